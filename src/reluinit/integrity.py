"""Results that can prove they are whole: every file a job writes for another to read carries a
seal, and every reader checks it before use.

A seal is a small JSON file beside the result, ``<file>.seal``: the file's size and SHA-256 (and,
for a table, its rows and columns, for a message that says what is missing). Writers write the
file and its seal atomically (a temporary file, then a rename); a seal also keeps the digest of the
file it replaces, so a job killed between the two renames leaves a pair that still verifies. CSV
stays plain CSV that any tool reads: a sidecar was chosen over a columnar format with a footer
(Parquet) because users, notebooks and the reference tree read these tables with anything.

A file its results tree never sealed (written before seals existed) is read as it is; one the tree
lists as sealed (``MANIFEST``) whose seal has gone is unverified, and refused like a damaged one. A
file whose seal does not match stops the reader with ``DamagedFile``: one line that names the file,
what is wrong, and the command that rebuilds it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shlex
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

SUFFIX = ".seal"
SCALES = ("quick", "smoke", "paper")


class DamagedFile(RuntimeError):
    """A result whose content is not what its writer sealed; the message ends with the fix."""
    ends_in_fix = True  # a job's log repeats it as what to do (reluinit.pipeline.jobs)


def seal_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def sealed_file(seal: Path) -> Path:
    """The file ``seal`` is the seal of (``seal_path``'s inverse)."""
    return seal.with_name(seal.name[: -len(SUFFIX)])


def digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _table_shape(path: Path) -> dict:
    if path.suffix != ".csv":
        return {}
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except Exception:  # noqa: BLE001 - a table that does not parse has no shape to report
        return {}
    return {"rows": len(table), "columns": list(table.columns)}


def write_atomic(path: str | Path, write, shape: dict | None = None) -> None:
    """``write(tmp_path)`` into a temporary file beside ``path``, then seal it and move it in place:
    a reader never sees half a file, and the seal is written first (it also accepts the file it
    replaces, module doc). Inside ``together``, the move waits for the block's end."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        stat = tmp.stat()  # a rename keeps it: the file's size and time as the seal records them
        record = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest(tmp), **(shape or {})}
    except OSError as e:
        _failed(e, path, tmp)
    if _BATCH is not None:
        _BATCH.append((path, tmp, record))
        return
    _put_in_place(path, tmp, record)


def _put_in_place(path: Path, tmp: Path, record: dict) -> None:
    target = seal_path(path)
    listed = target.exists() and path.exists()  # sealed before, so in the tree's list already: no second line
    try:
        previous = digest(path) if path.exists() else None
        _replace_text(target, json.dumps({"file": path.name, **record, "previous_sha256": previous}) + "\n")
    except OSError as e:
        _failed(e, path, tmp)
    os.replace(tmp, path)
    if not listed:
        _list_sealed(path)


def _failed(e: OSError, path: Path, tmp: Path):
    tmp.unlink(missing_ok=True)  # half a file, and on a full disk the space it holds
    if e.errno == errno.ENOSPC and not e.filename:  # a write() names no file: name the one it was for,
        raise OSError(e.errno, e.strerror, str(path)) from e  # so the full disk is the right one
    raise e


_BATCH: list | None = None  # the files of a ``together`` block, written and waiting to be moved in place


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Inside, ``write_atomic`` writes each file beside its place and moves them all in place as the
    block ends without an error: a stack's checkpoints of one epoch, all or none. An error (a full
    disk at the third of five) removes every file the block wrote and leaves each place as it was,
    so that the runs resume at one epoch, in the stack they left. (Moving them in place, the last
    step, writes only the small seals.)"""
    global _BATCH
    if _BATCH is not None:  # inside another block: its end moves them
        yield
        return
    _BATCH = batch = []
    try:
        yield
    except BaseException:
        for _, tmp, _ in batch:
            tmp.unlink(missing_ok=True)
        raise
    finally:
        _BATCH = None
    for i, (path, tmp, record) in enumerate(batch):
        try:
            _put_in_place(path, tmp, record)
        except BaseException:  # a full disk while sealing: the files not yet in place are not left behind
            for _, rest, _ in batch[i + 1:]:
                rest.unlink(missing_ok=True)
            raise


# Each results tree (``results/<scale>``) lists every file it has sealed, one path a line relative to
# it, in ``MANIFEST``: a listed file whose seal has gone is unverified, not a file "without a seal".
MANIFEST = ".sealed"


def _tree(path: Path) -> Path | None:
    """The results tree (``.../<scale>``) a file belongs to, or None (a file elsewhere)."""
    return next((p for p in Path(path).absolute().parents if p.name in SCALES), None)


def _list_sealed(path: Path) -> None:
    tree = _tree(path)
    if tree is None:
        return
    line = str(Path(path).absolute().relative_to(tree)) + "\n"
    with open(tree / MANIFEST, "a") as f:  # one short append: whole lines even from parallel jobs
        f.write(line)


def sealed(tree: str | Path) -> set[Path]:
    """Every file of a results tree that was ever sealed there (``MANIFEST``). A line that points
    outside the tree (``../../x``, an absolute path, a link out) is no file of the tree: ignored, so
    the sweep never moves a file outside it aside. ``DamagedFile`` when the list cannot be read (not
    UTF-8 text, a folder): the sweep moves it aside and lists again the seals it finds."""
    tree = Path(tree)
    listed = tree / MANIFEST
    if not listed.exists():
        return set()
    try:
        text = listed.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else (e.strerror or str(e)).lower()
        damaged = DamagedFile(f"{_manifest_damaged(listed, why)}: {_remove_manifest(listed)}")
        damaged.why = why
        raise damaged from None
    inside, home = os.path.normpath(tree.absolute()), tree.resolve()
    return {tree / line for line in text.splitlines()
            if line and Path(os.path.normpath(Path(inside) / line)).is_relative_to(inside)
            and (tree / line).resolve().is_relative_to(home)}


def _manifest_damaged(manifest: Path, why: str) -> str:
    return f"{manifest}, the list of what {manifest.parent} has sealed, is damaged ({why})"


def _remove_manifest(manifest: Path) -> str:
    return f"remove it with `rm -r {manifest}` (a run lists again the seals it finds)"


def _lost_seal(path: Path) -> bool:
    """Whether ``path`` was sealed by its tree but its seal is gone (never, while the tree's list is
    damaged: the sweep before the next run makes it again)."""
    tree = _tree(path)
    if tree is None or seal_path(path).exists():
        return False
    try:
        return Path(path).absolute() in sealed(tree)
    except DamagedFile:
        return False


def _relist(tree: Path) -> None:
    """``MANIFEST`` made again from the seals under ``tree`` whose files are there."""
    lines = sorted(str(f.relative_to(tree)) for f in map(sealed_file, tree.rglob(f"*{SUFFIX}")) if f.is_file())
    _replace_text(tree / MANIFEST, "".join(f"{line}\n" for line in lines))


# The config files of the run (``--configfile``), which the workflow puts here for its jobs: a
# suggested command repeats them, as it repeats the scale and results folder the path shows.
CONFIGFILES_ENV = "RELUINIT_CONFIGFILES"


def shown(path: str | Path) -> str:
    """``path`` as a message shows it: relative to the working folder where it lies in it."""
    here = Path.cwd()
    return str(Path(path).relative_to(here)) if Path(path).is_absolute() and Path(path).is_relative_to(here) else str(path)


def share_configfiles(files) -> None:
    """Hand the run's config files (``--configfile``) to its jobs, whose suggested commands repeat
    them (``rebuild_command``), each as ``shown``."""
    os.environ[CONFIGFILES_ENV] = " ".join(shlex.quote(shown(f)) for f in files)


# config.yaml's own `results` and `data_dir`: a command omits the setting only where the run used
# this value and no config file of its own (one may set another); tests/test_integrity.py checks them.
DEFAULT_RESULTS = "results"
DEFAULT_DATA = "data"


def command(targets: str, force: bool = False, settings=(), cores: bool = True) -> str:
    """The one builder of every Snakemake command a message suggests: ``targets``, then the run's
    config files (``--configfile``) and ``settings`` (``--config`` words; last, as ``--config`` takes
    every word after it). Targets and settings come shell-quoted (``rebuild_command``): the command
    works when pasted, whatever spaces or letters its paths hold."""
    files = os.environ.get(CONFIGFILES_ENV, "")
    return (f"snakemake {targets}{' --force' if force else ''}{' --cores 1' if cores else ''}"
            + (f" --configfile {files}" if files else "") + (f" --config {' '.join(settings)}" if settings else ""))


def _differs(folder: Path, default: str) -> bool:
    """Whether a command must name ``folder`` as its setting: it is not config.yaml's default, or the
    run has config files of its own (which may set another)."""
    return Path(shown(folder)) != Path(default) or bool(os.environ.get(CONFIGFILES_ENV))


def rebuild_command(path: str | Path, force: bool = True, data_dir: str | Path | None = None) -> str:
    """The command that rebuilds ``path`` (Snakemake runs the job that writes a file named as target),
    with the run's settings: the scale and the results folder the path lies in (``results/<scale>``
    by default), and the run's config files. The target first: ``--config`` takes every word after it.
    ``force``: rerun the job though its output is there (not for a file moved aside). ``data_dir``:
    ``path`` is a dataset's file under this data folder (``<data_dir>/fetched/<name>.json``)."""
    settings = []
    if data_dir is not None:
        if _differs(Path(data_dir), DEFAULT_DATA):
            settings.append(shlex.quote(f"data_dir={data_dir}"))
        return command(shlex.quote(str(path)), force, settings)
    parts = Path(path).parts[:-1]
    at = max((i for i, p in enumerate(parts) if p in SCALES), default=None)
    if at is not None:
        if parts[at] != "paper":
            settings.append(f"scale={parts[at]}")
        root = Path(*parts[:at]) if at else Path(".")
        if _differs(root, DEFAULT_RESULTS):
            settings.append(shlex.quote(f"results={root}"))
    return command(shlex.quote(str(path)), force, settings)


def verify(path: str | Path) -> None:
    """Raise ``DamagedFile`` when ``path`` does not match its seal (a file without one is read as is)."""
    path = Path(path)
    target = seal_path(path)
    if not target.exists():
        if path.exists() and _lost_seal(path):
            raise DamagedFile(f"{path} has lost its seal ({_tree(path) / MANIFEST} lists it as sealed), so it cannot "
                              f"be checked: rebuild it with `{rebuild_command(path)}`")
        return
    if not path.exists():
        raise DamagedFile(f"{path} is missing (its seal is there): rebuild it with `{rebuild_command(path)}`")
    record = _seal_of(path, target)
    # A writer that is still running (a training run saving a checkpoint each epoch) may replace seal
    # and file between our reading one and hashing the other: a seal that changed meanwhile is read
    # again, and only a file that matches neither the seal nor its successor is damaged.
    for _ in range(_REREADS):
        if digest(path) in (record.get("sha256"), record.get("previous_sha256")):
            return
        again = _seal_of(path, target)
        if again == record:
            break
        record = again
    size = path.stat().st_size
    if size != record["bytes"]:
        what = f"{size:,} bytes where {record['bytes']:,} were written"
    else:
        what = "the same size as written but other bytes"
    shape = _table_shape(path) if "rows" in record else {}
    if shape and shape["rows"] != record["rows"]:
        what += f", {shape['rows']:,} rows of {record['rows']:,}"
    elif "rows" in record and not shape:
        what += ", and it no longer parses as a table"
    raise DamagedFile(f"{path} is damaged: {what}. Rebuild it with `{rebuild_command(path)}`")


_REREADS = 5  # a writer replaces seal and file within milliseconds; five more looks are ample


def _seal_of(path: Path, target: Path) -> dict:
    try:
        return read_seal(target)
    except (OSError, ValueError) as e:
        raise DamagedFile(f"{target}, the seal of {path}, is unreadable ({e}): rebuild the file with "
                          f"`{rebuild_command(path)}`") from None


def read_seal(target: Path) -> dict:
    """A seal's record; ``ValueError`` when it is not JSON or not a JSON object (``null``, ``42``,
    ``[]``: a seal damaged or written by something else)."""
    record = json.loads(target.read_text())
    if not isinstance(record, dict) or not _count(record.get("bytes")):
        raise ValueError(f"not a seal's record but {json.dumps(record)[:40]}")
    if "rows" in record and not _count(record["rows"]):
        raise ValueError(f"its rows are not a count but {json.dumps(record['rows'])[:40]}")
    return record


def _count(value) -> bool:
    return type(value) is int and value >= 0  # not a bool, a float or a string


def _replace_text(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` atomically (a reader sees the old seal or the new, never half)."""
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def verify_all(paths) -> None:
    for p in paths:
        verify(p)


def sweep(root: str | Path) -> list[tuple[Path, Path, str]]:
    """Move aside (``<name>.damaged``, with its seal) every sealed file under ``root`` that is not
    what was sealed. Cheap: one ``stat`` a file; only a file whose size or time changed is hashed
    (a file whose content still matches, copied or touched, gets its time re-recorded). Returns
    (file, where it went, what was wrong) for each."""
    moved = []
    root = Path(root)
    if not root.is_dir():
        return moved
    try:
        listed = sealed(root)
    except DamagedFile as e:  # named, moved aside and made again from the seals here: never blocks a run
        manifest = root / MANIFEST
        moved.append(_set_aside(manifest, e.why))
        if moved[-1][1] != manifest:
            try:
                _relist(root)
            except OSError:
                pass
        listed = set()
    for path in sorted(listed):  # sealed here once, its seal gone: unverified, so rebuilt
        if path.exists() and not seal_path(path).exists() and not path.name.endswith(".damaged"):
            moved.append(_set_aside(path, "its seal is missing, so it cannot be checked"))
    for target in root.rglob(f"*{SUFFIX}"):
        path = sealed_file(target)
        if path.name.endswith(".damaged") or not path.exists():
            continue
        try:
            stat = path.stat()
        except OSError:
            continue
        try:
            record = read_seal(target)
        except (OSError, ValueError) as e:  # the file cannot be checked: as damaged as one that fails
            record, why = None, f"its seal {target.name} is unreadable ({e})"
        if record is not None:
            if stat.st_size == record["bytes"] and stat.st_mtime_ns == record.get("mtime_ns"):
                continue
            if stat.st_size == record["bytes"]:
                if digest(path) in (record.get("sha256"), record.get("previous_sha256")):
                    # the same bytes with another time (Snakemake touches outputs after a job): kept, and
                    # the time re-recorded so the next sweep hashes it no more; not in a read-only tree
                    try:
                        _replace_text(target, json.dumps({**record, "mtime_ns": stat.st_mtime_ns}) + "\n")
                    except OSError:
                        pass
                    continue
                why = "the same size as written but other bytes"
            else:
                why = f"{stat.st_size:,} bytes where {record['bytes']:,} were written"
        moved.append(_set_aside(path, why, target))
    return moved


def swept(path: Path, aside: Path, why: str, owner: Path | None = None) -> str:
    """The line a run says, before its DAG is built, for each file ``sweep`` found damaged. ``owner``:
    the output of the job that trains the run whose resumable checkpoint ``path`` is (no rule
    writes such a file: ``paths.trained_by``)."""
    where = f"moved to {aside}" if aside != path else "left in place"
    if path.name == MANIFEST:
        fix = (f"listed again from the seals under {path.parent}; nothing to do" if aside != path
               else _remove_manifest(path))
        return f"{_manifest_damaged(path, why)}: {where}, never read; {fix}."
    if owner is not None:  # a run's resumable state: no rule writes it, the job of its table trains it
        return (f"{path} is damaged ({why}): {where}, never read; nothing to do while {owner} is whole. When that "
                f"job runs again this run trains afresh and the others resume: `{rebuild_command(owner)}`.")
    return (f"{path} is damaged ({why}): {where}, never read; it is rebuilt when a job needs it, "
            f"or now with `{rebuild_command(path, force=False)}`.")


def _set_aside(path: Path, why: str, seal: Path | None = None) -> tuple[Path, Path, str]:
    """Move a damaged file (and its seal) to ``<name>.damaged``: (file, where it went, why). In a
    read-only tree it is named and left where it is, and its readers refuse it."""
    aside = path.with_name(path.name + ".damaged")
    try:
        os.replace(path, aside)
        if seal is not None:
            os.replace(seal, seal_path(aside))
    except OSError as e:
        return path, path, f"{why}; it could not be moved aside ({e.strerror})"
    return path, aside, why


# --- one writer a part ----------------------------------------------------------------------------


@contextlib.contextmanager
def exclusive(path: str | Path, wait: bool = True, waiting: Callable[[str], None] | None = None) -> Iterator[bool]:
    """Whether this process holds ``path``'s lock for as long as the block runs: an exclusive
    ``flock`` on it, which the system drops when its holder ends, however it ends (a killed job
    leaves nothing to clean up). ``wait``: block until the holder lets go, first calling
    ``waiting`` with who holds it (the holder's pid, host and start, written in the lock file);
    else yield False at once. Waiting for a lock this process holds already is granted at once (a
    harvest holds the part whose job then waits for it); a try (``wait=False``) finds it held, in
    this process too. Where ``fcntl`` is missing (Windows) every lock is taken."""
    try:
        import fcntl
    except ImportError:
        yield True
        return
    path = Path(path)
    key = os.path.realpath(path)
    if key in _HELD:
        yield wait
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f, _held(key):
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            if waiting:
                f.seek(0)
                waiting(f.read().strip() or "another process")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            f.flush()
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_HELD: set[str] = set()  # the locks this process holds (``exclusive``)


@contextlib.contextmanager
def _held(key: str) -> Iterator[None]:
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
