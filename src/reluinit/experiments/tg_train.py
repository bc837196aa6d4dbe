"""TG-F6a/b: trajectory growth through trained dense Gaussian ReLU nets (TG, Appendix C.2).

For every initial sigma_w, ``n_nets`` FFNNs (``depth`` ReLU layers of ``width`` units and a linear
readout) are initialised with weights N(0, sigma_w^2 / fan_in), biases N(0, bias^2), and trained on
MNIST (``training.train_runs``) until their test accuracy reaches ``target_acc`` (or the recipe's epochs
run out). Straight lines between pairs of test images (``n_lines`` of the same class, ``n_lines`` of
different classes) go through every trained net and through the same net before training (TG's
"random Gaussian networks of the same architecture", the black curves). Table: one row per
(run, line, trained).

Choices the paper leaves open (also in docs/papers/tg.md):
* Every net trains until its test accuracy is greater than ``target_acc`` ("trained to test
  accuracy of greater than 95%": the paper's nets all reached it; the run's ``stop_when``), the
  recipe's epochs being a cap far beyond what the nets need. A net still at chance after
  ``dead_after`` epochs (test accuracy at most the largest class share: it predicts one class,
  its ReLUs dead from the init) cannot reach it: it stops, is flagged ``dead`` and kept, outside
  the paper's population, which the claims read (``reached_target``). A run that misses the target
  otherwise (the cap) is kept and flagged too. Both are measured after their last epoch.
* Post-training sigma_w: the mean over the hidden layers (not the readout) of std(W_l) sqrt(fan_in),
  the same statistic as the initial sigma_w (std before the 1/sqrt(k) scaling). The random nets'
  rows carry the same statistic of the initial weights (column ``sigma_w_post`` too), which equals
  the nominal ``sigma_w_init`` up to sampling error; figures plot it on the same axis.
* Lines join test images in the input space the nets were trained in: pixels in [0, 1] standardised
  with the training set's mean and std (``DeviceData``), not TG-F3's norm-sqrt(n_0) scaling (a trained
  net is only meaningful on the inputs it was trained on; both give unit root-mean-square pixels on
  average). Pairs are drawn once from ``s["seed"]`` so every line goes through every net of every
  job; a within-class pair is a random test image and another of its class, a between-class pair
  a random image and one of another class.
* Growth factor: TG's ‖dz(d+1)‖/‖dz(d)‖ per piece of ``n_pieces`` pieces (``trajectories.measure``),
  averaged over pieces, then over the hidden-to-hidden layers 2..depth (``growth``: the quantity
  TG's theorems bound). Layer 1 compares the 784-d input with the first hidden layer of width 32
  (a change of dimension): its factor is ``growth_first``, and ``growth_all_layers`` averages
  every layer as the figure did before. Measured in float64.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..inits import initialize
from ..models import build
from ..nets import MLP, resolve_device
from ..training import Checkpoint, Recipe, RunSpec, history_table, load_data, train_runs
from ..trajectories import Line, measure
from . import part_seed, training_jobs

log = logging.getLogger(__name__)

DTYPE = torch.float64
LINES_STREAM = 0x7F6  # seeds the choice of image pairs, the same in every job
PAIRS = ("within", "between")


# --- nets ----------------------------------------------------------------------------------------


def sigma_w_of(net: MLP) -> float:
    """Mean over the hidden layers of std(W_l) sqrt(fan_in): the sigma_w the weights would have
    been drawn with (N(0, sigma_w^2 / fan_in))."""
    return float(np.mean([float(w.double().std()) * math.sqrt(w.shape[1]) for w in net.weights[: net.n_hidden]]))


def sigma_b_of(net: MLP) -> float:
    """Mean over the hidden layers of the root-mean-square bias."""
    return float(np.mean([float(b.double().pow(2).mean().sqrt()) for b in net.biases[: net.n_hidden]]))


def line_growth(net: MLP, x0: torch.Tensor, x1: torch.Tensor, n_pieces: int) -> dict:
    """Growth factor of the straight line x0 -> x1 through ``net``'s hidden layers (module doc)."""
    st = measure(net, Line(x0, x1), n_pieces, transitions=False)
    g = st.growth[1:]
    return {"growth": float(np.nanmean(g[1:])) if len(g) > 1 else np.nan, "growth_first": float(g[0]),
            "growth_all_layers": float(np.nanmean(g)), "length_in": float(st.length[0]),
            "length_out": float(st.length[-1])}


# --- lines ---------------------------------------------------------------------------------------


def choose_lines(y: np.ndarray, n_lines: int, seed: int) -> pd.DataFrame:
    """``n_lines`` within-class and ``n_lines`` between-class pairs of test indices (module doc)."""
    rng = np.random.default_rng([seed, LINES_STREAM])
    rows = []
    for pair in PAIRS:
        for _ in range(n_lines):
            i = int(rng.integers(len(y)))
            pool = np.flatnonzero(y == y[i]) if pair == "within" else np.flatnonzero(y != y[i])
            pool = pool[pool != i]
            j = int(rng.choice(pool))
            rows.append({"line": len(rows), "pair": pair, "point0": i, "point1": j, "class0": int(y[i]),
                         "class1": int(y[j])})
    return pd.DataFrame(rows)


# --- training ------------------------------------------------------------------------------------


def chance(y: torch.Tensor) -> float:
    """The accuracy of predicting the most frequent class of labels ``y`` (0.1135 on MNIST's test set)."""
    return float(torch.bincount(y.cpu()).max()) / len(y)


def to_target(model: nn.Module, train, test, recipe: Recipe, target: float, seed: int,
              checkpoint: Checkpoint | None = None, dead_after: int | None = None) -> RunSpec:
    """The run that trains until the test accuracy is greater than ``target``, the net is dead (still
    at chance after ``dead_after`` epochs), it diverges or ``recipe.epochs`` have run (its
    ``stop_when``); trained, its result is the Run, the first epoch above the target (None if
    never) and whether the net was found dead."""
    floor = chance(test.y)

    def dead(row) -> bool:
        return dead_after is not None and row["epoch"] >= dead_after and row["test_acc"] <= floor

    def outcome(run):
        reached = next((r["epoch"] for r in run.history if r["test_acc"] > target and r["epoch"] > 0), None)
        return run, reached, reached is None and dead(run.final)

    return RunSpec(model, train, test, recipe, seed, checkpoint,
                   stop_when=lambda row: row["test_acc"] > target or dead(row), then=outcome)


def train_to_target(model: nn.Module, train, test, recipe: Recipe, target: float, seed: int,
                    checkpoint: Checkpoint | None = None, dead_after: int | None = None):
    """``to_target``'s run trained alone: (Run, first epoch above the target or None, dead)."""
    spec = to_target(model, train, test, recipe, target, seed, checkpoint, dead_after)
    return spec.result(train_runs([spec])[0])


# --- runs and parts ------------------------------------------------------------------------------


def _runs(s: dict) -> dict[str, dict]:
    runs, i = {}, 0
    for sigma_w in s["sigma_ws"]:
        for net in range(s["n_nets"]):
            key = f"sw{sigma_w:g}-net{net}"
            runs[key] = {"key": key, "sigma_w": float(sigma_w), "net": net, "seed": part_seed(s["seed"], i)}
            i += 1
    return runs


def _load(s: dict, device):
    """The splits on the device, the lines (pairs of test images) every run measures, and the test
    images flattened in float64."""
    train, test, split = load_data(s, device)
    lines = choose_lines(test.y.cpu().numpy(), s["n_lines"], s["seed"])
    return (train, test, split), lines, test.x.flatten(1).to(DTYPE)


def train_and_measure(s: dict, run: dict, loaded, device, checkpoint: Checkpoint | None) -> RunSpec:
    """One run: initialise, keep the untrained net; trained, the lines through both (``measured``)."""
    (train, test, split), lines, x = loaded
    started = time.perf_counter()
    model = build("ffnn", split.n_classes, tuple(split.x.shape[1:]), "relu", width=s["width"], depth=s["depth"])
    initialize(model, "sigma", sigma_w=run["sigma_w"], sigma_b=s["bias"], seed=run["seed"])
    model.to(device)
    untrained = model.astype(DTYPE)  # the initial weights, before training (which may resume a checkpoint)
    spec = to_target(model, train, test, Recipe.from_settings(s["recipe"]), s["target_acc"], run["seed"], checkpoint,
                     s.get("dead_after"))
    outcome = spec.then
    spec.then = lambda result: measured(s, run, split, lines, x, untrained, model, *outcome(result), started)
    return spec


def measured(s: dict, run: dict, split, lines: pd.DataFrame, x: torch.Tensor, untrained: MLP, model: MLP, result,
             reached, dead, started: float) -> pd.DataFrame:
    """A trained run's rows: the lines through the untrained and the trained net, and its epochs."""
    nets = {False: untrained, True: model.astype(DTYPE)}
    rows = []
    for trained, net in nets.items():
        info = {"trained": trained, "sigma_w_post": sigma_w_of(net), "sigma_b_post": sigma_b_of(net),
                "test_acc": result.final["test_acc"] if trained else result.history[0]["test_acc"]}
        for line in lines.itertuples():
            rows.append({**info, "line": line.line,
                         **line_growth(net, x[line.point0], x[line.point1], s["n_pieces"])})
    summary = result.summary()
    table = pd.DataFrame(rows).merge(lines, on="line")
    log.info("run %s: %d epochs, test acc %.4f (target %s), sigma_w %.3g -> %.3g, growth %.3f -> %.3f, %.1f s",
             run["key"], summary["epochs_run"], summary["final_test_acc"],
             "reached" if reached else "missed: dead at chance" if dead else "missed",
             run["sigma_w"], table.loc[table["trained"], "sigma_w_post"].iloc[0],
             table.loc[~table["trained"], "growth"].mean(), table.loc[table["trained"], "growth"].mean(),
             time.perf_counter() - started)
    columns = dict(run=run["key"], net=run["net"], net_seed=run["seed"], sigma_w_init=run["sigma_w"],
                   bias=s["bias"], depth=s["depth"], width=s["width"], dataset=split.name,
                   reached_target=reached is not None, target_epoch=reached if reached is not None else -1, dead=dead,
                   n_pieces=s["n_pieces"], recipe=s["recipe"].get("name", ""))
    table = table.assign(kind="line", **columns, **summary, run_diverged=result.diverged).drop(columns="diverged")
    # the run's epochs (kind "epoch"): the engine's bookkeeping, next to what was measured
    return pd.concat([table, history_table(result, **columns).assign(kind="epoch")], ignore_index=True)


f6_parts, _f6_measure = training_jobs(_runs, train_and_measure, load=_load)


def f6_measure(s: dict, key: str, device: str = "auto", inputs=(), checkpoints: str | None = None,
               control=None, trained: bool = False, masks: str | None = None) -> pd.DataFrame:
    return _f6_measure(s, key, device, inputs, checkpoints, masks, control=control, trained=trained).assign(
        device=str(resolve_device(device)))


f6_measure.specs, f6_measure.train, f6_measure.during = _f6_measure.specs, _f6_measure.train, _f6_measure.during


# --- figure and summary --------------------------------------------------------------------------
