"""Issue 97, the reference and the claims: committed tables carry digests (an edited one is named
and judged by no claim), a claim's paper is its table's, and the refusals of render, export, a
claim on an empty table and a notebook's missing table name their fix."""

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import ROOT
from reluinit import integrity
from reluinit.pipeline import paths
from reluinit.report import claims, committed, reference, reports
from test_reference import ROWS, _done, _job

REF = ROOT / "reference" / "paper"


def _cli(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reluinit.report.reference", *args], capture_output=True, text=True,
                          cwd=cwd)


def _claims_file(path: Path, ids: list[str], **change) -> Path:
    """A claims.yaml holding the claims ``ids`` of the project's, each with ``change`` applied."""
    doc = yaml.safe_load((ROOT / "claims.yaml").read_text())
    path.write_text(yaml.safe_dump({"claims": [c | change for c in doc["claims"] if c["id"] in ids]}, sort_keys=False))
    return path


def _tree(tmp_path: Path, *exps: str) -> Path:
    """A reference tree with ``exps``' committed tables and runs.csv, digests recorded as export does."""
    root = tmp_path / "reference" / "paper"
    for exp in exps:
        src = Path(paths.existing_table(str(REF), exp))
        (root / src.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, root / src.parent.name / src.name)
    shutil.copyfile(REF / "runs.csv", root / "runs.csv")
    committed.record(root, list(exps))
    return root


def test_the_committed_reference_records_the_digests_of_every_table_it_holds():
    runs = pd.read_csv(REF / "runs.csv")
    recorded = pd.read_csv(REF / committed.TABLES).set_index("experiment")
    assert set(recorded.index) == set(runs.loc[runs["status"] == "done", "experiment"]) == set(committed.tables(REF))
    assert committed.edited(REF) == []


def test_a_committed_table_edited_by_hand_is_named_by_restore_and_render_and_not_judged(tmp_path):
    """Issue 97's probe: OP-F1's act_ratio scaled by 1.3 turned OP-1 from reproduced to not
    reproduced, and restore said nothing."""
    root = _tree(tmp_path, "OP-F1")
    listed = _claims_file(tmp_path / "claims.yaml", ["OP-1"])
    card = reference.render(root, listed, notebooks=False, readme=None)  # as exported: judged
    assert card.set_index("claim").loc["OP-1", "verdict"] == claims.REPRODUCED
    table = root / "OP" / "OP-F1.csv.gz"
    edited = pd.read_csv(table)
    edited["act_ratio"] *= 1.3
    table.write_bytes(gzip.compress(edited.to_csv(index=False).encode()))
    (root / "claims.csv").unlink()

    run = _cli("restore", "--root", str(root), "--results", str(tmp_path / "results" / "paper"))
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert f"{table}: edited after export" in run.stderr and "claims are not judged" in run.stderr
    assert "1 file(s) refused as damaged or edited" in run.stderr
    assert f"reluinit.report.reference record {table}" in run.stderr and "snakemake results/paper/OP/OP-F1.csv" in run.stderr
    with pytest.raises(committed.EditedTable, match="OP-F1.csv.gz: edited after export: its sha256") as refused:
        reference.render(root, listed, notebooks=False, readme=None)
    assert "export --experiments OP-F1" in str(refused.value)
    assert not (root / "claims.csv").exists()  # nothing judged, nothing written

    # an edit meant: re-recorded by its explicit command, then judged on the new numbers
    run = _cli("record", str(table))
    assert run.returncode == 0 and f"recorded {table}" in run.stdout, run.stderr
    card = reference.render(root, listed, notebooks=False, readme=None)
    assert card.set_index("claim").loc["OP-1", "verdict"] == claims.NOT_REPRODUCED


def test_a_deleted_table_and_an_edited_part_in_its_stead_are_named_by_render_and_not_judged(tmp_path):
    """A review's probe: OP-F1's table deleted and its act_ratio, scaled by 1.3, planted as a part
    file: render judged OP-1 on the part (reproduced -> not reproduced), exit 0, since it checked
    whole tables only."""
    root = _tree(tmp_path, "OP-F1")
    listed = _claims_file(tmp_path / "claims.yaml", ["OP-1"])
    table = root / "OP" / "OP-F1.csv.gz"
    planted = pd.read_csv(table)
    planted["act_ratio"] *= 1.3
    table.unlink()
    with pytest.raises(committed.EditedTable, match="records it but the tree does not hold it"):
        reference.render(root, listed, notebooks=False, readme=None)
    part = root / "OP" / "OP-F1" / "group0.csv.gz"
    part.parent.mkdir()
    part.write_bytes(gzip.compress(planted.to_csv(index=False).encode()))
    with pytest.raises(committed.EditedTable) as refused:
        reference.render(root, listed, notebooks=False, readme=None)
    assert f"{part}: parts.csv has no record of it, so the claims that read it are not judged" in str(refused.value)
    assert not (root / "claims.csv").exists()
    run = _cli("restore", "--root", str(root), "--results", str(tmp_path / "results" / "paper"))
    assert run.returncode != 0 and "records it but the tree does not hold it" in run.stderr, run.stderr


def test_export_records_the_tables_it_writes_and_a_tree_without_a_record_is_named_whole(tmp_path):
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    (results / "TG").mkdir(parents=True)
    _done(results, "TG-F4")
    reference.export(results, out, ["TG-F4"])
    recorded = pd.read_csv(out / committed.TABLES)
    assert recorded.to_dict("records") == [{"experiment": "TG-F4", "file": "TG/TG-F4.csv",
                                            **committed.digests((out / "TG" / "TG-F4.csv").read_bytes())}]
    assert committed.edited(out) == [] and reference.restore(out, tmp_path / "again")[2] == []
    (out / "TG" / "TG-F1.csv").write_bytes((out / "TG" / "TG-F4.csv").read_bytes())  # a table no export wrote
    assert committed.edited(out) == [f"{out / 'TG' / 'TG-F1.csv'}: {out / committed.TABLES} records no digest for it, "
                                     f"so its claims are not judged; rebuild it with `snakemake results/paper/TG/TG-F1.csv "
                                     f"--cores 1` and `python -m reluinit.report.reference export --experiments TG-F1 "
                                     f"--out {out}`, or, if the edit is meant, re-record it with `python -m "
                                     f"reluinit.report.reference record {out / 'TG' / 'TG-F1.csv'}`"]
    (out / "TG" / "TG-F1.csv").unlink()
    (out / committed.TABLES).unlink()  # a tree exported before tables carried digests
    assert committed.edited(out) == [f"{out / committed.TABLES} is missing, so no table of {out} can be checked and "
                                     f"no claim is judged on it; export the tree again or, if its tables are as "
                                     f"exported, record them with `python -m reluinit.report.reference record {out}`"]
    assert _cli("record", str(out)).returncode == 0 and committed.edited(out) == []
    run = _cli("record", str(REF / "RP" / "mask-audit.csv.gz"))  # not an experiment's table: refused, one line
    assert run.returncode != 0 and "mask-audit.csv.gz is not an experiment's table" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_claim_whose_paper_is_not_its_tables_is_refused_naming_the_claim_and_both_papers(tmp_path):
    wrong = _claims_file(tmp_path / "claims.yaml", ["OP-1"], paper="X")
    with pytest.raises(claims.ClaimError, match=r"claim OP-1: its paper is X but its table OP-F1 is OP's; "
                                                r"give it `paper: OP`"):
        claims.load(wrong)


def test_the_claims_of_a_sealed_but_empty_table_say_it_is_empty_and_how_to_rebuild_it(tmp_path):
    results = tmp_path / "results" / "quick"
    table = Path(paths.table(str(results), "OP-F1"))
    columns = list(pd.read_csv(REF / "OP" / "OP-F1.csv.gz", nrows=1).columns)
    integrity.write_atomic(table, lambda tmp: pd.DataFrame(columns=columns).to_csv(tmp, index=False),
                           shape={"rows": 0, "columns": columns})
    listed = claims.load(_claims_file(tmp_path / "claims.yaml", ["OP-1", "OP-2"]))
    card = claims.scorecard(listed, str(results), "quick")
    for note in card["note"]:
        assert "table OP-F1 is empty (0 rows)" in note and "not in this configuration" not in note
        assert f"snakemake {table} --force --cores 1 --config scale=quick" in note


@pytest.mark.parametrize("change,named", [("duplicate", "claim id OP-1 is used twice"),
                                          ("kind", "kind 'claimz' is none of claim, check, calibration")])
def test_render_refuses_a_duplicate_claim_id_or_an_unknown_kind_in_one_line(tmp_path, change, named):
    root = tmp_path / "reference" / "paper"
    root.mkdir(parents=True)
    shutil.copyfile(REF / "runs.csv", root / "runs.csv")
    doc = yaml.safe_load((ROOT / "claims.yaml").read_text())
    op1 = next(c for c in doc["claims"] if c["id"] == "OP-1")
    listed = [op1, op1] if change == "duplicate" else [op1 | {"kind": "claimz"}]
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump({"claims": listed}, sort_keys=False))
    run = _cli("render", "--root", "reference/paper", "--no-notebooks", cwd=tmp_path)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert named in run.stderr and "claims.yaml, line" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in root.iterdir()) == ["runs.csv"]  # nothing written


def test_render_on_a_missing_folder_refuses_before_writing_anything(tmp_path):
    nowhere = tmp_path / "nowhere" / "paper"
    run = _cli("render", "--root", str(nowhere), "--no-notebooks")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert f"{nowhere} holds no reference tree (no runs.csv)" in run.stderr
    assert f"reluinit.report.reference export --out {nowhere}" in run.stderr
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("made_up,meant", [("OP-F99", "OP-F1"), ("opf1", "OP-F1"), ("TG_F3A", "TG-F3a")])
def test_export_refuses_an_id_the_catalogue_does_not_have_and_suggests_the_one_meant(tmp_path, made_up, meant):
    out = tmp_path / "reference" / "paper"
    run = _cli("export", "--results", str(tmp_path / "results" / "paper"), "--out", str(out), "--experiments", made_up)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert f"no experiment {made_up!r} in the catalogue (did you mean" in run.stderr and meant in run.stderr
    assert "CATALOGUE.md" in run.stderr and not out.exists()


def test_a_notebooks_missing_table_names_the_command_for_its_scale_and_results(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objs: shown.extend(getattr(o, "data", o) for o in objs))
    results = tmp_path / "mine" / "quick"
    reports.show(str(results), "OP-F1", pd.DataFrame())
    table = paths.table(str(results), "OP-F1")
    assert f"`snakemake {table} --cores 1 --config scale=quick results={tmp_path / 'mine'}`" in shown[0]
    ref = tmp_path / "reference" / "paper"  # a reference tree: the job, then its export
    ref.mkdir(parents=True)
    (ref / "runs.csv").write_text("experiment,status\n")
    reports.show(str(ref), "OP-F1", pd.DataFrame())
    assert "`snakemake results/paper/OP/OP-F1.csv --cores 1` and `python -m reluinit.report.reference export " \
           f"--experiments OP-F1 --out {ref}`" in shown[1]


def test_restore_says_which_columns_of_a_trained_part_that_reruns_may_differ(tmp_path):
    """Issue 97: a part retrained in a stack of another size differs at float32 rounding (TG-F6's
    length_out by 4.7e-7): restore says which columns and how much, as docs/reference.md does."""
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    _job(results, "TG-F6", "group0", ROWS, 12.5)
    reference.export(results, out, ["TG-F6"])
    run = _cli("restore", "--root", str(out), "--results", str(tmp_path / "again" / "paper"))
    assert run.returncode == 0, run.stderr
    note = next(line for line in run.stdout.splitlines() if line.startswith("note:"))
    assert "stack of another size" in note and "4.7e-7" in note and "docs/reference.md" in note
    other = tmp_path / "other" / "paper"  # a measurement's part, not trained: no such note
    _job(results, "TG-F3a", "gaussian", ROWS, 12.5)
    reference.export(results, other, ["TG-F3a"])
    run = _cli("restore", "--root", str(other), "--results", str(tmp_path / "third" / "paper"))
    assert "restored" in run.stdout and "note:" not in run.stdout


@pytest.mark.parametrize("damage", ["a,b\n1,2\n", "", "twice"])
def test_a_damaged_tables_csv_is_named_with_its_fix_and_recorded_anew_by_record(tmp_path, damage):
    """A review's probes: another header or an empty tables.csv ended restore and record in a raw
    KeyError traceback or 'No columns to parse', and a row listed twice garbled the message."""
    root = _tree(tmp_path, "OP-F1")
    recorded = root / committed.TABLES
    kept = recorded.read_text()
    recorded.write_text(kept + kept.splitlines(keepends=True)[1] if damage == "twice" else damage)
    run = _cli("restore", "--root", str(root), "--results", str(tmp_path / "results" / "paper"))
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert f"{recorded} is damaged" in run.stderr and f"reference record {root}" in run.stderr, run.stderr
    run = _cli("record", str(root))
    assert run.returncode == 0, run.stderr
    assert recorded.read_text() == kept
