"""EP (expressive power): figures and summaries of the random-net measurements (``reluinit.experiments.ep`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from ..report import plotting
from .lr import plane_figure
from .tg import projection_figure


def f1_figure(table, s: dict):
    return plane_figure(table, s, f"EP-F1: input-space regions of a {s['depth']}-hidden-layer ReLU net, "
                                  f"width {s['width']}, layer by layer")


def f2_figure(table: pd.DataFrame, s: dict):
    acts = list(dict.fromkeys(table["activation"]))
    fig, axes = plotting.panels(2 * len(acts), width=3.55, height=3.4)
    data = plotting.as_labels(table[table["layer"] > 0], "sigma_w2", "$\\sigma_w^2$")
    wide, deep = max(s["widths"]), s["depth"]
    for i, act in enumerate(acts):
        g = data[data["activation"] == act]
        sns.lineplot(data=g[g["width"] == wide], x="layer", y="transitions", hue="$\\sigma_w^2$",
                     palette="viridis", marker="o", errorbar="se", ax=axes[2 * i])
        axes[2 * i].set(yscale="log", xlabel="depth d", ylabel="output transitions $T^{(d)}$",
                        title=f"{act}, width {wide}")
        sns.lineplot(data=g[g["layer"] == deep], x="width", y="transitions", hue="$\\sigma_w^2$",
                     palette="viridis", marker="o", errorbar="se", ax=axes[2 * i + 1], legend=False)
        axes[2 * i + 1].set(xscale="log", yscale="log", ylabel="output transitions $T^{(d)}$",
                            title=f"{act}, depth {deep}")
    fig.suptitle(f"EP-F2: transitions along a circle between {table['points'].iloc[0]} points, "
                 f"{s['n_pieces']:,} pieces, $\\sigma_b$ = {s['sigma_b']:g}")
    return fig


def transitions_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean output transitions T^(d) of the deepest net per setting, and the mean ratio between
    consecutive depths."""
    deep = table["layer"].max()
    rows = []
    for (act, s2, k), g in table[table["layer"] > 0].groupby(["activation", "sigma_w2", "width"]):
        mean = g.groupby("layer")["transitions"].mean()
        rows.append({"activation": act, "sigma_w2": s2, "width": k, f"transitions_depth{deep}": mean.iloc[-1],
                     "mean_ratio_per_layer": float(np.exp(np.log(mean.clip(lower=1)).diff().mean()))})
    return pd.DataFrame(rows)


def f5_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.4, height=4.0)
    data = table[table["layer"] > 0]
    data = data.assign(setting=[f"k={k}, $\\sigma_w^2$={s2:g}" for k, s2 in zip(data["width"], data["sigma_w2"])])
    sns.scatterplot(data=data, x="length", y="transitions", hue="setting", style="setting", s=18,
                    palette="viridis", ax=axes[0])
    axes[0].set(xscale="log", yscale="log", xlabel="trajectory length at layer d",
                ylabel="output transitions $T^{(d)}$ of the depth-d net")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"EP-F5: transitions vs length, {s['activation']}, one point per net and depth")
    return fig


def f5_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Slope of log(output transitions T^(d)) against log(length) per setting (Theorem 4: about 1)."""
    rows = []
    for (k, s2), g in table[(table["layer"] > 0) & (table["transitions"] > 0)].groupby(["width", "sigma_w2"]):
        slope = np.polyfit(np.log(g["length"]), np.log(g["transitions"]), 1)[0] if len(g) > 2 else np.nan
        rows.append({"width": k, "sigma_w2": s2, "loglog_slope": slope,
                     "transitions_per_unit_length": (g["transitions"] / g["length"]).median()})
    return pd.DataFrame(rows)


def f12_figure(table: pd.DataFrame, s: dict):
    widths = sorted(table["width"].unique())
    fig, axes = plotting.panels(len(widths), width=3.6, integer_x=True)
    data = plotting.as_labels(table, "sigma_w2", "$\\sigma_w^2$")
    for ax, k in zip(axes, widths):
        sns.lineplot(data=data[data["width"] == k], x="layer", y="length", hue="$\\sigma_w^2$", palette="viridis",
                     errorbar="se", ax=ax, legend=ax is axes[-1])
        ax.set(yscale="log", title=f"width {k}", ylabel="trajectory length")
    fig.suptitle(f"EP-F12: circle between {table['points'].iloc[0]} points through ReLU nets")
    return fig


def length_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per setting: mean length at the last layer and the mean per-layer length ratio."""
    rows = []
    for (act, s2, k), g in table.groupby(["activation", "sigma_w2", "width"]):
        mean = g.groupby("layer")["length"].mean()
        rows.append({"activation": act, "sigma_w2": s2, "width": k, "length_last": mean.iloc[-1],
                     "mean_ratio_per_layer": (mean.iloc[-1] / mean.iloc[0]) ** (1 / mean.index.max())})
    return pd.DataFrame(rows)


def f13_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(4, width=3.8, height=3.4)
    by_k = table[table["sweep"] == "by-width"]
    by_s = table[table["sweep"] == "by-sigma"]
    sns.lineplot(data=plotting.as_labels(by_k, "width", "k"), x="layer", y="length", hue="k", palette="viridis", errorbar="se",
                 ax=axes[0])
    axes[0].set(yscale="log", title=f"(a) $\\sigma_w^2$ = {s['sigma_w2_fixed']:g}", ylabel="trajectory length")
    sns.lineplot(data=plotting.as_labels(by_s, "sigma_w2", "$\\sigma_w^2$"), x="layer", y="length", hue="$\\sigma_w^2$",
                 palette="viridis", errorbar="se", ax=axes[1])
    axes[1].set(yscale="log", title=f"(b) k = {s['width_fixed']}", ylabel="trajectory length")
    for ax, data, x, title in ((axes[2], by_k, "width", f"(c) $\\sigma_w^2$ = {s['sigma_w2_fixed']:g}"),
                               (axes[3], by_s, "sigma_w2", f"(d) k = {s['width_fixed']}")):
        per = data[data["layer"] > 1].groupby([x, "net"], as_index=False).agg(
            ratio=("length_ratio", "mean"), lower=("lower_bound", "first"), upper=("upper_bound", "first"))
        sns.lineplot(data=per, x=x, y="ratio", marker="o", errorbar="se", ax=ax, color="C0", label="measured")
        bounds = per.groupby(x, as_index=False)[["lower", "upper"]].first()
        ax.plot(bounds[x], bounds["upper"], "k--", lw=1, label="upper bound")
        ax.plot(bounds[x], bounds["lower"], "k:", lw=1, label="lower bound")
        ax.set(xscale="log" if x == "width" else "linear", title=title,
               xlabel="width k" if x == "width" else "$\\sigma_w^2$", ylabel="length ratio, layer d+1 / d")
        ax.legend(fontsize=7)
    fig.suptitle("EP-F13: circle between random vectors through hard-tanh nets, EP Theorem 3 dashed/dotted")
    return fig


def f13_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean length ratio per setting between EP Theorem 3's bounds (hidden layers only: the first
    layer also changes the dimension, from the input's to the width)."""
    per = table[table["layer"] > 1].groupby(["sweep", "width", "sigma_w2"], as_index=False).agg(
        length_ratio=("length_ratio", "mean"), lower_bound=("lower_bound", "first"),
        upper_bound=("upper_bound", "first"))
    return per.assign(within_bounds=(per["length_ratio"] >= per["lower_bound"])
                      & (per["length_ratio"] <= per["upper_bound"]))


def f14_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, width=4.6)
    sns.lineplot(data=plotting.as_labels(table, "width", "width"), x="depth", y="dichotomies", hue="width", palette="viridis",
                 marker="o", errorbar="se", ax=axes[0])
    sns.lineplot(data=plotting.as_labels(table, "depth", "depth"), x="width", y="dichotomies", hue="depth", palette="viridis",
                 marker="o", errorbar="se", ax=axes[1])
    for ax in axes:
        ax.axhline(2 ** s["n_inputs"], color="C0", ls="--", lw=1)
        ax.set(yscale="log")
    axes[1].set(xscale="log")
    fig.suptitle(f"EP-F14: dichotomies of {s['n_inputs']} inputs sweeping the first layer along a great circle, "
                 f"hard-tanh, $\\sigma_w^2$ = {s['sigma_w2']:g}, $\\sigma_b$ = {s['sigma_b']:g}")
    return fig


def dichotomy_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby(["width", "swept_layer", "depth", "remaining_depth"], as_index=False).agg(
        dichotomies=("dichotomies", "mean"), label_flips=("label_flips", "mean"), transitions=("transitions", "mean"))


def f15_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.2, height=3.8, integer_x=True)
    data = plotting.as_labels(table, "depth", "net depth")
    sns.lineplot(data=data, x="remaining_depth", y="dichotomies", hue="net depth", palette="viridis",
                 errorbar="se", ax=axes[0])
    axes[0].axhline(2 ** s["n_inputs"], color="C0", ls="--", lw=1, label=f"$2^{{{s['n_inputs']}}}$")
    axes[0].set(yscale="log", xlabel="remaining depth (layers above the swept one)")
    axes[0].set_title(f"EP-F15: dichotomies vs remaining depth, k = {s['widths'][0]}, "
                      f"$\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def f16_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.2, height=3.8)
    per = table.groupby("depth", as_index=False)[["label_flips", "dichotomies", "random_walk_dichotomies"]].mean()
    sns.scatterplot(data=table.assign(depth=table["depth"].astype(str)), x="label_flips", y="dichotomies", hue="depth",
                    palette="viridis", ax=axes[0], s=20)
    order = per.sort_values("label_flips")
    axes[0].plot(order["label_flips"], order["random_walk_dichotomies"], "k-", lw=1, label="random walk")
    axes[0].axhline(2 ** s["n_inputs"], color="C0", ls="--", lw=1)
    axes[0].set(xscale="log", yscale="log", xlabel="output transitions (label flips along the sweep)",
                ylabel="unique dichotomies")
    axes[0].legend(fontsize=7, title="depth")
    axes[0].set_title(f"EP-F16: hard-tanh, $\\sigma_w^2$ = {s['sigma_w2']:g}, s = {s['n_inputs']}", fontsize=9)
    return fig


def f16_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby("depth", as_index=False).agg(
        label_flips=("label_flips", "mean"), transitions=("transitions", "mean"),
        dichotomies=("dichotomies", "mean"), random_walk_dichotomies=("random_walk_dichotomies", "mean"))


def f3_figure(table: pd.DataFrame, s: dict):
    return projection_figure(table, f"EP-F3: a circle through a {s['activation']} net, width {s['width']}, "
                                    f"$\\sigma_w^2$ = {s['sigma_w2']:g}, after each layer (top two principal directions)")
