"""The house has floors: the science (``reluinit.<module>``) imports nothing from the floors above
it (the pipeline's machinery, the reporting, the tools, the experiments and their figures), so a
researcher can use it on their own networks without the workflow."""

import ast
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src" / "reluinit"
FLOORS = ("pipeline", "report", "tools", "experiments", "figures", "gpucheck", "harvest")


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports (relative imports resolved), at any depth of the file."""
    package = ["reluinit"]  # the science modules sit at the package's top
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [module] + [f"{module}.{a.name}" for a in node.names]
    return out


def science_modules() -> list[Path]:
    return sorted(p for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def test_no_science_module_imports_a_floor_above_it():
    bad = [f"{p.name} imports {m}" for p in science_modules() for m in _imports(p)
           if any(m == f"reluinit.{f}" or m.startswith(f"reluinit.{f}.") for f in FLOORS)]
    assert not bad, "\n".join(bad)


def test_the_floors_hold_what_the_readme_says():
    assert {p.stem for p in (SRC / "pipeline").glob("*.py")} >= {"catalogue", "config", "paths", "plan", "jobs",
                                                               "smoke", "provenance"}
    assert {p.stem for p in (SRC / "report").glob("*.py")} >= {"claims", "reports", "reference", "plotting"}
    assert {p.stem for p in (SRC / "tools").glob("*.py")} >= {"benchmark", "precision"}
    assert len(science_modules()) >= 15


def test_the_import_rule_can_fail(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from .pipeline import catalogue\n    from . import nets\n")
    assert "reluinit.pipeline.catalogue" in _imports(bad) and "reluinit.nets" in _imports(bad)
