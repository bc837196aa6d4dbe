"""Fingerprints of what determines a result, so that none is silently reused after it changed.

Two kinds, for the two ways a result goes stale:

* ``settings_fingerprint``: the settings a training run was started with (everything in its
  config block but bookkeeping, and the run's own axes and seed). A checkpoint carries it, and
  a run resumes from a checkpoint only when it matches (``training.Checkpoint``); ``changes``
  names what differs, for the log line that says why a run starts afresh.
* ``code_fingerprint``: a hash of the library code a job runs, found by following, from the
  functions the job calls, every function, class and constant of this package they reference
  (transitively, through closures and module attributes). Measurement and figure jobs carry it
  as a Snakemake ``params`` entry, so editing a plotting function reruns the figure jobs that
  call it and nothing else, and editing a measurement reruns its measurements and figures.
  Training jobs deliberately carry none: they rerun on their settings only.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import types

PACKAGE = __name__.split(".")[0]

# Settings that say how a job is scheduled or where files live, not what a run computes.
BOOKKEEPING = frozenset({"resources", "runs_per_job", "optional", "data_dir"})


def plain(value):
    """``value`` as JSON would give it back (tuples become lists, keys strings): what a
    checkpoint stores and what two fingerprints are compared in."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def settings_fingerprint(settings: dict, exclude=(), **run) -> dict:
    """What determines one training run: ``settings`` without bookkeeping (and ``exclude``),
    and the run's own values (``run``: its axes, seed, ...), as plain data."""
    kept = {k: v for k, v in settings.items() if k not in BOOKKEEPING and k not in set(exclude)}
    return plain({**kept, **({"run": run} if run else {})})


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def changes(old: dict | None, new: dict) -> list[str]:
    """``["recipe.lr 0.1 -> 0.05", ...]``: every dotted key whose value differs (missing keys
    read ``(none)``)."""
    a, b = _flat(old or {}), _flat(new)
    missing = "(none)"
    return [f"{k} {a.get(k, missing)} -> {b.get(k, missing)}" for k in sorted(set(a) | set(b))
            if a.get(k, missing) != b.get(k, missing)]


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
