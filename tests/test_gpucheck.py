"""The prepared GPU check (``python -m reluinit.gpucheck``) runs on the CPU at toy sizes, writes
every table with its columns and a report, skips what its budget cannot hold, and its cost table
prices the paper DAG (``python -m reluinit.pipeline.plan --cost``)."""

import math
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from conftest import ROOT
from reluinit import gpucheck
from reluinit.pipeline import plan, smoke

# One worker runs this file's tests (pytest-xdist), so its module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_gpucheck")

CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())


def _check(out, *args, timeout=600):
    """The check in a process of its own. It keeps to its own budget (``--budget-s``, 480 s by
    default: a stage that cannot fit is skipped), so the wait is longer than that budget: the tiny
    check takes about 80 s alone on 2 cores, and took 305 s beside a CI run and a harvest."""
    return subprocess.run([sys.executable, "-m", "reluinit.gpucheck", "--device", "cpu", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One ``--tiny`` run on the CPU, shared by the tests below: (its folder, wall seconds)."""
    out = tmp_path_factory.mktemp("gpucheck")
    t0 = time.perf_counter()
    done = _check(out, "--tiny")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, time.perf_counter() - t0


def test_the_tiny_check_writes_every_table_with_its_columns_and_a_report(tiny):
    out, seconds = tiny
    assert gpucheck.problems(out) == []
    report = (out / gpucheck.REPORT).read_text()
    for stage in ("facts", "engines", "agreement", "throughput", "ensembles", "packing", "reference-check"):
        assert f"| {stage} | done |" in report
    assert seconds < 150, f"the tiny check took {seconds:.0f} s (about 80 s on 2 cores, 35 of them compiling)"


def test_engines_time_eager_and_compiled_steps_of_the_same_runs(tiny):
    """Each family's eager row and, for the fully connected ones, a compiled row: timed over the
    same steps, its spread and gain stated, its weights within fp32 rounding of eager's."""
    table = pd.read_csv(tiny[0] / "engines.csv")
    assert (table["status"] == "ok").all(), table
    assert set(table["family"]) == {"ffnn depth 3 alone", "ffnn depth 3 stacked", "cnn depth 3", "resnet8 (tiny)"}
    compiled = table[table["engine"].str.endswith("compiled")]
    assert set(compiled["family"]) == {"ffnn depth 3 alone", "ffnn depth 3 stacked"}
    assert (compiled["max_rel_difference_vs_eager"] <= 1e-5).all()
    assert (compiled["max_rel_difference_vs_eager"] > 0).all()  # compiled kernels round otherwise: it compared
    assert (table["steps_timed"] == 2).all() and (table["repeats"] == 2).all()
    assert (table["seconds_per_step"] > 0).all() and (table["spread"] >= 0).all()
    assert table["kernel_seconds_per_step"].isna().all()  # a CUDA profiler's number: none on a CPU
    assert "## Engines: eager, compiled, graphed" in (tiny[0] / gpucheck.REPORT).read_text()


def test_a_missing_column_is_named(tiny, tmp_path):
    out, _ = tiny
    for path in out.glob("*"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    table = pd.read_csv(tmp_path / "throughput.csv").drop(columns=["seconds_per_step"])
    table.to_csv(tmp_path / "throughput.csv", index=False)
    (tmp_path / "packing.csv").unlink()
    assert gpucheck.problems(tmp_path) == [f"{tmp_path / 'throughput.csv'} lacks the columns seconds_per_step",
                                           f"{tmp_path / 'packing.csv'} is missing"]


def test_agreement_on_the_cpu_passes_every_check(tiny):
    """Both sides are the CPU here: what this shows is that the machinery holds (a deterministic
    repeat and a resumed run bitwise equal, a bf16 run that learns), not device agreement."""
    table = pd.read_csv(tiny[0] / "agreement.csv")
    assert set(table["check"]) == {"trajectory length", "regions on a line", "pruning masks", "training",
                                   "training engine"}
    assert table["passes"].all(), table[~table["passes"]].to_string()
    engines = table[table["check"] == "training engine"]  # compiled against eager (graphed on CUDA only)
    assert list(engines["item"]) == ["compiled against eager, ffnn depth 3 alone, 5 steps"]
    assert 0 < engines["difference"].iloc[0] <= 1e-4
    assert set(table.loc[table["check"] == "pruning masks", "item"]) == {"SNIP", "GRASP", "SYNFLOW"}


def test_throughput_has_a_row_per_training_family_of_the_subset(tiny):
    table = pd.read_csv(tiny[0] / "throughput.csv")
    assert (table["status"] == "ok").all(), table[["family", "status"]].to_string()
    trains = {e for e in smoke.subset(CONFIG, "quick") if plan.catalogue.get(e).trains}
    timed = {e for cell in table["experiments"] for e in cell.split() if e != "train"}
    assert trains <= timed and "LR-MNIST" in set(table["recipe"])
    assert (table["steps_per_s"] > 0).all() and (table["baseline_steps_per_s"] > 0).all()
    # one paper run's projection: its steps over the real data (the paper's batch of 128) at the
    # measured rate, plus evaluation
    row = table.set_index("family").loc["resnet8 / cifar10 / rp-cifar10"]
    steps = 160 * math.ceil(50_000 / 128)
    assert row["steps_per_epoch"] == 391 and row["epochs"] == 160
    evaluation = 160 * 10_000 * row["eval_seconds_per_image"]
    assert row["projected_hours"] == pytest.approx((steps * row["seconds_per_step"] + evaluation) / 3600)
    cost = pd.read_csv(tiny[0] / "gpu-cost.csv")
    assert len(cost) == len(table) and set(cost["device"]) == {"cpu"}


def test_ensembles_time_small_nets_one_by_one_and_stacked(tiny):
    table = pd.read_csv(tiny[0] / "ensembles.csv")
    assert list(table["nets"]) == ["TG-F6", "EP-F7"] and set(table["k"]) == {2}
    assert (table["alone_s"] > 0).all() and (table["stacked_s"] > 0).all()
    assert table["ratio"].to_numpy() == pytest.approx((table["alone_s"] / table["stacked_s"]).to_numpy())
    assert (table["max_rel_difference"] <= 1e-5).all() and (table["max_rel_difference_float64"] <= 1e-12).all()


def test_packing_times_one_and_two_processes(tiny):
    table = pd.read_csv(tiny[0] / "packing.csv")
    assert table.groupby("processes").size().to_dict() == {1: 1, 2: 2}
    two = table[table["processes"] == 2]
    assert two["aggregate_steps_per_s"].iloc[0] == pytest.approx(two["steps_per_s"].sum())


def test_the_reference_cell_without_data_is_equal_where_it_is_the_papers_own(tiny):
    """EP-F14's first net at the paper's settings needs no dataset: equal to the committed table;
    TG's cells, on generated points, say they are not compared."""
    table = pd.read_csv(tiny[0] / "reference-check.csv")
    ep = table[table["experiment"] == "EP-F14"]
    assert len(ep) == 36 and ep["within"].astype(bool).all()
    tg = table[table["experiment"].str.startswith("TG")]
    assert tg["within"].isna().all() and tg["note"].str.contains("not compared").all()


def test_a_stage_the_budget_cannot_hold_is_skipped_and_reported(tmp_path):
    done = _check(tmp_path, "--tiny", "--budget-s", "4")
    assert done.returncode == 0, done.stderr[-2000:]
    report = (tmp_path / gpucheck.REPORT).read_text()
    assert "| facts | done |" in report and "| throughput | skipped |" in report
    assert (tmp_path / "facts.csv").exists() and not (tmp_path / "throughput.csv").exists()


def test_importing_the_check_imports_neither_snakemake_nor_papermill():
    code = ("import sys, reluinit.gpucheck, reluinit.gpucheck.agreement, reluinit.gpucheck.throughput, "
            "reluinit.gpucheck.cells, reluinit.gpucheck.report\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('snakemake', 'papermill')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- the plan priced from a cost table -------------------------------------------------------------


def _cost(tmp_path, rows):
    path = tmp_path / "gpu-cost.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_plan_prices_training_jobs_from_a_cost_table(tmp_path):
    """ResNet32 on CIFAR-10 at 0.01 s a step and 0.1 ms a test image: an RP-T1 run is 160 epochs of
    391 steps and 160 evaluations of 10,000 images, 625.6 + 160 s; families not in the table keep
    their declared hours."""
    path = _cost(tmp_path, [dict(model="resnet32", dataset="cifar10", recipe="rp-cifar10", seconds_per_step=0.01,
                                 eval_seconds_per_image=1e-4)])
    table = plan.jobs(CONFIG, "paper", cost=plan.read_cost(path)).set_index("job")
    run = table.loc["RP-T1/resnet32-snip-sparsity0.9-rep0"]
    assert run["measured_h"] == pytest.approx((160 * 391 * 0.01 + 160 * 10_000 * 1e-4) / 3600)
    assert run["unpriced_runs"] == 0 and run["runtime_h"] == 3.0
    other = table.loc["RP-T1/resnet50-snip-sparsity0.9-rep0"]
    assert other["unpriced_runs"] == 1 and other["measured_h"] == other["runtime_h"]
    assert (table.loc[table["rule"] != "train_part", "measured_h"] == table.loc[table["rule"] != "train_part",
                                                                                "runtime_h"]).all()
    bill = plan.totals(table.reset_index())
    priced = table["rule"].eq("train_part") & table["unpriced_runs"].eq(0)
    assert bill.loc["total", "gpu_hours"] - bill.loc["total", "gpu_hours_measured"] == pytest.approx(
        (table.loc[priced, "gpu_hours"] - table.loc[priced, "gpu_hours_measured"]).sum())


def test_the_plan_prices_a_shallow_ffnn_per_layer_below_a_deep_one(tmp_path):
    """RP-F3's ffnn timed at depth 100: a job of nine depth-2 runs (group0) costs 3/101 of a job of
    nine depth-100 runs (group15), each run 10,000 steps and an evaluation per epoch; a cost table
    that does not record the depth it timed prices every depth alike, as before."""
    row = dict(model="ffnn", dataset="mnist", recipe="rp-mnist", seconds_per_step=0.05, eval_seconds_per_image=1e-4)
    n = plan.run_steps(plan.settings(CONFIG, "RP-F3", "paper")["recipe"], "mnist")
    one_run = (n["steps"] * 0.05 + n["epochs"] * n["test_images"] * 1e-4) / 3600
    priced = plan.jobs(CONFIG, "paper", cost=plan.read_cost(_cost(tmp_path, [row | {"depth": 100}]))).set_index("job")
    assert priced.loc["RP-F3/group15", "measured_h"] == pytest.approx(9 * one_run)
    assert priced.loc["RP-F3/group0", "measured_h"] == pytest.approx(9 * one_run * 3 / 101)
    assert priced.loc["RP-F3/group3", "measured_h"] == pytest.approx(9 * one_run * 21 / 101)
    alike = plan.jobs(CONFIG, "paper", cost=plan.read_cost(_cost(tmp_path, [row]))).set_index("job")
    assert alike.loc["RP-F3/group0", "measured_h"] == alike.loc["RP-F3/group15", "measured_h"] == pytest.approx(9 * one_run)


def test_the_check_records_the_depth_it_times_for_each_family():
    """The cost table's depth is that of the run the family's job trains first (the smoke subset's
    deepest for RP's nets); families of nets without a depth setting record none."""
    from reluinit.gpucheck import throughput

    found = throughput.families(CONFIG, "smoke", "cpu")
    assert found[("ffnn", "mnist", "rp-mnist")].depth == 100 and found[("cnn", "mnist", "rp-mnist")].depth == 100
    assert found[("TG-F6 net", "mnist", "tg-mnist")].depth == 10
    assert math.isnan(found[("resnet32", "cifar10", "rp-cifar10")].depth)


def test_the_plan_command_shows_declared_and_measured_hours(tmp_path):
    path = _cost(tmp_path, [dict(model="resnet32", dataset="cifar10", recipe="rp-cifar10", seconds_per_step=0.01,
                                 eval_seconds_per_image=1e-4)])
    done = subprocess.run([sys.executable, "-m", "reluinit.pipeline.plan", "paper", "--cost", str(path)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert "gpu_hours_measured" in done.stdout and "GPU-hours measured against 7729 declared" in done.stdout
    bad = _cost(tmp_path, [dict(model="resnet32", dataset="cifar10", recipe="rp-cifar10", seconds_per_step=0.01)])
    done = subprocess.run([sys.executable, "-m", "reluinit.pipeline.plan", "paper", "--cost", str(bad)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no column eval_seconds_per_image" in done.stderr


def test_the_dataloader_baseline_trains_at_the_recipes_precision(monkeypatch):
    """Engine and baseline at one precision: PyTorch's default (TF32 convolutions) would time the
    baseline at another precision than a recipe's fp32; the flags are put back afterwards."""
    import torch

    from reluinit.gpucheck import throughput
    from reluinit.training import Recipe

    def flags():
        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    seen = []
    monkeypatch.setattr(throughput, "_baseline", lambda *a: seen.append(flags()) or 1.0)
    old = flags()
    try:
        for precision, inside in (("fp32", False), ("tf32", True)):
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not inside
            throughput.baseline({"recipe": Recipe(optimizer="sgd", lr=0.1, precision=precision)}, 1, 0, 0)
            assert seen[-1] == (inside, inside) and flags() == (not inside, not inside), precision
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
