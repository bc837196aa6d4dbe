"""RP's MNIST experiments as the paper and the authors' code set them: one normalisation (the
authors' (0.5, 0.5)) for pruning and training, three seeds a cell, RP-F5's tanh panels RP-F3's own
runs, and RP-F3's deciding cells under the readings the paper leaves open, each trained under its
own settings."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest
import torch
from tests.conftest import ROOT

from reluinit import datasets, training
from reluinit.experiments import rp, rp_train
from reluinit.figures import rp_train as rp_figures
from reluinit.pipeline import catalogue, shared
from reluinit.pipeline.config import read_yaml, settings


@pytest.fixture(scope="module")
def config():
    return read_yaml(ROOT / "config.yaml")


def test_mnist_is_normalised_by_the_authors_constants_in_pruning_and_training():
    """MNIST (and its quick and smoke stand-ins) by (0.5, 0.5), as the authors' data code does, in
    a training job's splits and in RP-F1/Th1's pruning batch; CIFAR's quick stand-in, of another
    shape, by its own statistics."""
    for scale in ("paper", "quick", "smoke"):
        assert datasets.fixed_stats("mnist", scale) == ((0.5,), (0.5,))
    assert datasets.fixed_stats("cifar10", "quick") is None
    assert datasets.fixed_stats("tiny_imagenet", "paper") is None
    s = {"dataset": "mnist", "data_dir": "unused", "scale": "quick", "batch_per_class": 2}
    train, _, split = training.load_data(s, "cpu", fixed_stats=True)
    assert torch.equal(train.x, (split.x - 0.5) / 0.5)
    x, y, _ = rp._batch(s, 0, "cpu")
    raw, same_y = datasets.balanced_batch(split, 2, 0)
    assert torch.equal(y, same_y) and torch.allclose(x, 2 * raw - 1)
    assert float(x.min()) == -1.0  # a black pixel


def test_rp_f3_and_f5_hold_three_seeds_a_cell_and_f5_reads_f3s_tanh_runs(config):
    """The paper's protocol (972 runs): RP-F3's tanh grid and RP-F5's ELU grid at three seeds a
    (set-up, depth, sparsity) cell, each with its own seed; RP-F5's tanh runs are RP-F3's."""
    def runs(exp):
        parts = catalogue.parts(exp, settings(config, exp, "paper"))
        return {k: r for p in parts.values() for k, r in p["runs"].items()}

    f3, f5 = runs("RP-F3"), runs("RP-F5")
    grid = {k: r for k, r in f3.items() if (r["momentum"], r["ordered_chi"]) == (0.0, 0.8)}
    assert len(grid) == 486 and len(f5) == 486 and {r["activation"] for r in f5.values()} == {"elu"}
    cells = pd.DataFrame(list(grid.values()) + list(f5.values())).groupby(
        ["activation", "setup", "depth", "sparsity"])["seed"].nunique()
    assert len(cells) == 2 * 162 and (cells == 3).all()
    twins = shared.twins(config, "RP-F5", "paper")
    assert len(twins) == 486 and {k for _, k in twins.values()} == set(grid)


def test_each_reading_trains_under_its_own_settings_and_the_grids_runs_under_the_grids(config):
    """A run at momentum 0.9 trains with the recipe's momentum 0.9, one at ordered chi 0.9 at that
    point (sigma_b kept); a run of the grid's reading trains under the settings as they are, so its
    RP-F5 twin trains alike."""
    s = settings(config, "RP-F3", "paper")
    runs = {k: r for p in catalogue.parts("RP-F3", s).values() for k, r in p["runs"].items()}
    by_reading = pd.Series([(r["momentum"], r["ordered_chi"]) for r in runs.values()]).value_counts()
    assert by_reading.to_dict() == {(0.0, 0.8): 486, (0.9, 0.8): 18 + 108, (0.0, 0.9): 162}
    for run in runs.values():
        rs = rp_train._run_settings(s, run)
        assert rs["recipe"]["momentum"] == run["momentum"]
        assert rs["ordered"] == ({**s["ordered"], "chi": run["ordered_chi"]})
        if (run["momentum"], run["ordered_chi"]) == (0.0, 0.8):
            assert rs == {**s, "dataset": run["dataset"]}
    deciding = [r for r in runs.values() if r["momentum"] == 0.9 and r["setup"] == "eoc_rescaled"]
    assert {r["sparsity"] for r in deciding} == {0.9} and len({r["depth"] for r in deciding}) == 6


def test_cells_keep_the_full_products_keys_and_seeds_and_refuse_an_unknown_field():
    s = {"seed": 5, "recipe": {"momentum": 0.0}, "ordered": {"chi": 0.8, "sigma_b": 1.0}, "reps": 2,
         "momenta": [0.0, 0.9], "dataset": "mnist", "model": "ffnn", "width": 8}
    axes = {"momentum": s["momenta"], "setup": ["eoc", "ordered"], "depth": [2, 3]}
    full = rp_train._runs(s, axes)
    kept = rp_train._runs({**s, "cells": [{"momentum": [0.9], "setup": ["ordered"]}, {"depth": [2], "momentum": [0.0]}]},
                          axes)
    assert kept and len(kept) == 4 + 4 and all(full[k] == r for k, r in kept.items())
    with pytest.raises(ValueError, match="'sparsity'"):
        rp_train._runs({**s, "cells": [{"sparsity": [0.5]}]}, axes)


def _final_rows(accs: dict) -> pd.DataFrame:
    rows = []
    for (depth, sparsity), values in accs.items():
        for rep, acc in enumerate(values):
            rows.append({"run": f"{depth}-{sparsity}-{rep}", "epoch": 1, "depth": depth, "sparsity": sparsity,
                         "final_test_acc": acc, "activation": "tanh", "setup": "ordered", "momentum": 0.0,
                         "ordered_chi": 0.8, "dataset": "mnist", "experiment": "RP-F3"})
    return pd.DataFrame(rows)


def test_the_heatmap_shows_the_mean_over_seeds_and_outlines_cells_whose_seeds_disagree():
    """One seed trains and another is at chance: outlined; all train, or all at chance: not."""
    assert rp_figures.seeds_disagree([0.9, 0.11, 0.92]) and not rp_figures.seeds_disagree([0.9, 0.6, 0.95])
    assert not rp_figures.seeds_disagree([0.11, 0.1135]) and not rp_figures.seeds_disagree([0.9])
    table = _final_rows({(40, 0.1): [0.9, 0.11, 0.92], (40, 0.5): [0.1, 0.1, 0.1], (60, 0.1): [0.8, 0.8, 0.8]})
    s = {"activations": ["tanh"], "setups": ["ordered"], "width": 100, "ordered": {"chi": 0.8, "sigma_b": 1.0},
         "recipe": {"momentum": 0.0, "iterations": 10000}}
    fig = rp_figures.heat_figure(table, s)
    ax = fig.axes[0]
    outlined = [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle) and p.get_edgecolor()[0] == 1.0]
    assert [(p.get_x(), p.get_y()) for p in outlined] == [(0.0, 1.0)]  # sparsity 0.1 (column 0), depth 40 (row 1)
    assert sorted(t.get_text() for t in ax.texts) == ["10", "64", "80"]
