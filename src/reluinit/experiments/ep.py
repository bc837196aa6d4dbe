"""EP: expressive power of deep nets, the random-net experiments: input-space regions (EP-F1),
transitions, lengths and projections along circles (EP-F2, F3, F5, F12, F13) and dichotomies
when sweeping a layer's weights (EP-F14, F15, F16).

EP's nets: weights N(0, sigma_w^2 / k), biases N(0, sigma_b^2), the arc
``x(t) = cos(pi t / 2) x0 + sin(pi t / 2) x1`` between two points (EP-F2, F5, F12, F13; EP-F3
draws the closed circle through their plane), MNIST test images by 0-based index or random
vectors, normalised to unit root-mean-square coordinate (``points.normalise``). A depth-d net is the
first d layers of one deeper sampled net, so one net gives every depth. Transitions are counted
between consecutive points of the discretised path: ``transitions`` those of layer d's neurons,
EP's T^(d) (the output neurons of the depth-d net, what its figures plot), ``transitions_total``
those of all its layers; EP-F16's transitions are label changes of the readout.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from ..dichotomies import random_walk, sweep
from ..nets import resolve_device
from ..points import DTYPE, dataset_name, endpoints, normalise
from ..sampling import random_net
from ..theory import ep_hardtanh_growth_bounds
from ..trajectories import make_path, path_rows
from . import part_seed, resolve_part

log = logging.getLogger(__name__)


# --- circles through random nets: EP-F2, F5, F12, F13 ---------------------------------------------


def circle_rows(s: dict, seed: int, dev, activation: str, sigma_w2: float, width: int, depth: int) -> pd.DataFrame:
    """``n_nets`` nets of one setting: per net and layer d the circle's length and ``transitions``,
    the transitions of layer d's neurons: EP's T^(d), the output neurons' transitions of the
    depth-d net, which its figures plot; and ``transitions_total``, those of all its layers 1..d."""
    frames = []
    for i in range(s["n_nets"]):
        net_seed = part_seed(seed, i)
        x0, x1 = endpoints(s, net_seed + 1, dev)
        net = random_net([len(x0)] + [width] * depth, "gaussian", float(np.sqrt(sigma_w2)), bias=s["sigma_b"],
                         activation=activation, seed=net_seed, device=dev, dtype=DTYPE)
        rows = path_rows(net, make_path("arc", x0, x1), s["n_pieces"], net=i, net_seed=net_seed, device=str(dev))
        frames.append(rows.assign(transitions_total=rows["transitions"].cumsum()))
    df = pd.concat(frames, ignore_index=True)
    log.info("%s sigma_w^2=%g width %d: depth-%d transitions %.1f, length %.4g", activation, sigma_w2, width, depth,
             df.loc[df["layer"] == depth, "transitions_total"].mean(), df.loc[df["layer"] == depth, "length"].mean())
    return df.assign(activation=activation, sigma_w2=sigma_w2, sigma_b=s["sigma_b"], width=width,
                     points=dataset_name(s))


def grid_parts(s: dict) -> dict[str, dict]:
    """One job per activation (EP-F2) or a single job."""
    return {a: {"activation": a} for a in s.get("activations", [s.get("activation")])}


def grid_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Every (sigma_w^2, width) of the settings, nets as deep as the deepest depth asked for."""
    p, seed = resolve_part(grid_parts(s), s["seed"], key)
    dev = resolve_device(device)
    return pd.concat([circle_rows(s, part_seed(seed, 1000 * i + j), dev, p["activation"], s2, k, s["depth"])
                      for i, s2 in enumerate(s["sigma_w2"]) for j, k in enumerate(s["widths"])], ignore_index=True)


def f13_parts(s: dict) -> dict[str, dict]:
    return {"by-width": {}, "by-sigma": {}}


def f13_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Hard-tanh nets: lengths per layer for several widths at one sigma_w^2, and for several
    sigma_w^2 at one width, with EP Theorem 3's per-layer bounds."""
    _, seed = resolve_part(f13_parts(s), s["seed"], key)
    dev = resolve_device(device)
    grid = ([(s["sigma_w2_fixed"], k) for k in s["widths"]] if key == "by-width"
            else [(s2, s["width_fixed"]) for s2 in s["sigma_w2"]])
    frames = []
    for j, (s2, k) in enumerate(grid):
        df = circle_rows(s, part_seed(seed, j), dev, "hardtanh", s2, k, s["depth"])
        ratio = df.groupby("net")["length"].transform(lambda v: v / v.shift(1))
        lower, upper = ep_hardtanh_growth_bounds(k, float(np.sqrt(s2)))
        frames.append(df.assign(length_ratio=ratio, lower_bound=lower, upper_bound=upper))
    return pd.concat(frames, ignore_index=True).assign(sweep=key)


# --- dichotomies: EP-F14, F15, F16 ---------------------------------------------------------------------


def dichotomy_parts(s: dict) -> dict[str, dict]:
    return {"sweeps": {}}


def _sweep_nets(s: dict, key: str, device: str, layers_of) -> pd.DataFrame:
    """For every width and net: sweep each layer ``layers_of(depth)`` and count, at every depth
    above it, dichotomies, label flips and transitions."""
    _, seed = resolve_part(dichotomy_parts(s), s["seed"], key)
    dev = resolve_device(device)
    sigma_w = float(np.sqrt(s["sigma_w2"]))
    x = torch.randn(s["n_inputs"], s["input_dim"], generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    x = normalise(x)
    rows = []
    for j, k in enumerate(s["widths"]):
        for i in range(s["n_nets"]):
            net_seed = part_seed(seed, 1000 * j + i)
            widths = [s["input_dim"]] + [k] * s["depth"]
            net = random_net(widths, "gaussian", sigma_w, bias=s["sigma_b"], activation="hardtanh", seed=net_seed,
                             device=dev, dtype=DTYPE)
            other = random_net(widths, "gaussian", sigma_w, bias=s["sigma_b"], activation="hardtanh",
                               seed=net_seed + 1, device=dev, dtype=DTYPE)  # W1 of every swept layer
            readouts = torch.randn(s["depth"], k, generator=torch.Generator().manual_seed(net_seed + 2),
                                   dtype=DTYPE).to(dev)
            for layer in layers_of(s["depth"]):
                sw = sweep(net, other.weights[layer], x, layer, readouts, s["n_steps"])
                for d, dich, flips, trans, first in zip(sw.depths, sw.dichotomies, sw.label_flips, sw.transitions,
                                                        sw.first_labels):
                    # depth d reads the labels after layer d (1-based); the swept layer is layer + 1
                    rows.append({"width": k, "net": i, "net_seed": net_seed, "swept_layer": layer, "depth": d,
                                 "remaining_depth": d - layer - 1, "dichotomies": dich, "label_flips": flips,
                                 "transitions": trans, "first_labels": "".join(map(str, first))})
        log.info("width %d: %d nets swept", k, s["n_nets"])
    return pd.DataFrame(rows).assign(n_inputs=s["n_inputs"], sigma_w2=s["sigma_w2"], sigma_b=s["sigma_b"],
                                     n_steps=s["n_steps"], device=str(dev))


def f14_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    return _sweep_nets(s, key, device, lambda depth: [0])


def f15_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    return _sweep_nets(s, key, device, lambda depth: list(range(depth)))


def f16_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Sweeps of the first layer, and the random walk with as many label flips as each net had."""
    _, seed = resolve_part(dichotomy_parts(s), s["seed"], key)
    df = _sweep_nets(s, key, device, lambda depth: [0])
    walks = [random_walk(np.array(list(f), dtype=np.int64), int(n), s["n_walks"], part_seed(seed, 10_000 + i))
             for i, (f, n) in enumerate(zip(df["first_labels"], df["label_flips"]))]
    return df.assign(random_walk_dichotomies=walks)
