"""X: across the papers. X-F1: regions per line (LR) and transitions (EP) on the same lines,
vs depth at fixed width, for several sigma_w^2: where does linear-in-neurons growth (LR, He init)
give way to exponential growth in depth (EP, large sigma_w)?"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from .. import datasets
from ..lazy import plotting, sns  # figure code: imported when a figure is drawn
from ..nets import resolve_device, sample_mlp
from ..regions import split_lines
from . import part_seed

log = logging.getLogger(__name__)


def f1_parts(s: dict) -> dict[str, dict]:
    return {f"{act}-s{s2:g}": {"activation": act, "sigma_w2": s2} for act in s["activations"] for s2 in s["sigma_w2"]}


def f1_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Exact regions and transitions along lines between pairs of test images, for every depth."""
    p = f1_parts(s)[key]
    data = datasets.load(s["dataset"], s["data_dir"], train=False, scale=s["scale"])
    x = data.x[: 2 * s["n_lines"]].flatten(1).double()
    x0, x1 = x[0::2], x[1::2]
    frames = []
    for depth in s["depths"]:
        for net_i in range(s["n_nets"]):
            seed = part_seed(s["seed"], 1000 * depth + net_i)
            net = sample_mlp([x.shape[1]] + [s["width"]] * depth, "gaussian", sigma_w=float(np.sqrt(p["sigma_w2"])),
                             activation=p["activation"], bias_std=s["sigma_b"], seed=seed,
                             device=resolve_device(device), dtype=torch.float64)
            split = split_lines(net, x0, x1)
            frames.append(pd.DataFrame({"line": np.arange(len(x0)), "regions": split.regions().cpu().numpy(),
                                        "transitions": split.transitions().cpu().numpy()}).assign(
                depth=depth, net=net_i, net_seed=seed))
        log.info("%s depth %d: mean regions per line %.1f", key, depth, frames[-1]["regions"].mean())
    df = pd.concat(frames, ignore_index=True)
    neurons = df["depth"] * s["width"]
    return df.assign(activation=p["activation"], sigma_w2=p["sigma_w2"], width=s["width"], neurons=neurons,
                     regions_per_neuron=df["regions"] / neurons, transitions_per_neuron=df["transitions"] / neurons,
                     dataset=data.name)


def f1_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, width=4.8, integer_x=True)
    data = table.assign(**{"$\\sigma_w^2$": table["sigma_w2"].map(lambda v: f"{v:g}"), "activation": table["activation"]})
    for ax, col, label in [(axes[0], "regions_per_neuron", "regions along a line / #neurons"),
                           (axes[1], "transitions_per_neuron", "transitions (EP) / #neurons")]:
        sns.lineplot(data=data, x="depth", y=col, hue="$\\sigma_w^2$", style="activation", marker="o",
                     errorbar="se", ax=ax, palette="viridis")
        ax.set(yscale="log", ylabel=label)
    axes[0].get_legend().remove()
    sns.move_legend(axes[1], "upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"X-F1: width {s['width']}, lines between {table['dataset'].iloc[0]} test pairs; "
                 "flat = linear in #neurons (LR), rising = exponential in depth (EP)")
    return fig


def f1_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per activation and sigma_w^2: regions per neuron at the shallowest and the deepest depth
    and their ratio (about 1: linear in #neurons; growing with depth: exponential regime)."""
    per = table.groupby(["activation", "sigma_w2", "depth"])["regions_per_neuron"].mean()
    rows = []
    for (act, s2), g in per.groupby(level=[0, 1]):
        rows.append({"activation": act, "sigma_w2": s2, "depths": f"{g.index[0][2]}-{g.index[-1][2]}",
                     "per_neuron_shallow": g.iloc[0], "per_neuron_deep": g.iloc[-1],
                     "deep_over_shallow": g.iloc[-1] / g.iloc[0]})
    return pd.DataFrame(rows)
