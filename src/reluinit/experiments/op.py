"""OP: activation and gradient norm preservation at initialization (OP-F1, OP-F2, OP-F3).

Data, as in OP Section 4: inputs ``x ~ N(0, I)`` in ``R^input_dim`` and class targets drawn
uniformly from ``n_classes`` classes, fed through the ReLU net and a linear readout with
softmax and cross-entropy. The same data serve every job of an experiment, so widths and
initializations are compared on identical inputs.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from .. import theory
from ..datasets import gaussian_data
from ..nets import random_widths, resolve_device, sample_mlp
from ..norms import distortion, norm_ratios
from . import part_seed, resolve_part

log = logging.getLogger(__name__)


def _measure_net(s: dict, widths: list[int], init: str, net_seed: int, device: str) -> pd.DataFrame:
    """Per-sample, per-layer ratios of one sampled net, as a long table."""
    x, y = gaussian_data(s["n_samples"], s["input_dim"], s["n_classes"], s["seed"])
    net = sample_mlp([s["input_dim"], *widths, s["n_classes"]], init, readout=True, seed=net_seed,
                     device=resolve_device(device))
    log.info("%s net of %d layers (widths %d..%d, seed %d) on %s: measuring %d inputs", init, len(widths),
             min(widths), max(widths), net_seed, net.weights[0].device, len(x))
    r = norm_ratios(net, x, y, batch_size=s["batch_size"])
    n, depth = r["act_ratio"].shape
    return pd.DataFrame({
        "sample": np.repeat(np.arange(n), depth),
        "layer": np.tile(np.arange(1, depth + 1), n),
        "layer_width": np.tile(widths, n),
        "act_ratio": r["act_ratio"].double().numpy().ravel(),
        "grad_ratio": r["grad_ratio"].double().numpy().ravel(),
        "init": init,
        "net_seed": net_seed,
        "data_seed": s["seed"],
    })


# --- OP-F1: ratios per layer, He vs Glorot, several widths --------------------------------

def f1_parts(s: dict) -> dict[str, dict]:
    return {f"{init}-w{w}": {"init": init, "width": w} for init in s["inits"] for w in s["widths"]}


def f1_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    p, seed = resolve_part(f1_parts(s), s["seed"], key)
    df = _measure_net(s, [p["width"]] * s["depth"], p["init"], seed, device)
    return df.assign(width=p["width"])


# --- OP-F2: measured distortion vs the epsilon of Lemmas 2 and 5 ---------------------------

def f2_parts(s: dict) -> dict[str, dict]:
    return {"all": {}}


def f2_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    frames = []
    for i, m in enumerate(s["widths"]):
        df = _measure_net(s, [m], s["init"], part_seed(s["seed"], i), device)
        frames.append(df.assign(
            width=m,
            eps_forward=distortion(torch.tensor(df["act_ratio"].to_numpy())).numpy(),
            eps_backward=distortion(torch.tensor(df["grad_ratio"].to_numpy())).numpy(),
            eps_lemma2=theory.lemma2_epsilon(m, s["delta"]),
            eps_lemma5=theory.lemma5_epsilon(m, s["delta"]),
            delta=s["delta"],
        ))
    return pd.concat(frames, ignore_index=True)


# --- OP-F3: gradient ratio when the widths vary around a centre ----------------------------

def f3_parts(s: dict) -> dict[str, dict]:
    return {f"v{v}": {"variation": v} for v in s["width_variations"]}


def f3_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    p, seed = resolve_part(f3_parts(s), s["seed"], key)
    v = p["variation"]
    widths = random_widths(s["width_center"], v, s["depth"], seed)
    return _measure_net(s, widths, s["init"], seed, device).assign(variation=v)
