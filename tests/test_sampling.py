"""TG's random-net families: their moments, supports and sparsity, and the lemmas behind the bounds."""

import math

import numpy as np
import pytest
import torch

from reluinit.dichotomies import random_walk, sweep
from reluinit.nets import ACTIVATIONS
from reluinit.sampling import discrete_C, random_net, sigma_of_discrete, subvector_norms
from reluinit.theory import tg_growth_lower_bound

K = 400


@pytest.mark.parametrize("dist", ["gaussian", "uniform", "discrete"])
def test_families_have_the_density_and_standard_deviation_asked_for(dist):
    net = random_net([K, K, K], dist, 2.0, alpha=0.3, bias=0.5, seed=0)
    w, b = net.weights[0], torch.cat(net.biases)
    kept = w != 0
    assert kept.double().mean().item() == pytest.approx(0.3 * (6 / 7 if dist == "discrete" else 1), abs=0.005)
    # Nonzero weights drawn from P: variance sigma_w^2 / k (over all of P, zeros of the discrete set included).
    var = (w**2).sum().item() / (0.3 * w.numel())
    assert var == pytest.approx(4.0 / K, rel=0.02)
    if dist == "discrete":
        assert set(np.unique(np.round(w.numpy() * math.sqrt(K)))) <= set(range(-3, 4))
        assert set(np.unique(b.numpy())) == {-0.5, 0.5}
    elif dist == "uniform":
        assert w.abs().max().item() <= math.sqrt(3) * 2.0 / math.sqrt(K)
        assert b.abs().max().item() <= 0.5
    else:
        assert b.std().item() == pytest.approx(0.5, rel=0.1)


def test_discrete_sets_are_named_by_their_standard_deviation():
    assert discrete_C(2.0) == 3 and sigma_of_discrete(3) == 2.0
    assert discrete_C(sigma_of_discrete(17)) == 17
    with pytest.raises(ValueError, match="no integer C"):
        discrete_C(1.0)


def test_same_seed_same_net_and_bad_density_is_an_error():
    a = random_net([5, 7, 3], "uniform", 1.0, alpha=0.5, seed=4)
    b = random_net([5, 7, 3], "uniform", 1.0, alpha=0.5, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.weights, b.weights))
    with pytest.raises(ValueError, match="alpha"):
        random_net([5, 7], alpha=0.0, seed=0)


@pytest.mark.parametrize("dist", ["gaussian", "uniform", "discrete"])
def test_the_constant_m_of_theorem_2_bounds_e_abs_u_dot_w(dist):
    """E|u^T w| >= M ‖u‖ for a row w of P, the assumption Corollaries 1-3 rest on; recover M from
    the per-layer bound (alpha M sqrt(k) / 2) and check it by Monte Carlo on a fixed u."""
    k, sigma = 50, 2.0
    m = 2 * tg_growth_lower_bound(dist, sigma, 1.0) / math.sqrt(k)
    net = random_net([k, 20000], dist, sigma, seed=1)
    u = torch.randn(k, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert (net.weights[0] @ u).abs().mean().item() >= m * u.norm().item()
    if dist == "gaussian":  # exact there: E|N(0, s^2)| = s sqrt(2/pi)
        assert (net.weights[0] @ u).abs().mean().item() == pytest.approx(m * u.norm().item(), rel=0.02)


def test_tg_f4_subvector_norms():
    """E‖u_J‖ ≈ sqrt(alpha) ‖u‖ for u uniform on a high-dimensional sphere; = alpha ‖u‖ one-hot."""
    k = 1000
    u = torch.randn(k, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    u = u / u.norm()
    for alpha in (0.1, 0.5, 0.9):
        assert subvector_norms(u, alpha, 4000, seed=1).mean() == pytest.approx(math.sqrt(alpha), rel=0.01)
        onehot = subvector_norms(torch.eye(k, dtype=torch.float64)[0], alpha, 20000, seed=2)
        assert abs(onehot.mean() - alpha) < 4 * onehot.std() / math.sqrt(len(onehot))


def test_dichotomy_sweep_equals_brute_force():
    """Counting labellings along the great circle, layer by layer, as a direct loop would."""
    s, k, depth, layer, steps = 6, 12, 4, 1, 300
    net = random_net([8] + [k] * depth, "gaussian", math.sqrt(8), activation="hardtanh", seed=0)
    other = random_net([8] + [k] * depth, "gaussian", math.sqrt(8), activation="hardtanh", seed=1)
    x = torch.randn(s, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 2
    readouts = torch.randn(depth, k, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    sw = sweep(net, other.weights[layer], x, layer, readouts, steps, chunk=37)
    act = ACTIVATIONS["hardtanh"]
    seen = {d: set() for d in range(layer + 1, depth + 1)}
    flips = {d: 0 for d in seen}
    previous = {}
    for i in range(steps):
        t = 2 * math.pi * i / steps
        z = x
        for l in range(depth):
            w = math.cos(t) * net.weights[l] + math.sin(t) * other.weights[l] if l == layer else net.weights[l]
            z = act(z @ w.T + net.biases[l])
            if l + 1 in seen:
                labels = tuple((z @ readouts[l] > 0).tolist())
                seen[l + 1].add(labels)
                if l + 1 in previous:
                    flips[l + 1] += sum(a != b for a, b in zip(labels, previous[l + 1]))
                previous[l + 1] = labels
    assert list(sw.dichotomies) == [len(seen[d]) for d in sw.depths]
    assert list(sw.label_flips) == [flips[d] for d in sw.depths]
    assert all(sw.dichotomies <= sw.label_flips + 1)


def test_random_walk_counts_distinct_states():
    start = np.zeros(4, dtype=np.int64)
    assert random_walk(start, 0, 5, seed=0) == 1
    assert random_walk(start, 1, 5, seed=0) == 2
    many = random_walk(start, 2000, 5, seed=0)
    assert many == 16  # all 2^4 labellings are visited long before 2000 flips
