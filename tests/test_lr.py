"""LR-F5..F8 wiring on real checkpoint files: what each measures and what each figure draws."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from reluinit import datasets
from reluinit.experiments import lr, lr_train
from reluinit.figures import lr as lr_figures
from reluinit.nets import sample_mlp
from reluinit.regions import data_plane, split_lines

# One worker runs this file's tests (pytest-xdist), so its module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_lr")

F64 = torch.float64
ARCH = "d2w16"


@pytest.fixture(scope="module")
def digits():
    return datasets.load("mnist", "unused", train=True, scale="quick")


def _settings(tmp_path, **extra) -> dict:
    train = {"architectures": [ARCH], "runs": 2, "dataset": "mnist", "data_dir": str(tmp_path), "scale": "quick"}
    return {"training": "LR-MNIST", "train": train, **extra}


def _checkpoints(tmp_path, digits, run: int) -> str:
    """Run ``run`` of ``ARCH``: at init (He, biases N(0, 1e-6)) and after a few full-batch Adam
    steps on the digits, which move kinks of lines through 0 far beyond the example."""
    seed = 100 + run
    net = sample_mlp([64, 16, 16, 10], "he", readout=True, bias_std=1e-3, seed=seed, dtype=F64)
    info = {"test_acc": 0.1, "seed": seed, "dataset": "digits", "arch": ARCH}
    states = [lr_train.snapshot(net, epoch=0, **info)]
    params = [*net.weights, *net.biases]
    for p in params:
        p.requires_grad_(True)
    x, y = digits.x.flatten(1).double(), digits.y
    opt = torch.optim.Adam(params, lr=2e-2)
    for _ in range(25):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    for p in params:
        p.requires_grad_(False)
    states.append(lr_train.snapshot(net, epoch=5, **dict(info, test_acc=0.9)))
    path = tmp_path / f"run{run}.pt"
    lr_train.save(states, path)
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, digits):
    tmp = tmp_path_factory.mktemp("lr")
    return tmp, [_checkpoints(tmp, digits, r) for r in range(2)]


def test_f5_counts_the_whole_line_through_examples_drawn_per_run(runs, digits):
    tmp, paths = runs
    s = _settings(tmp, seed=15, n_lines=12)
    tables = [lr.f5_measure(s, f"{ARCH}-run{r}", "cpu", [paths[r]]) for r in range(2)]
    for r, table in enumerate(tables):
        # Every checkpoint of a run uses the run's own examples, recorded with their seed.
        assert table.groupby("epoch")["example"].apply(list).map(tuple).nunique() == 1
        assert table["line_seed"].nunique() == 1 and table["net_seed"].nunique() == 1
        for (epoch, state) in zip(sorted(table["epoch"].unique()), lr_train.load(paths[r])):
            rows = table[table["epoch"] == epoch].sort_values("line")
            x = digits.x[torch.tensor(rows["example"].to_numpy())].flatten(1).double()
            net = lr_train.restore(state)
            whole = split_lines(net, torch.zeros_like(x), x, -math.inf, math.inf)
            reach = 2 * whole.t0[torch.isfinite(whole.t0)].abs().max().item() + 1
            long = split_lines(net, -reach * x, reach * x)  # holds every kink of these lines
            assert (rows["regions"].to_numpy() == long.regions().numpy()).all()
            segment = split_lines(net, -x, x).regions().numpy()  # the old reading, -x to x
            assert (rows["regions"].to_numpy() >= segment).all()
            if epoch > 0:
                assert (rows["regions"].to_numpy() > segment).any()
    # Runs draw different examples; the draw is reproducible.
    assert set(tables[0]["example"]) != set(tables[1]["example"])
    again = lr.f5_measure(s, f"{ARCH}-run0", "cpu", [paths[0]])
    pd.testing.assert_frame_equal(again, tables[0])


def test_f6_panel_c_is_neurons_times_distance_against_accuracy(runs):
    tmp, paths = runs
    s = _settings(tmp, seed=16, n_points=50)
    table = pd.concat([lr.f6_measure(s, f"{ARCH}-run{r}", "cpu", [paths[r]]) for r in range(2)])
    ax = lr_figures.f6_figure(table, s).axes[2]
    expected = table.groupby("epoch").agg(acc=("test_acc", "mean"), d=("distance", "mean"))
    line = ax.get_lines()[0]
    assert np.allclose(line.get_xdata(), expected["acc"])
    assert np.allclose(line.get_ydata(), 32 * expected["d"])  # 32 neurons x mean distance
    assert "#neurons" in ax.get_ylabel() and "accuracy" in ax.get_xlabel()


def test_f8_marks_the_three_training_points(runs, digits):
    tmp, paths = runs
    s = _settings(tmp, half_side_factor=1.25)
    table = lr.f8_measure(s, f"{ARCH}-run0", "cpu", [paths[0]])
    *_, corners = data_plane(digits.x.flatten(1), digits.y, scale=1.25)
    for d in range(3):
        assert np.allclose(table[f"digit{d}_u"], corners[d, 0]) and np.allclose(table[f"digit{d}_v"], corners[d, 1])
    fig = lr_figures.f8_figure(table, s)
    for ax in fig.axes:
        marks = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.get_lines()]
        assert np.allclose(marks, corners)
        # Inside the square drawn (half-side 1.25 x the circumradius).
        assert all(ax.get_xlim()[0] < u < ax.get_xlim()[1] and ax.get_ylim()[0] < v < ax.get_ylim()[1]
                   for u, v in marks)
