"""LR: exact linear regions of ReLU nets at initialization (LR-F1, LR-F2, LR-F3, LR-F4).

The trained-network experiments of LR (F5-F8) come with the training engine.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import seaborn as sns
import torch

from .. import plotting
from ..nets import sample_mlp
from ..regions import plane_regions, sawtooth, split_lines
from . import Experiment, register, resolve_part

log = logging.getLogger(__name__)


def _net(s: dict, n_in: int, seed: int):
    return sample_mlp([n_in, *([s["width"]] * s["depth"]), 1], s["init"], activation=s.get("activation", "relu"),
                      readout=True, bias_std=s["bias_std"], seed=seed, dtype=torch.float64)


# --- 2-D input: the partition of a square, layer by layer (LR-F1, LR-F2, EP-F1) ----------------

def plane_parts(s: dict) -> dict[str, dict]:
    return {f"net{i}": {} for i in range(s["n_nets"])}


def plane_measure(s: dict, key: str, device: str = "auto") -> pd.DataFrame:
    """One row per polygon vertex: the exact partition of ``[-r, r]^2`` after each hidden layer."""
    _, seed = resolve_part(plane_parts(s), s["seed"], key)
    net = _net(s, 2, seed)
    layers = plane_regions(net, np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0]), s["half_side"])
    rows = []
    for layer, polygons in enumerate(layers, start=1):
        log.info("layer %d: %d regions", layer, len(polygons))
        for i, poly in enumerate(polygons):
            for j, (u, v) in enumerate(poly.vertices):
                rows.append((layer, i, j, u, v, poly.area, poly.bounded, len(polygons)))
    df = pd.DataFrame(rows, columns=["layer", "region", "vertex", "u", "v", "area", "bounded", "n_regions"])
    return df.assign(net=key, net_seed=seed, width=s["width"], depth=s["depth"])


def plane_figure(table: pd.DataFrame, s: dict, title: str, layers: list[int] | None = None):
    first = table[table["net"] == table["net"].iloc[0]]
    layers = layers or sorted(first["layer"].unique())
    fig, axes = plotting.panels(len(layers), width=3.6, height=3.6)
    for ax, layer in zip(axes, layers):
        plotting.polygons(ax, first[first["layer"] == layer])
        n = first.loc[first["layer"] == layer, "n_regions"].iloc[0]
        ax.set(title=f"after layer {layer}: {n} regions", xlabel="$x_1$", ylabel="$x_2$")
    fig.suptitle(title)
    return fig


def plane_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Regions per layer (mean over nets) and the share of the square in bounded regions."""
    per_poly = table.drop_duplicates(["net", "layer", "region"])
    return per_poly.groupby("layer").agg(
        regions=("n_regions", "mean"),
        bounded_regions=("bounded", lambda b: b.sum() / per_poly["net"].nunique()),
        area=("area", lambda a: a.sum() / per_poly["net"].nunique())).reset_index()


def f1_figure(table: pd.DataFrame, s: dict):
    last = int(table["layer"].max())
    return plane_figure(table, s, f"LR-F1: regions of a depth-{s['depth']}, width-{s['width']} ReLU net at "
                                  f"init (He), input $[-{s['half_side']}, {s['half_side']}]^2$", layers=[last])


def f2_figure(table: pd.DataFrame, s: dict):
    return plane_figure(table, s, f"LR-F2: regions layer by layer, width {s['width']} (He init)")


# --- LR-F3: Telgarsky's sawtooth, exact and perturbed ---------------------------------------

def f3_parts(s: dict) -> dict[str, dict]:
    return {"all": {}}


def f3_measure(s: dict, key: str, device: str = "auto") -> pd.DataFrame:
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


def f3_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.0, integer_x=True)
    data = table.assign(Weights=table["noise"].map(lambda x: "exact" if x == 0 else f"noise {x:g}"))
    sns.lineplot(data=data, x="n", y="pieces", hue="Weights", errorbar="sd", marker="o", ax=axes[0])
    axes[0].plot(table["n"].unique(), 2.0 ** table["n"].unique(), "k--", lw=0.8, label="$2^n$")
    axes[0].set(yscale="log", xlabel="tent maps composed $n$ (2 ReLUs each)", ylabel="linear pieces on [0, 1]",
                title="LR-F3: Telgarsky's sawtooth, exact vs perturbed")
    axes[0].legend()
    return fig


def f3_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby(["n", "noise"])["pieces"].agg(["mean", "std", "min", "max"]).reset_index()


# --- LR-F4: the function of a net with 1-D input at init -------------------------------------

def f4_parts(s: dict) -> dict[str, dict]:
    return {f"net{i}": {} for i in range(s["n_nets"])}


def f4_measure(s: dict, key: str, device: str = "auto") -> pd.DataFrame:
    """The output at every breakpoint on ``[-r, r]`` (exact: the function is linear in between)."""
    _, seed = resolve_part(f4_parts(s), s["seed"], key)
    net = _net(s, 1, seed)
    r = s["half_side"]
    split = split_lines(net, torch.tensor([[-r]], dtype=torch.float64), torch.tensor([[r]], dtype=torch.float64))
    t = torch.cat([split.t0, split.t1[-1:]])
    y = torch.cat([split.out_a[:, 0] + split.t0 * split.out_b[:, 0],
                   split.out_a[-1:, 0] + split.t1[-1:] * split.out_b[-1:, 0]])
    return pd.DataFrame({"x": (-r + 2 * r * t).numpy(), "y": y.numpy(), "breakpoint": np.arange(len(t)),
                         "pieces": split.pieces().item(), "regions": split.regions().item(),
                         "net": key, "net_seed": seed, "neurons": s["width"] * s["depth"]})


def f4_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=6.0)
    for net, g in table.groupby("net", sort=False):
        axes[0].plot(g["x"], g["y"], lw=1.0, marker=".", ms=3, label=f"{net}: {g['pieces'].iloc[0]} pieces")
    axes[0].set(xlabel="input $x$", ylabel="output",
                title=f"LR-F4: 1-D input, depth {s['depth']}, width {s['width']}, He init (dots: breakpoints)")
    axes[0].legend(fontsize="small")
    return fig


def f4_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop_duplicates("net")[["net", "pieces", "regions", "neurons"]]


register(Experiment("LR-F1", plane_parts, plane_measure, f1_figure, plane_summary))
register(Experiment("LR-F2", plane_parts, plane_measure, f2_figure, plane_summary))
register(Experiment("LR-F3", f3_parts, f3_measure, f3_figure, f3_summary))
register(Experiment("LR-F4", f4_parts, f4_measure, f4_figure, f4_summary))
