"""Agreement: the same code gives the same science on the device as on the CPU.

One row per compared item (``COLUMNS["agreement"]``), each with the criterion it is held to:

* trajectory lengths of one TG-F2-size net (width 784, depth 20, 10,001 points, float64), per
  layer: relative difference below 1e-9 (float64 sums in another order);
* exact regions on 20 lines through a 784-64-64-64 net: counts equal, line by line;
* SNIP, GraSP and SynFlow masks of ResNet32 with doubled filters at density 0.05 (the RP batch of
  10 images a class): the share of weights whose mask differs, and whether every one of them is a
  near tie (its CPU score within 1e-3 of the global threshold, relatively); exact ties stated;
* 20 training steps of ResNet32 (fp32, the rp-cifar10 recipe) twice in deterministic mode, bitwise
  equal; and interrupted after 10 steps and resumed from the checkpoint, bitwise equal to the
  uninterrupted run;
* one bf16 autocast run whose training loss falls;
* the training step compiled and graphed (CUDA) against eager (``reluinit.engine``): 5 steps of a
  masked depth-3 tanh net from the same weights on the same batch, every weight within
  ``ENGINE_RTOL`` of eager's (relative to its tensor's largest; fp32 kernels fused otherwise).

On ``--device cpu`` both sides are the CPU: the rows then show the machinery runs, not agreement.
"""

from __future__ import annotations

import copy
import tempfile
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from .common import generated

TRAJECTORY_RTOL = 1e-9
NEAR_TIE_RTOL = 1e-3
DENSITY = 0.05
ENGINE_RTOL = 1e-4  # as tests/test_engine.py: fp32 rounding of fused kernels over a few steps


def _row(check, item, device_value, cpu_value, difference, criterion, passes, note=""):
    return dict(check=check, item=item, device_value=device_value, cpu_value=cpu_value, difference=difference,
                criterion=criterion, passes=bool(passes), note=note)


def run(check) -> pd.DataFrame:
    dev, tiny = check.device, check.tiny
    rows = trajectories(dev, tiny) + regions(dev, tiny) + pruning(dev, tiny) + training(dev, tiny) + engines(dev)
    return pd.DataFrame(rows)


def engines(dev) -> list[dict]:
    """Compiled and graphed steps against eager ones on the device (the engines stage's runs, at the
    tiny check's fully connected size whatever the check's size: the comparison, not the speed)."""
    from .engines import families, rows

    ffnn = [f for f in families(tiny=True) if f["family"].endswith("alone")]
    out = []
    for r in rows(dev, True, steps=1, warm=4, repeats=1, families_of=ffnn):
        if r["engine"] == "eager":
            continue
        diff = r.get("max_rel_difference_vs_eager", float("nan"))
        out.append(_row("training engine", f"{r['engine']} against eager, {r['family']}, 5 steps", diff, 0.0, diff,
                        f"relative weight difference <= {ENGINE_RTOL:g}", r["status"] == "ok" and diff <= ENGINE_RTOL,
                        r["status"]))
    return out


def trajectories(dev, tiny: bool) -> list[dict]:
    from ..points import normalise
    from ..sampling import random_net
    from ..trajectories import Line, measure

    width, depth, pieces = (64, 5, 1000) if tiny else (784, 20, 10_000)
    # TG-F2's first density: sigma_w 6, alpha 0.1, biases 0.01, between two normalised points
    net = random_net([width] * (depth + 1), "gaussian", 6.0, alpha=0.1, bias=0.01, seed=0)
    x = normalise(torch.randn(2, width, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    on = {d: measure(copy.deepcopy(net).to(d), Line(x[0].to(d), x[1].to(d)), pieces).length
          for d in (torch.device("cpu"), dev)}
    cpu, got = on[torch.device("cpu")], on[dev]
    rel = np.abs(got - cpu) / np.abs(cpu)
    return [_row("trajectory length", f"layer {layer}", got[layer], cpu[layer], rel[layer],
                 f"relative difference < {TRAJECTORY_RTOL:g}", rel[layer] < TRAJECTORY_RTOL,
                 f"width {width}, depth {depth}, {pieces + 1} points, float64")
            for layer in range(depth + 1)]


def regions(dev, tiny: bool) -> list[dict]:
    from ..nets import sample_mlp
    from ..regions import split_lines

    widths, n_lines = ([64, 16, 16, 16], 5) if tiny else ([784, 64, 64, 64], 20)
    net = sample_mlp(widths, "he", bias_std=1.0, seed=0, dtype=torch.float64)
    gen = torch.Generator().manual_seed(1)
    x0, x1 = (torch.randn(n_lines, widths[0], generator=gen, dtype=torch.float64) for _ in range(2))
    counts = {d: split_lines(copy.deepcopy(net).to(d), x0.to(d), x1.to(d), keep_pattern=True).regions().cpu().numpy()
              for d in (torch.device("cpu"), dev)}
    cpu, got = counts[torch.device("cpu")], counts[dev]
    return [_row("regions on a line", f"line {i}", int(got[i]), int(cpu[i]), int(got[i] - cpu[i]), "counts equal",
                 got[i] == cpu[i], "-".join(map(str, widths)) + " ReLU, float64")
            for i in range(n_lines)]


def pruning(dev, tiny: bool) -> list[dict]:
    from ..inits import initialize
    from ..models import ResNet
    from ..pruning import PRUNERS, synflow_masks

    depth, per_class, rounds = (8, 2, 5) if tiny else (32, 10, 100)
    model = initialize(ResNet(depth), "kaiming_fan_out", seed=0)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(10 * per_class, 3, 32, 32, generator=gen)
    y = torch.arange(10 * per_class) % 10
    cpu = torch.device("cpu")
    rows = []
    for method in ("snip", "grasp"):
        def scores(d, method=method):
            m = copy.deepcopy(model).to(d)
            s = PRUNERS[method].scores(m, x=x.to(d), y=y.to(d), in_shape=(3, 32, 32), seed=0, temperature=200.0)
            return {k: v.detach().double().cpu() for k, v in s.items()}
        # SNIP and GraSP score in full fp32 (pruning.full_fp32); with TF32 convolutions 0.79% of SNIP's
        # masks differed on an H200 (reference/gpu/nvidia-h200-2026-11-26)
        rows.append(_mask_row(method.upper(), scores(cpu), scores(dev), depth, len(y)))
    masks = {d: torch.cat([v.flatten().cpu() for v in synflow_masks(copy.deepcopy(model).to(d), (3, 32, 32), DENSITY,
                                                                     rounds).values()]).bool() for d in (cpu, dev)}
    differ = masks[cpu] != masks[dev]
    rows.append(_row("pruning masks", "SYNFLOW", int(masks[dev].sum()), int(masks[cpu].sum()),
                     float(differ.float().mean()), "share of masks that differ < 1e-4", differ.float().mean() < 1e-4,
                     f"ResNet{depth} doubled, density {DENSITY}, {rounds} rounds in float64: {int(differ.sum())} of "
                     f"{len(differ):,} masks differ (iterative: no single threshold, ties not counted)"))
    return rows


def _mask_row(item: str, cpu_scores: dict, dev_scores: dict, depth: int, n_images: int) -> dict:
    """One method's masks at ``DENSITY`` from device and CPU scores: the share that differs, and whether every
    differing weight is a near tie of the CPU threshold."""
    from ..pruning import masks_from_scores

    flat_cpu = torch.cat([v.flatten() for v in cpu_scores.values()])
    flat_dev = torch.cat([v.flatten() for v in dev_scores.values()])
    masks = [torch.cat([v.flatten() for v in masks_from_scores(s, DENSITY).values()]).bool()
             for s in (cpu_scores, dev_scores)]
    differ = masks[0] != masks[1]
    k = round(DENSITY * len(flat_cpu))
    threshold = flat_cpu.topk(k).values[-1]
    ties = int((flat_cpu == threshold).sum()) - 1  # weights sharing the threshold's score
    near = (flat_cpu - threshold).abs() <= NEAR_TIE_RTOL * threshold.abs()
    score_rel = float(((flat_dev - flat_cpu).abs() / flat_cpu.abs().clamp_min(1e-30)).median())
    return _row("pruning masks", item, int(masks[1].sum()), int(masks[0].sum()), float(differ.float().mean()),
                f"every differing weight a near tie (CPU score within {NEAR_TIE_RTOL:g} of the threshold)",
                bool((~differ | near).all()),
                f"ResNet{depth} doubled, density {DENSITY}, {n_images} images: {int(differ.sum())} of "
                f"{len(flat_cpu):,} masks differ; {ties} other weights share the threshold's score exactly, "
                f"{int(near.sum())} lie within {NEAR_TIE_RTOL:g} of it; median relative score difference {score_rel:.2g}")


def _state(model) -> dict:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _max_diff(a: dict, b: dict) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0 for k in a)


def _bitwise(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def training(dev, tiny: bool) -> list[dict]:
    from ..inits import initialize
    from ..models import ResNet
    from ..training import Recipe, fit

    depth, batch, steps, shape = (8, 16, 4, (3, 16, 16)) if tiny else (32, 128, 10, (3, 32, 32))  # steps an epoch
    base = Recipe(optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=1e-4, batch_size=batch, epochs=2,
                  schedule="step", augment=True, crop_pad=4, precision="fp32", channels_last=True)
    train, test = generated(steps * batch, dev, shape), generated(2 * batch, dev, shape, seed=4)

    def net():
        return initialize(ResNet(depth), "kaiming_fan_out", seed=0).to(dev)

    rows = []
    was = torch.are_deterministic_algorithms_enabled()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            states, nets = [], []
            for _ in range(2):
                nets.append(net())
                fit(nets[-1], train, test, base, seed=5)
                states.append(_state(nets[-1]))
            with tempfile.TemporaryDirectory() as tmp:
                path = f"{tmp}/run.pt"
                fit(net(), train, test, base, seed=5, checkpoint=path, stop_when=lambda row: True)  # stops after epoch 1
                resumed = net()  # a fresh process's view: the same init, then the checkpoint
                run = fit(resumed, train, test, base, seed=5, checkpoint=path)
        finally:
            torch.use_deterministic_algorithms(was)
    nondeterministic = sorted({str(w.message).split(".")[0] for w in caught if "deterministic" in str(w.message)})
    note = (f"ResNet{depth} doubled, fp32, batch {batch}, {2 * steps} steps; "
            + ("ops without a deterministic kernel: " + "; ".join(nondeterministic) if nondeterministic
               else "every op deterministic"))
    rows.append(_row("training", "deterministic repeat", "bitwise" if _bitwise(*states) else "differs", "",
                     _max_diff(*states), "final weights bitwise equal", _bitwise(*states), note))
    interrupted = _state(resumed)
    rows.append(_row("training", "interrupted and resumed", f"stopped after epoch 1, resumed to {run.final['epoch']}", "",
                     _max_diff(states[0], interrupted), "final weights bitwise equal to the uninterrupted run",
                     _bitwise(states[0], interrupted), note))
    bf16 = replace(base, precision="bf16", epochs=3, schedule="constant", lr=0.02, augment=False)
    learn = generated(steps * batch, dev, shape, learnable=True)
    history = fit(net(), learn, generated(2 * batch, dev, shape, learnable=True, seed=6), bf16, seed=5).history
    first, last = history[1]["train_loss"], history[-1]["train_loss"]
    rows.append(_row("training", "bf16 autocast loss falls", last, first, last - first,
                     "last epoch's training loss below the first's", last < first,
                     f"ResNet{depth} doubled, bf16 autocast, channels-last, {3 * steps} steps on images coloured by class"))
    return rows
