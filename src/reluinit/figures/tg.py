"""TG (trajectory growth): figures and summaries (``reluinit.experiments.tg`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker

from ..report import plotting

# sampling.DISTRIBUTIONS, in its order (one hue each; tests/test_figures.py checks they agree): the
# figures import no torch, which sampling does.
DISTRIBUTIONS = ("gaussian", "uniform", "discrete")


def projection_figure(table: pd.DataFrame, title: str):
    layers = sorted(table["layer"].unique())
    fig, axes = plotting.panels(len(layers), width=3.0, height=3.0)
    for ax, layer in zip(axes, layers):
        g = table[table["layer"] == layer]
        ax.scatter(g["u"], g["v"], c=g["t"], cmap="viridis", s=2)
        ax.set(title="input" if layer == 0 else f"layer {layer}", xticks=[], yticks=[], aspect="equal")
        ax.text(0.02, 0.02, f"length {g['length'].iloc[0]:.3g}", transform=ax.transAxes, fontsize=8)
    fig.suptitle(title)
    return fig


def projection_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The image's full-dimensional length at each projected layer, and its ratio to the input's."""
    per = table.groupby("layer")["length"].first().reset_index()
    return per.assign(ratio_to_input=per["length"] / per["length"].iloc[0])


def f1_figure(table: pd.DataFrame, s: dict):
    return projection_figure(table, f"TG-F1: a circle through a ReLU net (width {s['width']}, $\\sigma_w$ = "
                                    f"{s['sigma_w']:g}), pre-activations on their top two principal directions")


def f2_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, width=4.8, integer_x=True)
    data = table.assign(**{"$\\alpha$": table["alpha"].map(lambda a: f"{a:g}")})
    sns.lineplot(data=data, x="layer", y="length", hue="$\\alpha$", palette="viridis", errorbar="se", ax=axes[0])
    axes[0].set(yscale="log", ylabel="E[length of $z^{(d)}$]", xlabel="layer d")
    exact = data.dropna(subset=["discretisation_error"])
    exact = exact[exact["layer"] > 0]
    if len(exact):
        sns.lineplot(data=exact, x="layer", y="discretisation_error", hue="$\\alpha$", palette="viridis",
                     marker="o", errorbar=None, ax=axes[1], legend=False)
        axes[1].set(yscale="log")
    axes[1].set(xlabel="layer d", ylabel="1 - (discretised / exact length)",
                title=f"{s['n_pieces']:,} pieces vs every breakpoint")
    fig.suptitle(f"TG-F2: line between {table['points'].iloc[0]} points through sparse-Gaussian ReLU nets, "
                 f"$\\sigma_w$ = {s['sigma_w']:g}, width {s['width']}, {s['n_nets']} nets")
    return fig


def f2_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per density: mean length at the first and last layer, the mean per-layer growth of the
    mean length, and the largest discretisation error measured."""
    rows = []
    for alpha, g in table.groupby("alpha"):
        mean = g.groupby("layer")["length"].mean()
        depth = mean.index.max()
        rows.append({"alpha": alpha, "length_input": mean.iloc[0], f"length_layer{depth}": mean.iloc[-1],
                     "mean_growth_per_layer": (mean.iloc[-1] / mean.iloc[0]) ** (1 / depth),
                     "exact_layers": int(g.dropna(subset=["length_exact"])["layer"].max()),
                     "max_discretisation_error": g["discretisation_error"].max()})
    return pd.DataFrame(rows)


def net_growth(table: pd.DataFrame) -> pd.DataFrame:
    """One growth factor per net: the mean over its hidden-to-hidden layers 2..L (TG averages
    pieces, layers and nets; the theorems bound ‖dz(d+1)‖/‖dz(d)‖ between hidden layers, while
    layer 1 compares the input with the first hidden layer, which may change the dimension:
    R^500 -> 784 in TG-F5). Layer 1's own factor is kept as ``first_layer_growth``."""
    keys = ["path", "sweep", "distribution", "sigma_w", "alpha", "net"]
    hidden = table[table["layer"] > 1].groupby(keys, as_index=False).agg(growth=("growth", "mean"),
                                                                          lower_bound=("lower_bound", "first"))
    first = table[table["layer"] == 1].groupby(keys, as_index=False).agg(first_layer_growth=("growth", "mean"))
    return hidden.merge(first, on=keys, how="left")


def growth_panel(ax, table: pd.DataFrame, x: str):
    per_net = net_growth(table)
    palette = dict(zip(DISTRIBUTIONS, sns.color_palette("colorblind", 3)))  # unordered: distinct hues
    sns.lineplot(data=per_net, x=x, y="growth", hue="distribution", palette=palette, marker="o", errorbar="se", ax=ax)
    bounds = per_net.groupby(["distribution", x], as_index=False)["lower_bound"].first()
    for dist, g in bounds.groupby("distribution"):
        ax.plot(g[x], g["lower_bound"], ls="--", color=palette[dist], label=f"{dist} bound")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set(xlabel="$\\sigma_w$" if x == "sigma_w" else "density $\\alpha$",
           ylabel="E[$\\|dz^{(d+1)}\\| / \\|dz^{(d)}\\|$], hidden layers")
    ax.legend(fontsize=7)


def _f3_figure(sweep: str):
    def figure(table: pd.DataFrame, s: dict):
        fig, axes = plotting.panels(1, width=6.0, height=4.0)
        growth_panel(axes[0], table, sweep)
        held = f"$\\alpha$ = {s['alpha']:g}" if sweep == "sigma_w" else f"$\\sigma_w$ = {s['sigma_w']:g}"
        what = "$\\sigma_w$" if sweep == "sigma_w" else "density"
        axes[0].set_title(f"TG-F3{'a' if sweep == 'sigma_w' else 'b'}: growth factor vs {what}, {held}, "
                          f"width {s['width']}, dashed: Corollaries 1-3", fontsize=9)
        return fig
    return figure


f3a_figure, f3b_figure = _f3_figure("sigma_w"), _f3_figure("alpha")


def growth_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean growth factor per setting and distribution, with its bound and the spread between
    distributions at the same (sigma_w, alpha) (TG's universality: the same for all three)."""
    per_net = net_growth(table)
    out = per_net.groupby(["path", "sweep", "distribution", "sigma_w", "alpha"], as_index=False).agg(
        growth=("growth", "mean"), growth_se=("growth", "sem"), lower_bound=("lower_bound", "first"),
        first_layer_growth=("first_layer_growth", "mean"))
    key = out["sigma_w"].round(9).astype(str) + "/" + out["alpha"].astype(str) + "/" + out["path"]
    spread = out.groupby(key)["growth"].transform(lambda g: (g.max() - g.min()) / g.mean() if len(g) > 1 else np.nan)
    return out.assign(spread_between_distributions=spread)


def f4_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, width=4.4)
    for ax, kind in zip(axes, ["sphere", "one-hot"]):
        g = table[table["u"] == kind].assign(k=lambda d: d["k"].astype(str))
        sns.lineplot(data=g, x="alpha", y="mean_norm", hue="k", marker="o", palette="viridis",
                     seed=plotting.BOOTSTRAP_SEED, ax=ax)
        a = np.linspace(0, 1, 101)
        ax.plot(a, np.sqrt(a), "k--", lw=1, label="$\\sqrt{\\alpha}$ (upper bound)")
        ax.plot(a, a, "k:", lw=1, label="$\\alpha$ (Lemma 7)")
        ax.set(xlabel="$\\alpha$", ylabel="E$\\|u_J\\|$ / $\\|u\\|$",
               title=f"u {'uniform on the sphere' if kind == 'sphere' else 'one-hot'}")
        ax.legend(fontsize=7)
    fig.suptitle(f"TG-F4: norm of a random sub-vector, {s['n_draws']:,} draws per point")
    return fig


def f4_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Largest deviation from sqrt(alpha) (sphere) and from alpha (one-hot), in standard errors."""
    target = np.where(table["u"] == "sphere", table["sqrt_alpha"], table["alpha"])
    t = table.assign(target=target, deviation=table["mean_norm"] - target)
    return t.groupby(["u", "k"], as_index=False).agg(max_abs_deviation=("deviation", lambda d: d.abs().max()),
                                                     max_se=("se", "max"))


def f5_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(5, width=3.8, height=3.4)
    main = table[table["sweep"] != "convergence"]
    for ax, (path, sweep), tag in zip(axes, [("line", "sigma_w"), ("line", "alpha"), ("semicircles", "sigma_w"),
                                             ("semicircles", "alpha")], "abcd"):
        growth_panel(ax, main[(main["path"] == path) & (main["sweep"] == sweep)], sweep)
        ax.set_title(f"({tag}) {'straight line' if path == 'line' else 'curved path'}", fontsize=9)
    conv = table[table["sweep"] == "convergence"]
    if len(conv):
        per = conv[conv["layer"] > 0].groupby(["n_pieces", "alpha", "layer"], as_index=False)["length"].mean()
        finest = per[per["n_pieces"] == per["n_pieces"].max()].drop(columns="n_pieces")
        per = per[per["n_pieces"] < per["n_pieces"].max()].merge(finest, on=["alpha", "layer"], suffixes=("", "_finest"))
        per["rel_diff"] = (per["length"] / per["length_finest"] - 1).abs()
        sns.lineplot(data=per.assign(layer=per["layer"].astype(str)), x="n_pieces", y="rel_diff", hue="layer",
                     palette="viridis", marker="o", errorbar=None, ax=axes[4])
        axes[4].set(xscale="log", yscale="log", xlabel="pieces", ylabel="|length / finest - 1|",
                    title="(e) curved path: refining the discretisation")
        axes[4].legend(title="layer", fontsize=7, title_fontsize=8, ncol=2, loc="lower left")  # below the curves
        axes[4].xaxis.set_minor_formatter(ticker.NullFormatter())
    fig.suptitle(f"TG-F5: random points in $R^{{{s['input_dim']}}}$, width {s['width']}, dashed: Corollaries 1-3")
    return fig
