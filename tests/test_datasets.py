"""Datasets are loaded through torchvision's own classes from tiny files in its on-disk formats."""

import gzip
import hashlib
import pickle
import shutil
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from reluinit import datasets

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def write_idx(path, array):
    """MNIST's IDX format: big-endian magic (0x08 = ubyte, ndim), dims, then the bytes."""
    array = np.asarray(array, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, array.ndim))
        f.write(struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.tobytes())


def make_mnist(root, n_train=12, n_test=5):
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    data = {}
    for prefix, n in [("train", n_train), ("t10k", n_test)]:
        images = rng.integers(0, 256, (n, 28, 28))
        labels = rng.integers(0, 10, n)
        write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
        data[prefix] = (images, labels)
    return data


def md5(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


def make_cifar(root, base, n=8):
    """Pickled batches as CIFAR-10/100 ship them, and a subclass of torchvision's class that
    knows these files' checksums (the real ones are checked against the real archive)."""
    folder = root / base.base_folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    label_key = "labels" if base is torchvision.datasets.CIFAR10 else "fine_labels"
    written = {}
    for name, _ in base.train_list + base.test_list:
        batch = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 label_key: rng.integers(0, 10, n).tolist()}
        (folder / name).write_bytes(pickle.dumps(batch))
        written[name] = batch
    meta_key = base.meta["key"]
    (folder / base.meta["filename"]).write_bytes(pickle.dumps({meta_key: [f"c{i}" for i in range(10)]}))
    local = type("Local" + base.__name__, (base,), {
        "train_list": [[f, md5(folder / f)] for f, _ in base.train_list],
        "test_list": [[f, md5(folder / f)] for f, _ in base.test_list],
        "meta": {**base.meta, "md5": md5(folder / base.meta["filename"])},
    })
    return local, written, label_key


def test_mnist_idx_files_load_through_torchvision(tmp_path):
    data = make_mnist(tmp_path)
    split = datasets.load("mnist", tmp_path, train=True)
    assert split.x.shape == (12, 1, 28, 28) and split.x.dtype == torch.float32
    assert torch.equal(split.x[:, 0] * 255, torch.tensor(data["train"][0], dtype=torch.float32))
    assert split.y.tolist() == data["train"][1].tolist()
    assert len(datasets.load("mnist", tmp_path, train=False).y) == 5
    # Present on disk: fetch downloads nothing and reports the sizes.
    assert datasets.fetch("mnist", tmp_path) == {"dataset": "mnist", "root": str(tmp_path),
                                                 "source": "torchvision", "train": 12, "test": 5}


@pytest.mark.parametrize("base", [torchvision.datasets.CIFAR10, torchvision.datasets.CIFAR100])
def test_cifar_pickles_load_through_torchvision(tmp_path, monkeypatch, base):
    local, written, label_key = make_cifar(tmp_path, base)
    name = "cifar10" if base is torchvision.datasets.CIFAR10 else "cifar100"
    monkeypatch.setitem(datasets.TORCHVISION, name, local)
    train = datasets.load(name, tmp_path, train=True)
    n_train = 8 * len(base.train_list)
    assert train.x.shape == (n_train, 3, 32, 32)
    first = written[base.train_list[0][0]]
    # CIFAR rows are channel-major 32x32 planes.
    expected = torch.tensor(first["data"][0].reshape(3, 32, 32), dtype=torch.float32) / 255
    assert torch.equal(train.x[0], expected)
    assert train.y[:8].tolist() == first[label_key]
    assert len(datasets.load(name, tmp_path, train=False).y) == 8


def test_quick_scale_uses_bundled_digits_for_mnist(tmp_path):
    train = datasets.load("mnist", tmp_path / "nothing-here", train=True, scale="quick")
    test = datasets.load("mnist", tmp_path / "nothing-here", train=False, scale="quick")
    assert train.name == test.name == "digits"
    assert train.x.shape[1:] == (1, 8, 8) and len(train.y) + len(test.y) == 1797
    assert 0 <= train.x.min() and train.x.max() <= 1 and train.n_classes == 10


def test_offline_fetch_fails_fast_and_says_where_to_put_files(tmp_path, monkeypatch):
    # An address on this machine that refuses connections stands in for an unreachable mirror
    # (the subclass keeps the name MNIST, which torchvision uses for its folder).
    unreachable = type("MNIST", (torchvision.datasets.MNIST,), {"mirrors": ["http://127.0.0.1:9/"]})
    monkeypatch.setitem(datasets.TORCHVISION, "mnist", unreachable)
    start = time.monotonic()
    with pytest.raises(datasets.DatasetUnavailable) as err:
        datasets.fetch("mnist", tmp_path)
    assert time.monotonic() - start < 30
    assert "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz" in str(err.value)
    assert "from http://127.0.0.1:9/" in str(err.value)
    assert f"{tmp_path.resolve()}/MNIST/raw/" in str(err.value)


def test_missing_dataset_names_the_command_that_fetches_it(tmp_path):
    with pytest.raises(datasets.DatasetUnavailable) as err:
        datasets.load("cifar10", tmp_path)
    assert str(err.value).endswith(f"fetch it with `snakemake {tmp_path}/fetched/cifar10.json --cores 1 "
                                  f"--config data_dir={tmp_path}`.")


def test_a_damaged_mnist_file_is_named_with_the_fix(tmp_path):
    """A raw file cut short: torchvision says only that it cannot read it, and a fetch would take the
    files as there; both name the file, say to delete it, and give the command that fetches again."""
    make_mnist(tmp_path)
    raw = tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte"
    raw.write_bytes(raw.read_bytes()[:1000])
    for attempt in (lambda: datasets.load("mnist", tmp_path), lambda: datasets.fetch("mnist", tmp_path)):
        with pytest.raises(datasets.DatasetUnavailable) as err:
            attempt()
        assert str(err.value) == (f"{raw} is damaged (1,000 bytes where its header promises 9,424): delete it and "
                                  f"fetch mnist again with `snakemake {tmp_path}/fetched/mnist.json --force --cores 1 "
                                  f"--config data_dir={tmp_path}`.")


def test_a_damaged_cifar_batch_is_named(tmp_path, monkeypatch):
    local, _, _ = make_cifar(tmp_path, torchvision.datasets.CIFAR10)
    monkeypatch.setitem(datasets.TORCHVISION, "cifar10", local)
    batch = tmp_path / local.base_folder / local.train_list[0][0]
    batch.write_bytes(batch.read_bytes()[:-10])
    with pytest.raises(datasets.DatasetUnavailable, match=f"{batch} is damaged \\(MD5 "):
        datasets.load("cifar10", tmp_path)


def make_tiny_imagenet_zip(path):
    """The official archive's layout, two classes, one training and one validation image each."""
    wnids = ["n01443537", "n01629819"]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tiny-imagenet-200/wnids.txt", "\n".join(wnids) + "\n")
        annotations = []
        for i, wnid in enumerate(wnids):
            for split_path in (f"train/{wnid}/images/{wnid}_0.JPEG", f"val/images/val_{i}.JPEG"):
                img = Image.fromarray(np.full((64, 64, 3), 40 * (i + 1), dtype=np.uint8))
                buf = path.parent / "img.jpg"
                img.save(buf, format="JPEG")
                z.write(buf, f"tiny-imagenet-200/{split_path}")
            annotations.append(f"val_{i}.JPEG\t{wnid}\t0\t0\t63\t63")
        z.writestr("tiny-imagenet-200/val/val_annotations.txt", "\n".join(annotations) + "\n")
    return wnids


def test_tiny_imagenet_fetch_verifies_and_rearranges(tmp_path):
    archive = tmp_path / "src" / "tiny-imagenet-200.zip"
    archive.parent.mkdir()
    wnids = make_tiny_imagenet_zip(archive)
    root = tmp_path / "data"
    record = datasets.fetch_tiny_imagenet(root, url=archive.as_uri(), md5=md5(archive))
    assert record["train"] == 2 and record["test"] == 2 and record["val_images_moved"] == 2
    for i, wnid in enumerate(wnids):
        assert (root / "tiny-imagenet-200" / "val" / wnid / f"val_{i}.JPEG").exists()
    val = datasets.load("tiny_imagenet", root, train=False)
    assert val.x.shape == (2, 3, 64, 64) and sorted(val.y.tolist()) == [0, 1]
    # A second fetch finds everything in place.
    again = datasets.fetch_tiny_imagenet(root, url=archive.as_uri(), md5=md5(archive))
    assert again["val_images_moved"] == 0 and again["test"] == 2


def test_an_interrupted_extraction_is_extracted_again(tmp_path, monkeypatch):
    """The extraction is cut short after its first files (wnids.txt among them, the old marker of a
    complete one): the next fetch must not take the folder as complete."""
    archive = tmp_path / "data" / "tiny-imagenet-200.zip"
    archive.parent.mkdir()
    make_tiny_imagenet_zip(archive)
    real = zipfile.ZipFile.extractall

    def cut_short(self, path=None, members=None, pwd=None):
        for member in self.namelist()[:2]:
            self.extract(member, path)
        raise KeyboardInterrupt

    monkeypatch.setattr(zipfile.ZipFile, "extractall", cut_short)
    with pytest.raises(KeyboardInterrupt):
        datasets.fetch_tiny_imagenet(archive.parent, url=archive.as_uri(), md5=md5(archive))
    assert not (archive.parent / "tiny-imagenet-200").exists()
    # an extraction of the code before, cut short the same way, left the folder with wnids.txt
    legacy = archive.parent / "tiny-imagenet-200"
    legacy.mkdir()
    (legacy / "wnids.txt").write_text("n01443537\n")
    monkeypatch.setattr(zipfile.ZipFile, "extractall", real)
    record = datasets.fetch_tiny_imagenet(archive.parent, url=archive.as_uri(), md5=md5(archive))
    assert record["train"] == 2 and record["test"] == 2
    assert (legacy / datasets.EXTRACTED).exists() and not list(archive.parent.glob(".*extracting"))


def test_tiny_imagenet_bad_checksum_and_offline(tmp_path):
    archive = tmp_path / "tiny-imagenet-200.zip"
    make_tiny_imagenet_zip(archive)
    with pytest.raises(datasets.DatasetUnavailable, match="MD5"):
        datasets.fetch_tiny_imagenet(tmp_path, url=archive.as_uri(), md5="0" * 32)
    with pytest.raises(datasets.DatasetUnavailable) as err:
        datasets.fetch_tiny_imagenet(tmp_path / "empty", url="http://127.0.0.1:9/tiny-imagenet-200.zip")
    assert "http://127.0.0.1:9/tiny-imagenet-200.zip" in str(err.value)
    assert str((tmp_path / "empty" / "tiny-imagenet-200.zip").resolve()) in str(err.value)


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(),
                    reason="Debian's dataset-fashion-mnist is not installed (.ci/run installs it as root)")
def test_full_size_fashion_mnist_loads_through_torchvision(tmp_path):
    """The real 70,000 images in MNIST's IDX format: the same loading path as MNIST, at full size."""
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in DEBIAN_FASHION_MNIST.glob("*.gz"):
        with gzip.open(gz) as src, open(raw / gz.stem, "wb") as dst:
            shutil.copyfileobj(src, dst)
    train = datasets.load("fashion_mnist", tmp_path, train=True)
    test = datasets.load("fashion_mnist", tmp_path, train=False)
    assert train.x.shape == (60000, 1, 28, 28) and test.x.shape == (10000, 1, 28, 28)
    assert torch.bincount(train.y).tolist() == [6000] * 10
    assert 0.2 < train.x.mean().item() < 0.4 and train.x.max().item() == 1.0


def _refused(root) -> str:
    with pytest.raises(datasets.DatasetUnavailable) as err:
        datasets.load("mnist", root)
    with pytest.raises(datasets.DatasetUnavailable) as again:
        datasets.fetch("mnist", root)
    assert str(again.value) == str(err.value)
    return str(err.value)


def test_mnist_files_whole_but_not_mnists_are_refused_by_name(tmp_path):
    """A label file from the other split (its header and size agree with each other), a header that
    says one label fewer, a wrong IDX type byte: each is named with the fix before anything reads it."""
    make_mnist(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    labels = raw / "train-labels-idx1-ubyte"
    shutil.copy(raw / "t10k-labels-idx1-ubyte", labels)  # 5 labels for 12 images
    assert _refused(tmp_path).startswith(f"{labels} is damaged (5 labels for the 12 images of train-images-idx3-ubyte)")
    write_idx(labels, np.zeros(11))  # a header of 11: self-consistent, one short
    assert "11 labels for the 12 images" in _refused(tmp_path)
    write_idx(labels, np.zeros(12))
    images = raw / "t10k-images-idx3-ubyte"
    data = bytearray(images.read_bytes())
    data[2] = 0x0D  # float32's type code: torchvision would fail with a TypeError naming no file
    images.write_bytes(bytes(data))
    message = _refused(tmp_path)
    assert message.startswith(f"{images} is damaged (its IDX type byte is 0x0d where MNIST's files hold unsigned "
                              "bytes (0x08))") and "fetch mnist again with `snakemake" in message


def test_a_file_of_mnists_official_size_must_be_mnists(tmp_path, monkeypatch):
    """The official files' sizes and MD5 are known: a file of that size with other bytes is refused;
    a file of another size (a subset, your own data) is checked for consistency only."""
    make_mnist(tmp_path)
    labels = tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    monkeypatch.setitem(datasets.MNIST_OFFICIAL, labels.name, (labels.stat().st_size, "0" * 32))
    assert f"MNIST's size ({labels.stat().st_size:,} bytes) with MD5 {md5(labels)} where the official file's is " \
           f"{'0' * 32}" in _refused(tmp_path)
    monkeypatch.setitem(datasets.MNIST_OFFICIAL, labels.name, (labels.stat().st_size, md5(labels)))
    assert len(datasets.load("mnist", tmp_path).y) == 12
    monkeypatch.setitem(datasets.MNIST_OFFICIAL, labels.name, (60_008, "0" * 32))  # not the official size
    assert len(datasets.load("mnist", tmp_path).y) == 12


def test_official_mnist_files_under_each_others_names_are_refused(tmp_path, monkeypatch):
    """The train and t10k files swapped wholesale are each whole and consistent: the run used to
    train on the 10,000 test digits and call them "mnist, 10,000-image subset". Each file of an
    official size is that file; here the official table is this fake set's own."""
    make_mnist(tmp_path, n_train=12, n_test=5)
    raw = tmp_path / "MNIST" / "raw"
    official = {f.name: (f.stat().st_size, md5(f)) for f in raw.iterdir()}
    monkeypatch.setattr(datasets, "MNIST_OFFICIAL", official)
    assert datasets.load("mnist", tmp_path, train=False) is not None  # the set as published
    for kind in ("images-idx3", "labels-idx1"):
        train, test = raw / f"train-{kind}-ubyte", raw / f"t10k-{kind}-ubyte"
        train.rename(raw / "swap")
        test.rename(train)
        (raw / "swap").rename(test)
    said = _refused(tmp_path)
    assert "is damaged (it is MNIST's official t10k-" in said and "under another name: put each file under its own name" in said, said


def test_a_dataset_a_job_cannot_read_is_the_runs_last_words():
    """A job that finds its dataset damaged after the fetch (a file swapped since) ended with only
    Snakemake's "At least one job did not complete successfully": the error ends in its fix, and a
    job's log marks such an error as what to do, which the run repeats last (jobs.TODO_PREFIX)."""
    assert datasets.DatasetUnavailable("x").ends_in_fix


def _gzipped(raw, names=None) -> dict:
    """The files of ``raw`` gzipped in place (the unpacked ones removed); their (size, MD5) before."""
    table = {}
    for f in sorted(raw.iterdir()):
        if names is None or f.name in names:
            table[f.name] = (f.stat().st_size, md5(f))
            with open(f, "rb") as src, gzip.open(f.with_name(f.name + ".gz"), "wb") as dst:
                shutil.copyfileobj(src, dst)
            f.unlink()
    return table


def test_gzipped_mnist_files_are_unpacked_and_checked_by_their_content(tmp_path, monkeypatch):
    """The official MNIST gzipped by anyone but torchvision's mirror (as ``../shared/data/mnist/``
    ships it) was refused with "put them in .../MNIST/raw/ (gzipped or not)": unpacked next to
    themselves, they load, and an official size must still have its MD5. Here the official table
    is this fake set's own; alone or mixed with unpacked files."""
    data = make_mnist(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    official = _gzipped(raw, {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"})  # mixed
    official.update({f.name: (f.stat().st_size, md5(f)) for f in raw.iterdir() if not f.name.endswith(".gz")})
    monkeypatch.setattr(datasets, "MNIST_OFFICIAL", official)
    assert datasets.fetch("mnist", tmp_path)["train"] == 12
    assert np.array_equal(datasets.load("mnist", tmp_path).y.numpy(), data["train"][1])
    assert {f.name: md5(f) for f in raw.iterdir() if f.name in official} == {n: m for n, (_, m) in official.items()}

    other = tmp_path / "other"
    make_mnist(other)
    labels = other / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-1] + bytes([(labels.read_bytes()[-1] + 1) % 10]))  # one label changed
    _gzipped(other / "MNIST" / "raw")
    assert f"{labels} is damaged (MNIST's size ({official[labels.name][0]:,} bytes) with MD5" in _refused(other)


def test_a_truncated_gzip_and_a_link_to_nothing_are_named_with_their_fix(tmp_path, monkeypatch):
    make_mnist(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    _gzipped(raw)
    gz = raw / "train-images-idx3-ubyte.gz"
    gz.write_bytes(gz.read_bytes()[:200])
    fix = f"then rerun `snakemake {tmp_path}/fetched/mnist.json --cores 1 --config data_dir={tmp_path}`."
    said = _refused(tmp_path)
    assert said.startswith(f"{gz} is damaged (not a whole gzip file: ") and said.endswith(fix), said
    assert not (raw / "train-images-idx3-ubyte").exists() and not list(raw.glob("*.part"))
    gz.unlink()
    gz.symlink_to(gz)  # a loop
    said = _refused(tmp_path)
    assert said.startswith(f"{gz} is a symbolic link to nothing that can be read") and said.endswith(fix), said
    gz.unlink()
    make_mnist(tmp_path / "again")
    _gzipped(tmp_path / "again" / "MNIST" / "raw")
    shutil.copy(tmp_path / "again" / "MNIST" / "raw" / gz.name, gz)

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(datasets.shutil, "copyfileobj", full)
    said = _refused(tmp_path)
    assert said.startswith(f"{gz} could not be unpacked in {raw}: the disk holding it is full (No space left on "
                           f"device): free space there (`df -h {raw.parent}`") and said.endswith(fix), said
    assert not list(raw.glob("*.part"))

    def read_only(*a, **k):  # a read-only mount: unpacking there, or gunzip there, cannot work
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(datasets.shutil, "copyfileobj", read_only)
    said = _refused(tmp_path)
    assert said == (f"{gz} could not be unpacked in {raw} (Read-only file system): that folder cannot be written "
                    f"here, so copy the data folder to a folder DIR you can write (`cp -r {tmp_path} DIR`) and give "
                    f"that as data_dir: `snakemake DIR/fetched/mnist.json --cores 1 --config data_dir=DIR` (a harvest: "
                    f"`--data-dir DIR`)."), said
    monkeypatch.undo()
    assert datasets.fetch("mnist", tmp_path)["train"] == 12


def test_a_data_folder_of_the_four_gzipped_files_is_read_as_mnist(tmp_path, monkeypatch):
    """``data_dir`` holding the four ``.gz`` files themselves (``../shared/data/mnist/``'s layout)."""
    make_mnist(tmp_path / "made")
    official = _gzipped(tmp_path / "made" / "MNIST" / "raw")
    monkeypatch.setattr(datasets, "MNIST_OFFICIAL", official)
    for gz in (tmp_path / "made" / "MNIST" / "raw").iterdir():
        shutil.move(gz, tmp_path / gz.name)
    assert datasets.fetch("mnist", tmp_path)["test"] == 5
    assert {f.name: md5(f) for f in (tmp_path / "MNIST" / "raw").iterdir()} == {n: m for n, (_, m) in official.items()}


def test_a_read_only_data_folder_is_named_before_snakemake_fails_to_write_in_it(tmp_path):
    """A read-only mount of the data files: Snakemake cannot create the fetch job's record there and
    stops with "Failed to create output directory", which names no fix, before the job could give
    one. The run's first lines say what to do. (A bind mount needs root; skipped without.)"""
    import subprocess

    from conftest import snakemake

    files, data = tmp_path / "files", tmp_path / "mnt"
    files.mkdir(), data.mkdir()
    (files / "train-images-idx3-ubyte.gz").write_bytes(b"")
    mounted = subprocess.run(["mount", "--bind", str(files), str(data)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"no bind mount here ({mounted.stderr.decode().strip()}): needs root")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(data)], capture_output=True).returncode != 0:
            pytest.skip("no read-only remount here")
        run = snakemake(f"{data}/fetched/mnist.json", "--cores", "1", "--config", f"data_dir={data}")
    finally:
        subprocess.run(["umount", str(data)], capture_output=True)
    assert run.returncode != 0
    said = [line for line in run.stderr.splitlines() if line.startswith("warning: the data folder")]
    assert said == [f"warning: the data folder {data} cannot be written here, and a job that fetches a dataset "
                    f"records what it found in {data}/fetched/: if this run needs one, copy the data folder to a "
                    f"folder DIR you can write (`cp -r {data} DIR`) and give that as data_dir (`--config "
                    f"data_dir=DIR`, last)."], run.stderr[-2000:]
