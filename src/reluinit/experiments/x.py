"""X: across the papers. X-F1: regions per line (LR) and transitions (EP) on the same lines,
vs depth at fixed width, for several sigma_w^2: where does linear-in-neurons growth (LR, He init)
give way to exponential growth in depth (EP, large sigma_w)?"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from .. import datasets
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
    if 2 * s["n_lines"] > len(data.x):  # each line joins two test images, never one twice
        error = ValueError(f"X-F1: n_lines = {s['n_lines']} joins {2 * s['n_lines']} test images, and this test set "
                           f"has {len(data.x):,}: lower n_lines under experiments.X-F1.{s['scale']} in the config "
                           f"(at most {len(data.x) // 2})")
        error.ends_in_fix = True
        raise error
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
