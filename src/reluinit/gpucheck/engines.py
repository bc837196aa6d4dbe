"""The engines stage: eager, compiled and graphed steps of the same runs, timed and compared.

Per family (RP-F3's depth-100 tanh ffnn alone and as a stack of 27, RP-T4's depth-100 cnn,
ResNet32 with doubled filters on CIFAR-10 shapes, each with its recipe's batch size and
optimizer, on generated data) and per engine of ``reluinit.engine`` (graphed on CUDA only): the
model from the same initial weights, ``warm`` steps (the compile, the graphs' recording), then
``repeats`` timings of ``steps`` steps on the same batches. A row carries wall seconds per step
(the median of the repeats) and their spread, the device's kernel time per step (CUDA's profiler;
empty on a CPU), the gain over eager, the seconds spent compiling, and the largest difference of
any weight from the eager run after the same steps (relative to its tensor's largest weight):
agreement and speed in one table. ``--tiny``: depth 3, 3 nets, 2 steps, small widths, and the
convolutional families eager only.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from dataclasses import replace

import pandas as pd
import torch

from .common import COLUMNS


def families(tiny: bool) -> list[dict]:
    """What the stage times: name, model builder, input shape, stack size, recipe settings."""
    from ..inits import init_point

    depth, k = (3, 3) if tiny else (100, 27)
    sw, sb = init_point("eoc", "tanh", 0.2)[1:]
    rp_mnist = dict(optimizer="sgd", lr=1e-3, momentum=0.0, batch_size=32 if tiny else 100, precision="fp32")
    rp_cifar = dict(optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=5e-4, batch_size=16 if tiny else 128,
                    precision="fp32", augment=True)
    ffnn = dict(model="ffnn", width=16 if tiny else 100, depth=depth, activation="tanh", init=(sw, sb))
    return [
        dict(family=f"ffnn depth {depth} alone", k=1, shape=(1, 28, 28), recipe=rp_mnist, **ffnn),
        dict(family=f"ffnn depth {depth} stacked", k=k, shape=(1, 28, 28), recipe=rp_mnist, **ffnn),
        dict(family=f"cnn depth {depth}", model="cnn", width=8 if tiny else 32, depth=depth, activation="tanh",
             init=(sw, sb), k=1, shape=(1, 28, 28), recipe=rp_mnist),
        dict(family="resnet8 (tiny)" if tiny else "resnet32 doubled", model="resnet8" if tiny else "resnet32",
             width=None, depth=8 if tiny else 32, activation="relu", init=None, k=1, shape=(3, 32, 32),
             recipe=rp_cifar),
    ]


def _model(f: dict, seed: int, device):
    from ..inits import initialize, weight_layers
    from ..models import build
    from ..pruning import apply_masks

    kw = {} if f["width"] is None else dict(width=f["width"], depth=f["depth"])
    model = build(f["model"], 10, f["shape"], f["activation"], **kw)
    if f["init"] is not None:
        initialize(model, "sigma", sigma_w=f["init"][0], sigma_b=f["init"][1], seed=seed)
    gen = torch.Generator().manual_seed(seed)
    apply_masks(model, {f"{n}.weight": torch.rand(m.weight.shape, generator=gen) < 0.5 for n, m in weight_layers(model)})
    return model.to(device)


def _stepper(f: dict, mode: str, models: list, train, recipe):
    """The family's step under ``mode`` (the trainer's own: ``training.stepper``, its runs alone or
    stacked), and the batch it is timed on (fixed: the compared runs see the same data) with the
    modules whose weights are compared."""
    from ..training import RunSpec, stepper

    specs = [RunSpec(m, train, train, recipe, i, n_classes=10) for i, m in enumerate(models)]
    step = stepper(specs, mode, stacked=f["k"] > 1)
    for m in step.members:
        m.model.train()
    gen = torch.Generator(device=train.device).manual_seed(0)
    orders = [torch.randperm(len(train), generator=gen, device=train.device) for _ in models]
    xb, yb = step.batch(train, orders, 0, replace(recipe, augment=False), step.members)

    def written_back():
        step.write_back()
        return [m.model for m in step.members]

    return (lambda: step.step(xb, yb)), written_back


def _kernel_seconds(fn, steps: int, device) -> float:
    """The device's kernel time per step over ``steps`` steps (CUDA's profiler); NaN on a CPU."""
    if torch.device(device).type != "cuda":
        return math.nan
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize(device)
    events = prof.key_averages()
    total_us = sum(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) for e in events)
    return total_us / 1e6 / steps


def rows(device, tiny: bool, steps: int, warm: int, repeats: int, families_of=None, only=None):
    """One row per (family, engine), each as it is measured (only the engines of ``only``, when given)."""
    from ..engine import flushed_denormals
    from ..nets import tf32
    from ..training import DeviceData, Recipe
    from .common import sync

    device = torch.device(device)
    for f in families_of or families(tiny):
        # --tiny compiles the fully connected families only (the conv nets' compiles took 40 s of its 75
        # on 2 cores; tests/test_engine.py compiles those)
        modes = ["eager"] + (["compiled"] if not tiny or f["model"] == "ffnn" else []) + \
            (["graphed"] if device.type == "cuda" else [])
        modes = [m for m in modes if only is None or m in only]
        recipe = Recipe(**f["recipe"], iterations=10**6, schedule="constant")
        gen = torch.Generator().manual_seed(0)
        n = max(4 * recipe.batch_size, 256)
        x, y = torch.randn(n, *f["shape"], generator=gen), torch.randint(0, 10, (n,), generator=gen)
        zero, one = torch.zeros(()), torch.ones(())
        train = DeviceData(x, y, device, mean=zero, std=one)
        initial = [_model(f, seed, device) for seed in range(f["k"])]
        eager_s, eager_models = math.nan, None
        for mode in modes:
            base = dict(family=f["family"], engine=mode if f["k"] == 1 else f"stacked {mode}", k=f["k"],
                        depth=f["depth"], batch_size=recipe.batch_size, precision=recipe.precision, steps_timed=steps,
                        repeats=repeats, device=str(device))
            try:
                with tf32(recipe.precision == "tf32"), flushed_denormals(device.type == "cpu"):
                    fn, trained = _stepper(f, mode, [copy.deepcopy(m) for m in initial], train, recipe)
                    sync(device)
                    t0 = time.perf_counter()
                    for _ in range(warm):
                        fn()
                    sync(device)
                    compile_s = time.perf_counter() - t0
                    times = []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        for _ in range(steps):
                            fn()
                        sync(device)
                        times.append((time.perf_counter() - t0) / steps)
                    models = trained()  # after warm + repeats x steps, the same for every engine
                    kernel = _kernel_seconds(fn, steps, device)
            except Exception as e:  # noqa: BLE001 - an engine that fails is a result, the others still run
                yield dict(base, status=f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                continue
            per_step = statistics.median(times)
            if mode == "eager":
                eager_s, eager_models = per_step, [copy.deepcopy(m) for m in models]
            yield dict(base, seconds_per_step=per_step, spread=(max(times) - min(times)) / per_step,
                       kernel_seconds_per_step=kernel, run_steps_per_s=f["k"] / per_step,
                       gain_over_eager=eager_s / per_step, compile_seconds=compile_s,
                       max_rel_difference_vs_eager=_difference(eager_models, models), status="ok")
        torch._dynamo.reset()


def _difference(a, b) -> float:
    from ..tools.benchmark import _largest_difference

    return math.nan if a is None else _largest_difference(a, b)


def run(check) -> pd.DataFrame:
    """The stage: 20 timed steps, 3 repeats, after 5 warm-up steps (``--tiny``: 2, 2, 3)."""
    steps, repeats, warm = (2, 2, 3) if check.tiny else (20, 3, 5)
    out = []
    for row in rows(check.device, check.tiny, steps, warm, repeats):
        out.append(row)
        check.write("engines", pd.DataFrame(out, columns=COLUMNS["engines"]))  # what is measured is kept
    return pd.DataFrame(out, columns=COLUMNS["engines"])
