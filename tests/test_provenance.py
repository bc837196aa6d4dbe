"""Code fingerprints (what makes a measurement or figure job rerun) and settings fingerprints."""

import contextlib
import importlib
import io
import subprocess
import sys
import textwrap

import reluinit
from reluinit import fingerprint
from reluinit.pipeline import provenance

MODULE = '''{top}
import functools

SCALE = {scale}
HELPERS = {{"double": lambda x: 2 * x}}


def helper(x):
    return x + {offset}


def measure(x):
    return HELPERS["double"](helper(x)) * SCALE


def figure():
    return "{label}"


def make(kind):
    def job():
        return kind(1)
    return job


partial_measure = functools.partial(measure, 3)
'''


def _load(tmp_path, name, **values):
    """A module of this package written from MODULE with ``values`` (imported afresh)."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(MODULE.format(**{"top": "", "scale": 1, "offset": 1, "label": "x", **values}))
    reluinit.__path__.append(str(folder))
    try:
        sys.modules.pop(f"reluinit.{name}", None)
        return importlib.import_module(f"reluinit.{name}")
    finally:
        reluinit.__path__.remove(str(folder))


def test_a_fingerprint_follows_the_code_a_function_reaches(tmp_path):
    fp = provenance.code_fingerprint
    base = _load(tmp_path, "probe_a")
    same = _load(tmp_path, "probe_a")
    assert fp(base.measure) == fp(same.measure) and fp(base.figure) == fp(same.figure)
    helper_edit = _load(tmp_path, "probe_a", offset=2)  # a helper the measurement calls
    assert fp(helper_edit.measure) != fp(base.measure) and fp(helper_edit.figure) == fp(base.figure)
    constant_edit = _load(tmp_path, "probe_a", scale=3)  # a module constant it reads
    assert fp(constant_edit.measure) != fp(base.measure)
    label_edit = _load(tmp_path, "probe_a", label="y")  # a figure's label
    assert fp(label_edit.figure) != fp(base.figure) and fp(label_edit.measure) == fp(base.measure)
    moved = _load(tmp_path, "probe_a", top="# a comment above everything\n\n")  # same code, other lines
    assert fp(moved.measure) == fp(base.measure) and fp(moved.figure) == fp(base.figure)
    # through closures and partials too
    assert fp(helper_edit.make(helper_edit.measure)) != fp(base.make(base.measure))
    assert fp(helper_edit.partial_measure) != fp(base.partial_measure)


def test_a_fingerprint_is_the_same_in_every_process():
    code = textwrap.dedent("""
        from reluinit.pipeline import catalogue, provenance
        from reluinit.report import plotting
        e = catalogue.get("RP-T1")
        print(provenance.code_fingerprint(e.measure), provenance.code_fingerprint(e.figure, plotting.save))
    """)
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(code, {})
    assert other == here.getvalue() and len(other.split()) == 2


def test_changes_name_every_dotted_key_that_differs():
    old = {"recipe": {"lr": 0.1, "epochs": 2}, "seed": 1, "format": 1}
    new = {"recipe": {"lr": 0.05, "epochs": 2}, "seed": 1, "model": "resnet8", "format": 1}
    assert fingerprint.changes(old, new) == ["model (none) -> resnet8", "recipe.lr 0.1 -> 0.05"]
    assert fingerprint.changes(new, new) == []
    assert fingerprint.settings_fingerprint({"a": (1, 2), "resources": {"gpu": 1}}, seed=3) == \
        {"a": [1, 2], "run": {"seed": 3}}


def test_memo_computes_once_per_version_of_the_source(tmp_path, monkeypatch):
    """What the workflow's planning computes from the code is read back, as plain data, by the next
    process of the same source, under its key; another key or another source computes it again."""
    calls, WANT = [], [("parts", ["a", "b"]), ("v80", 1), ("v200", 2)]

    def compute():
        calls.append(1)
        return {"parts": ("a", "b"), "v80": 1, "v200": 2}  # dicts keep their order (a job's parts run in it)

    def fresh_process(digest="now"):
        monkeypatch.setattr(provenance, "_memo", {})
        monkeypatch.setattr(provenance, "source_digest", lambda: digest)

    fresh_process()
    assert list(provenance.memo("parts", ["X-F1", {"n": 1}], compute).items()) == WANT  # plain, as if read
    monkeypatch.setattr(provenance, "MEMO_DIR", tmp_path)
    fresh_process()
    assert list(provenance.memo("parts", ["X-F1", {"n": 1}], compute).items()) == WANT
    assert list(provenance.memo("parts", ["X-F1", {"n": 1}], compute).items()) == WANT and len(calls) == 2
    provenance.save_memo()
    fresh_process()  # the next process reads it
    assert list(provenance.memo("parts", ["X-F1", {"n": 1}], compute).items()) == WANT and len(calls) == 2
    assert provenance.memo("parts", ["X-F1", {"n": 2}], compute) and len(calls) == 3  # another setting
    fresh_process("edited")  # another version of the source
    assert provenance.memo("parts", ["X-F1", {"n": 1}], compute) and len(calls) == 4
    provenance.save_memo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memo-edited.json", "memo-now.json"]


def test_source_digest_covers_every_source_file_of_the_package(tmp_path):
    """A copy of the package whose one file differs by a comment has another digest."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(reluinit.__path__[0], root / "reluinit", ignore=shutil.ignore_patterns("__pycache__"))
    digest = "import sys; sys.path.insert(0, sys.argv[1]); from reluinit.pipeline import provenance; print(provenance.source_digest())"
    same = subprocess.run([sys.executable, "-c", digest, str(root)], capture_output=True, text=True, check=True).stdout
    with (root / "reluinit" / "figures" / "op.py").open("a") as f:
        f.write("# edited\n")
    edited = subprocess.run([sys.executable, "-c", digest, str(root)], capture_output=True, text=True, check=True).stdout
    assert same.strip() == provenance.source_digest() and edited.strip() != same.strip()
