"""EP's trained conv nets (CIFAR-10): figures and summaries (``reluinit.experiments.ep_conv`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import seaborn as sns

from ..report import plotting


def _mark_pools(ax, table: pd.DataFrame) -> None:
    for b in sorted(table.loc[table["stage"] == "pool", "block"].unique()):
        ax.axvspan(b - 0.3, b + 0.3, color="0.85", zorder=0)


def f4_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.4, height=3.8, integer_x=True)
    data = plotting.as_labels(table, "sigma_w2", "$\\sigma_w^2$")
    sns.lineplot(data=data, x="layer", y="length", hue="$\\sigma_w^2$", palette="viridis", marker="o",
                 errorbar="se", ax=axes[0])
    _mark_pools(axes[0], table)
    axes[0].set(yscale="log", xlabel="layer (grey: pooling)", ylabel="trajectory length")
    axes[0].set_title(f"EP-F4: circle between {table['dataset'].iloc[0]} test images through a ReLU conv net "
                      f"(width {s['width']}) at init, {s['n_nets']} net(s)", fontsize=8)
    return fig


def f4_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per sigma_w^2: mean length after each block, and the mean growth per conv block."""
    mean = table.groupby(["sigma_w2", "layer", "stage"], as_index=False)["length"].mean()
    ratio = mean.groupby("sigma_w2")["length"].transform(lambda v: v / v.shift(1))
    return mean.assign(ratio_to_previous=ratio)


def _lengths(table: pd.DataFrame, variant: str) -> pd.DataFrame:
    g = table[(table["kind"] == "length") & (table["variant"] == variant)]
    return g.groupby(["epoch", "layer", "block", "stage"], as_index=False)["length"].mean()


def _length_panel(ax, g: pd.DataFrame, title: str, cmap: str = "viridis") -> None:
    """One curve per epoch; segments into a normalisation stage dotted."""
    epochs = sorted(g["epoch"].unique())
    colours = sns.color_palette(cmap, len(epochs))
    for colour, epoch in zip(colours, epochs):
        e = g[g["epoch"] == epoch].sort_values("layer")
        x, y, st = e["layer"].to_numpy(), e["length"].to_numpy(), e["stage"].to_numpy()
        for i in range(1, len(x)):
            ax.plot(x[i - 1:i + 1], y[i - 1:i + 1], color=colour, lw=1.2, ls=":" if st[i] == "norm" else "-",
                    label=f"epoch {epoch:g}" if i == 1 else None)
        ax.plot(x, y, "o", color=colour, ms=2.5)
    _mark_pools(ax, g)
    ax.set(yscale="log", xlabel="layer (grey: pooling)", ylabel="trajectory length", title=title)
    ax.legend(fontsize=7, ncol=2)


def f8_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.6, height=4.0, integer_x=True)
    _length_panel(axes[0], _lengths(table, "plain"), "no batch norm")
    fig.suptitle(f"EP-F8: circle between two {table['dataset'].iloc[0]} test images through the conv net during "
                 f"training, $\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def _length_summary(table: pd.DataFrame, variants) -> pd.DataFrame:
    """Length after each stage at the first and last epoch, and its growth through training."""
    rows = []
    for v in variants:
        g = _lengths(table, v)
        if g.empty:
            continue
        first, last = g["epoch"].min(), g["epoch"].max()
        a = g[g["epoch"] == first].set_index("layer")
        b = g[g["epoch"] == last].set_index("layer")
        rows.append(pd.DataFrame({"variant": v, "layer": a.index, "stage": a["stage"].to_numpy(),
                                  "length_init": a["length"].to_numpy(), "last_epoch": last,
                                  "length_final": b["length"].reindex(a.index).to_numpy()}))
    df = pd.concat(rows, ignore_index=True)
    return df.assign(growth_through_training=df["length_final"] / df["length_init"])


def f8_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _length_summary(table, ["plain"])


def f9_figure(table: pd.DataFrame, s: dict):
    g = table[(table["kind"] == "sigma_w") & (table["variant"] == "plain")]
    fig, axes = plotting.panels(1, width=5.4, height=3.8)
    sns.lineplot(data=plotting.as_labels(g, "layer", "layer"), x="epoch", y="sigma_w", hue="layer", palette="viridis", marker="o",
                 errorbar="se", ax=axes[0])
    axes[0].axhline(math.sqrt(s["sigma_w2"]), color="k", ls="--", lw=1, label="init")
    axes[0].set(ylabel="$\\sigma_w$ = std(W) $\\sqrt{\\mathrm{fan\\ in}}$")
    axes[0].set_title(f"EP-F9: weight scale per layer through training, conv net without batch norm, "
                      f"init $\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=8)
    return fig


def f9_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table[(table["kind"] == "sigma_w") & (table["variant"] == "plain")]
    mean = g.groupby(["layer", "epoch"], as_index=False)["sigma_w"].mean().sort_values("epoch")
    out = mean.groupby("layer", as_index=False).agg(sigma_w_init=("sigma_w", "first"), sigma_w_final=("sigma_w", "last"),
                                                    last_epoch=("epoch", "last"))
    return out.assign(ratio=out["sigma_w_final"] / out["sigma_w_init"])


def f10_figure(table: pd.DataFrame, s: dict):
    variants = [v for v in ("plain", "bn", "trajreg") if v in set(table["variant"])]
    titles = {"plain": "no batch norm", "bn": "batch norm (dotted: the BN layer alone)",
              "trajreg": "trajectory regularization (dotted: its layer alone)"}
    fig, axes = plotting.panels(len(variants), width=5.0, height=4.0, integer_x=True)
    for ax, v in zip(axes, variants):
        _length_panel(ax, _lengths(table, v), titles[v])
    lo = min(ax.get_ylim()[0] for ax in axes)
    hi = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(lo, hi)
    fig.suptitle(f"EP-F10: circle between two {table['dataset'].iloc[0]} test images through the conv net during "
                 f"training, $\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def f10_summary(table: pd.DataFrame) -> pd.DataFrame:
    """As EP-F8's, for every variant, with the length ratio (after / before) of each normalisation
    layer alone and of the ReLU after it, at the first and the last epoch."""
    df = _length_summary(table, ["plain", "bn", "trajreg"])
    out = {}
    for when in ("init", "final"):
        prev = df.groupby("variant")[f"length_{when}"].shift(1)
        for stage in ("norm", "relu"):
            mask = df["stage"] == stage
            out[f"{stage}_ratio_{when}"] = np.where(mask, df[f"length_{when}"] / prev, np.nan)
    return df.assign(**out)


def f11_figure(table: pd.DataFrame, s: dict):
    g = table[table["kind"] == "epoch"]
    fig, axes = plotting.panels(2, width=4.6, height=3.6)
    for ax, col in zip(axes, ("test_acc", "train_acc")):
        sns.lineplot(data=g, x="epoch", y=col, hue="variant", errorbar="se", marker="o", ax=ax,
                     hue_order=[v for v in ("plain", "bn", "trajreg") if v in set(g["variant"])])
        ax.set(ylabel=col.replace("_", " "))
    fig.suptitle(f"EP-F11: conv net on {g['dataset'].iloc[0]}: no BN vs BN vs trajectory regularization "
                 f"(coefficient {s.get('trajreg_coef', 0.01):g})", fontsize=9)
    return fig


def f11_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table[table["kind"] == "epoch"].sort_values("epoch").groupby("run", as_index=False).last()
    g = g.assign(run_diverged=g["run_diverged"].astype(bool))
    return g.groupby("variant", as_index=False).agg(runs=("run", "count"), final_test_acc=("final_test_acc", "mean"),
                                                    best_test_acc=("best_test_acc", "mean"),
                                                    epochs=("epoch", "max"), diverged=("run_diverged", "sum"))


def f6_figure(table: pd.DataFrame, s: dict):
    g = plotting.as_labels(table[table["kind"] == "noise"], "layer", "layer")
    fig, axes = plotting.panels(1, width=5.4, height=3.8)
    sns.lineplot(data=g, x="magnitude", y="test_acc", hue="layer", palette="viridis", marker="o", errorbar="se",
                 ax=axes[0])
    axes[0].set(xlabel="noise magnitude (std relative to the layer's weight std)", ylabel="test accuracy")
    axes[0].set_title(f"EP-F6: noise in one layer of a trained conv net ({g['dataset'].iloc[0]}, "
                      f"$\\sigma_w^2$ = {s['sigma_w2']:g})", fontsize=9)
    return fig


def f6_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table[table["kind"] == "noise"]
    return g.groupby(["layer", "magnitude"], as_index=False).agg(base_acc=("base_acc", "mean"),
                                                                 test_acc=("test_acc", "mean"), drop=("drop", "mean"))
