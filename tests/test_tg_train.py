"""TG-F6: trained nets as MLPs, their growth factor and sigma_w, training to a target, the table."""

import numpy as np
import pandas as pd
import pytest
import torch

from reluinit import datasets
from reluinit.experiments import tg_train
from reluinit.figures.tg_train import lines_of
from reluinit.inits import initialize
from reluinit.models import build
from reluinit.nets import MLP, Activation
from reluinit.pipeline.catalogue import get
from reluinit.training import DeviceData, Recipe, fit


def _settings(**over):
    return {"seed": 7, "scale": "quick", "data_dir": "/tmp/nodata", "dataset": "mnist", "sigma_ws": [1.0, 2.0],
            "n_nets": 2, "depth": 4, "width": 16, "bias": 0.01, "target_acc": 0.95, "n_lines": 3,
            "n_pieces": 500, "runs_per_job": 2,
            "recipe": {"optimizer": "adam", "lr": 0.003, "batch_size": 32, "epochs": 2, "schedule": "constant",
                       "precision": "fp32", "name": "tg-mnist"}, **over}


def _digits(n=300):
    split = datasets.load("mnist", "/tmp/nodata", train=True, scale="quick")
    return DeviceData(split.x[:n], split.y[:n], "cpu")


def _model(sigma_w=2.0, width=16, depth=4, seed=0):
    model = build("ffnn", 10, (1, 8, 8), "relu", width=width, depth=depth)
    initialize(model, "sigma", sigma_w=sigma_w, sigma_b=0.1, seed=seed)
    return model


def test_the_trained_model_is_the_measured_net():
    """One description: the FFNN that trains is a ``nets.MLP``; its float64 copy is what the lines
    are measured on, with the same outputs, and a copy (the model is untouched)."""
    model = _model()
    x = torch.randn(9, 1, 8, 8, dtype=torch.float64)
    net = model.astype(torch.float64)
    assert isinstance(model, MLP) and net.readout and net.n_hidden == 4 and net.widths == [64, 16, 16, 16, 16, 10]
    assert torch.allclose(net.preactivations(x.flatten(1))[1], model.double()(x), atol=1e-12)
    with torch.no_grad():
        net.weights[0][0, 0] += 1.0
    assert torch.allclose(model.astype(torch.float64)(x), model(x), atol=1e-12)


def test_growth_factor_equals_brute_force_on_a_trained_net():
    data = _digits()
    model = _model(seed=3)
    run, _, _ = tg_train.train_to_target(model, data, data, Recipe(optimizer="adam", lr=0.003, batch_size=64,
                                                                   epochs=1, schedule="constant"), 2.0, seed=0)
    x0, x1 = data.x[0].flatten().double(), data.x[5].flatten().double()
    got = tg_train.line_growth(model.astype(torch.float64), x0, x1, 2000)
    # brute force: the float64 torch model's hidden activations at 2001 points of the line
    m = model.double()
    z = x0 + torch.linspace(0, 1, 2001, dtype=torch.float64)[:, None] * (x1 - x0)
    norms, ratios = [torch.linalg.vector_norm(z[1:] - z[:-1], dim=1)], []
    h = z
    for layer in m.sequence()[:-1]:  # every hidden layer and its activation, not the readout
        with torch.no_grad():
            h = layer(h)
        if isinstance(layer, Activation):
            norms.append(torch.linalg.vector_norm(h[1:] - h[:-1], dim=1))
            ok = norms[-2] > 0
            ratios.append(float((norms[-1][ok] / norms[-2][ok]).mean()))
    assert len(ratios) == 4
    # growth: hidden-to-hidden layers only (the first layer changes the dimension), kept apart
    assert got["growth"] == pytest.approx(np.mean(ratios[1:]), rel=1e-9)
    assert got["growth_first"] == pytest.approx(ratios[0], rel=1e-9)
    assert got["growth_all_layers"] == pytest.approx(np.mean(ratios), rel=1e-9)
    assert got["length_out"] == pytest.approx(float(norms[-1].sum()), rel=1e-9)


def test_sigma_w_of_an_untrained_net_is_the_initial_one():
    for sigma_w in (0.5, 2.0, 4.0):
        net = _model(sigma_w, width=64, depth=6, seed=int(10 * sigma_w))
        assert tg_train.sigma_w_of(net) == pytest.approx(sigma_w, rel=0.03)
        assert tg_train.sigma_b_of(net) == pytest.approx(0.1, rel=0.3)


def test_lines_are_pairs_of_the_right_kind_and_the_same_in_every_job():
    y = np.repeat(np.arange(10), 20)
    lines = tg_train.choose_lines(y, 5, seed=1)
    assert list(lines["pair"]) == ["within"] * 5 + ["between"] * 5
    within = lines[lines["pair"] == "within"]
    between = lines[lines["pair"] == "between"]
    assert (within["class0"] == within["class1"]).all() and (between["class0"] != between["class1"]).all()
    assert (lines["point0"] != lines["point1"]).all()
    assert lines.equals(tg_train.choose_lines(y, 5, seed=1))


def test_training_stops_at_the_target_and_resumes(tmp_path):
    data = _digits()
    recipe = Recipe(optimizer="adam", lr=0.003, batch_size=64, epochs=3, schedule="step")
    run, reached, dead = tg_train.train_to_target(_model(), data, data, recipe, 0.0, seed=0, checkpoint=None)
    assert run.final["epoch"] == 1 and reached == 1 and not dead
    run, reached, dead = tg_train.train_to_target(_model(), data, data, recipe, 1.01, seed=0, checkpoint=None)
    assert [r["epoch"] for r in run.history] == [0, 1, 2, 3] and reached is None and not dead
    # the step schedule is that of one 3-epoch run: x0.1 after epoch 1 (3 // 2) and 2 (3 * 3 // 4)
    assert [r["lr"] for r in run.history[1:]] == pytest.approx([0.003, 0.0003, 0.00003])
    # epoch by epoch is one uninterrupted run
    a, b = _model(), _model()
    tg_train.train_to_target(a, data, data, recipe, 1.01, seed=0)
    fit(b, data, data, recipe, seed=0)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    ckpt = str(tmp_path / "run.pt")
    a = _model()
    tg_train.train_to_target(a, data, data, recipe, 1.01, seed=0, checkpoint=ckpt)
    b = _model()  # a fresh model finds the finished checkpoint and trains no more
    run_b, _, _ = tg_train.train_to_target(b, data, data, recipe, 1.01, seed=0, checkpoint=ckpt)
    assert run_b.final["epoch"] == 3
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_the_target_is_strictly_above_and_a_dead_net_stops_at_chance_flagged():
    """TG trains "to test accuracy of greater than 95%": an accuracy equal to the target is not
    above it. A net whose ReLUs are all off from the init predicts one class (accuracy = the largest
    class share) and can never get there: it stops after ``dead_after`` epochs, flagged dead."""
    data = _digits()
    recipe = Recipe(optimizer="adam", lr=0.003, batch_size=64, epochs=6, schedule="constant")
    model = _model()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.out_features != 10:
                m.bias.fill_(-100.0)  # every hidden unit off for every input
    run, reached, dead = tg_train.train_to_target(model, data, data, recipe, 0.95, seed=0, dead_after=2)
    assert dead and reached is None and run.final["epoch"] == 2
    assert run.final["test_acc"] <= tg_train.chance(data.y) == pytest.approx(max(np.bincount(data.y.numpy())) / len(data.y))
    run, reached, dead = tg_train.train_to_target(_model(), data, data, recipe, 0.95, seed=0, dead_after=2)
    assert not dead and run.final["epoch"] > 2  # a net that learns trains on
    first = run.history[1]["test_acc"]
    _, reached, _ = tg_train.train_to_target(_model(), data, data, recipe, first, seed=0)
    assert reached != 1  # equal to the target after epoch 1 is not above it


def test_quick_experiment_end_to_end(tmp_path):
    exp = get("TG-F6")
    s = _settings()
    parts = exp.parts(s)
    assert exp.trains and list(parts) == ["group0", "group1"]
    by_part = {k: exp.measure(s, k, device="cpu", checkpoints=str(tmp_path)) for k in parts}
    full = pd.concat(by_part.values(), ignore_index=True)
    epochs = full[full["kind"] == "epoch"]  # the engine's per-epoch rows, epoch 0 included
    assert epochs.groupby("run")["epoch"].min().eq(0).all() and epochs["test_acc"].notna().all()
    table = lines_of(full)
    assert len(table) == 2 * 2 * 6 * 2  # sigma_ws x nets x lines x trained
    assert table["dataset"].iloc[0] == "digits"
    assert set(table["pair"]) == {"within", "between"}
    # every line goes through every net, trained and not
    assert (table.groupby(["line"])[["point0", "point1"]].nunique() == 1).all().all()
    assert (table.groupby("line")["run"].nunique() == 4).all()
    random = table[~table["trained"]]
    trained = table[table["trained"]]
    assert np.allclose(random["sigma_w_post"], random["sigma_w_init"], rtol=0.15)
    assert (trained["epochs_run"] <= 2).all() and (trained["epochs_run"] >= 1).all()
    assert (trained["test_acc"] > random["test_acc"].mean()).all()
    assert np.isfinite(table["growth"]).all() and (table["growth"] > 0).all()
    # random ReLU nets: growth grows with sigma_w
    g = random.groupby("sigma_w_init")["growth"].mean()
    assert g[2.0] > g[1.0]
    summary = exp.summary(full)
    assert len(summary) == 4 and {"growth_trained", "growth_random", "reached_target"} <= set(summary.columns)
    fig = exp.figure(full, s)
    assert len(fig.axes) == 2
    # re-running a part resumes its finished checkpoints: the same rows, no training
    again = exp.measure(s, "group0", device="cpu", checkpoints=str(tmp_path))
    pd.testing.assert_frame_equal(again, by_part["group0"])
