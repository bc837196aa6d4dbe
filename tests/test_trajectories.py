"""The trajectory engine against exact interval splitting, brute force and TG's theory."""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from reluinit.regions import split_lines
from reluinit.sampling import random_net
from reluinit.theory import ep_hardtanh_growth_bounds, tg_growth_lower_bound
from reluinit.trajectories import Arc, Line, Semicircles, measure, project_2d

F64 = torch.float64


def _points(dim, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, dim, generator=g, dtype=F64)


@pytest.mark.parametrize("activation", ["relu", "hardtanh"])
def test_exact_line_length_is_the_limit_of_fine_discretisations(activation):
    net = random_net([10, 8, 8, 8], "gaussian", 2.0 if activation == "relu" else 3.0, bias=0.1,
                     activation=activation, seed=1)
    x0, x1 = _points(10, 0)
    exact = split_lines(net, x0[None], x1[None]).length_post[:, 0].numpy()
    errors = []
    for n in (10**4, 10**5, 10**6, 10**7):
        chords = measure(net, Line(x0, x1), n, chunk=2**16, transitions=False).length[1:]
        # A chord is never longer than the arc it spans: the discretisation approaches from below.
        assert np.all(chords <= exact * (1 + 1e-12))
        errors.append(np.max(1 - chords / exact))
    assert errors[-1] < 1e-6
    assert errors[-1] < errors[0] / 100  # error ~ (breakpoints per piece), i.e. ~ 1/n


@pytest.mark.parametrize("activation", ["relu", "hardtanh"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_transitions_and_patterns_from_breakpoints_equal_dense_sampling(activation, seed):
    net = random_net([5, 6, 6, 6], "gaussian", 2.5, bias=0.2, activation=activation, seed=10 + seed)
    x0, x1 = _points(5, seed)
    split = split_lines(net, x0[None], x1[None])
    gap = torch.diff(torch.cat([split.t0, split.t1[-1:]])).min().item()
    n = int(4 / gap) + 2  # several samples between any two breakpoints
    st = measure(net, Line(x0, x1), n, chunk=997, patterns=True)
    assert st.transitions.sum() == split.transitions()[0].item()
    assert st.patterns[-1] == split.regions()[0].item()


def test_chunking_does_not_change_the_sums():
    net = random_net([6, 12, 12, 12], "gaussian", 2.0, alpha=0.7, bias=0.05, seed=3)
    path = Arc(*_points(6, 4))
    a = measure(net, path, 5000, chunk=7, patterns=True)
    b = measure(net, path, 5000, chunk=4999, patterns=True)
    np.testing.assert_allclose(a.length, b.length, rtol=1e-12)
    np.testing.assert_allclose(a.growth[1:], b.growth[1:], rtol=1e-12)
    assert (a.transitions == b.transitions).all() and (a.patterns == b.patterns).all()


def test_curved_path_meets_its_endpoints_and_converges_to_its_length():
    x0, x1 = _points(20, 5)
    path = Semicircles(x0, x1, n_arcs=10, seed=0)
    ends = path(torch.tensor([0.0, 1.0], dtype=F64))
    torch.testing.assert_close(ends, torch.stack([x0, x1]))
    exact = math.pi / 2 * (x1 - x0).norm().item()  # n half circles of diameter |x1 - x0| / n
    lengths = [measure(random_net([20, 4], seed=0), path, n, transitions=False).length[0] for n in (100, 1000, 10000)]
    errors = [abs(length / exact - 1) for length in lengths]
    assert errors[2] < 1e-4 and errors[2] < errors[1] < errors[0]


def test_dense_gaussian_relu_growth_factor_at_sigma_2():
    growth = []
    for i in range(4):
        x0, x1 = _points(256, 100 + i)
        net = random_net([256] * 7, "gaussian", 2.0, bias=0.01, seed=200 + i)
        growth.append(np.nanmean(measure(net, Line(x0, x1), 2000, transitions=False).growth[1:]))
    g = float(np.mean(growth))
    assert 1.3 <= g <= 1.65
    assert g > tg_growth_lower_bound("gaussian", 2.0, 1.0)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_three_weight_families_grow_alike_at_equal_variance_and_density(alpha):
    """TG's universality: sigma_w = 2 is exactly the discrete set {-3..3} / sqrt(k)."""
    mean = {}
    for dist in ("gaussian", "uniform", "discrete"):
        growth = []
        for i in range(6):
            x0, x1 = _points(400, 1000 + i)
            net = random_net([400] * 6, dist, 2.0, alpha=alpha, bias=0.01, seed=10 + i)
            growth.append(np.nanmean(measure(net, Line(x0, x1), 1000, transitions=False).growth[1:]))
        mean[dist] = np.mean(growth)
    spread = (max(mean.values()) - min(mean.values())) / np.mean(list(mean.values()))
    assert spread < 0.03, mean
    for dist, g in mean.items():
        assert g > tg_growth_lower_bound(dist, 2.0, alpha)


def test_projection_of_a_circle_is_a_closed_curve_at_the_input():
    net = random_net([30, 20, 20], "gaussian", 2.0, seed=0)
    x0, x1 = _points(30, 6)
    uv = project_2d(net, Arc(x0, x1), 200, [0, 2])
    assert uv[0].shape == (200, 2) and uv[2].shape == (200, 2)
    # The arc lies in the plane of x0 and x1, which its top two principal directions span.
    chord = np.linalg.norm(np.diff(uv[0], axis=0), axis=1).sum()
    full = measure(net, Arc(x0, x1), 199, transitions=False).length[0]
    assert chord == pytest.approx(full, rel=1e-9)


def test_ep_theorem_3_bounds_bracket_measured_hard_tanh_growth():
    k, s2 = 64, 8.0
    lower, upper = ep_hardtanh_growth_bounds(k, math.sqrt(s2))
    ratios = []
    for i in range(3):
        x0, x1 = _points(k, 300 + i) * math.sqrt(k) / _points(k, 300 + i).norm(dim=1, keepdim=True)
        net = random_net([k] * 7, "gaussian", math.sqrt(s2), activation="hardtanh", seed=400 + i)
        length = measure(net, Arc(x0, x1), 5000, transitions=False).length
        ratios.append(np.mean(length[2:] / length[1:-1]))
    assert lower < np.mean(ratios) < upper


def test_ep_upper_bound_is_the_mean_of_a_scaled_chi_variable():
    k, sigma = 5, 2.0
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(200_000, k, generator=gen, dtype=F64) * sigma / math.sqrt(k)
    _, upper = ep_hardtanh_growth_bounds(k, sigma)  # E‖W u‖ for a unit u, W without activation
    assert w.norm(dim=1).mean().item() == pytest.approx(upper, rel=5e-3)


def test_trajectory_memory_is_bounded_at_the_paper_width():
    """TG-F2's paper setting (width 784, 20 layers, 10,000 pieces, exact lengths) stays far under
    4 GB of host memory for a net: points are taken in chunks. The child reads its own peak
    (``VmHWM``): ``ru_maxrss`` would report the test worker's, inherited through exec."""
    code = """
import torch
from reluinit.sampling import random_net
from reluinit.tools.memory import peak_rss_bytes
from reluinit.trajectories import Line, measure
from reluinit.regions import split_lines
torch.manual_seed(0)
x0, x1 = torch.randn(2, 784, dtype=torch.float64)
net = random_net([784] * 21, "gaussian", 6.0, alpha=0.9, bias=0.01, seed=0)
measure(net, Line(x0, x1), 10000)
split_lines(net, x0[None], x1[None], keep_pattern=False, max_intervals=20000)
print(peak_rss_bytes())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) < 4 * 2**30


def test_a_child_reads_its_own_peak_memory_not_its_parents():
    """The bound above is read in a child process: its peak is its own, not the 1 GB its parent
    (a test worker) holds when it starts the child, which ``ru_maxrss`` would report."""
    import numpy as np

    held = np.ones(2**27)  # 1 GiB, touched
    code = "from reluinit.tools.memory import peak_rss_bytes; print(peak_rss_bytes())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert held.sum() == 2**27 and 0 < int(out.stdout.split()[-1]) < 2**29


def test_benchmark_script_prints_its_ratio():
    out = subprocess.run([sys.executable, "-m", "reluinit.tools.benchmark", "trajectories", "--width", "32", "--depth", "2", "--points",
                          "101", "--repeats", "1", "--device", "cpu"], capture_output=True, text=True, check=True)
    ratio = float(next(line for line in out.stdout.splitlines() if line.startswith("ratio")).split()[-1])
    assert ratio > 0


def test_ep_f15_remaining_depth_counts_the_layers_above_the_swept_one():
    """EP Figure 15's x-axis: the number of layers above the swept layer (0 when the labels are
    read right after it)."""
    import yaml

    from conftest import ROOT
    from reluinit.pipeline import catalogue
    from reluinit.pipeline.config import settings

    s = settings(yaml.safe_load((ROOT / "config.yaml").read_text()), "EP-F15", "quick")
    s = {**s, "widths": [8], "depth": 3, "n_nets": 1, "n_steps": 200}
    table = catalogue.get("EP-F15").measure(s, "sweeps", device="cpu")
    assert set(zip(table["swept_layer"], table["depth"], table["remaining_depth"])) == {
        (0, 1, 0), (0, 2, 1), (0, 3, 2), (1, 2, 0), (1, 3, 1), (2, 3, 0)}


def test_tg_f1_and_ep_f3_trace_a_closed_circle_of_length_2_pi_r():
    """Both papers start from a closed circle, not a quarter arc: the path returns to its first
    point, and its length is 2 pi times its radius (the points' norm, sqrt(input_dim)) up to the
    chord sum's 1 - pi^2 / (6 n^2)."""
    import math

    import torch
    import yaml

    from conftest import ROOT
    from reluinit.pipeline import catalogue
    from reluinit.pipeline.config import settings
    from reluinit.trajectories import make_path

    x0, x1 = torch.randn(2, 50, dtype=torch.float64)
    circle = make_path("circle", x0 * (7 / x0.norm()), x1 * (7 / x1.norm()))
    ends = circle(torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert torch.allclose(ends[0], ends[1], atol=1e-12) and torch.allclose(ends[0], x0 * (7 / x0.norm()))
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    for exp in ("TG-F1", "EP-F3"):
        s = {**settings(config, exp, "quick"), "width": 8, "n_points": 1001}
        table = catalogue.get(exp).measure(s, "circle", device="cpu")
        inputs = table[table["layer"] == 0]
        radius = math.sqrt(s["input_dim"])
        assert inputs["length"].iloc[0] == pytest.approx(2 * math.pi * radius, rel=1e-5), exp
        uv = inputs[["u", "v"]].to_numpy()
        assert abs(uv[0] - uv[-1]).max() < 1e-9, exp  # closed in the projection too


def test_tg_growth_averages_hidden_to_hidden_layers_and_keeps_the_first_apart():
    """TG-F3/F5's growth per net is the mean over layers 2..L (what the theorems bound); layer 1,
    which may change the dimension (R^500 -> 784 in TG-F5), is its own column."""
    import pandas as pd

    from reluinit.figures.tg import growth_summary, net_growth

    rows = [{"path": "line", "sweep": "alpha", "distribution": "gaussian", "sigma_w": 2.0, "alpha": 0.5, "net": 0,
             "layer": layer, "growth": g, "lower_bound": 0.5} for layer, g in [(0, np.nan), (1, 3.0), (2, 1.0),
                                                                              (3, 1.2)]]
    per_net = net_growth(pd.DataFrame(rows))
    assert per_net["growth"].iloc[0] == pytest.approx(1.1) and per_net["first_layer_growth"].iloc[0] == 3.0
    summary = growth_summary(pd.DataFrame(rows))
    assert summary["growth"].iloc[0] == pytest.approx(1.1) and summary["first_layer_growth"].iloc[0] == 3.0


def test_a_sweep_measured_in_float32_sees_the_same_nets_and_growth_as_in_float64():
    """TG's growth sweeps run in float32 (their ``dtype`` setting): the nets are drawn in float64
    and cast, so a seed names the same net, and the growth factors agree to 1e-4 while nets
    differ from each other by percents. What a sweep does not measure has no column."""
    from reluinit.experiments.tg import growth_rows
    from reluinit.figures.tg import net_growth

    s = {"input_dim": 64, "width": 96, "depth": 5, "bias": 0.01, "n_nets": 3, "n_pieces": 3000,
         "sigma_ws": [2.0, 6.0], "alpha": 0.5}
    per = {d: net_growth(growth_rows({**s, "dtype": d}, "gaussian", "sigma_w", "line", 7, torch.device("cpu")))
           for d in ("float64", "float32")}
    change = (per["float32"]["growth"] - per["float64"]["growth"]).abs()
    spread = per["float64"].groupby("sigma_w")["growth"].std()
    assert change.max() < 1e-4 and spread.min() > 100 * change.max()
    rows = growth_rows({**s, "dtype": "float32"}, "gaussian", "sigma_w", "line", 7, torch.device("cpu"))
    assert set(rows["dtype"]) == {"float32"}
    assert not {"length_pre", "transitions", "patterns"} & set(rows.columns)  # not measured: no columns
