"""RP: robust pruning at initialization, the experiments without long training: where SBP puts
the weights it keeps (RP-F1, RP-F2/F4) and when a layer is emptied (RP-Th1, RP-T7).

Choices the paper leaves open (also in docs/papers/rp.md):
* SBP (SNIP) scores come from one class-balanced batch of 10 training images per class.
* RP-F1 and RP-Th1 use tanh FFNNs on MNIST: the EOC point is solved from sigma_b = 0.2 (the
  authors' tanh point), the chaotic point is sigma_w = 3 at the same sigma_b, and the ordered
  point of RP-Th1 is the sigma_w that gives |log chi| = 8 kappa at sigma_b = 1, in both readings
  of the paper's unstated base (``READINGS``), each judged against the bound in its own base.
* RP-T7's nets are L square N x N layers whose first layer has variance sigma_w^2 / (gamma N)
  (alpha_1 = gamma, the others 1); MBP needs no data, so the input is not used. gamma is the
  variance ratio throughout (net and bound); the sweep adds 15 because Table 7's gamma = 5 and 10
  columns match variance ratios 10 and 15 (bound 0.81 / 0.72). Its 5.77 at gamma = 2 is not the
  infimum over eps: that evaluates to 0.996 here (0.961 with gamma itself as the scale ratio).
* RP-F2 prunes ResNet32 and Stable ResNet32 (doubled filters, Kaiming init) with SBP at the
  configured sparsity; RP-F4 is the same measurement shown as the pruned share.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import torch

from .. import datasets
from ..inits import initialize
from ..meanfield import READINGS, chi, eoc_sigma_w, ordered_sigma_w
from ..models import build, ffnn
from ..nets import resolve_device
from ..pruning import apply_masks, chi_empirical, layer_table, load_masks, prune, prune_with_s_cr, rescale, row_shuffled
from ..theory import rp_mbp_bound, rp_theorem1_bound
from . import part_seed, resolve_part

log = logging.getLogger(__name__)


def _batch(s: dict, seed: int, dev):
    """A class-balanced pruning batch of the training split, normalised as every RP experiment
    normalises (the authors' constants, ``datasets.fixed_stats``; the training set's statistics
    where they have none), and the split."""
    data = datasets.load(s["dataset"], s["data_dir"], train=True, scale=s["scale"])
    x, y = datasets.balanced_batch(data, s["batch_per_class"], seed)
    stats = datasets.fixed_stats(s["dataset"], s["scale"])
    if stats is None:
        dims = [d for d in range(data.x.dim()) if d != 1]
        stats = (data.x.mean(dim=dims).tolist(), data.x.std(dim=dims).clamp_min(1e-6).tolist())
    return datasets.normalise(x, stats).to(dev), y.to(dev), data


def _ffnn(s: dict, n_in: int, sigma_w: float, sigma_b: float, seed: int, dev) -> torch.nn.Module:
    model = ffnn(n_in, s["width"], s["depth"], 10, s["activation"])
    return initialize(model, "sigma", sigma_w=sigma_w, sigma_b=sigma_b, seed=seed).to(dev)


# --- RP-F1: kept fraction per neuron, EOC vs chaotic ------------------------------------------------


def f1_parts(s: dict) -> dict[str, dict]:
    return {"eoc": {}, "chaotic": {}}


# Proposition 1's chi, measured per net: dense, pruned, rescaled, and two controls that keep the
# rescaling but break one dependence of the SBP mask on the net: its per-row counts placed at random
# positions ("random"), and the SBP mask on freshly drawn weights ("redrawn").
CHI_STAGES = ("dense", "pruned", "rescaled", "rescaled_random", "rescaled_redrawn")


def _chi_stages(s: dict, x, y, sigma_w: float, seed: int, dev) -> tuple[dict, dict[str, float]]:
    """One net's SBP masks at ``sparsity`` and its measured chi at every stage of ``CHI_STAGES``."""
    probe = x.flatten(1).double()
    model = _ffnn(s, x[0].numel(), sigma_w, s["sigma_b"], seed, dev)
    masks = prune(model, "snip", 1 - s["sparsity"], x=x, y=y)
    model = model.double()
    out = {"dense": chi_empirical(model, probe)}
    apply_masks(model, masks)
    out["pruned"] = chi_empirical(model, probe)
    out["rescaled"] = chi_empirical(rescale(model, masks, sigma_w=sigma_w), probe)
    shuffled = row_shuffled(masks, seed)
    control = _ffnn(s, x[0].numel(), sigma_w, s["sigma_b"], seed, dev).double()
    out["rescaled_random"] = chi_empirical(rescale(apply_masks(control, shuffled), shuffled, sigma_w), probe)
    redrawn = _ffnn(s, x[0].numel(), sigma_w, s["sigma_b"], part_seed(seed, 1), dev).double()
    out["rescaled_redrawn"] = chi_empirical(rescale(apply_masks(redrawn, masks), masks, sigma_w), probe)
    return masks, out


def f1_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """SBP at ``sparsity`` on a depth-100, width-100 FFNN; one row per hidden neuron of the first
    net: the share of its incoming weights kept. With chi measured on the batch at every stage of
    ``CHI_STAGES`` for ``n_nets`` nets (mean and sd over them, and each net's value ";"-joined in
    ``chi_measured_<stage>_nets``: Proposition 1 is a statement about the random init, and one net's
    chi varies by a few percent), the first net being the one shown."""
    _, seed = resolve_part(f1_parts(s), s["seed"], key)
    dev = resolve_device(device)
    sigma_w = eoc_sigma_w(s["sigma_b"], s["activation"]) if key == "eoc" else s["chaotic_sigma_w"]
    x, y, data = _batch(s, seed, dev)
    per_net = []
    for i in range(s["n_nets"]):
        net_masks, chis = _chi_stages(s, x, y, sigma_w, seed if i == 0 else part_seed(seed, 100 + i), dev)
        if i == 0:
            masks = net_masks
        per_net.append(chis)
        log.info("%s net %d of %d: measured chi %s", key, i + 1, s["n_nets"],
                 ", ".join(f"{k} {v:.3f}" for k, v in chis.items()))
    chis = pd.DataFrame(per_net)
    rows = []
    for layer, m in enumerate(list(masks.values())[: s["depth"]], start=1):
        kept = m.double().mean(dim=1).cpu().numpy()
        rows.append(pd.DataFrame({"layer": layer, "neuron": np.arange(len(kept)), "kept_fraction": kept}))
    log.info("%s (sigma_w %.4f): %d of %d layers emptied", key, sigma_w, layer_table(masks)["collapsed"].sum(),
             len(masks))
    measured = {f"chi_measured_{k}": chis[k].mean(skipna=False) for k in CHI_STAGES}
    measured |= {f"chi_measured_{k}_sd": chis[k].std(ddof=1, skipna=False) if len(chis) > 1 else 0.0
                 for k in CHI_STAGES}
    # each net's chi, so that a mean, its standard error or a test can be recomputed from the table
    measured |= {f"chi_measured_{k}_nets": ";".join(f"{v:.6f}" for v in chis[k]) for k in CHI_STAGES}
    return pd.concat(rows, ignore_index=True).assign(
        phase=key, sigma_w=sigma_w, sigma_b=s["sigma_b"], chi=chi(sigma_w, s["sigma_b"], s["activation"]),
        **measured, chi_nets=s["n_nets"], sparsity=s["sparsity"], net_seed=seed, dataset=data.name)


# --- RP-Th1: SBP critical sparsity in the ordered phase ------------------------------------------------


def th1_parts(s: dict) -> dict[str, dict]:
    return {reading: {"reading": reading} for reading in READINGS}


def th1_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """``n_nets`` nets at the chi of one reading of Theorem 1's logarithm, their SBP critical
    sparsity, and the bound in the same reading (``bound``, and ``kappa_reading`` = |log chi| / 8)."""
    p, seed = resolve_part(th1_parts(s), s["seed"], key)
    dev = resolve_device(device)
    log_fn = READINGS[p["reading"]]
    sigma_w = ordered_sigma_w(s["kappa"], s["sigma_b"], s["activation"], p["reading"])
    c = chi(sigma_w, s["sigma_b"], s["activation"])
    rows = []
    for i in range(s["n_nets"]):
        net_seed = part_seed(seed, i)
        x, y, data = _batch(s, net_seed, dev)
        # float64: in the ordered phase gradients shrink like chi^(depth / 2) (10^-80 at chi = 0.025,
        # L = 100), below float32's range, where every deep score would be 0 and s_cr with it
        model = _ffnn(s, x[0].numel(), sigma_w, s["sigma_b"], net_seed, dev).double()
        rows.append({"net": i, "net_seed": net_seed,
                     "s_cr": prune_with_s_cr(model, "snip", 1.0, x=x.double(), y=y)[1]})
        log.info("%s reading, net %d: s_cr = %.3f", p["reading"], i, rows[-1]["s_cr"])
    L, N = s["depth"], s["width"]
    return pd.DataFrame(rows).assign(
        reading=p["reading"], sigma_w=sigma_w, sigma_b=s["sigma_b"], chi=c, kappa=s["kappa"],
        kappa_reading=abs(log_fn(c)) / 8, depth=L, width=N, dataset=data.name,
        bound=rp_theorem1_bound(c, L, N, log=log_fn))


# --- RP-T7: MBP critical sparsity when one layer is scaled down -----------------------------------------


def t7_parts(s: dict) -> dict[str, dict]:
    return {"nets": {}}


def t7_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    _, seed = resolve_part(t7_parts(s), s["seed"], key)
    L, N = s["depth"], s["width"]
    rows = []
    for gamma in s["gammas"]:
        bound = rp_mbp_bound(gamma, N * N)
        for i in range(s["n_nets"]):
            net_seed = part_seed(seed, 1000 * int(gamma * 100) + i)
            model = initialize(ffnn(N, N, L - 1, N, bias=False), "sigma", sigma_w=1.0, seed=net_seed)
            with torch.no_grad():
                model.layers[0].weight.div_(math.sqrt(gamma))  # alpha_1 = gamma: variance 1 / (gamma N)
            rows.append({"gamma": gamma, "net": i, "net_seed": net_seed,
                         "s_cr": prune_with_s_cr(model, "magnitude", 1.0)[1], "bound": bound})
    return pd.DataFrame(rows).assign(depth=L, width=N)


# --- RP-F2 / RP-F4: kept share per layer, ResNet32 vs Stable ResNet32 ------------------------------------


def f2_parts(s: dict) -> dict[str, dict]:
    return {m: {"model": m} for m in s["models"]}


def f2_masks(s: dict, key: str, device: str = "auto", inputs=()) -> dict[str, dict]:
    """The ``prune`` job: SBP's masks of one He-initialized model (the part) at ``sparsity``."""
    p, seed = resolve_part(f2_parts(s), s["seed"], key)
    dev = resolve_device(device)
    x, y, data = _batch(s, seed, dev)
    model = initialize(build(p["model"], data.n_classes, tuple(x.shape[1:])), "he", seed=seed).to(dev)
    masks, s_cr = prune_with_s_cr(model, "snip", 1 - s["sparsity"], x=x, y=y)
    return {key: {"masks": {n: m.cpu() for n, m in masks.items()}, "model": p["model"], "method": "snip",
                  "sparsity": s["sparsity"], "net_seed": seed, "s_cr": s_cr, "dataset": data.name}}


def f2_measure(s: dict, key: str, device: str = "auto", inputs=(), masks: str | None = None) -> pd.DataFrame:
    """The kept share of each layer, read from the part's masks (``f2_masks``; pruned here without
    a masks file)."""
    run = (load_masks(masks) if masks else f2_masks(s, key, device))[key]
    return layer_table(run["masks"]).assign(model=run["model"], kept_percent=lambda t: 100 * t["density"],
                                            sparsity=run["sparsity"], net_seed=run["net_seed"], dataset=run["dataset"])
