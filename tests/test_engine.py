"""The training step's engines (``reluinit.engine``): compiled = eager, masks kept, compiled once.

Each compiled case trains a model twice from the same weights, eagerly and compiled
(``Recipe(compile=True)``: ``torch.compile`` of the whole step), for two epochs whose last batch is
short, with recompilation made an error. Compiled kernels sum in another order than eager ones, so
the two agree to rounding grown by training: within ``FP32`` relative to each tensor's largest
weight in float32, ``FP64`` in float64.
"""

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from reluinit import engine, inits, models
from reluinit.engine import run_loss
from reluinit.pruning import apply_masks
from reluinit.training import DeviceData, How, Recipe, RunSpec, cross_entropy, fit, train_runs

FP32, FP64 = 1e-4, 1e-10


def _data(shape, n=9 * 16 + 5, dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, *shape, generator=gen), torch.randint(0, 10, (n,), generator=gen)
    zero, one = torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)
    return (DeviceData(x, y, "cpu", mean=zero, std=one, dtype=dtype),
            DeviceData(x[:20], y[:20], "cpu", mean=zero, std=one, dtype=dtype))


def _masked(model, density=0.5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    masks = {f"{name}.weight": torch.rand(m.weight.shape, generator=gen) < density
             for name, m in inits.weight_layers(model)}
    return apply_masks(model, masks), masks


def _largest_difference(a: nn.Module, b: nn.Module) -> float:
    return max(float((p - q).abs().max() / p.abs().max().clamp_min(1e-30))
               for p, q in zip(a.state_dict().values(), b.state_dict().values()) if p.is_floating_point())


def _eager_and_compiled(model, shape, dtype=torch.float32, loss_fn=cross_entropy, **recipe):
    """The model trained eagerly and compiled (a copy each), 20 steps: two epochs of 9 full
    batches and a short one; a recompilation fails the run."""
    train, test = _data(shape, dtype=dtype)
    out = []
    for compile in (False, True):
        m = copy.deepcopy(model).to(dtype)
        r = Recipe(**{"optimizer": "sgd", "lr": 0.01, "batch_size": 16, "epochs": 2, "schedule": "constant",
                      **recipe}, compile=compile)
        with torch._dynamo.config.patch(error_on_recompile=True):
            run = fit(m, train, test, r, seed=0, loss_fn=loss_fn)
        assert not run.diverged and run.final["epoch"] == 2 and run.final["step"] == 20
        out.append(m)
    torch._dynamo.reset()
    return out


def _pruned_are_zero(model, masks) -> bool:
    weights = {f"{name}.weight": (m.parametrizations.weight.original if hasattr(m, "parametrizations") else m.weight)
               for name, m in inits.weight_layers(model)}
    return all(bool((weights[n][~mask] == 0).all()) for n, mask in masks.items())


@pytest.mark.parametrize("optimizer", [dict(optimizer="sgd", momentum=0.9, weight_decay=5e-4, nesterov=True),
                                       dict(optimizer="adam", lr=1e-3, weight_decay=5e-4)], ids=["sgd", "adam"])
def test_a_compiled_masked_mlp_trains_as_eager_and_keeps_pruned_weights_at_zero(optimizer):
    torch.manual_seed(0)
    model, masks = _masked(models.build("ffnn", 10, (1, 8, 8), "tanh", width=32, depth=3))
    eager, compiled = _eager_and_compiled(model, (1, 8, 8), **optimizer)
    assert _largest_difference(eager, compiled) <= FP32
    assert _pruned_are_zero(compiled, masks) and _pruned_are_zero(eager, masks)
    assert _largest_difference(model, compiled) > 100 * FP32  # it trained: the comparison can fail


def _float64_loss(model, xb, yb):
    """Cross-entropy in the logits' own type (``training.cross_entropy`` computes it in float32,
    for bf16 logits: in float64 it rounds the loss to float32, which the compiled step then fuses
    differently)."""
    logits = model(xb)
    return F.cross_entropy(logits, yb), logits


def test_a_compiled_step_agrees_with_eager_to_rounding_in_float64():
    torch.manual_seed(0)
    model, _ = _masked(models.build("ffnn", 10, (1, 8, 8), "relu", width=32, depth=3))
    eager, compiled = _eager_and_compiled(model, (1, 8, 8), dtype=torch.float64, loss_fn=_float64_loss,
                                          momentum=0.9)
    assert _largest_difference(eager, compiled) <= FP64
    assert _largest_difference(model.double(), compiled) > 1e6 * FP64


@pytest.mark.parametrize("name", ["cnn", "resnet8"])
def test_a_compiled_conv_net_trains_as_eager(name):
    torch.manual_seed(0)
    model = models.build(name, 10, (3, 8, 8), "relu", width=8, depth=3, padding="circular")
    if name.startswith("resnet"):
        model = models.ResNet(8, 10, 3, channels=(4, 8, 16))
    model, masks = _masked(model)
    eager, compiled = _eager_and_compiled(model, (3, 8, 8), momentum=0.9)
    assert _largest_difference(eager, compiled) <= FP32
    assert _pruned_are_zero(compiled, masks)


def test_a_compiled_stack_trains_as_an_eager_one():
    """Three masked nets in one stack (``ensemble``), compiled and eager, 20 steps."""
    train, test = _data((1, 8, 8))
    base = []
    for seed in range(3):
        torch.manual_seed(seed)
        base.append(_masked(models.build("ffnn", 10, (1, 8, 8), "tanh", width=32, depth=3), seed=seed))
    trained = {}
    for compile in (False, True):
        recipe = Recipe(optimizer="sgd", lr=0.01, momentum=0.9, weight_decay=5e-4, batch_size=16, epochs=2,
                        schedule="constant", compile=compile)

        specs = [RunSpec(copy.deepcopy(base[i][0]), train, test, recipe, i) for i in range(3)]
        with torch._dynamo.config.patch(error_on_recompile=True):
            runs = train_runs(specs, How(stack="always"))
        assert {h["engine"] for r in runs for h in r.history} == {f"stacked {'compiled' if compile else 'eager'}"}
        trained[compile] = [spec.model for spec in specs]
    torch._dynamo.reset()
    for (model, masks), eager, compiled in zip(base, trained[False], trained[True]):
        assert _largest_difference(eager, compiled) <= FP32
        assert _largest_difference(model, compiled) > 100 * FP32
        assert _pruned_are_zero(compiled, masks)


def test_the_engine_is_decided_once_from_the_recipe():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert engine.mode_for(False, cpu, 10**6) == "eager"
    assert engine.mode_for(True, cpu, 1) == "compiled"
    assert engine.mode_for(True, cuda, 1) == "graphed"
    assert engine.mode_for("auto", cuda, engine.AUTO_MIN_STEPS[True]) == "graphed"
    assert engine.mode_for("auto", cuda, engine.AUTO_MIN_STEPS[True] - 1) == "eager"
    assert engine.mode_for("auto", cpu, 10**6) == "eager"  # compiled stacks were no faster on 2 cores
    with pytest.raises(ValueError, match="compile must be"):
        engine.mode_for("yes", cpu, 1)


def test_subnormals_are_flushed_on_every_thread_while_training_and_restored_after():
    """A product of subnormal numbers is zero inside ``flushed_denormals`` whichever thread of
    torch's pool computes it (a product this large splits across threads), and subnormal again
    after."""
    tiny = torch.full((2048, 256), 1e-39)
    ones = torch.ones(256, 256) / 256
    assert bool((tiny @ ones != 0).all())
    with engine.flushed_denormals():
        with engine.flushed_denormals():  # nested: the outer one keeps the mode
            pass
        assert bool((tiny @ ones == 0).all())
        assert bool((tiny * 1.0 == 0).all())
    assert bool((tiny @ ones != 0).all())


def test_subnormals_are_flushed_on_torchs_pool_when_another_openmp_is_loaded_first():
    """Packages vendor their own GNU OpenMP (scikit-learn's ``scikit_learn.libs/libgomp-<hash>.so``
    sorts before ``torch/lib/libgomp.so.1``); setting the mode on that copy's threads left torch's
    products subnormal (the test above failed after "Your own network"'s examples had loaded it)."""
    import ctypes

    torch_lib = Path(torch.__file__).parent / "lib"
    others = sorted(p for p in torch_lib.parents[1].glob("*.libs/libgomp*.so*"))
    if not others:
        pytest.skip("no other package here ships its own libgomp")
    ctypes.CDLL(str(others[0]))
    engine._openmp.cache_clear()
    try:
        assert Path(engine._openmp()._name).parent == torch_lib
        tiny, ones = torch.full((2048, 256), 1e-39), torch.ones(256, 256) / 256
        with engine.flushed_denormals():
            assert bool((tiny @ ones == 0).all())
        assert bool((tiny @ ones != 0).all())
    finally:
        engine._openmp.cache_clear()


def test_the_graphed_engine_runs_its_code_on_a_cpu_as_compiled():
    """``graphed`` is ``compiled`` with CUDA graphs (``mode="reduce-overhead"``, a step mark per
    replay); on a CPU torch skips the graphs, so the suite runs the GPU's code path itself."""
    torch.manual_seed(0)
    model, masks = _masked(models.build("ffnn", 10, (1, 8, 8), "tanh", width=32, depth=3))
    train, _ = _data((1, 8, 8))
    trained = {}
    for mode in ("eager", "graphed"):
        m = copy.deepcopy(model)
        opt = Recipe(optimizer="sgd", lr=0.01, momentum=0.9).optimizer_for(m.parameters())
        step = engine.Engine(mode, run_loss(m, cross_entropy, None), opt)
        for i in range(6):
            xb, yb = train.take(torch.arange(16 * i, 16 * i + 16) % len(train))
            loss, right = step(xb, yb)
        trained[mode] = m
    torch._dynamo.reset()
    assert step.eager_steps == 1  # the first step; the other five replayed the compiled one
    assert _largest_difference(trained["eager"], trained["graphed"]) <= FP32
    assert _pruned_are_zero(trained["graphed"], masks)


def test_a_loss_is_computed_in_float32_for_half_logits_and_in_the_logits_own_type_otherwise():
    """A float64 run's loss (LR's nets, the float64 tests) is not rounded to float32; bf16 logits
    (autocast) are lifted to float32."""
    gen = torch.Generator().manual_seed(0)
    logits, y = torch.randn(7, 10, generator=gen, dtype=torch.float64), torch.randint(0, 10, (7,), generator=gen)
    for dtype, want in ((torch.bfloat16, torch.float32), (torch.float32, torch.float32), (torch.float64, torch.float64)):
        loss, _ = cross_entropy(lambda x, d=dtype: x.to(d), logits, y)
        assert loss.dtype == want
    exact = F.cross_entropy(logits, y)
    assert float(abs(cross_entropy(lambda x: x, logits, y)[0] - exact)) <= 1e-15 * float(exact)
    assert float(abs(F.cross_entropy(logits.float(), y).double() - exact)) > 1e-12 * float(exact)  # the test can fail
