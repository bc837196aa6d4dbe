"""The paper scale on the device: cells of ``reference/paper/`` recomputed with the same seeds.

Each cell calls its experiment's own ``measure`` with the paper's settings, cut to a prefix of its
sweep and nets that keeps every seed (a net's seed depends on its place in the sweep):

* TG-F2, the first density (alpha 0.1), the first 10 nets: every layer's length and exact length,
  all float64 (those nets are the reference's exact ones), within a relative 1e-6;
* TG-F3a, the Gaussian family at the first sigma_w (1), 20 nets in float32 as configured: each
  net's growth factor (the mean over hidden layers, what the figure and claims read) within the
  spread of that number across the reference's 100 nets; the note gives the largest change that
  float32 alone makes there (``precision.csv``);
* EP-F14, the first width (10), its 5 nets: dichotomies, label flips and transitions at every
  depth, equal.

Seconds per net on the device are set beside the reference's (its job seconds on 2 CPU cores over
its nets, the whole experiment's average). TG's cells join MNIST test images: without
``--data-dir`` they run on generated points and are not compared. ``--tiny`` runs one net of each
at toy sizes, compared only where the toy run is the paper's own cell (EP-F14's first net).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

REFERENCE = Path(__file__).resolve().parents[3] / "reference" / "paper"
FLOAT64_RTOL = 1e-6


def run(check) -> pd.DataFrame:
    """Every cell; one that fails is a row saying so, and the others still run."""
    import logging

    frames = []
    for cell in (ep_f14, tg_f3a, tg_f2):  # cheapest first
        try:
            frames.append(cell(check))
        except Exception as e:
            logging.getLogger(__name__).exception("%s failed", cell.__name__)
            frames.append(pd.DataFrame([{"experiment": cell.__name__.upper().replace("_", "-"), "cell": "",
                                         "note": f"failed: {type(e).__name__}: {e}"}]))
    from .common import COLUMNS

    table = pd.concat(frames, ignore_index=True)
    promised = COLUMNS["reference-check"]
    return table.reindex(columns=promised + [c for c in table.columns if c not in promised])


def _reference(exp: str) -> tuple[pd.DataFrame | None, float]:
    """The committed table of ``exp`` and its CPU seconds per net (NaN, None without one)."""
    paper = exp.split("-")[0]
    path = next((p for p in (REFERENCE / paper / f"{exp}.csv", REFERENCE / paper / f"{exp}.csv.gz") if p.exists()),
                None)
    if path is None:
        return None, float("nan")
    table = pd.read_csv(path)
    runs = pd.read_csv(REFERENCE / "runs.csv").set_index("experiment")
    return table, float(runs.loc[exp, "job_seconds"]) / table["net_seed"].nunique()


def _settings(check, exp: str, **changes) -> tuple[dict, str]:
    """The paper's settings of ``exp`` with ``changes``, reading MNIST from ``--data-dir``; without
    one, generated points of the same dimension (and the note says so)."""
    from ..pipeline.config import settings

    s = {**settings(check.config, exp, "paper"), **changes}
    if "dataset" not in s:
        return s, ""
    if check.data_dir:
        return {**s, "data_dir": check.data_dir}, ""
    s = {k: v for k, v in s.items() if k not in ("dataset", "points")}
    return {**s, "input_dim": 784}, "generated points (no --data-dir): not compared"


def _compare(exp, cell, mine: pd.DataFrame, ref: pd.DataFrame | None, keys: list[str], quantities: list[str],
             tolerance, seconds_per_net: float, ref_seconds: float, note: str, relative: bool = True,
             layer: str | None = "layer") -> pd.DataFrame:
    """One row per (key values, quantity): the device's value beside the reference's; ``layer``
    names the key that is the row's layer (or depth)."""
    comparable = ref is not None and not note
    long = mine.melt(id_vars=keys, value_vars=quantities, var_name="quantity", value_name="device_value")
    if comparable:
        other = ref.melt(id_vars=keys, value_vars=quantities, var_name="quantity", value_name="reference_value")
        long = long.merge(other, on=keys + ["quantity"], how="left")
    else:
        long["reference_value"] = np.nan
    diff = (long["device_value"] - long["reference_value"]).abs()
    long["relative_difference"] = diff / long["reference_value"].abs().clip(lower=1e-300) if relative else diff
    tol = tolerance if isinstance(tolerance, pd.Series) else pd.Series(tolerance, index=long.index)
    long["tolerance"] = tol.values
    long["within"] = (long["relative_difference"] <= long["tolerance"]) if comparable else np.nan
    long["layer"] = long.pop(layer) if layer else np.nan
    return long.assign(experiment=exp, cell=cell, device_seconds_per_net=seconds_per_net,
                       reference_seconds_per_net=ref_seconds, points=mine["points"].iloc[0] if "points" in mine else "",
                       note=note)


def tg_f2(check) -> pd.DataFrame:
    from ..pipeline.catalogue import get

    n_nets = 1 if check.tiny else 10
    toy = dict(width=64, depth=5, n_pieces=1000) if check.tiny else {}
    s, note = _settings(check, "TG-F2", n_nets=n_nets, exact_nets=n_nets, **toy)
    note = note or ("toy sizes: not compared" if check.tiny else "")
    key = f"alpha{s['alphas'][0]:g}"
    t0 = time.perf_counter()
    mine = get("TG-F2").measure(s, key, str(check.device))
    seconds = (time.perf_counter() - t0) / n_nets
    ref, ref_seconds = _reference("TG-F2")
    if ref is not None:
        ref = ref[(ref["part"] == key) & (ref["net"] < n_nets)]
    return _compare("TG-F2", f"{key}, nets 0-{n_nets - 1}", mine, ref, ["net", "layer"], ["length", "length_exact"],
                    FLOAT64_RTOL, seconds, ref_seconds, note)


def tg_f3a(check) -> pd.DataFrame:
    from ..figures.tg import net_growth
    from ..pipeline.catalogue import get

    n_nets = 1 if check.tiny else 20
    toy = dict(width=64, depth=5, n_pieces=1000) if check.tiny else {}
    s, note = _settings(check, "TG-F3a", n_nets=n_nets, **toy)
    note = note or ("toy sizes: not compared" if check.tiny else "")
    s["sigma_ws"] = s["sigma_ws"][:1]  # the first setting keeps its nets' seeds
    t0 = time.perf_counter()
    mine = net_growth(get("TG-F3a").measure(s, "gaussian", str(check.device)))
    seconds = (time.perf_counter() - t0) / n_nets
    ref, ref_seconds = _reference("TG-F3a")
    spread = np.nan
    if ref is not None:
        ref = net_growth(ref[(ref["part"] == "gaussian") & (ref["sigma_w"] == s["sigma_ws"][0])])
        spread = ref["growth"].std()
        ref = ref[ref["net"] < n_nets]
    float32 = _float32_change("TG-F3a", f"sigma_w={s['sigma_ws'][0]:g}")
    table = _compare("TG-F3a", f"gaussian, sigma_w {s['sigma_ws'][0]:g}, nets 0-{n_nets - 1}",
                     mine.assign(points=s.get("dataset", "random R^784")), ref, ["net"], ["growth"], spread, seconds,
                     ref_seconds, note, relative=False, layer=None)
    table["note"] = (table["note"] + "; " if note else "") + (
        f"tolerance: the sd of a net's growth across the reference's nets ({spread:.3g}); float32 alone changes it "
        f"by up to {float32:.2g} (precision.csv)")
    return table


def _float32_change(exp: str, setting: str) -> float:
    path = REFERENCE / "precision.csv"
    if not path.exists():
        return float("nan")
    p = pd.read_csv(path)
    return float(p.loc[(p["experiment"] == exp) & (p["setting"] == setting), "change"].abs().max())


def ep_f14(check) -> pd.DataFrame:
    from ..pipeline.catalogue import get

    n_nets = 1 if check.tiny else 5
    s, note = _settings(check, "EP-F14", n_nets=n_nets)
    s["widths"] = s["widths"][:1]
    t0 = time.perf_counter()
    mine = get("EP-F14").measure(s, "sweeps", str(check.device))
    seconds = (time.perf_counter() - t0) / n_nets
    ref, ref_seconds = _reference("EP-F14")
    if ref is not None:
        ref = ref[(ref["width"] == s["widths"][0]) & (ref["net"] < n_nets)]
    return _compare("EP-F14", f"width {s['widths'][0]}, nets 0-{n_nets - 1}", mine.assign(points="random R^50"),
                    ref, ["net", "depth"], ["dichotomies", "label_flips", "transitions"], 0.0, seconds, ref_seconds,
                    note, layer="depth")
