"""The catalogue: the one map from ids to code. The README's status table and CATALOGUE.md are the
ones it and the config give (they cannot say "planned" for what is built, or miss an experiment);
it, the config, the schema and the shared experiment list name the same ids; the library never
imports the experiments."""

import ast
import os
import re
import shutil

import pandas as pd
import pytest
import yaml

from conftest import ROOT
from reluinit.pipeline import catalogue
from reluinit.pipeline import new as scaffold


def test_readme_status_table_is_generated_from_the_catalogue():
    table = catalogue.status_table(yaml.safe_load((ROOT / "config.yaml").read_text()))
    readme = (ROOT / "README.md").read_text()
    assert table in readme, "README's status table is stale: paste `python -m reluinit.pipeline.catalogue`"
    assert "planned" not in readme.split("## ", 1)[0]
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert all(exp in table for exp in config["experiments"])


def test_catalogue_file_is_generated_from_registry_and_config():
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    expected = catalogue.catalogue_markdown(config)
    assert (ROOT / "CATALOGUE.md").read_text() == expected, (
        "CATALOGUE.md is stale: run `python -m reluinit.pipeline.catalogue catalogue > CATALOGUE.md`")
    # every configured id has a row with its place, and both scales' settings come from the config
    for exp in config["experiments"]:
        assert f"| {exp} | {catalogue.ENTRIES[exp].place} |" in expected
    assert "widths: [100, 500, 2000, 4060]" in expected  # OP-F1's paper block
    assert "widths: [100, 500, 4060]" in expected  # ... and its quick one
    assert "RP-T8" in expected and "optional: not built by `all`" in expected


def test_catalogue_follows_a_config_change_and_names_a_missing_entry():
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["experiments"]["OP-F1"]["quick"]["n_samples"] = 123
    assert "n_samples: 123" in catalogue.catalogue_markdown(config)
    config["experiments"]["OP-F9"] = config["experiments"]["OP-F1"]
    with pytest.raises(KeyError, match="OP-F9"):
        catalogue.catalogue_markdown(config)


def test_every_paper_has_a_public_link():
    for paper in catalogue.REFERENCES.values():
        assert paper["url"].startswith("https://") and (
            paper["url"].endswith(paper["id"].split(":")[-1].strip()) or paper["id"].split()[-1] in paper["url"])


# --- the catalogue is the one map from ids to code ----------------------------------------------

SHARED_LIST = ROOT.parent / "shared" / "EXPERIMENTS.md"


def _shared_ids(text: str) -> set[str]:
    """The ids of the shared experiment list's tables, in the catalogue's spelling: "LR-F1/F2" is
    LR-F1 and LR-F2, "TG-F4a/b" and "EP-F13a-d" are one figure each (its panels)."""
    ids = set()
    for cell in re.findall(r"^\| ([A-Z]+-[A-Za-z0-9/-]+) \|", text, flags=re.M):
        paper, first = cell.split("-", 1)
        for name in first.split("/"):
            if re.fullmatch(r"[a-d](-[a-d])?", name):  # a panel of the previous id
                continue
            exp = f"{paper}-{name}"
            ids.add(exp if exp in catalogue.ENTRIES else re.sub(r"[a-d](-[a-d])?$", "", exp))
    return ids


def test_catalogue_config_schema_and_the_shared_list_name_the_same_ids():
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    ids = set(catalogue.ENTRIES)
    assert set(config["experiments"]) == ids
    assert set(schema["properties"]["experiments"]["properties"]) == ids
    if not SHARED_LIST.exists():
        pytest.skip("no ../shared/EXPERIMENTS.md beside this clone")
    assert _shared_ids(SHARED_LIST.read_text()) == ids


def test_every_catalogue_entry_names_functions_its_module_has():
    for exp, entry in catalogue.ENTRIES.items():
        e = catalogue.get(exp)
        assert all(callable(f) for f in (e.parts, e.measure, e.figure, e.summary, e.trained)), exp
        assert e.paper == catalogue.paper_of(exp) and e.paper in catalogue.PAPERS
        assert e.source is None or catalogue.ENTRIES[e.source].module == entry.module
    with pytest.raises(KeyError, match="OP-F9"):
        catalogue.get("OP-F9")


def _imports(path):
    """(module, names) of every import statement in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text())
    package = ["reluinit"] + list(path.relative_to(SRC).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module, [a.name for a in node.names]


SRC = ROOT / "src" / "reluinit"


def test_the_library_never_imports_the_experiments():
    """The science is the library; experiments only wire it: no module outside
    ``reluinit/experiments`` imports from it (``catalogue.get`` reaches it by name), but the tools,
    which sit above the experiments (``tools.precision`` measures TG's own sweeps)."""
    for path in SRC.rglob("*.py"):
        if {"experiments", "tools"} & set(path.relative_to(SRC).parts):
            continue
        for module, names in _imports(path):
            assert not module.startswith("reluinit.experiments"), f"{path.name} imports {module}"
            assert not (module == "reluinit" and "experiments" in names), f"{path.name} imports reluinit.experiments"


def test_experiment_modules_stay_thin():
    for path in (SRC / "experiments").glob("*.py"):
        assert len(path.read_text().splitlines()) <= 400, f"{path.name}: move its science into the library"


def test_the_pages_example_id_is_one_no_test_makes():
    """Following docs/adding-an-experiment.md literally must not collide with the suite's own toy
    (X-F2, the test below): a user who made the page's X-F3 keeps a green suite."""
    page = (ROOT / "docs/adding-an-experiment.md").read_text()
    shown = set(re.findall(r"reluinit\.pipeline\.new (\S+)", page))
    assert len(shown) == 1 and "X-F2" not in shown
    others = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py") if p.name != "test_catalogue.py")
    assert not any(re.search(rf"\b{i}\b", others) for i in shown)


@pytest.mark.workflow
def test_a_new_experiment_made_by_the_command_builds_and_keeps_the_catalogue_whole(tmp_path):
    """docs/adding-an-experiment.md: ``python -m reluinit.pipeline.new X-F2 --paper X`` writes every
    file a new id needs; in that copy `snakemake x_f2` builds its table and figure, and the tests
    that keep the catalogue, config, schema, notebooks, CATALOGUE.md and README in step pass."""
    import subprocess
    import sys

    from conftest import copy_workflow, snakemake

    wf = copy_workflow(tmp_path / "wf")
    for name in ("tests", "CATALOGUE.md", "README.md", "docs", "reference"):  # what the commands edit and the tests read
        src = ROOT / name
        if src.is_dir() and not (wf / name).exists():
            shutil.copytree(src, wf / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file() and not (wf / name).exists():
            shutil.copy(src, wf / name)
    env = {**os.environ, "PYTHONPATH": str(wf / "src")}
    made = subprocess.run([sys.executable, "-m", "reluinit.pipeline.new", "X-F2", "--paper", "X", "--shows", "A toy.",
                           "--root", str(wf)], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    wrote = [line.split(" ", 1)[1] for line in made.stdout.splitlines() if line.startswith("wrote ")]
    assert wrote == ["src/reluinit/experiments/x_f2.py", "src/reluinit/figures/x_f2.py", "src/reluinit/pipeline/catalogue.py",
                     "config.yaml", "workflow/schemas/config.schema.yaml", "notebooks/X.ipynb", "claims.yaml",
                     "CATALOGUE.md", "README.md"]
    run = snakemake("x_f2", "--cores", "1", "--config", "scale=quick", cwd=wf)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "plotted by reluinit.figures.x_f2.figure" in run.stdout + run.stderr
    table = pd.read_csv(wf / "results/quick/X/X-F2.csv")
    assert len(table) == 100 and (table["value"] >= 0).all()
    assert (wf / "results/quick/figures/X-F2.png").stat().st_size > 0
    # the claim stub: in the claims section, whole once uncommented as the stub says, and judged
    text = (wf / "claims.yaml").read_text()
    stub = text[text.index("# X-F2 (python -m reluinit.pipeline.new)"):text.index("\ncells:")]
    stub = stub[:stub.index("\n\n")]  # the stub, not the comment that introduces the cells
    free = scaffold._free_claim_id((ROOT / "claims.yaml").read_text(), "X")  # X-3 here; later in a user's clone
    assert f"id: {free}" in stub  # the next free id of paper X
    used = re.sub(r"(?m)^  # (?=[ -])", "  ", stub)
    (wf / "claims.yaml").write_text(text.replace(stub, used))
    from reluinit.report import claims

    claim = next(c for c in claims.load(wf / "claims.yaml") if c.id == free)
    row = claims.evaluate(claim, table, "quick")
    assert row["verdict"] in (claims.REPRODUCED, claims.NOT_REPRODUCED) and abs(row["measured"] - 0.798) < 0.2
    regen = subprocess.run([sys.executable, "-m", "reluinit.pipeline.regenerate", "--skip-reference"], cwd=wf,
                           capture_output=True, text=True, env=env)
    assert regen.returncode == 0, regen.stderr
    assert free in (wf / "docs/claims.md").read_text()
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_catalogue.py",
                            "tests/test_reports.py", "tests/test_claims.py", "-k", "not new_experiment"],
                           cwd=wf, capture_output=True, text=True, env=env)
    assert suite.returncode == 0, suite.stdout[-3000:]
