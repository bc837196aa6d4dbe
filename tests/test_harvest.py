"""The harvest (paper-scale parts on a machine lent for minutes) and the digests that let
`reference restore` prove a part is what was exported."""

import gzip
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, snakemake
from reluinit import harvest, integrity, training
from reluinit.pipeline import paths
from reluinit.report import reference
from test_reference import _job


def test_importing_the_harvest_imports_neither_snakemake_nor_papermill():
    code = ("import sys, reluinit.harvest; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('snakemake', 'papermill')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.workflow
def test_a_tiny_harvest_restored_into_a_tree_leaves_snakemake_none_of_its_parts_to_run(workdir, tmp_path):
    """RP-F3 prunes: its masks are made first by the prune rule's own script, and Snakemake, finding
    the restored part done, asks for neither the masks nor the part again."""
    out, ref = tmp_path / "harvest", tmp_path / "reference" / "quick"
    table = harvest.harvest(180, tmp_path / "data", out, device="cpu", only=["TG-F6", "EP-F6", "RP-F3"], tiny=True,
                            reference=tmp_path / "none", config_file=workdir / "config.yaml")
    done = table[table["status"] == "finished"]
    assert set(done["experiment"]) == {"TG-F6", "EP-F6", "RP-F3"} and (done["seconds"] > 0).all()
    assert Path(paths.masks(str(out / "quick"), "RP-F3", "group0")).exists()
    results = out / "quick"
    assert (results / "harvest-report.md").read_text().count("| finished |") == len(done)
    reference.export(results, ref, ["TG-F6", "EP-F6", "RP-F3"], scale="quick")
    parts = pd.read_csv(ref / "parts.csv", dtype=reference.TEXT)
    assert parts[["sha256", "bytes", "rows"]].notna().all().all() and set(parts["machine"]) == set(done["machine"])
    restored, left_out, refused = reference.restore(ref, workdir / "results" / "quick", scale="quick")
    assert len(restored) == len(done) and left_out == refused == []
    for f in restored:
        integrity.verify(f)  # sealed, as a job writes it
        assert integrity.seal_path(f).exists()
    run = snakemake("tg_f6", "ep_f6", "rp_f3", "-n", "--cores", "2", "--config", "scale=quick", cwd=workdir)
    assert run.returncode == 0, run.stderr[-2000:]
    stats = (run.stdout + run.stderr).split("Job stats:")[1].split("total")[0]
    scheduled = dict(line.split() for line in stats.splitlines()[3:] if line.strip())
    # their tables and figures, no part and no masks
    assert set(scheduled) == {"figure_tg_f6", "figure_ep_f6", "figure_rp_f3", "tg_f6", "ep_f6", "rp_f3"}


def test_a_part_stopped_by_the_budget_travels_with_the_reference_and_resumes_to_the_same_rows(tmp_path):
    """The deadline stops a run after an epoch with its checkpoint written; the checkpoint goes into
    the reference with the export and back into another tree with restore, where the run resumes
    and ends where a run never stopped ends."""
    import yaml

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config.update(data_dir=str(tmp_path / "data"), scale="quick")
    whole, cut, moved = (tmp_path / name / "quick" for name in ("whole", "cut", "moved"))
    config["results"] = str(cut.parent)
    with pytest.raises(training.OutOfTime, match="checkpoint"):
        harvest.run_part(config, "quick", cut, "TG-F6", "group0", "cpu", 1, control=training.Control(time.monotonic()))
    assert not Path(paths.part(str(cut), "TG-F6", "group0")).exists()
    assert 0 < harvest.checkpoint_mb(cut, "TG-F6", "group0") <= reference.CHECKPOINTS_MAX_BYTES / 1e6
    ref = tmp_path / "reference" / "quick"
    reference.export(cut, ref, ["TG-F6"], scale="quick")
    assert list(Path(paths.checkpoints(str(ref), "TG-F6", "group0")).glob("*.pt"))
    restored = reference.restore(ref, moved, scale="quick")[0]
    assert restored == [Path(paths.checkpoints(str(moved), "TG-F6", "group0"))]
    for results in (whole, moved):
        config["results"] = str(results.parent)
        harvest.run_part(config, "quick", results, "TG-F6", "group0", "cpu", 1)
    log = Path(paths.log(str(moved), "TG/TG-F6/group0")).read_text()
    assert "resumed from" in log and "at epoch 1 of 2" in log  # not trained again from the start
    a, b = (pd.read_csv(paths.part(str(r), "TG-F6", "group0")) for r in (whole, moved))
    timing = [c for c in a.columns if "seconds" in c]
    pd.testing.assert_frame_equal(a.drop(columns=timing), b.drop(columns=timing))


@pytest.fixture
def exported(tmp_path):
    """A reference with two parts of an unfinished TG-F3a: one gzipped, as export keeps every part, and
    one plain, as parts exported before that were (the reference still holds such parts)."""
    results, out = tmp_path / "results" / "paper", tmp_path / "reference" / "paper"
    rng = np.random.default_rng(0)
    _job(results, "TG-F3a", "gaussian", pd.DataFrame({"layer": range(40_000), "growth": rng.random(40_000)}), 5.0)
    _job(results, "TG-F3a", "uniform", pd.DataFrame({"layer": range(3), "growth": [0.5, 1.5, 1.25]}), 5.0)
    reference.export(results, out, ["TG-F3a"])
    kept = out / "TG" / "TG-F3a"
    assert sorted(f.name for f in kept.iterdir()) == ["gaussian.csv.gz", "uniform.csv.gz"]  # small parts too
    assert gzip.decompress((kept / "uniform.csv.gz").read_bytes()) == (results / "TG" / "TG-F3a" / "uniform.csv").read_bytes()
    (kept / "uniform.csv").write_bytes(gzip.decompress((kept / "uniform.csv.gz").read_bytes()))
    (kept / "uniform.csv.gz").unlink()
    return out


def _restore_cli(root: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reluinit.report.reference", "restore", "--root", str(root),
                           "--results", str(results)], capture_output=True, text=True, cwd=ROOT)


def test_restore_refuses_a_truncated_part_and_leaves_no_half_file(exported, tmp_path):
    part = exported / "TG" / "TG-F3a" / "gaussian.csv.gz"
    whole, _, refused = reference.restore(exported, tmp_path / "intact")
    assert len(whole) == 2 and refused == []
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    again = tmp_path / "again"
    run = _restore_cli(exported, again)
    assert run.returncode != 0
    assert f"{part}: damaged" in run.stderr and "snakemake" in run.stderr.splitlines()[0]
    assert not (again / "TG" / "TG-F3a" / "gaussian.csv").exists()  # no half file
    assert (again / "TG" / "TG-F3a" / "uniform.csv").exists()  # the others are restored
    assert _restore_cli(exported, again).returncode != 0  # and the next restore refuses it again


def test_restore_refuses_an_altered_part_naming_it(exported, tmp_path):
    part = exported / "TG" / "TG-F3a" / "uniform.csv"
    part.write_text(part.read_text().replace("1.25", "1.35"))  # well-formed, same size, other numbers
    restored, left_out, refused = reference.restore(exported, tmp_path / "again")
    assert [f.stem for f in restored] == ["gaussian"] and left_out == []
    assert len(refused) == 1 and refused[0].startswith(f"{part}: altered: its sha256")
    assert "rebuild it with `snakemake" in refused[0]
    gz = exported / "TG" / "TG-F3a" / "gaussian.csv.gz"  # and a gzipped part rewritten with other rows
    gz.write_bytes(gzip.compress(b"layer,growth\n0,0.5\n"))
    refused = reference.restore(exported, tmp_path / "third")[2]
    assert any(r.startswith(f"{gz}: altered") and "rows 1 is not the recorded 40000" in r for r in refused)


def test_restore_refuses_a_renamed_part(exported, tmp_path):
    part = exported / "TG" / "TG-F3a" / "uniform.csv"
    renamed = part.with_name("sphere.csv")
    part.rename(renamed)
    restored, _, refused = reference.restore(exported, tmp_path / "again")
    assert [f.stem for f in restored] == ["gaussian"]
    assert refused == [f"{renamed}: parts.csv has no record of part 'sphere' of TG-F3a (renamed, or not exported): "
                       f"rename it back with `mv {renamed} {part}` and restore again"]
    part_gz = exported / "TG" / "TG-F3a" / "gaussian.csv.gz"  # no recorded name left to go back to: it goes
    extra = part_gz.with_name("extra.csv.gz")
    extra.write_bytes(part_gz.read_bytes())
    refused = reference.restore(exported, tmp_path / "fourth")[2]
    assert f"{extra}: parts.csv has no record of part 'extra' of TG-F3a (renamed, or not exported): delete it (`rm {extra}`)" \
        in "\n".join(refused)
    extra.unlink()
    # a part renamed onto another's recorded name is caught by its digest
    (exported / "TG" / "TG-F3a" / "gaussian.csv.gz").unlink()
    renamed.rename(exported / "TG" / "TG-F3a" / "gaussian.csv")
    refused = reference.restore(exported, tmp_path / "third")[2]
    assert len(refused) == 1 and "altered" in refused[0]


def test_a_harvest_killed_between_parts_has_recorded_the_parts_it_finished(tmp_path, monkeypatch):
    """harvest.csv grows part by part: a long harvest ended hard (a session's end, a kill) keeps the
    commit and machine of every part it finished, which ``reference export`` then records."""
    done = []

    def run_part(config, scale, results, exp, part, *args):
        if done:
            raise KeyboardInterrupt  # killed during the second part
        done.append((exp, part))

    monkeypatch.setattr(harvest, "run_part", run_part)
    monkeypatch.setattr(harvest, "part_masks", lambda *a: [])
    with pytest.raises(KeyboardInterrupt):
        harvest.harvest(600, tmp_path / "data", tmp_path / "out", device="cpu", tiny=True,
                        reference=tmp_path / "none", threads=1)
    made = pd.read_csv(tmp_path / "out" / "quick" / "harvest.csv")
    finished = made[made.status == "finished"]
    assert list(zip(finished.experiment, finished.part)) == done
    assert finished.commit.notna().all() and finished.machine.notna().all()


def test_harvests_sharing_an_out_never_run_the_same_part(tmp_path, monkeypatch):
    """One harvest per core on one tree: a part another harvest holds is passed over, and so is one
    another harvest finished after this one listed its parts; the holder's end frees the part."""
    results, only = tmp_path / "out" / "quick", ["EP-F6", "TG-F6", "RP-F3"]  # one part each, in this order
    held, other = ("EP-F6", "rep0"), ("RP-F3", "group0")
    done = []

    def finish(exp, part):
        Path(paths.part(str(results), exp, part)).parent.mkdir(parents=True, exist_ok=True)
        Path(paths.part(str(results), exp, part)).write_text("rows")

    def run_part(config, scale, results, exp, part, *args):
        done.append((exp, part))
        finish(exp, part)
        if len(done) == 1:
            finish(*other)  # meanwhile the other harvest finishes a later part

    monkeypatch.setattr(harvest, "run_part", run_part)
    monkeypatch.setattr(harvest, "part_masks", lambda *a: [])
    run = dict(budget_s=600, data_dir=tmp_path / "data", out=tmp_path / "out", device="cpu", tiny=True,
               reference=tmp_path / "none", threads=1, only=only)
    with harvest.part_lock(results, *held) as mine:
        assert mine
        with harvest.part_lock(results, *held) as again:
            assert not again  # a second holder is refused, even in one process
        made = harvest.harvest(**run)
    assert done == [("TG-F6", "group0")], done
    assert list(made.loc[made.status == "finished", "experiment"]) == ["TG-F6"], made
    done.clear()
    harvest.harvest(**run)  # the holder has ended: its part is free, and nothing else is left
    assert done == [held]


def test_restore_keeps_a_part_the_tree_holds_and_says_whether_it_is_the_references(exported, tmp_path):
    """A results tree's own file is never overwritten; restore says, per part already there, that it
    is the reference's, or that it differs and what would take the reference's instead."""
    tree = tmp_path / "tree y ü"
    assert len(reference.restore(exported, tree)[0]) == 2
    mine = tree / "TG" / "TG-F3a" / "uniform.csv"
    other = mine.read_text().replace("1.25", "1.35")
    integrity.write_atomic(mine, lambda tmp: Path(tmp).write_text(other))  # another valid run's numbers, sealed
    restored, left_out, refused = reference.restore(exported, tree)
    assert restored == [] and refused == [] and mine.read_text().count("1.35") == 1
    assert any(line.startswith("TG-F3a gaussian: ") and "the same as the reference's" in line for line in left_out)
    differs = next(line for line in left_out if line.startswith("TG-F3a uniform: "))
    assert "differs from the reference's" in differs and f"`rm '{mine}'` and restore again" in differs
    mine.write_text(other.replace("1.35", "1.45"))  # edited after its seal: damaged, not another run's
    damaged = next(line for line in reference.restore(exported, tree)[1] if line.startswith("TG-F3a uniform: "))
    assert "does not match its seal" in damaged and f"`rm '{mine}'` and restore again" in damaged, damaged


def test_a_harvest_stops_within_its_budget_mid_epoch(tmp_path, monkeypatch):
    """A part whose epoch outlasts the budget (RP-T4's depth-100 CNN takes over an hour an epoch on a
    CPU) is stopped at the budget's end, not at the end of its epoch, and listed as unfinished."""
    def run_part(*args):
        end = time.monotonic() + 60
        while time.monotonic() < end:  # one long epoch of small steps
            time.sleep(0.01)

    monkeypatch.setattr(harvest, "run_part", run_part)
    monkeypatch.setattr(harvest, "part_masks", lambda *a: [])
    t0 = time.monotonic()
    made = harvest.harvest(harvest.MARGIN_S + 2, tmp_path / "data", tmp_path / "out", device="cpu", tiny=True,
                           reference=tmp_path / "none", threads=1, only=["TG-F6"])
    spent = time.monotonic() - t0
    assert spent < harvest.MARGIN_S + 2 + 1, spent
    stopped = made[made.status == "unfinished"]
    assert len(stopped) == 1 and "mid-epoch" in stopped.note.iloc[0], made
    assert (made.status == "not started").sum() == len(made) - 1


def test_a_part_stopped_anywhere_resumes_to_the_rows_of_a_run_never_stopped(tmp_path):
    """What the stop cuts is the epoch in progress: files are written atomically, the checkpoint of the
    last whole epoch resumes the run, and it ends with the rows of a run that never stopped. The part
    is stopped again and again, each time later (its data, its init, its epochs), until it finishes."""
    # a second or two of training to land in; the part run whole first, so that no stop lands in a
    # first import (the harvest ends after one; this test goes on)
    config, whole, cut = _tg_f6_whole(tmp_path, epochs=30)
    at, stops, mid_training = 0.3, 0, 0
    while True:
        control = training.Control()
        try:
            with harvest.stopped_at(time.monotonic() + at, control):
                harvest.run_part(config, "quick", cut, "TG-F6", "group0", "cpu", 1, control=control)
            break
        except harvest.BudgetEnded:
            stops += 1
            mid_training += harvest.checkpoint_mb(cut, "TG-F6", "group0") > 0
            at *= 1.3
    assert stops >= 3 and mid_training >= 1, (stops, mid_training)
    _same_rows(whole, cut)


def _tg_f6_whole(tmp_path, epochs=None):
    """TG-F6's quick part run whole into ``tmp_path/whole``; the config, now pointing at
    ``tmp_path/cut`` for the same part to be stopped, and both trees."""
    import yaml

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config.update(data_dir=str(tmp_path / "data"), scale="quick")
    if epochs:
        config["recipes"]["tg-mnist"]["quick"]["epochs"] = epochs
    whole, cut = (tmp_path / name / "quick" for name in ("whole", "cut"))
    config["results"] = str(whole.parent)
    harvest.run_part(config, "quick", whole, "TG-F6", "group0", "cpu", 1)
    config["results"] = str(cut.parent)
    return config, whole, cut


def _same_rows(whole, cut) -> None:
    """The part's rows in both trees are equal but for their seconds."""
    a, b = (pd.read_csv(paths.part(str(r), "TG-F6", "group0")) for r in (whole, cut))
    timing = [c for c in a.columns if "seconds" in c]
    pd.testing.assert_frame_equal(a.drop(columns=timing), b.drop(columns=timing))


def test_a_stop_between_two_runs_saves_waits_for_the_stacks_last(tmp_path, monkeypatch):
    """The budget's signal lands just after the first run of a stack saves its epoch: the stop waits
    until every run of the stack has saved that epoch, so all resume together, in the same stack
    (a run resumed in a smaller one rounds differently: its place in the stack moves it between the
    fused optimizer's vector and scalar paths), and end with the rows of a run never stopped."""
    import os
    import signal

    import torch

    config, whole, cut = _tg_f6_whole(tmp_path)
    save, signalled = training._Member.save, []

    def save_then_signal(member):
        save(member)
        if member.run.final["epoch"] == 2 and not signalled:
            signalled.append(member.spec.checkpoint.path)
            os.kill(os.getpid(), signal.SIGALRM)  # the budget's end, as its timer sends it

    monkeypatch.setattr(training._Member, "save", save_then_signal)
    control = training.Control()
    with pytest.raises(harvest.BudgetEnded):
        with harvest.stopped_at(time.monotonic() + 3600, control):
            harvest.run_part(config, "quick", cut, "TG-F6", "group0", "cpu", 1, control=control)
    saved = sorted(signalled[0].parent.glob("*.pt"))
    assert len(saved) == 4 and {torch.load(f, weights_only=True)["history"][-1]["epoch"] for f in saved} == {2}
    monkeypatch.setattr(training._Member, "save", save)
    harvest.run_part(config, "quick", cut, "TG-F6", "group0", "cpu", 1)
    _same_rows(whole, cut)


def test_a_harvest_names_mnist_damaged_rather_than_missing(tmp_path):
    """MNIST there but wrong (a label file of the other split) is said as the dataset check says it,
    with its fix, not as "not under <data_dir>"."""
    from test_datasets import make_mnist

    make_mnist(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    shutil.copy(raw / "t10k-labels-idx1-ubyte", raw / "train-labels-idx1-ubyte")  # 5 labels for 12 images
    problem = harvest.data_problem("mnist", tmp_path, "paper")
    assert "train-labels-idx1-ubyte is damaged (5 labels for the 12 images" in problem, problem
    assert harvest.data_problem("mnist", tmp_path / "none", "paper").startswith(f"mnist is not under {tmp_path / 'none'}")
    assert harvest.data_problem("mnist", tmp_path / "none", "quick") is None  # the bundled stand-in


def test_the_harvest_budget_is_a_finite_number_of_seconds():
    for bad in ("nan", "inf", "1e12", "-5", "3", "ten"):
        with pytest.raises(SystemExit):
            harvest.main(["--budget-s", bad, "--out", "unused"])
    assert harvest.budget_seconds("600") == 600.0


def test_the_harvest_refuses_a_file_for_its_out_folder_and_threads_below_one(tmp_path, capsys):
    """``--out <a file>`` was a traceback after the harvest had started, ``--threads -3`` was taken."""
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    for args, said in ((["--out", str(afile)], f"{afile} is a file, where the results tree's folder"),
                       (["--out", str(afile / "deeper")], f"{afile} is a file, where the results tree's folder"),
                       (["--out", str(tmp_path / "new"), "--threads", "-3"], "-3 threads: give at least 1"),
                       (["--out", str(tmp_path / "new"), "--threads", "two"], "'two' is not a whole number of threads")):
        with pytest.raises(SystemExit):
            harvest.main(["--budget-s", "600", *args])
        assert said in capsys.readouterr().err
    assert afile.read_text() == "mine" and not (tmp_path / "new").exists()
    assert harvest.thread_count("2") == 2 and harvest.out_folder(str(tmp_path / "new")) == str(tmp_path / "new")


def test_first_puts_the_named_parts_ahead_in_its_order_and_refuses_a_part_it_cannot_run(tmp_path, capsys):
    """``--first``: the parts a verdict waits for run before the usual order (closest-to-complete
    experiment, then cheapest), in the order named; the rest keep theirs. A name that is no part of
    the chosen experiments (a typo, another experiment, a bare part) stops the harvest before it runs."""
    import yaml

    config = yaml.safe_load((ROOT / "config.yaml").read_text()) | {"data_dir": str(tmp_path / "data")}
    args = (config, "quick", tmp_path / "none", tmp_path / "out" / "quick")
    usual, _ = harvest.candidates(*args)
    names = list(usual["experiment"] + "/" + usual["part"])
    assert len(names) > 3 and names[0] == "EP-F18/rep0"
    first = [names[-1], names[2]]  # the last and the third, in that order
    table, _ = harvest.candidates(*args, first=first)
    assert list(table["experiment"] + "/" + table["part"]) == first + [n for n in names if n not in first]
    assert list(table.columns) == list(usual.columns)
    for bad in ("RP-F3/group99", "group0", "EP-F6/rep0"):  # EP-F6 is not among --only's
        with pytest.raises(SystemExit, match=f"--first names {bad}, not a part this harvest could run"):
            harvest.candidates(*args, only=["RP-F3"], first=[bad])
    with pytest.raises(SystemExit):
        harvest.main(["--budget-s", "600", "--out", str(tmp_path / "new"), "--tiny", "--only", "RP-F3",
                      "--first", "RP-F3/group7"])
    assert not (tmp_path / "new").exists()  # refused before anything was written
