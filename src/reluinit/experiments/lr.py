"""LR: exact linear regions of ReLU nets, at initialization (LR-F1..F4) and through training
(LR-F5..F8, measured on the checkpoints of rule `train_LR_MNIST`)."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import torch

from .. import datasets
from ..nets import resolve_device, sample_mlp
from ..regions import boundary_distance, data_plane, plane_regions, sawtooth, split_lines
from . import lr_train, part_seed, resolve_part

log = logging.getLogger(__name__)


def _net(s: dict, n_in: int, seed: int):
    return sample_mlp([n_in, *([s["width"]] * s["depth"]), 1], s["init"], readout=True, bias_std=s["bias_std"],
                      seed=seed, dtype=torch.float64)


def net_parts(s: dict) -> dict[str, dict]:
    """One job per random net."""
    return {f"net{i}": {} for i in range(s["n_nets"])}


# --- 2-D input: the partition of a square, layer by layer (LR-F1, LR-F2, EP-F1) ----------------


def plane_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """One row per polygon vertex: the exact partition of ``[-r, r]^2`` after each hidden layer
    (``net_kind`` "deep"). With ``shallow_twin``, also that of a one-hidden-layer net with as many
    neurons (width x depth, the same init, its own seed; ``net_kind`` "shallow"): LR's Theorem 1
    says the two have the same complexity."""
    _, seed = resolve_part(net_parts(s), s["seed"], key)
    frames = [_partition(_net(s, 2, seed), s["half_side"], "deep").assign(width=s["width"], depth=s["depth"])]
    if s.get("shallow_twin"):
        twin = {**s, "width": s["width"] * s["depth"], "depth": 1}
        frames.append(_partition(_net(twin, 2, part_seed(seed, 1)), s["half_side"], "shallow")
                      .assign(width=twin["width"], depth=1))
    return pd.concat(frames, ignore_index=True).assign(net=key, net_seed=seed)


def _partition(net, half_side: float, kind: str) -> pd.DataFrame:
    layers = plane_regions(net, np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0]), half_side)
    rows = []
    for layer, polygons in enumerate(layers, start=1):
        log.info("%s net, layer %d: %d regions", kind, layer, len(polygons))
        for i, poly in enumerate(polygons):
            for j, (u, v) in enumerate(poly.vertices):
                rows.append((layer, i, j, u, v, poly.area, poly.bounded, len(polygons)))
    df = pd.DataFrame(rows, columns=["layer", "region", "vertex", "u", "v", "area", "bounded", "n_regions"])
    return df.assign(net_kind=kind)


# --- LR-F3: Telgarsky's sawtooth, exact and perturbed ---------------------------------------

def f3_parts(s: dict) -> dict[str, dict]:
    return {"all": {}}


def f3_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    rows = []
    ends = (torch.zeros(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64))
    for n in range(1, s["max_teeth_depth"] + 1):
        rows.append((n, 0.0, -1, split_lines(sawtooth(n), *ends).pieces().item()))
        for noise in s["noise"]:
            for rep in range(s["n_noisy"]):
                seed = s["seed"] + 1000 * n + rep
                rows.append((n, noise, seed, split_lines(sawtooth(n, noise, seed), *ends).pieces().item()))
    df = pd.DataFrame(rows, columns=["n", "noise", "net_seed", "pieces"])
    return df.assign(two_to_n=2 ** df["n"])


# --- LR-F4: the function of a net with 1-D input at init -------------------------------------

def f4_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """The output at every breakpoint on ``[-r, r]`` (exact: the function is linear in between)."""
    _, seed = resolve_part(net_parts(s), s["seed"], key)
    net = _net(s, 1, seed)
    r = s["half_side"]
    split = split_lines(net, torch.tensor([[-r]], dtype=torch.float64), torch.tensor([[r]], dtype=torch.float64))
    t = torch.cat([split.t0, split.t1[-1:]])
    y = torch.cat([split.out_a[:, 0] + split.t0 * split.out_b[:, 0],
                   split.out_a[-1:, 0] + split.t1[-1:] * split.out_b[-1:, 0]])
    return pd.DataFrame({"x": (-r + 2 * r * t).numpy(), "y": y.numpy(), "breakpoint": np.arange(len(t)),
                         "pieces": split.pieces().item(), "regions": split.regions().item(),
                         "net": key, "net_seed": seed, "neurons": s["width"] * s["depth"]})


# --- trained nets: LR-F5 to LR-F8 -----------------------------------------------------------
# Every net of a training spec is trained once (rule `train_<spec>`); these experiments only read its
# checkpoints, so a new measurement never retrains.

def _architectures(s: dict) -> list[str]:
    """The architectures a trained-net experiment measures: its own subset, or the spec's all."""
    trained = s["train"]["architectures"]
    chosen = s.get("architectures") or trained
    missing = [a for a in chosen if a not in trained]
    if missing:
        raise ValueError(f"architectures {missing} are not trained by training spec {s['training']!r} "
                         f"(it trains {trained}); add them there or pick from those")
    return chosen


def trained_parts(s: dict) -> dict[str, dict]:
    return {f"{arch}-run{r}": {"arch": arch, "run": r}
            for arch in _architectures(s) for r in range(s["train"]["runs"])}


def trained_inputs(s: dict, key: str) -> list[tuple[str, str, int]]:
    p = trained_parts(s)[key]
    return [(s["training"], p["arch"], p["run"])]


def _checkpoints(s: dict, key: str, inputs):
    """(part kwargs, checkpoints, training data) of one job."""
    p = trained_parts(s)[key]
    states = lr_train.load(inputs[0])
    t = s["train"]
    data = datasets.load(t["dataset"], t["data_dir"], train=True, scale=t["scale"])
    return p, states, data


def _rows(p: dict, state: dict, net, **columns) -> pd.DataFrame:
    """One checkpoint's measurements, with what identifies the net and how good it is."""
    neurons = sum(net.widths[1:-1])
    return pd.DataFrame(columns).assign(arch=p["arch"], run=p["run"], epoch=state["epoch"], neurons=neurons,
                                        test_acc=state["test_acc"], dataset=state["dataset"],
                                        net_seed=state["seed"])


def line_examples(s: dict, net_seed: int, n_train: int) -> tuple[torch.Tensor, int]:
    """The training examples a run's lines pass through: ``n_lines`` of them, drawn without
    replacement per run (as the paper samples 100 lines from each run), from a seed of the
    experiment's own and the run's, so no two runs share their lines by construction."""
    seed = part_seed(s["seed"], net_seed)
    return torch.randperm(n_train, generator=torch.Generator().manual_seed(seed))[: s["n_lines"]], seed


def f5_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Regions along the whole (infinite) line through 0 and a training example, at every
    checkpoint (exact): the paper counts "the total number of regions on an infinite line", and
    training moves kinks far beyond any fixed segment."""
    p, states, data = _checkpoints(s, key, inputs)
    examples, line_seed = line_examples(s, int(states[0]["seed"]), len(data.x))
    x = data.x[examples].flatten(1).double()
    frames = []
    for state in states:
        net = lr_train.restore(state, resolve_device(device))
        split = split_lines(net, torch.zeros_like(x), x, -math.inf, math.inf)
        frames.append(_rows(p, state, net, line=np.arange(len(x)), example=examples.numpy(),
                            regions=split.regions().cpu().numpy()).assign(line_seed=line_seed))
    df = pd.concat(frames, ignore_index=True)
    return df.assign(regions_per_neuron=df["regions"] / df["neurons"])


def f6_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Distance to the nearest region boundary of points drawn from N(mean, var) of the
    training pixels, at every checkpoint (exact)."""
    p, states, data = _checkpoints(s, key, inputs)
    x = data.x.flatten(1).double()
    gen = torch.Generator().manual_seed(s["seed"])
    points = x.mean(0) + x.std(0) * torch.randn(s["n_points"], x.shape[1], generator=gen, dtype=torch.float64)
    frames = []
    for state in states:
        net = lr_train.restore(state, resolve_device(device))
        dist, _, _ = boundary_distance(net, points)
        frames.append(_rows(p, state, net, point=np.arange(len(points)), distance=dist.cpu().numpy()))
    return pd.concat(frames, ignore_index=True)


def f8_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Exact regions of the trained net in the data plane, at every checkpoint (vertex rows)."""
    p, states, data = _checkpoints(s, key, inputs)
    centre, e1, e2, half, corners = data_plane(data.x.flatten(1), data.y, scale=s["half_side_factor"])
    # The plane's three examples, in its (u, v) coordinates, for the figure to mark.
    marks = {f"digit{d}_{axis}": corners[d, i] for d in range(3) for i, axis in enumerate("uv")}
    frames = []
    for state in states:
        net = lr_train.restore(state)
        polygons = plane_regions(net, centre, e1, e2, half)[-1]
        rows = [(i, j, u, v, poly.area, poly.bounded) for i, poly in enumerate(polygons)
                for j, (u, v) in enumerate(poly.vertices)]
        df = pd.DataFrame(rows, columns=["region", "vertex", "u", "v", "area", "bounded"])
        frames.append(_rows(p, state, net, **{c: df[c] for c in df}).assign(
            n_regions=len(polygons), half_side=half, **marks))
    return pd.concat(frames, ignore_index=True)
