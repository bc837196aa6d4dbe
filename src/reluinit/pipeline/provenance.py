"""Code fingerprints, so that no result is silently reused after the code that made it changed.

(A training run's settings fingerprint, what its checkpoint carries, is the science's:
``reluinit.fingerprint``.)

* ``code_fingerprint``: a hash of the library code a job runs, found by following, from the
  functions the job calls, every function, class and constant of this package they reference
  (transitively, through closures and module attributes). Measurement and figure jobs carry it
  as a Snakemake ``params`` entry, so editing a plotting function reruns the figure jobs that
  call it and nothing else, and editing a measurement reruns its measurements and figures.
  Training jobs deliberately carry none: they rerun on their settings only.

And ``memo``: what planning a build computes from the code (a job's parts, code fingerprints),
kept per version of the package's source for the workflow's next Snakemake process.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import inspect
import json
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

PACKAGE = __name__.split(".")[0]

# --- code ----------------------------------------------------------------------------------------


def code_fingerprint(*objects) -> str:
    """A short hash of the source of ``objects`` (functions, classes, modules of this package) and
    of everything of this package they reach. Independent of the process: two interpreters give
    the same value for the same code."""
    found: dict[str, str] = {}
    for obj in objects:
        _visit(obj, found, set())
    digest = hashlib.sha256()
    for key in sorted(found):
        digest.update(f"{key}\0{found[key]}\0".encode())
    return digest.hexdigest()[:16]


def _ours(obj) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def _codes(code: types.CodeType):
    """A code object and the code objects nested in it (inner functions, lambdas, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


@functools.cache
def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):  # made at run time (dataclass methods): its class's source covers it
        return ""


def _visit(obj, found: dict, seen: set) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, functools.partial):
        for part in (obj.func, *obj.args, *obj.keywords.values()):
            _visit(part, found, seen)
    elif isinstance(obj, (staticmethod, classmethod)):
        _visit(obj.__func__, found, seen)
    elif isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            _visit(f, found, seen)
    elif inspect.ismethod(obj):
        _visit(obj.__func__, found, seen)
    elif isinstance(obj, types.ModuleType):
        pass  # a namespace: what of it a function uses is found by name (_visit_function)
    elif inspect.isfunction(obj):
        if _ours(obj):
            _visit_function(obj, found, seen)
    elif inspect.isclass(obj):
        if _ours(obj):
            found[f"class {obj.__module__}.{obj.__qualname__}"] = _source(obj)
            for member in vars(obj).values():
                _visit(member, found, seen)
    elif isinstance(obj, dict):
        for value in obj.values():
            _visit(value, found, seen)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for value in obj:
            _visit(value, found, seen)
    elif _ours(type(obj)):
        # An instance of one of our classes: its class, and its value where that prints the same
        # in every process. Not its attributes: an Experiment would pull in every function it names.
        _visit(type(obj), found, seen)
        text = repr(obj)
        if " at 0x" not in text:
            found[f"instance {type(obj).__qualname__} {text}"] = text


def _visit_function(fn: types.FunctionType, found: dict, seen: set) -> None:
    code = fn.__code__
    source = _source(fn)
    if source:  # functions made at run time (dataclass methods) are covered by their class
        # keyed by name and text, not line: an edit above a function does not change its print
        found[f"function {fn.__module__}.{fn.__qualname__} {hashlib.sha256(source.encode()).hexdigest()}"] = source
    names = sorted({name for c in _codes(code) for name in c.co_names})
    for cell in fn.__closure__ or ():
        try:
            _visit(cell.cell_contents, found, seen)
        except ValueError:  # an empty cell
            pass
    for default in (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()):
        _visit(default, found, seen)
    for name in names:
        if name not in fn.__globals__:
            continue
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            if value.__name__.startswith(PACKAGE):
                # `plotting.save(...)`: the module's attributes that this code names
                for attr in names:
                    member = getattr(value, attr, None)
                    if member is not None:
                        _constant_or_visit(f"{value.__name__}.{attr}", member, found, seen)
            continue
        _constant_or_visit(f"{fn.__module__}.{name}", value, found, seen)


def _constant_or_visit(key: str, value, found: dict, seen: set) -> None:
    """A module-level constant is recorded by value (a number, a string, a dtype); anything else
    of ours is followed."""
    if isinstance(value, (bool, int, float, str, bytes, type(None))) or type(value).__module__ == "torch":
        found[f"constant {key}"] = repr(value)
    elif isinstance(value, (dict, list, tuple, set, frozenset)):
        try:
            found[f"constant {key}"] = json.dumps(value, sort_keys=True)
        except TypeError:  # holds functions or classes: follow them
            _visit(value, found, seen)
    else:
        _visit(value, found, seen)


# --- what planning computes, remembered ----------------------------------------------------------

# Where ``memo`` keeps its answers; None (the default) keeps them for this process only. The
# workflow sets it (``.snakemake/reluinit``, or $RELUINIT_MEMO), so that a Snakemake process (the one
# you start, each SLURM job's, each test's) reads a job's parts and code fingerprints instead of
# importing torch and seaborn to recompute them: about 2.5 s of each process's 4.5 s to plan one figure.
MEMO_DIR: Path | None = None
MEMO_FILES_KEPT = 8  # the answers of the last few versions of the source (a branch switched back)
_memo: dict = {}  # this process's answers: {"file": Path, "known": {...}, "new": {...}}
_here: dict[str, str] = {}  # without MEMO_DIR: this process's answers, as JSON text


@functools.cache
def source_digest() -> str:
    """A hash of every source file of this package and of the Python version reading them: answers
    computed by any other version of the code are never read."""
    root = Path(__file__).resolve().parent.parent  # the whole package
    digest = hashlib.sha256(repr(sys.version_info[:2]).encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(f"\0{path.relative_to(root).as_posix()}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def memo(name: str, key, compute: Callable):
    """``compute()`` as plain data (as JSON gives it back, dicts in their order), remembered under
    ``(name, key)`` for this version of the package's source (``source_digest``) in ``MEMO_DIR``.
    Only for what is a function of the code and of ``key`` alone (the key holds every setting it
    reads). The value is the same plain data whether it was computed now or read, so a first run
    and a later one plan alike. Without ``MEMO_DIR`` the answer is remembered for this process alone
    and each call gets its own copy: the plan of the paper scale asks for an experiment's parts once
    per job (RP-F3's 1,598 jobs: 12 s computed each time, 3 s remembered)."""
    k = json.dumps([name, key], default=str)
    if MEMO_DIR is None:
        if k not in _here:
            _here[k] = json.dumps(compute(), default=str)
        return json.loads(_here[k])
    if _memo.get("dir") != MEMO_DIR:
        file = Path(MEMO_DIR) / f"memo-{source_digest()}.json"
        _memo.update(dir=MEMO_DIR, file=file, known=_read(file), new={})
    if k not in _memo["known"]:
        _memo["known"][k] = _memo["new"][k] = _json(compute())
    return _memo["known"][k]


def _json(value):
    """``value`` as JSON gives it back, its dicts in their own order (a job's parts run in order)."""
    return json.loads(json.dumps(value, default=str))


def _read(file: Path) -> dict:
    try:
        return json.loads(file.read_text())
    except (OSError, ValueError):  # none yet, or cut short: computed again
        return {}


@atexit.register
def save_memo() -> None:
    """Add this process's new answers to the memo file (merged with what other processes wrote
    meanwhile; written whole, then renamed, so a reader never sees half a file), and remove the
    files of all but the newest ``MEMO_FILES_KEPT`` versions of the source. The workflow calls it
    once the DAG is built (``onstart``), before any job of a cluster starts and reads it."""
    if not _memo.get("new"):
        return
    file = _memo["file"]
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_read(file), **_memo["new"]}
        tmp = file.with_name(f".{file.name}.{os.getpid()}")
        tmp.write_text(json.dumps(merged))  # not sorted: the parts' order is theirs
        os.replace(tmp, file)
        _memo["new"] = {}
        old = sorted(file.parent.glob("memo-*.json"), key=lambda p: p.stat().st_mtime)[:-MEMO_FILES_KEPT]
        for p in old:
            p.unlink(missing_ok=True)
    except OSError:  # a read-only or full disk: the next process computes them again
        pass
