"""Runs one table takes from another (config `shared`, reluinit.pipeline.shared): RP's Table 2
prints Table 1's CIFAR-10 SNIP and SBP-SR cells at 90-98% and Table 9 its ReLU SBP-SR cells, so
RP-T2 and RP-T9 train none of those runs and take RP-T1's rows instead; the runs they keep are
numbered as before; a shared run without a twin, or whose twin trains otherwise, is refused with the
fix; the bill counts each run once."""

import copy

import pandas as pd
import pytest
import yaml

from conftest import ROOT, copy_workflow, snakemake
from reluinit.pipeline import catalogue, jobs, paths, plan, shared, steps
from reluinit.pipeline.config import settings
from reluinit.report import claims

CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())
# (table, runs it takes from RP-T1 at the paper scale): RP-T2 3 models x 2 methods x 3 sparsities x
# 3 seeds on CIFAR-10; RP-T9 2 models x 4 sparsities x 3 seeds, ReLU SBP-SR
TAKEN = {"RP-T2": 54, "RP-T9": 24}


def _runs(exp, s):
    return {k: run for part in catalogue.parts(exp, s).values() for k, run in part["runs"].items()}


def _without_shared(config):
    config = copy.deepcopy(config)
    for block in config["experiments"].values():
        block["paper"].pop("shared", None)
    return config


def _fields(run):
    return {k: v for k, v in run.items() if k not in ("key", "seed")}


@pytest.mark.parametrize("scale", ["paper", "quick"])
@pytest.mark.parametrize("exp", sorted(TAKEN))
def test_shared_runs_are_no_part_and_each_has_a_twin_in_rp_t1_with_equal_fields(exp, scale):
    taken = shared.shared_runs(CONFIG, exp, scale)
    own = _runs(exp, settings(CONFIG, exp, scale))
    assert taken and not set(taken) & set(own)
    if scale == "paper":
        assert len(taken) == TAKEN[exp]
    cells = CONFIG["experiments"][exp]["paper"]["shared"]["cells"]
    assert all(all(run[f] in values for f, values in cells.items()) for run in taken.values())
    assert not any(all(run[f] in values for f, values in cells.items()) for run in own.values())
    theirs = _runs("RP-T1", settings(CONFIG, "RP-T1", scale))
    twins = shared.twins(CONFIG, exp, scale)
    assert set(twins) == set(taken)
    for key, (part, twin) in twins.items():
        assert _fields(theirs[twin]) == _fields(taken[key])
        assert twin in catalogue.parts("RP-T1", settings(CONFIG, "RP-T1", scale))[part]["runs"]


def test_the_paper_scale_takes_exactly_the_cells_the_paper_prints_twice():
    """claims.yaml holds the paper's printed cells: every cell RP-T2 and RP-T9 take from RP-T1 is
    printed alike in both tables, and RP-T9's ReLU SNIP cells, which the paper trained apart (92.24
    vs 92.26 at 90%), are RP-T9's own runs."""
    cells = {c["id"]: c for c in yaml.safe_load((ROOT / "claims.yaml").read_text())["cells"]}
    t1 = {tuple(r[:3]): tuple(r[3:]) for r in cells["RP-T1"]["rows"]}
    printed = {e: {tuple(r[:4]): tuple(r[4:]) for r in cells[e]["rows"]} for e in TAKEN}
    firsts = {"RP-T2": "dataset", "RP-T9": "activation"}
    for exp in TAKEN:
        seen = {(run[firsts[exp]], run["model"], run["method"], run["sparsity"])
                for run in shared.shared_runs(CONFIG, exp, "paper").values()}
        assert seen and all(printed[exp][cell] == t1[cell[1:]] for cell in seen)
    assert printed["RP-T9"][("relu", "resnet32", "snip", 0.9)] != t1[("resnet32", "snip", 0.9)]
    assert not any(run["method"] == "snip" for run in shared.shared_runs(CONFIG, "RP-T9", "paper").values())


@pytest.mark.parametrize("exp", sorted(TAKEN))
def test_the_runs_that_stay_keep_their_keys_and_seeds(exp):
    for scale in ("paper", "quick"):
        full = _runs(exp, settings(_without_shared(CONFIG), exp, scale))
        own = _runs(exp, settings(CONFIG, exp, scale))
        assert own == {k: full[k] for k in own} and len(own) + len(shared.shared_runs(CONFIG, exp, scale)) == len(full)


def _part(path, exp, part, runs):
    rows = pd.DataFrame([{"run": r, "epoch": e, "best_test_acc": 0.5 + 0.1 * e} for r in runs for e in (0, 1)])
    jobs.write_table(rows, path, experiment=exp, scale="quick", part=part)


def test_the_table_takes_exactly_the_shared_runs_rows_from_the_source_parts(tmp_path, monkeypatch):
    own, src = tmp_path / "RP-T9" / "a.csv", tmp_path / "RP-T1" / "b.csv"
    for p in (own, src):
        p.parent.mkdir(parents=True)
    _part(own, "RP-T9", "a", ["relu-x-snip", "tanh-x-sbp_sr"])
    _part(src, "RP-T1", "b", ["x-snip", "x-sbp_sr", "y-sbp_sr"])
    monkeypatch.setattr(steps, "picture", lambda exp, table, s: None)  # the rows, not the plot
    monkeypatch.setattr("reluinit.report.plotting.save", lambda fig, paths: None)
    monkeypatch.setattr(catalogue, "figures_of", lambda exp: (None, lambda t: t.head(1)))
    out = {k: str(tmp_path / f"out.{k}") for k in ("table", "pdf", "png")} | {"built": str(tmp_path / "built.json")}
    steps.draw("RP-T9", [str(own), str(src)], {}, out, str(tmp_path / "log"), "quick",
               shared={str(src): ["x-sbp_sr", "y-sbp_sr"]})
    table = pd.read_csv(out["table"])
    assert list(table["run"]) == ["relu-x-snip"] * 2 + ["tanh-x-sbp_sr"] * 2 + ["x-sbp_sr"] * 2 + ["y-sbp_sr"] * 2
    assert list(table.loc[table["run"] == "x-sbp_sr", "experiment"]) == ["RP-T1"] * 2  # where they were trained
    # a source part that lacks a shared run (written before it) is named with its rebuild command
    with pytest.raises(shared.SharedRunsError, match=r"holds no rows of run\(s\) z-sbp_sr.*rebuild it with `snakemake"):
        steps.draw("RP-T9", [str(own), str(src)], {}, out, str(tmp_path / "log"), "quick",
                   shared={str(src): ["z-sbp_sr"]})


def test_a_partial_table_of_the_reference_takes_the_shared_runs_from_the_source(tmp_path):
    results = str(tmp_path)
    for exp, part, runs in [("RP-T2", "p0", ["cifar100-a"]), ("RP-T1", "q0", ["a", "b"]), ("RP-T1", "q1", ["c"])]:
        path = paths.part(results, exp, part)
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        _part(path, exp, part, runs)
    table = claims._table(results, "RP-T2", {"RP-T1": ["a", "c", "not-run-yet"]})
    assert sorted(set(table["run"])) == ["a", "c", "cifar100-a"] and table.attrs["partial"] == 3
    assert set(claims._table(results, "RP-T2")["run"]) == {"cifar100-a"}  # without `shared`, its own alone


def _with(exp, **changed):
    config = copy.deepcopy(CONFIG)
    config["experiments"][exp]["paper"].update(changed)
    return config


def test_a_shared_cell_with_no_twin_is_refused_naming_the_fix():
    config = _with("RP-T9", shared={"from": "RP-T1", "cells": {"activation": ["tanh"], "method": ["sbp_sr"]}})
    with pytest.raises(shared.SharedRunsError, match=r"^RP-T9's run tanh-resnet32-sbp_sr-sparsity0.9-rep0 is one "
                       r"of the cells it takes from RP-T1 .* but RP-T1 has no run with its fields") as e:
        shared.twins(config, "RP-T9", "paper")
    assert str(e.value).endswith("take the cell out of RP-T9's shared.cells so that RP-T9 trains it")
    with pytest.raises(ValueError, match="shared.cells names 'methd', which run"):
        shared.shared_runs(_with("RP-T9", shared={"from": "RP-T1", "cells": {"methd": ["snip"]}}), "RP-T9", "paper")


def test_a_twin_that_trains_otherwise_is_refused_naming_the_setting():
    with pytest.raises(shared.SharedRunsError, match=r"\(RP-T1 -> RP-T2: batch_per_class 10 -> 5\): make these "
                       "settings of experiments.RP-T1 and experiments.RP-T2 equal in config.yaml"):
        shared.twins(_with("RP-T2", batch_per_class=5), "RP-T2", "paper")
    # what SNIP and SBP-SR do not read (SynFlow's rounds, GraSP's batches) may differ
    assert len(shared.twins(_with("RP-T2", synflow_rounds=7), "RP-T2", "paper")) == TAKEN["RP-T2"]


def test_the_bill_counts_each_shared_run_once():
    ids = ["RP-T1", *sorted(TAKEN)]
    before = plan.price(plan.jobs(_without_shared(CONFIG), "paper", ids), ids)
    after = plan.price(plan.jobs(CONFIG, "paper", ids), ids)
    assert after.loc["RP-T1"].equals(before.loc["RP-T1"])
    for exp, n in TAKEN.items():
        assert after.loc[exp, "training_jobs"] == before.loc[exp, "training_jobs"] - n
        hours = sum(plan.run_hours(settings(CONFIG, exp, "paper"), run["model"])
                    for run in shared.shared_runs(CONFIG, exp, "paper").values())
        assert after.loc[exp, "gpu_hours"] == pytest.approx(before.loc[exp, "gpu_hours"] - hours)
    note = plan.shared_note(CONFIG, "paper")
    assert "RP-T2 takes 54 of its runs from RP-T1; RP-T9 takes 24 of its runs from RP-T1" in note


def test_the_catalogue_says_which_cells_come_from_which_table():
    text = catalogue.catalogue_markdown(CONFIG)
    row = next(line for line in text.splitlines() if line.startswith("| RP-T2 |"))
    assert "its runs of dataset cifar10 and method snip or sbp_sr are RP-T1's (`shared`)" in row
    row = next(line for line in text.splitlines() if line.startswith("| RP-T1 |"))
    assert "its runs also fill RP-T2 and RP-T9's shared cells" in row


@pytest.mark.workflow
def test_the_figure_jobs_read_rp_t1s_parts_and_a_cell_without_twin_stops_the_plan(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    run = snakemake("rp_t2", "rp_t9", "-n", "--cores", "2", "--config", "scale=quick", cwd=wf)
    assert run.returncode == 0, run.stderr[-2000:]
    for exp in TAKEN:
        reason = next(line for line in run.stdout.splitlines() if line.startswith("Reason:") and f"figures/{exp}." in line)
        assert "results/quick/RP/RP-T1/group0.csv" in reason, reason
    config = yaml.safe_load((wf / "config.yaml").read_text())
    config["experiments"]["RP-T9"]["paper"]["shared"]["cells"]["activation"] = ["tanh"]
    (wf / "config.yaml").write_text(yaml.safe_dump(config))
    run = snakemake("rp_t9", "-n", "--cores", "2", "--config", "scale=quick", cwd=wf)
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode != 0 and last.startswith("RP-T9's run tanh-resnet8-sbp_sr-sparsity0.9-rep0"), last
    assert last.endswith("so that RP-T9 trains it")
