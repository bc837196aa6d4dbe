"""EP's trained fully connected MNIST nets: figures and summaries (``reluinit.experiments.ep_fc`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns

from ..report import plotting
from .ep_conv import _length_summary, _lengths


def one_figure(table: pd.DataFrame, s: dict, fig_id: str):
    """EP's Figures 7 and 17: train and test accuracy through training, one curve per trained layer
    (train accuracy as recorded over each epoch's batches)."""
    epochs = table[(table["kind"] == "epoch") & (table["epoch"] > 0)]
    epochs = epochs.assign(layer=epochs["trained_layer"].map(lambda l: f"$W^{{({l:g})}}$"))
    order = [f"$W^{{({l:g})}}$" for l in sorted(epochs["trained_layer"].unique())]
    fig, axes = plotting.panels(2, width=4.4, height=3.6)
    for ax, col, split in zip(axes, ("train_acc", "test_acc"), ("train", "test")):
        sns.lineplot(data=epochs, x="epoch", y=col, hue="layer", hue_order=order, palette="viridis", marker="o",
                     ms=3, errorbar="se", ax=ax, legend=split == "test")
        ax.set(xlabel="epoch", ylabel=f"{split} accuracy", title=f"{split}")
    axes[1].legend(title="trained layer", fontsize=7)
    fig.suptitle(f"{fig_id}: one layer trained (others frozen at init), {epochs['dataset'].iloc[0]}, width "
                 f"{s['width']}, depth {s['depth']}, {s.get('activation', 'hardtanh')}, "
                 f"$\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def f7_figure(table: pd.DataFrame, s: dict):
    return one_figure(table, s, "EP-F7")


def f17_figure(table: pd.DataFrame, s: dict):
    return one_figure(table, s, "EP-F17")


def one_summary(table: pd.DataFrame) -> pd.DataFrame:
    final = table[table["kind"] == "epoch"].sort_values("epoch").groupby("run", as_index=False).last()
    return final.groupby("trained_layer", as_index=False).agg(
        runs=("run", "count"), train_acc=("final_train_acc", "mean"), test_acc=("final_test_acc", "mean"),
        best_test_acc=("best_test_acc", "mean"))


def f18_figure(table: pd.DataFrame, s: dict):
    g = _lengths(table, "fc")
    fig, axes = plotting.panels(1, width=5.4, height=3.8, integer_x=True)
    epochs = sorted(g["epoch"].unique())
    colours = matplotlib.colormaps["rainbow_r"](np.linspace(0, 1, len(epochs)))  # red (start) .. purple (end)
    for colour, epoch in zip(colours, epochs):
        e = g[g["epoch"] == epoch].sort_values("layer")
        axes[0].plot(e["layer"], e["length"], "-o", color=colour, ms=2.5, lw=1.2,
                     label=f"epoch {epoch:g}" if epoch in (epochs[0], epochs[-1]) else None)
    axes[0].set(yscale="log", xlabel="layer", ylabel="trajectory length")
    axes[0].legend(fontsize=7)
    axes[0].set_title(f"EP-F18: circle between two {table['dataset'].iloc[0]} test images through a "
                      f"{s.get('activation', 'relu')} FC net (width {s['width']}, $\\sigma_w^2$ = {s['sigma_w2']:g}) "
                      f"during training\n(red = start, purple = end)", fontsize=8)
    return fig


def f18_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _length_summary(table, ["fc"])
