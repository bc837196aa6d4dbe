"""LR (linear regions): figures and summaries (``reluinit.experiments.lr`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from ..report import plotting


def _deep(table: pd.DataFrame) -> pd.DataFrame:
    """The deep net's rows (tables made before ``net_kind`` hold only those)."""
    return table[table["net_kind"] == "deep"] if "net_kind" in table else table


def plane_figure(table: pd.DataFrame, s: dict, title: str, layers: list[int] | None = None):
    """The first net's partition after each of ``layers``, and its shallow twin's when measured."""
    first = table[table["net"] == table["net"].iloc[0]]
    deep = _deep(first)
    shallow = first[first["net_kind"] == "shallow"] if "net_kind" in first else first.iloc[:0]
    layers = layers or sorted(deep["layer"].unique())
    fig, axes = plotting.panels(len(layers) + (not shallow.empty), width=3.6, height=3.6)
    for ax, layer in zip(axes, layers):
        plotting.polygons(ax, deep[deep["layer"] == layer])
        n = deep.loc[deep["layer"] == layer, "n_regions"].iloc[0]
        ax.set(title=f"after layer {layer}: {n} regions", xlabel="$x_1$", ylabel="$x_2$")
    if not shallow.empty:
        plotting.polygons(axes[-1], shallow)
        axes[-1].set(title=f"one layer of {shallow['width'].iloc[0]}: {shallow['n_regions'].iloc[0]} regions",
                     xlabel="$x_1$", ylabel="$x_2$")
    fig.suptitle(title)
    return fig


def plane_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Regions per layer (mean over nets) and the share of the square in bounded regions; with a
    shallow twin, its regions (mean over nets) beside them."""
    per_poly = _deep(table).drop_duplicates(["net", "layer", "region"])
    out = per_poly.groupby("layer").agg(
        regions=("n_regions", "mean"),
        bounded_regions=("bounded", lambda b: b.sum() / per_poly["net"].nunique()),
        area=("area", lambda a: a.sum() / per_poly["net"].nunique())).reset_index()
    if "net_kind" in table and (table["net_kind"] == "shallow").any():
        twin = table[table["net_kind"] == "shallow"].drop_duplicates("net")
        out["shallow_twin_regions"] = twin["n_regions"].mean()
    return out


def f1_figure(table: pd.DataFrame, s: dict):
    last = int(table["layer"].max())
    return plane_figure(table, s, f"LR-F1: regions of a depth-{s['depth']}, width-{s['width']} ReLU net at "
                                  f"init (He), input $[-{s['half_side']}, {s['half_side']}]^2$", layers=[last])


def f2_figure(table: pd.DataFrame, s: dict):
    twin = " and a one-layer net with as many neurons" if s.get("shallow_twin") else ""
    return plane_figure(table, s, f"LR-F2: regions layer by layer, width {s['width']} (He init){twin}")


def f3_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.0, integer_x=True)
    data = table.assign(Weights=table["noise"].map(lambda x: "exact" if x == 0 else f"noise {x:g}"))
    sns.lineplot(data=data, x="n", y="pieces", hue="Weights", errorbar="sd", marker="o", ax=axes[0])
    axes[0].plot(table["n"].unique(), 2.0 ** table["n"].unique(), "k--", lw=0.8, label="$2^n$")
    axes[0].set(yscale="log", xlabel="tent maps composed $n$ (2 ReLUs each)", ylabel="linear pieces on [0, 1]",
                title="LR-F3: Telgarsky's sawtooth, exact vs perturbed")
    axes[0].legend()
    return fig


def f3_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby(["n", "noise"])["pieces"].agg(["mean", "std", "min", "max"]).reset_index()


def f4_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=6.0)
    for net, g in table.groupby("net", sort=False):
        axes[0].plot(g["x"], g["y"], lw=1.0, marker=".", ms=3, label=f"{net}: {g['pieces'].iloc[0]} pieces")
    axes[0].set(xlabel="input $x$", ylabel="output",
                title=f"LR-F4: 1-D input, depth {s['depth']}, width {s['width']}, He init (dots: breakpoints)")
    axes[0].legend(fontsize="small")
    return fig


def f4_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop_duplicates("net")[["net", "pieces", "regions", "neurons"]]


def f5_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=6.0)
    sns.lineplot(data=table, x="epoch", y="regions_per_neuron", hue="arch", errorbar="se", marker="o", ax=axes[0])
    axes[0].set(ylabel="regions on the line / #neurons",
                title=f"LR-F5: whole lines through 0 and a training example\n{table['line'].nunique()} lines "
                      f"x {table['run'].nunique()} runs ({table['dataset'].iloc[0]})")
    return fig


def f5_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby(["arch", "neurons", "epoch"]).agg(
        regions_per_neuron=("regions_per_neuron", "mean"), test_acc=("test_acc", "mean")).reset_index()


def f6_figure(table: pd.DataFrame, s: dict):
    per_net = table.groupby(["arch", "neurons", "run", "epoch"]).agg(
        distance=("distance", "mean"), test_acc=("test_acc", "first")).reset_index()
    per_net["neurons_x_distance"] = per_net["neurons"] * per_net["distance"]
    fig, axes = plotting.panels(3)
    sns.lineplot(data=per_net, x="epoch", y="distance", hue="arch", marker="o", seed=plotting.BOOTSTRAP_SEED,
                 ax=axes[0])
    c = per_net.loc[per_net["epoch"] == per_net["epoch"].min(), "neurons_x_distance"].mean()  # at init
    for n in sorted(per_net["neurons"].unique()):  # c / #neurons
        axes[0].axhline(c / n, color="grey", lw=0.6, ls="--")
    axes[0].set(yscale="log", ylabel="mean distance to boundary", title="(a) dashed: c / #neurons")
    sns.lineplot(data=per_net, x="epoch", y="neurons_x_distance", hue="arch", marker="o", seed=plotting.BOOTSTRAP_SEED,
                 ax=axes[1], legend=False)
    axes[1].set(ylabel="#neurons x mean distance", title="(b)")
    # (c) as the paper: #neurons x distance against test accuracy, each architecture's mean over
    # runs joined in epoch order (its path through training).
    path = per_net.groupby(["arch", "epoch"], as_index=False)[["test_acc", "neurons_x_distance"]].mean()
    sns.lineplot(data=path, x="test_acc", y="neurons_x_distance", hue="arch", sort=False, marker="o",
                 errorbar=None, ax=axes[2], legend=False)
    axes[2].set(xlabel="test accuracy", ylabel="#neurons x mean distance", title="(c) through training")
    fig.suptitle("LR-F6: distance to the nearest region boundary through training")
    return fig


def f6_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table.groupby(["arch", "neurons", "epoch"]).agg(distance=("distance", "mean"),
                                                         test_acc=("test_acc", "mean")).reset_index()
    return g.assign(neurons_x_distance=g["neurons"] * g["distance"])


def f7_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=6.0)
    data = table.assign(log10_distance=np.log10(table["distance"]), Epoch=table["epoch"].astype(str))
    sns.histplot(data=data, x="log10_distance", hue="Epoch", element="step", fill=False, stat="density",
                 common_norm=False, ax=axes[0], palette="viridis")
    axes[0].set(xlabel=r"$\log_{10}$ distance to the nearest boundary",
                title=f"LR-F7: {', '.join(table['arch'].unique())}, through training")
    return fig


def f7_summary(table: pd.DataFrame) -> pd.DataFrame:
    logs = table.assign(log10_distance=np.log10(table["distance"]))
    return logs.groupby("epoch")["log10_distance"].describe().reset_index()


def f8_figure(table: pd.DataFrame, s: dict):
    first = table[(table["arch"] == table["arch"].iloc[0]) & (table["run"] == table["run"].iloc[0])]
    epochs = sorted(first["epoch"].unique())
    fig, axes = plotting.panels(len(epochs), width=3.2, height=3.2)
    for ax, epoch in zip(axes, epochs):
        g = first[first["epoch"] == epoch]
        plotting.polygons(ax, g)
        for d in range(3):  # the three training examples the plane passes through
            u, v = g[f"digit{d}_u"].iloc[0], g[f"digit{d}_v"].iloc[0]
            ax.plot(u, v, "o", ms=9, mfc="white", mec="k", mew=1.2, zorder=3)
            ax.annotate(str(d), (u, v), ha="center", va="center", fontsize=7, fontweight="bold", zorder=4)
        ax.set(title=f"epoch {epoch}: {g['n_regions'].iloc[0]} regions", xticks=[], yticks=[])
    n = first["neurons"].iloc[0]
    fig.suptitle(f"LR-F8: regions in the plane through digits 0, 1, 2 ({first['arch'].iloc[0]}, "
                 f"{n} neurons, #neurons$^2$ = {n * n})")
    return fig


def f8_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table.drop_duplicates(["arch", "run", "epoch"])
    return g.groupby(["arch", "neurons", "epoch"])["n_regions"].mean().reset_index().assign(
        regions_over_neurons_squared=lambda d: d["n_regions"] / d["neurons"] ** 2)
