"""TG: trajectory growth in sparse random ReLU nets (TG-F1 to TG-F5); EP-F3 shares TG-F1's projection.

Choices the paper leaves open (also in docs/papers/tg.md):
* MNIST points are indexed from 0: TG's "101st and 1001st" test points are indices 100 and 1000.
  "Normalised" points (TG and EP alike): pixels in [0, 1], then every point scaled to norm
  sqrt(n_0), i.e. unit root-mean-square coordinate, the input scale for which N(0, sigma_w^2/k)
  weights give first-layer pre-activations of variance sigma_w^2 ("accounting for input scaling",
  EP). Random points are Gaussian directions at that norm, a fresh pair for every net.
* The growth factor is TG's: ‖dz(d+1)‖/‖dz(d)‖ per piece of the discretised path, averaged over
  pieces, then over the layers of a net, then over nets.
* Depth is not given: 20 layers for TG-F2 (its figure's axis), 10 for the growth-factor sweeps.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from ..nets import resolve_device
from ..points import DTYPE, dataset_name, endpoints
from ..regions import split_lines
from ..sampling import random_net, sigma_of_discrete, subvector_norms
from ..theory import tg_growth_lower_bound
from ..trajectories import make_path, path_rows, project_2d
from . import part_seed, resolve_part

log = logging.getLogger(__name__)

def projection_parts(s: dict) -> dict[str, dict]:
    return {"circle": {}}


def projection_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """A circle's image after the chosen layers, on its own two principal directions (TG-F1,
    EP-F3), with the full-dimensional length of each image."""
    _, seed = resolve_part(projection_parts(s), s["seed"], key)
    dev = resolve_device(device)
    sigma_w = s["sigma_w"] if "sigma_w" in s else float(np.sqrt(s["sigma_w2"]))
    bias = s["bias"] if "bias" in s else s["sigma_b"]
    net = random_net([s["input_dim"]] + [s["width"]] * max(s["layers"]), "gaussian", sigma_w, bias=bias,
                     activation=s["activation"], seed=seed, device=dev, dtype=DTYPE)
    path = make_path("circle", *endpoints(s, seed + 1, dev))  # closed, as both papers draw it
    proj = project_2d(net, path, s["n_points"], s["layers"])
    lengths = path_rows(net, path, s["n_points"] - 1).set_index("layer")["length_pre"]
    t = np.linspace(0, 1, s["n_points"])
    return pd.concat([pd.DataFrame({"layer": layer, "t": t, "u": uv[:, 0], "v": uv[:, 1], "length": lengths[layer]})
                      for layer, uv in proj.items()], ignore_index=True).assign(
        net_seed=seed, sigma_w=sigma_w, width=s["width"], activation=s["activation"], device=str(dev))


# What a growth sweep does not measure (``path_rows(counts=False, pre=False)``): no columns for it.
NOT_COUNTED = ["transitions", "patterns", "length_pre"]


def measure_dtype(s: dict) -> torch.dtype:
    """The float type a sweep pushes its points through (``dtype`` in its settings, float64 by
    default). Nets are always drawn in float64 and then cast, so a seed names the same net in
    either type; ``python -m reluinit.tools.precision`` shows what float32 changes."""
    return getattr(torch, s.get("dtype", "float64"))


def _labels(seed: int, dev) -> dict:
    return {"net_seed": seed, "device": str(dev)}


# --- TG-F1 -------------------------------------------------------------------------------------


# --- TG-F2: length per layer, one curve per density ----------------------------------------------


def f2_parts(s: dict) -> dict[str, dict]:
    return {f"alpha{a:g}": {"alpha": a} for a in s["alphas"]}


def f2_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Length of the image of a straight line after every layer, for ``n_nets`` sparse-Gaussian
    nets: from ``n_pieces`` pieces as in the paper (in ``dtype``), and, for the first
    ``exact_nets`` nets, exactly (every breakpoint, float64) for the layers where at most
    ``exact_max_intervals`` linear pieces make it affordable; those nets' pieces are summed in
    float64 too, so their discretisation error is not float32 rounding."""
    p, seed = resolve_part(f2_parts(s), s["seed"], key)
    dev = resolve_device(device)
    x0, x1 = endpoints(s, seed, dev)
    path = make_path("line", x0, x1)
    frames = []
    for i in range(s["n_nets"]):
        net_seed = part_seed(seed, i)
        net = random_net([len(x0)] + [s["width"]] * s["depth"], "gaussian", s["sigma_w"], alpha=p["alpha"],
                         bias=s["bias"], seed=net_seed, device=dev, dtype=DTYPE)
        exact_net = i < s.get("exact_nets", s["n_nets"])
        rows = path_rows(net if exact_net else net.astype(measure_dtype(s)), path, s["n_pieces"], counts=False,
                         net=i, **_labels(net_seed, dev)).drop(columns=["transitions", "patterns"])
        length_exact = np.full(len(rows), np.nan)
        if exact_net:
            exact = split_lines(net, x0[None], x1[None], keep_pattern=False, max_intervals=s["exact_max_intervals"])
            length_exact[0] = float((x1 - x0).norm())
            length_exact[1: 1 + len(exact.length_post)] = exact.length_post[:, 0].cpu().numpy()
        frames.append(rows.assign(length_exact=length_exact))
        if i % 10 == 0 or i == s["n_nets"] - 1:
            log.info("%s net %d/%d: length at layer %d = %.4g (exact up to layer %d)", key, i + 1, s["n_nets"],
                     s["depth"], rows["length"].iloc[-1], np.isfinite(length_exact).sum() - 1)
    df = pd.concat(frames, ignore_index=True)
    return df.assign(alpha=p["alpha"], sigma_w=s["sigma_w"], width=s["width"], distribution="gaussian",
                     discretisation_error=1 - df["length"] / df["length_exact"], points=dataset_name(s))


# --- TG-F3, TG-F5: the growth factor vs sigma_w and vs alpha, three distributions ----------------


def _settings_grid(s: dict, sweep: str, dist: str) -> list[tuple[float, float]]:
    """(sigma_w, alpha) pairs of a sweep; the discrete family sweeps its integer C."""
    if sweep == "alpha":
        return [(s["sigma_w"], a) for a in s["alphas"]]
    sigmas = [sigma_of_discrete(C) for C in s["discrete_C"]] if dist == "discrete" else s["sigma_ws"]
    return [(sg, s["alpha"]) for sg in sigmas]


def growth_rows(s: dict, dist: str, sweep: str, path_kind: str, seed: int, dev, n_pieces: int | None = None,
                n_nets: int | None = None) -> pd.DataFrame:
    """Growth factor per layer of ``n_nets`` nets for every setting of a sweep."""
    frames = []
    for j, (sigma_w, alpha) in enumerate(_settings_grid(s, sweep, dist)):
        for i in range(n_nets or s["n_nets"]):
            net_seed = part_seed(seed, 1000 * j + i)
            x0, x1 = endpoints(s, net_seed + 1, dev)
            net = random_net([len(x0)] + [s["width"]] * s["depth"], dist, sigma_w, alpha=alpha, bias=s["bias"],
                             seed=net_seed, device=dev, dtype=DTYPE).to(measure_dtype(s))
            path = make_path(path_kind, x0, x1, n_arcs=s.get("n_arcs", 100), seed=net_seed + 2)
            frames.append(path_rows(net, path, n_pieces or s["n_pieces"], counts=False, pre=False, net=i,
                                    sigma_w=sigma_w, alpha=alpha, **_labels(net_seed, dev)).drop(columns=NOT_COUNTED))
        g = pd.concat(frames[-(n_nets or s["n_nets"]):])
        log.info("%s %s sigma_w=%.3g alpha=%.2f: growth %.4f (bound %.4f)", dist, path_kind, sigma_w, alpha,
                 g.loc[g["layer"] > 1, "growth"].mean(), tg_growth_lower_bound(dist, sigma_w, alpha))
    df = pd.concat(frames, ignore_index=True)
    bound = [tg_growth_lower_bound(dist, sg, a) for sg, a in zip(df["sigma_w"], df["alpha"])]
    return df.assign(distribution=dist, sweep=sweep, path=path_kind, width=s["width"], lower_bound=bound,
                     points=dataset_name(s))


def f3_parts(s: dict) -> dict[str, dict]:
    return {d: {"dist": d} for d in s["distributions"]}


def _f3_measure(sweep: str):
    def measure_(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
        p, seed = resolve_part(f3_parts(s), s["seed"], key)
        return growth_rows(s, p["dist"], sweep, "line", seed, resolve_device(device))
    return measure_


f3a_measure, f3b_measure = _f3_measure("sigma_w"), _f3_measure("alpha")


# --- TG-F4: E‖u_J‖ -------------------------------------------------------------------------------


def f4_parts(s: dict) -> dict[str, dict]:
    return {"subvectors": {}}


def f4_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Monte Carlo E‖u_J‖/‖u‖ for u uniform on the sphere (one u per k) and u one-hot."""
    _, seed = resolve_part(f4_parts(s), s["seed"], key)
    rows = []
    for k in s["ks"]:
        gen = torch.Generator().manual_seed(part_seed(seed, k))
        sphere = torch.randn(k, generator=gen, dtype=DTYPE)
        for kind, u in (("sphere", sphere / sphere.norm()), ("one-hot", torch.eye(k, dtype=DTYPE)[0])):
            for j, alpha in enumerate(s["alphas"]):
                norms = subvector_norms(u, alpha, s["n_draws"], part_seed(seed, 7919 * k + j))
                rows.append({"u": kind, "k": k, "alpha": alpha, "mean_norm": norms.mean(),
                             "se": norms.std(ddof=1) / np.sqrt(len(norms)), "n_draws": len(norms),
                             "sqrt_alpha": np.sqrt(alpha)})
    return pd.DataFrame(rows)


# --- TG-F5: random points, straight and curved paths ----------------------------------------------


def f5_parts(s: dict) -> dict[str, dict]:
    parts = {f"{path}-{sweep}": {"path": path, "sweep": sweep} for path in ("line", "semicircles")
             for sweep in ("sigma_w", "alpha")}
    parts["convergence"] = {"path": "semicircles", "sweep": "convergence"}
    return parts


def f5_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """Growth factors of the three families on paths between random points; the ``convergence``
    part refines the curved path's discretisation (Gaussian nets, sigma_w and alpha fixed)."""
    p, seed = resolve_part(f5_parts(s), s["seed"], key)
    dev = resolve_device(device)
    if p["sweep"] != "convergence":
        return pd.concat([growth_rows(s, d, p["sweep"], p["path"], part_seed(seed, i), dev)
                          for i, d in enumerate(s["distributions"])], ignore_index=True)
    exact = {**s, "dtype": "float64"}  # lengths refined to 1e-5 and below: float32 rounding would show
    frames = [growth_rows(exact, "gaussian", "alpha", "semicircles", seed, dev, n_pieces=n,
                          n_nets=s["convergence_nets"]) for n in s["convergence_pieces"]]
    return pd.concat(frames, ignore_index=True).assign(sweep="convergence")
