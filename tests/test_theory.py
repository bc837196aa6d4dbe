import math

import pytest

from reluinit import theory
from reluinit.datasets import gaussian_data
from reluinit.nets import sample_mlp
from reluinit.norms import distortion, norm_ratios


def test_epsilon_solves_the_bound():
    for m in (200, 500, 4000):
        eps = theory.op_epsilon(m, 0.05)
        assert 0 < eps < 1
        assert theory.op_failure_probability(m, eps) == pytest.approx(0.05, rel=1e-9)


def test_epsilon_shrinks_with_width_like_one_over_sqrt_m():
    eps = [theory.op_epsilon(m) for m in (500, 2000, 8000)]
    assert eps[0] > eps[1] > eps[2]
    # For small eps the rate is 3 eps^2 / 32 (Taylor), so eps ~ sqrt(32 log(2/delta) / (3 m)).
    m = 8000
    assert eps[2] == pytest.approx(math.sqrt(32 * math.log(40) / (3 * m)), rel=0.05)


def test_no_guarantee_below_the_minimum_width():
    # op_rate(1) = 0.0618: below m = log(40) / 0.0618 ≈ 60 no eps < 1 is guaranteed.
    assert math.isnan(theory.op_epsilon(50))
    assert not math.isnan(theory.op_epsilon(70))


@pytest.mark.parametrize("direction", ["act_ratio", "grad_ratio"])
def test_lemmas_hold_on_sampled_layers(direction):
    """The bound is valid: at most a delta fraction of inputs may exceed eps (Lemmas 2 and 5)."""
    m, delta = 500, 0.05
    x, y = gaussian_data(1000, 100, 10, seed=0)
    net = sample_mlp([100, m, 10], "he_fan_out", readout=True, seed=7)
    eps = distortion(norm_ratios(net, x, y)[direction][:, 0])
    assert (eps > theory.op_epsilon(m, delta)).float().mean().item() <= delta


def test_rp_theorem1_readings_build_the_net_and_the_bound_in_one_base():
    """RP-Th1 reads kappa = |log chi| / 8 with ln or with log10, each for both the net's chi and
    the bound: the log10 reading gives the paper's 27% at kappa = 0.2, L = N = 100; ln gives 62%."""

    from reluinit.meanfield import READINGS, chi, ordered_sigma_w
    from reluinit.theory import rp_theorem1_bound

    bounds = {}
    for reading, log in READINGS.items():
        c = chi(ordered_sigma_w(0.2, 1.0, "tanh", reading), 1.0, "tanh")
        assert abs(log(c)) / 8 == pytest.approx(0.2, rel=1e-6), reading
        bounds[reading] = rp_theorem1_bound(c, 100, 100, log=log)
    assert bounds["log10"] == pytest.approx(0.27, abs=0.01) and bounds["ln"] == pytest.approx(0.62, abs=0.01)
