"""OP (norm preservation): figures and summaries (``reluinit.experiments.op`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from ..report import plotting

INIT_LABELS = {"he_fan_out": "He", "glorot": "Glorot", "he": "He (fan-in)"}


def f1_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, integer_x=True)
    data = table.assign(Init=table["init"].map(INIT_LABELS), Width=table["width"].astype(str))
    for ax, col, ylabel in [
        (axes[0], "act_ratio", r"$\|h_l\| / \|x\|$"),
        (axes[1], "grad_ratio", r"$\|\partial \ell/\partial W_l\|_F / (\|\delta\|\,\|x\|)$"),
    ]:
        sns.lineplot(data=data, x="layer", y=col, hue="Width", style="Init", errorbar="sd",
                     marker="o", ax=ax, palette="viridis")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="layer $l$", ylabel=ylabel)
    axes[0].get_legend().remove()
    sns.move_legend(axes[1], "upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"OP-F1: norm ratios at init, mean ± std over {s['n_samples']} inputs")
    return fig


def f1_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over the data of both ratios, per init, width and layer."""
    return (table.groupby(["init", "width", "layer"])[["act_ratio", "grad_ratio"]]
            .agg(["mean", "std"]).reset_index())


def f2_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per width: mean distortion (the paper's "empirical estimate"), its (1 - delta) quantile
    (what the lemmas actually bound) and the lemmas' epsilon."""
    delta = table["delta"].iloc[0]
    rows = []
    for (width,), g in table.groupby(["width"]):
        for direction, lemma in [("forward", "eps_lemma2"), ("backward", "eps_lemma5")]:
            col = f"eps_{direction}"
            rows.append({"width": width, "direction": direction,
                         "mean": g[col].mean(), "quantile": g[col].quantile(1 - delta),
                         "lemma": g[lemma].iloc[0]})
    return pd.DataFrame(rows)


def f2_figure(table: pd.DataFrame, s: dict):
    summary = f2_summary(table)
    fig, axes = plotting.panels(2)
    for ax, (direction, lemma) in zip(axes, [("forward", "Lemma 2"), ("backward", "Lemma 5")]):
        d = summary[summary["direction"] == direction]
        ax.plot(d["width"], d["lemma"], "k--", label=f"{lemma}, $\\delta$={s['delta']}")
        ax.plot(d["width"], d["quantile"], "s-", label=f"measured {1 - s['delta']:.0%} quantile")
        ax.plot(d["width"], d["mean"], "o-", label="measured mean")
        ax.set(xlabel="width $m$", ylabel=r"distortion $\epsilon$", title=f"{direction} pass")
        ax.legend()
    fig.suptitle("OP-F2: tightness of the width bounds (one hidden ReLU layer)")
    return fig


def f3_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.5, integer_x=True)
    data = table.assign(Variation=table["variation"].map(lambda v: f"v = {v}"))
    sns.lineplot(data=data, x="layer", y="grad_ratio", hue="Variation", errorbar="sd", marker="o",
                 ax=axes[0], palette="viridis")
    axes[0].axhline(1.0, color="grey", lw=0.8, ls=":")
    axes[0].set(xlabel="layer $l$", ylabel=r"$\|\partial \ell/\partial W_l\|_F / (\|\delta\|\,\|x\|)$",
                title=f"OP-F3: widths U({s['width_center']} - v, {s['width_center']} + v), He")
    return fig


def f3_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per width variation: mean |ratio - 1| and the mean over layers of the std over data."""
    per_layer = table.groupby(["variation", "layer"])["grad_ratio"].agg(["mean", "std"]).reset_index()
    return per_layer.groupby("variation").agg(
        mean_abs_dev=("mean", lambda m: (m - 1).abs().mean()), mean_std=("std", "mean")).reset_index()
