"""The smoke scale (the paper scale's jobs at their real sizes, cut short), its CI subset, and the
bill of the paper scale (`python -m reluinit.pipeline.plan`)."""

import copy
import math
import re

import pandas as pd
import pytest
import torch
import yaml

from conftest import ROOT, snakemake
from reluinit import datasets, training
from reluinit.experiments import group_runs, part_seed
from reluinit.fingerprint import settings_fingerprint
from reluinit.pipeline import catalogue, plan, smoke
from reluinit.pipeline.config import settings
from reluinit.report import claims

CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())


def smoke_config(**experiment_blocks) -> dict:
    config = copy.deepcopy(CONFIG)
    config["scale"] = "smoke"
    for exp, block in experiment_blocks.items():
        config["experiments"][exp]["smoke"] = block
    return config


def test_smoke_settings_are_the_papers_with_the_truncation_knobs():
    paper, cut = settings(CONFIG, "RP-T2", "paper"), settings(CONFIG, "RP-T2", "smoke")
    for key in ("models", "methods", "datasets", "sparsities", "batch_per_class"):
        assert cut[key] == paper[key]
    assert cut["recipe"]["batch_size"] == paper["recipe"]["batch_size"] == 128
    assert cut["recipe"]["max_steps"] == CONFIG["smoke"]["max_steps"] and "max_steps" not in paper["recipe"]
    assert cut["recipes_by_dataset"]["cifar100"]["max_steps"] == CONFIG["smoke"]["max_steps"]
    # a block's own smoke: cuts what a generic knob cannot (LR's nets: one run each, one epoch)
    lr = settings(CONFIG, "LR-F5", "smoke")["train"]
    assert lr["runs"] == 1 and lr["architectures"] == CONFIG["training"]["LR-MNIST"]["paper"]["architectures"]


@pytest.mark.parametrize("name", ["mnist", "cifar10", "cifar100", "tiny_imagenet"])
def test_smoke_datasets_are_generated_with_the_real_shapes_and_classes(name, tmp_path):
    shape, n_classes = datasets.SHAPES[name][:2]
    for train in (True, False):
        split = datasets.load(name, tmp_path, train=train, scale="smoke")
        assert tuple(split.x.shape[1:]) == shape and split.x.dtype == torch.float32
        assert split.n_classes == n_classes and set(split.y.tolist()) == set(range(n_classes))
        assert split.name == datasets.resolve(name, "smoke") == f"synthetic {datasets.SHAPES[name][4]} shapes (smoke)"
    assert not any(tmp_path.iterdir())  # nothing read, nothing fetched
    # enough for the papers' balanced pruning batches
    per_class = 1 if name == "tiny_imagenet" else 10
    datasets.balanced_batch(datasets.load(name, tmp_path, scale="smoke"), per_class, seed=0)


def test_max_steps_stops_a_run_and_evaluation_reads_the_first_examples():
    torch.manual_seed(0)
    x, y = torch.randn(100, 1, 2, 2), torch.arange(100) % 3
    data = training.DeviceData(x, y, "cpu")
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    recipe = training.Recipe(epochs=5, batch_size=4, lr=0.01, max_steps=3, eval_examples=8)
    run = training.fit(model, data, data, recipe, seed=0)
    assert run.final["step"] == 3 and run.final["epoch"] == 1  # not 5 epochs of 25 steps
    assert run.final["train_seconds"] <= run.final["seconds"]
    with torch.no_grad():
        first = model(data.x[:8]).argmax(1).eq(data.y[:8]).float().mean().item()
    assert training.evaluate(model, data, limit=8)[1] == pytest.approx(first)
    assert training.Recipe(epochs=5, batch_size=4).total_steps(25) == 125  # no cut at other scales


def test_the_scorecard_judges_nothing_at_the_smoke_scale():
    claim = claims.load(ROOT / "claims.yaml")[0]
    row = claims.evaluate(claim, pd.DataFrame(), "smoke")
    assert row["verdict"] == claims.NOT_RUN and "smoke" in row["note"]


def test_the_subset_covers_every_combination_of_the_paper_dag_and_the_largest_models():
    config = smoke_config()
    chosen = smoke.subset(config)
    assert not smoke.uncovered(config, chosen)
    assert set(chosen) == set(plan.default_experiments(CONFIG, "paper"))
    run_of = {exp: [r for k in keys for r in plan.job_runs(catalogue.get(exp).parts(settings(config, exp, "smoke"))[k])]
              for exp, keys in chosen.items()}
    for exp in ("RP-T1", "RP-T2", "RP-T3"):
        assert "resnet104" in {r["model"] for r in run_of[exp]}
    assert "vgg16x3" in {r["model"] for r in run_of["RP-T5"]}
    assert 100 in {r["depth"] for r in run_of["RP-F3"]}  # the FFNN of depth 100
    for exp, keys in chosen.items():  # a random-net experiment's first job is among its smoke jobs
        if not catalogue.get(exp).trains:
            assert keys[0] == next(iter(catalogue.get(exp).parts(settings(config, exp, "smoke"))))


def test_a_smoke_block_that_drops_a_model_leaves_combinations_uncovered():
    config = smoke_config(**{"RP-T1": {"models": ["resnet32"]}})
    assert smoke.uncovered(config, smoke.subset(config)) == {("RP-T1", "resnet50", "cifar10"),
                                                             ("RP-T1", "resnet104", "cifar10")}


def test_the_memory_projection_adds_the_real_datasets_host_memory():
    shape, _, n_train, n_test, _ = datasets.SHAPES["cifar10"]
    generated = len(datasets.synthetic("cifar10").y) + datasets.SYNTHETIC_TEST
    expected = smoke.HOST_BYTES_PER_PIXEL * math.prod(shape) * (n_train + n_test - generated) / 1e6
    assert smoke.data_extra_mb({"cifar10"}) == pytest.approx(expected)
    assert 2000 < expected < 2500  # 60,000 images of 3x32x32 at 13 bytes a pixel
    assert smoke.data_extra_mb(set()) == 0
    assert smoke.job_datasets(CONFIG, "RP-T2", "cifar100-resnet104-snip-sparsity0.9-rep0") == {"cifar100"}
    assert smoke.job_datasets(CONFIG, "LR-F5", "d2w48-run0") == {"mnist"}  # through the nets it measures


def test_the_plan_lists_every_paper_job_with_its_resources(capsys):
    table = plan.jobs(CONFIG, "paper")
    counts = table["rule"].value_counts()
    n_train = sum(len(catalogue.get(e).parts(settings(CONFIG, e, "paper")))
                  for e in plan.default_experiments(CONFIG, "paper") if catalogue.get(e).trains)
    assert counts["train_part"] == n_train == 817  # RP-T2's 54 and RP-T9's 24 shared runs are RP-T1's jobs
    assert counts["measure_trained"] == n_train  # each part's rows, from its checkpoints
    # LR's nets: a job per architecture trains its 5 seeds together (rule train_LR_MNIST)
    assert counts["train_LR_MNIST"] == 5 and "LR-MNIST/d2w48" in set(table["job"])
    t3 = table.set_index("job").loc["RP-T3/resnet104-snip-sparsity0.9-rep0"]
    assert (t3["gpu"], t3["cpus"], t3["mem_mb"], t3["runtime_h"]) == (1, 8, 64000, 48)
    # a prune job per part of an experiment that prunes, on the CPU, with its training job's memory
    n_prune = sum(len(catalogue.parts(e, settings(CONFIG, e, "paper")))
                  for e in plan.default_experiments(CONFIG, "paper") if catalogue.entry(e).masks)
    assert counts["prune"] == n_prune == 805
    t2 = table.set_index("job").loc["RP-T2/masks/cifar100-resnet104-sbp_sr-sparsity0.98-rep2"]
    assert (t2["gpu"], t2["cpus"], t2["mem_mb"], t2["runtime_h"]) == (0, 2, 32000, 2)
    assert table.set_index("job").loc["RP-F2/masks/resnet32", "mem_mb"] == plan.MEASURE["mem_mb"]  # no training
    t4 = table[table["job"].str.startswith("RP-T4/") & (table["rule"] == "train_part")]  # a job asks for its runs' sum
    assert list(t4["runtime_h"]) == [3 * plan.run_hours(settings(CONFIG, "RP-T4", "paper"), "cnn")] * 9 == [6] * 9
    assert table["gpu_hours"].sum() == pytest.approx((table["gpu"] * table["runtime_h"]).sum())
    assert plan.main(["paper"]) == 0
    out = capsys.readouterr().out
    total = re.search(r"(\d+) jobs, (\d+) GPU-hours, (\d+) CPU-hours requested", out)
    assert int(total.group(1)) == len(table) and int(total.group(2)) == round(table["gpu_hours"].sum())
    with pytest.raises(ValueError, match="runtime"):
        plan.hours("3 weeks")


def test_group_by_gives_each_rp_t4_job_one_depth_and_keeps_every_key_and_seed():
    """RP-T4's runs come set-up by set-up and, within one, depth by depth with their 3 seeds (their
    keys and seeds follow that order); ``group_by: [depth]`` keeps a job to one depth, so each of its
    9 jobs holds one set-up's 3 seeds at one depth (one architecture: they stack) and moves no run.
    Without ``group_by``, chunks of the run order."""
    s = settings(CONFIG, "RP-T4", "paper")
    assert (s["runs_per_job"], s["group_by"], s["reps"]) == (3, ["depth"], 3)
    parts = catalogue.get("RP-T4").parts(s)
    alone = catalogue.get("RP-T4").parts({**s, "runs_per_job": 1})  # a part per run, named after it
    runs = {k: r for p in parts.values() for k, r in p["runs"].items()}
    assert len(runs) == 27 and runs == {k: p["runs"][k] for k, p in alone.items()}  # the same keys, seeds, values
    assert [runs[k]["seed"] for k in alone] == [part_seed(s["seed"], i) for i in range(27)]  # in the axes' order
    assert all(len({r["depth"] for r in p["runs"].values()}) == 1 for p in parts.values())
    assert all(sorted(r["rep"] for r in p["runs"].values()) == [0, 1, 2] for p in parts.values())
    assert sorted((r["setup"], r["depth"]) for p in parts.values() for r in list(p["runs"].values())[:1]) == sorted(
        (u, d) for u in s["setups"] for d in s["depths"])
    assert list(parts) == [f"group{i}" for i in range(9)]

    order = list(alone)  # without group_by: chunks of the run order, here the same 3 seeds in a row
    plain = group_runs({k: runs[k] for k in order}, 3)
    assert {k: list(p["runs"]) for k, p in plain.items()} == {f"group{i}": order[3 * i:3 * i + 3] for i in range(9)}
    # splits in order of first appearance, chunked within each, group<i> counting on across them
    few = {k: {"x": k[0]} for k in ["a1", "b1", "a2", "b2", "a3"]}
    assert {k: list(p["runs"]) for k, p in group_runs(few, 2, ["x"]).items()} == {
        "group0": ["a1", "a2"], "group1": ["a3"], "group2": ["b1", "b2"]}
    assert [list(p["runs"]) for p in group_runs(few, 2, []).values()] == [["a1", "b1"], ["a2", "b2"], ["a3"]]
    with pytest.raises(ValueError, match="group_by names 'depht', which run a1 does not have"):
        group_runs(few, 2, ["depht"])
    # bookkeeping, as runs_per_job is: a run's checkpoint resumes under another grouping
    run = runs["eoc-depth50-sparsity0.5-rep0"]
    assert settings_fingerprint(s, **run) == settings_fingerprint({**s, "group_by": [], "runs_per_job": 1}, **run)
    # the quick scale keeps its one job of every run
    quick = catalogue.get("RP-T4").parts(settings(CONFIG, "RP-T4", "quick"))
    assert list(quick) == ["group0"] and len(quick["group0"]["runs"]) == 6


@pytest.mark.workflow
def test_the_plan_is_what_snakemake_assigns(workdir):
    target = "results/paper/RP/RP-T3/resnet104-snip-sparsity0.9-rep0.csv"
    run = snakemake(target, "-n", "--cores", "2", cwd=workdir)
    assert run.returncode == 0, run.stderr[-2000:]
    trained = "results/paper/RP/RP-T3/trained/resnet104-snip-sparsity0.9-rep0.json"  # its training job's record
    message = re.search(rf"-> {re.escape(trained)}; resources: (.*)", run.stdout).group(1)
    resources = dict(re.findall(r"(\w+)=(\d+)", message))
    r = plan.train_resources(CONFIG, "RP-T3", "resnet104-snip-sparsity0.9-rep0", "paper")
    assert int(resources["mem_mb"]) == r["mem_mb"] == 64000 and int(resources["gpu"]) == r["gpu"] == 1
    assert int(resources["runtime"]) == plan.hours(r["runtime"]) * 60 == 48 * 60
    masks = "results/paper/RP/RP-T3/masks/resnet104-snip-sparsity0.9-rep0.pt"
    message = re.search(rf"-> {re.escape(masks)}; resources: (.*)", run.stdout).group(1)
    resources = dict(re.findall(r"(\w+)=(\d+)", message))
    r = plan.prune_resources(CONFIG, "RP-T3", "resnet104-snip-sparsity0.9-rep0", "paper")
    assert int(resources["mem_mb"]) == r["mem_mb"] == 64000 and int(resources["threads"]) == plan.MEASURE["threads"]


@pytest.mark.workflow
@pytest.mark.smoke
def test_the_smoke_subset_runs_within_the_declared_memory(workdir):
    """Every smoke job of the CI subset runs; peak memory, projected to the paper's data, fits. One
    optimizer step a run, at the paper's batch size: ResNet104's step on 64x64 inputs is a minute of
    two CPU cores."""
    config = workdir / "config.yaml"
    text = config.read_text()
    assert "\n  max_steps: 2\n" in text
    config.write_text(text.replace("\n  max_steps: 2\n", "\n  max_steps: 1\n"))
    run = snakemake("smoke", "--cores", "2", "--keep-going", "--config", "scale=smoke", cwd=workdir, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    results = workdir / "results" / "smoke"
    memory = pd.read_csv(results / "memory.csv")
    chosen = smoke.subset(smoke_config())
    assert len(memory) >= sum(len(k) for k in chosen.values()) and memory["fits"].all()
    # the prune jobs too: RP-T2's ResNet104 scores CIFAR-100's 1,000 images (16 GB on this CPU)
    pruned = {f"{e}/masks/{k}" for e, keys in chosen.items() if catalogue.entry(e).masks for k in keys}
    assert pruned and pruned <= set(memory["job"])
    assert (memory["max_rss_mb"] > 0).all()
    cost = pd.read_csv(results / "cost.csv")
    trains = [e for e in chosen if catalogue.get(e).trains]
    assert set(cost["experiment"]) == set(trains) and (cost["seconds_per_step"] > 0).all()
    assert (cost["steps"] == cost["runs"]).all()  # one step a run
    t1 = pd.read_csv(results / "RP" / "RP-T1" / f"{chosen['RP-T1'][-1]}.csv")
    assert set(t1["dataset"]) == {"synthetic CIFAR-10 shapes (smoke)"} and set(t1["scale"]) == {"smoke"}
    assert set(cost.loc[cost["experiment"] == "RP-T1", "batch_size"]) == {128}  # the paper's batch
