"""Mean-field maps and the edge of chaos against closed forms and the authors' constants."""

import math

import numpy as np
import pytest
import torch

from reluinit.inits import init_point
from reluinit.meanfield import chi, correlation_map, eoc_sigma_w, phase, q_star, sigma_w_for_chi, variance_map


def test_relu_eoc_is_he():
    assert eoc_sigma_w(0.0, "relu") ** 2 == pytest.approx(2.0, rel=1e-12)
    assert chi(math.sqrt(2), 0.0, "relu") == pytest.approx(1.0, rel=1e-9)
    # ReLU's variance map is linear: q -> sigma_w^2 q / 2 + sigma_b^2.
    assert variance_map(3.0, 1.5, 0.1, "relu") == pytest.approx(1.5**2 * 3.0 / 2 + 0.01, rel=1e-9)


@pytest.mark.parametrize("activation, sigma_b, authors", [("tanh", 0.2, 1.2981), ("elu", 0.2, 1.22459)])
def test_eoc_matches_the_constants_the_authors_used(activation, sigma_b, authors):
    sw = eoc_sigma_w(sigma_b, activation)
    assert sw == pytest.approx(authors, rel=0.01)
    assert phase(sw, sigma_b, activation) == "eoc"
    assert phase(0.9 * sw, sigma_b, activation) == "ordered" and phase(1.1 * sw, sigma_b, activation) == "chaotic"


def test_fixed_point_and_chi_agree_with_a_wide_random_net():
    """Monte Carlo: a wide tanh net's pre-activation variance settles at q*, and a tiny
    perturbation's squared norm then grows by chi per layer."""
    sw, sb, k = 1.5, 0.3, 3000
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(k, generator=gen, dtype=torch.float64)
    d = 1e-7 * torch.randn(k, generator=gen, dtype=torch.float64)
    growth = []
    for layer in range(12):
        w = torch.randn(k, k, generator=gen, dtype=torch.float64) * sw / math.sqrt(k)
        b = torch.randn(k, generator=gen, dtype=torch.float64) * sb
        new_h, new_d = w @ torch.tanh(h) + b, w @ (torch.tanh(h + d) - torch.tanh(h))
        if layer >= 6:
            growth.append((new_d.norm() / d.norm()).item() ** 2)
        h, d = new_h, new_d
    assert (h @ h).item() / k == pytest.approx(q_star(sw, sb, "tanh"), rel=0.05)
    assert np.mean(growth) == pytest.approx(chi(sw, sb, "tanh"), rel=0.05)


def test_correlation_map_fixes_one_and_is_a_contraction_in_the_ordered_phase():
    sw, sb = math.sqrt(0.1), 1.0  # deep in the ordered phase (chi = 0.046)
    assert correlation_map(1.0, sw, sb, "tanh") == pytest.approx(1.0, abs=1e-9)
    c = 0.2
    for _ in range(20):
        c = correlation_map(c, sw, sb, "tanh")
    assert c == pytest.approx(1.0, abs=1e-6)
    assert np.isinf(q_star(2.0, 0.5, "relu"))


@pytest.mark.parametrize("activation", ["tanh", "elu"])
def test_an_ordered_point_named_by_its_chi_has_that_chi_below_the_edge(activation):
    """RP's ordered point is chi = 0.8 at sigma_b = 1 for every activation: the solved sigma_w
    gives that chi, lies below the EOC, and a larger target lies closer to it."""
    sw = sigma_w_for_chi(0.8, 1.0, activation)
    assert chi(sw, 1.0, activation) == pytest.approx(0.8, abs=1e-9)
    assert phase(sw, 1.0, activation) == "ordered"
    assert sw < sigma_w_for_chi(0.9, 1.0, activation) < eoc_sigma_w(1.0, activation)


def test_relu_ordered_point_is_closed_form_and_chi_must_be_below_one():
    assert sigma_w_for_chi(0.5, 0.0, "relu") == pytest.approx(1.0, rel=1e-12)  # chi = sigma_w^2 / 2
    for bad in (0.0, 1.0, 1.3):
        with pytest.raises(ValueError, match="0 < chi < 1"):
            sigma_w_for_chi(bad, 1.0, "tanh")


def test_init_point_takes_an_ordered_sigma_w_or_a_chi_and_not_both():
    assert init_point("ordered", "tanh", ordered={"sigma_w": 0.5, "sigma_b": 1.0}) == ("sigma", 0.5, 1.0)
    scheme, sw, sb = init_point("ordered", "elu", ordered={"chi": 0.8, "sigma_b": 1.0})
    assert (scheme, sb) == ("sigma", 1.0) and chi(sw, 1.0, "elu") == pytest.approx(0.8, abs=1e-9)
    for bad in ({"sigma_b": 1.0}, {"chi": 0.8, "sigma_w": 0.5, "sigma_b": 1.0}, {"chi": 0.8}):
        with pytest.raises(ValueError, match="one of sigma_w or chi"):
            init_point("ordered", "tanh", ordered=bad)
