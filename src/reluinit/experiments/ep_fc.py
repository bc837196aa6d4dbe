"""EP: expressive power of deep nets, the experiments that train fully connected nets: one layer
trained, the others frozen (EP-F7 on MNIST, EP-F17 on CIFAR-10), and trajectory length through the
training of an MNIST net started at small sigma_w (EP-F18). Nets, circles, stages and the table's
columns are as in ``ep_conv`` (its docstring).

* EP-F7/F17 ("train from W^(1) on, so that the number of parameters trained remains fixed"): with
  ``depth`` hidden layers the linear layers are W^(0) (input -> hidden 1), W^(1) ..
  W^(depth-1) (hidden -> hidden) and the readout W^(depth). Each run trains one of W^(1) ..
  W^(depth-1) (weights and bias, everything else frozen at init: ``requires_grad=False``), all
  of the same size; ``include_readout: true`` adds a run training the readout alone. Train
  accuracy is re-measured in eval mode after training (``final_train_acc``).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from torch import nn

from ..lazy import matplotlib, plotting, sns  # figure code: imported when a figure is drawn
from ..models import fc_net
from ..stages import circle, length_rows, sigma_w_rows
from ..training import Checkpoint, Recipe, evaluate, fit, run_rows
from . import product_runs, training_jobs
from .ep_conv import _length_summary, _lengths

log = logging.getLogger(__name__)


# --- EP-F7 / EP-F17: training one layer of a hard-tanh FC net ------------------------------------------


def trained_layers(s: dict) -> list[int]:
    """Indices of the linear layers trained one at a time: W^(1) .. W^(depth-1), and the readout
    W^(depth) with ``include_readout``."""
    return list(range(1, s["depth"] + (1 if s.get("include_readout", False) else 0)))


def freeze_all_but(model: nn.Module, index: int) -> nn.Linear:
    """Freeze every parameter but those of the ``index``-th linear layer (0-based); return it."""
    lins = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in lins[index].parameters():
        p.requires_grad_(True)
    return lins[index]


def one_layer_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> pd.DataFrame:
    train, test, split = data
    model = fc_net(split.n_classes, tuple(split.x.shape[1:]), s["width"], s["depth"], s.get("activation", "hardtanh"),
                   s["sigma_w2"], s.get("sigma_b", 0.0), run["seed"]).to(device)
    freeze_all_but(model, run["layer"])
    recipe = Recipe.from_settings(s["recipe"])
    result = fit(model, train, test, recipe, seed=run["seed"], checkpoint=checkpoint)
    _, train_acc = evaluate(model, train, recipe.eval_batch_size)
    log.info("run %s: W^(%d) trained, train accuracy %.4f, test %.4f", run["key"], run["layer"], train_acc,
             result.final["test_acc"])
    return run_rows(result, run=run["key"], trained_layer=run["layer"], rep=run["rep"], net_seed=run["seed"],
                      final_train_acc=train_acc, dataset=split.name, width=s["width"], depth=s["depth"],
                      activation=s.get("activation", "hardtanh"), sigma_w2=s["sigma_w2"],
                      readout=run["layer"] == s["depth"], recipe=s["recipe"].get("name", ""))


one_parts, one_measure = training_jobs(lambda s: product_runs(s, {"layer": trained_layers(s)}), one_layer_run)


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


# --- EP-F18: lengths through an MNIST FC net during training -------------------------------------------


def fc_length_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> pd.DataFrame:
    train, test, split = data
    in_shape = tuple(split.x.shape[1:])
    model = fc_net(split.n_classes, in_shape, s["width"], s["depth"], s.get("activation", "relu"), s["sigma_w2"],
                   s.get("sigma_b", 0.0), run["seed"]).to(device)
    path = circle(test, s["points"])
    result = fit(model, train, test, Recipe.from_settings(s["recipe"]), seed=run["seed"], checkpoint=checkpoint,
                 on_epoch=lambda epoch, m: length_rows(m, path, s["n_pieces"], in_shape) + sigma_w_rows(m))
    return run_rows(result, run=run["key"], rep=run["rep"], net_seed=run["seed"], dataset=split.name,
                      width=s["width"], depth=s["depth"], activation=s.get("activation", "relu"),
                      sigma_w2=s["sigma_w2"], n_pieces=s["n_pieces"], variant="fc", recipe=s["recipe"].get("name", ""))


f18_parts, f18_measure = training_jobs(lambda s: product_runs(s, {}), fc_length_run)


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
