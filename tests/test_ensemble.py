"""Ensembles (``reluinit.ensemble``): K runs (``training.RunSpec``) trained as one stack equal the same
K runs trained one by one (``training.train_runs``), run by run: data order, masks, stopping rule,
divergence, checkpoints.

Each family that stacks is compared on the bundled digits (8x8, the quick scale's MNIST) for at
least 100 steps: weights within float rounding (fp32: relative 1e-5; float64: 1e-12), the same
epochs, steps and test accuracy to 3 decimals, pruned weights exactly zero. ``test_a_leak_fails``
shows the comparison catches a seed, a mask or a stopping rule that goes to the wrong run.
"""

import math

import pytest
import torch

from reluinit import datasets, pruning
from reluinit.experiments import ensembled
from reluinit.inits import initialize
from reluinit.models import build
from reluinit.training import Checkpoint, DeviceData, How, Recipe, RunSpec, pays, plan, signature, stackable, train_runs

torch.set_num_threads(1)

TRAIN = DeviceData.from_split(datasets.digits(True), "cpu")
TEST = DeviceData.from_split(datasets.digits(False), "cpu", like=TRAIN)
TRAIN64 = DeviceData.from_split(datasets.digits(True), "cpu", dtype=torch.float64)
TEST64 = DeviceData.from_split(datasets.digits(False), "cpu", like=TRAIN64, dtype=torch.float64)

# family: (model, activation, width, depth, sigma_w, sigma_b, recipe, masked, trained layer). Each
# learning rate learns the digits in an epoch or two without amplifying rounding: a stacked product
# and a lone one may sum in another order (on an AVX2 CPU, MKL's bmm and addmm do), and at lr 0.3
# the depth-6 tanh net grows a float64 difference of 1e-16 to 3e-10 in 4 epochs (fp32: test
# accuracies apart by 0.07), where at 0.15 it stays within rounding (float64 8e-16, fp32 7e-7).
FAMILIES = {
    "TG-F6": ("ffnn", "relu", 16, 4, 1.4, 0.01, dict(optimizer="adam", lr=3e-3), False, None),
    "RP-F3": ("ffnn", "tanh", 16, 6, 1.2, 0.2, dict(optimizer="sgd", lr=0.15, momentum=0.0), True, None),
    "RP-F5": ("ffnn", "elu", 16, 6, 1.23, 0.2, dict(optimizer="sgd", lr=0.15, momentum=0.0), True, None),
    "RP-T4": ("cnn", "tanh", 8, 4, 1.2, 0.2, dict(optimizer="sgd", lr=0.5, momentum=0.0), True, None),
    "EP-F7": ("ffnn", "hardtanh", 16, 4, 1.0, 0.0, dict(optimizer="sgd", lr=0.05, momentum=0.9), False, 1),
    "LR": ("ffnn", "relu", 16, 3, 1.414, 0.0, dict(optimizer="adam", lr=1e-2), False, None),
}


def _job(family, float64=False, epochs=4, stops=None, seeds=(1, 2, 3), mask_seeds=None, check_every=100,
         checkpoints=None, hook=None, blow=None):
    """The runs of one job of ``family`` and a function that makes the spec of one of them: build,
    initialize, prune (its own mask); trained, its result is (model, Run, masks). ``stops``: each
    run's target accuracy; ``blow``: the run that starts with an infinite weight."""
    name, act, width, depth, sigma_w, sigma_b, opt, masked, layer = FAMILIES[family]
    recipe = Recipe(**opt, batch_size=32, epochs=epochs, schedule="step", check_every=check_every)
    train, test = (TRAIN64, TEST64) if float64 else (TRAIN, TEST)
    stops = stops or [None] * len(seeds)
    mask_seeds = mask_seeds or seeds

    def one(i):
        model = build(name, 10, (1, 8, 8), act, width=width, depth=depth)
        initialize(model, "sigma", sigma_w=sigma_w, sigma_b=sigma_b, seed=seeds[i])
        if float64:
            model.double()
        masks = None
        if masked:
            gen = torch.Generator().manual_seed(100 + mask_seeds[i])
            masks = {n: torch.rand(w.shape, generator=gen) < 0.5 + 0.2 * i
                     for n, w in model.named_parameters() if n.endswith("weight") and w.dim() > 1}
            pruning.apply_masks(model, masks)
        if layer is not None:
            for j, p in enumerate(model.parameters()):
                p.requires_grad_(j in (2 * layer, 2 * layer + 1))
        if i == blow:
            with torch.no_grad():
                next(model.parameters()).mul_(math.inf)
        stop = stops[i]
        ckpt = Checkpoint(checkpoints / f"run{i}.pt", {"seed": seeds[i]}) if checkpoints else None
        return RunSpec(model, train, test, recipe, seeds[i], ckpt, masks,
                       on_epoch=(lambda epoch, m: hook(i, epoch, m)) if hook else None,
                       stop_when=None if stop is None else (lambda row: row["test_acc"] >= stop),
                       then=lambda run: (model, run, masks))

    return list(range(len(seeds))), one


def _train(one, runs, stack: str = "auto") -> list:
    """The runs' specs trained (``How(stack=...)``: ``"never"``, one by one), their results in order."""
    specs = [one(i) for i in runs]
    return [spec.result(run) for spec, run in zip(specs, train_runs(specs, How(stack=stack)))]


def _differences(alone, together) -> float:
    """The largest relative difference of any weight between the runs trained alone and stacked;
    AssertionError where their histories differ (epochs, steps, divergence, test accuracy to 3
    decimals) or a pruned weight is not zero."""
    worst = 0.0
    for (m1, r1, masks), (m2, r2, _) in zip(alone, together):
        assert [(h["epoch"], h["step"], h["diverged"]) for h in r1.history] == \
            [(h["epoch"], h["step"], h["diverged"]) for h in r2.history]
        assert [round(h["test_acc"], 3) for h in r1.history] == [round(h["test_acc"], 3) for h in r2.history]
        assert r1.diverged == r2.diverged
        for (n, p), q in zip(m1.state_dict().items(), m2.state_dict().values()):
            assert p.shape == q.shape, n
            if not p.is_floating_point():
                assert torch.equal(p, q), n
                continue
            finite = torch.isfinite(p)  # a diverged run's weights: NaN in the same places
            assert torch.equal(finite, torch.isfinite(q)) and torch.equal(p[~finite].isnan(), q[~finite].isnan()), n
            if finite.any():
                worst = max(worst, float((p[finite] - q[finite]).abs().max() / p[finite].abs().max().clamp_min(1e-30)))
        for name, mask in (masks or {}).items():
            w = dict(m2.named_modules())[name.rsplit(".", 1)[0]].weight
            assert torch.all(w[~mask] == 0), name
    return worst


@pytest.mark.parametrize("family", FAMILIES)
def test_a_stack_trains_each_run_as_it_trains_alone(family):
    # LR trains in float64 (``lr_train``); RP-T4's cnn at a learning rate where it learns in few steps
    # grows fp32 rounding to 1.5e-4 in 172 steps, so float64 shows its stack exact (6.5e-16)
    float64 = family in ("LR", "RP-T4")
    target = 0.12 if family == "RP-T4" else 0.3  # run 0 meets it after an epoch or two
    runs, one = _job(family, float64=float64, stops=[target, 2.0, 2.0])
    alone = _train(one, runs, "never")
    specs = [one(i) for i in runs]
    assert all(stackable(c) is None for c in specs) and len({signature(c) for c in specs}) == 1
    together = _train(one, runs, "always")  # RP-T4's cnn stacks on a GPU only (``pays``)
    assert together[1][1].final["step"] >= 100  # at least 100 steps
    assert alone[0][1].final["epoch"] < 4 == alone[1][1].final["epoch"]  # run 0 met its target early
    assert _differences(alone, together) <= (1e-12 if float64 else 1e-5)


def test_a_stacked_leaky_relu_net_trains_at_its_own_slope_as_it_does_alone():
    """A leaky ReLU of slope 0.2 (``MLP.negative_slope``, not torch's 0.01) trains stacked as alone,
    in float64 where the two agree to rounding; nets of another slope do not share its stack."""
    recipe = Recipe(optimizer="sgd", lr=0.1, momentum=0.0, batch_size=32, epochs=3, schedule="step")

    def one(i, slope=0.2):
        model = build("ffnn", 10, (1, 8, 8), "leaky_relu", width=16, depth=4)
        model.negative_slope = slope
        initialize(model, "sigma", sigma_w=1.4, sigma_b=0.01, seed=i + 1)
        model.double()
        return RunSpec(model, TRAIN64, TEST64, recipe, i + 1, then=lambda run: (model, run, None))

    runs = [0, 1, 2]
    alone = _train(one, runs, "never")
    together = _train(one, runs, "always")
    assert together[0][1].final["step"] >= 100
    assert _differences(alone, together) <= 1e-12
    specs = [one(i) for i in runs] + [one(i, slope=0.01) for i in runs]
    assert len({signature(c) for c in specs}) == 2
    assert plan(specs) == [([0, 1, 2], True), ([3, 4, 5], True)]


def test_the_stacks_of_a_deep_tanh_net_agree_in_float64():
    """Where fp32 rounding grows through depth, float64 shows the stack computes the same thing."""
    runs, one = _job("RP-F3", float64=True)
    assert _differences(_train(one, runs, "never"), _train(one, runs)) <= 1e-12


@pytest.mark.parametrize("leak", ["seed", "mask", "stopping rule"])
def test_a_leak_fails(leak):
    """The comparison is not vacuous: two runs trained with each other's seed, mask or stopping rule
    (as a stack that mixed up its runs would) are caught."""
    swap = {"seed": dict(seeds=(2, 1, 3)), "mask": dict(mask_seeds=(2, 1, 3)),
            "stopping rule": dict(stops=[2.0, 0.3, 2.0])}[leak]
    family = "TG-F6" if leak == "stopping rule" else "RP-F3"
    base = dict(stops=[0.3, 2.0, 2.0]) if leak == "stopping rule" else {}
    runs, one = _job(family, **base)
    _, mixed = _job(family, **swap)
    with pytest.raises(AssertionError):
        assert _differences(_train(one, runs, "never"), _train(mixed, runs)) <= 1e-5


def test_a_run_that_diverges_leaves_the_stack_and_the_others_go_on():
    runs, one = _job("TG-F6", check_every=5, blow=1)  # run 1's loss is NaN from its first step
    alone = _train(one, runs, "never")
    together = _train(one, runs)
    assert [r.diverged for _, r, _ in together] == [False, True, False]
    assert together[1][1].final["step"] == 5 and together[1][1].final["test_acc"] == pytest.approx(0.1)
    assert together[0][1].final["epoch"] == 4
    assert _differences(alone, together) <= 1e-5


def test_a_stack_interrupted_resumes_each_run_from_its_own_checkpoint(tmp_path):
    """Killed after an epoch, a job resumes: every run from its checkpoint, the same final weights as
    a stack that was never interrupted, bit for bit; a run alone reads them as its own."""
    class Killed(Exception):
        pass

    def kill_at_2(i, epoch, m):
        if epoch == 2:
            raise Killed
        return []

    runs, one = _job("RP-F3", checkpoints=tmp_path / "a")
    (tmp_path / "a").mkdir()
    _, killed = _job("RP-F3", checkpoints=tmp_path / "a", hook=kill_at_2)
    with pytest.raises(Killed):
        _train(killed, runs)
    assert all(torch.load(tmp_path / "a" / f"run{i}.pt", weights_only=True)["history"][-1]["epoch"] == 1
               for i in runs)
    resumed = _train(one, runs)
    (tmp_path / "b").mkdir()
    _, fresh = _job("RP-F3", checkpoints=tmp_path / "b")
    uninterrupted = _train(fresh, runs)
    for (m1, r1, _), (m2, r2, _) in zip(resumed, uninterrupted):
        assert all(torch.equal(p, q) for p, q in zip(m1.state_dict().values(), m2.state_dict().values()))
        assert [h["epoch"] for h in r1.history] == [h["epoch"] for h in r2.history] == [0, 1, 2, 3, 4]
    # a run alone reads a stacked run's checkpoint as its own: finished, it trains no further
    model, run, _ = _train(one, [0], "never")[0]
    assert run.final["epoch"] == 4 and torch.equal(model.layers[0].weight, resumed[0][0].layers[0].weight)


def test_runs_at_different_epochs_train_in_separate_stacks(tmp_path):
    runs, one = _job("TG-F6", checkpoints=tmp_path)
    _train(one, [0], "never")  # run 0 finished alone; runs 1 and 2 start afresh
    done = _train(one, runs)
    assert [r.final["epoch"] for _, r, _ in done] == [4, 4, 4]
    assert len(done[0][1].history) == 5
    assert {h["engine"] for _, r, _ in done[1:] for h in r.history} == {"stacked eager"}


def test_what_does_not_stack_trains_alone_and_a_recipe_can_turn_it_off():
    runs, one = _job("TG-F6")
    spec = one(0)
    spec.model.add_module("bn", torch.nn.BatchNorm1d(3))
    assert "batch norm" in stackable(spec)
    cnn = _job("RP-T4")[1](0)
    assert pays(one(0)) and not pays(cnn)  # on the CPU a stack of convolutions is slower
    assert plan([cnn, _job("RP-T4")[1](1)]) == [([0], False), ([1], False)]
    assert ensembled({"recipe": {"name": "x"}}) and not ensembled({"recipe": {"name": "x", "ensemble": False}})
    alone = _train(one, runs, "never")
    specs = [one(i) for i in runs]
    for c in specs:
        c.stack = False  # what ``training_jobs`` sets from a recipe's ``ensemble: false``
    assert "ensemble: false" in stackable(specs[0]) and plan(specs) == [([0], False), ([1], False), ([2], False)]
    off = [c.result(r) for c, r in zip(specs, train_runs(specs))]
    assert _differences(alone, off) == 0.0


def test_turning_ensembles_off_keeps_every_fingerprint():
    """``ensemble`` changes float rounding, not a run: its checkpoints resume either way."""
    from reluinit.fingerprint import settings_fingerprint

    s = {"seed": 1, "recipe": {"name": "r", "lr": 0.1}}
    off = {"seed": 1, "recipe": {"name": "r", "lr": 0.1, "ensemble": False}}
    assert settings_fingerprint(s, net=0) == settings_fingerprint(off, net=0)
    assert settings_fingerprint(s) != settings_fingerprint({**s, "recipe": {"name": "r", "lr": 0.2}})


def test_the_benchmark_times_both_ways_and_prints_the_difference():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "reluinit.tools.benchmark", "training", "--steps", "3", "-k", "2",
                          "--only", "EP-F7", "--device", "cpu"], capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("EP-F7"))
    k, alone, together, ratio, steps_alone, rate, steps_only, products, share, diff, diff64 = row.split()[1:12]
    assert k == "2" and alone.endswith("s") and together.endswith("s") and ratio.endswith("x")
    assert steps_alone.endswith("x") and float(steps_alone[:-1]) > 0
    # the ceiling, printed in the same run: the stack's steps take longer than their products alone
    assert 0 < float(steps_only) < float(products) and share.endswith("%")
    assert abs(float(share[:-1]) - 100 * float(steps_only) / float(products)) <= 1
    assert float(diff) <= 1e-5 and float(diff64) <= 1e-12
