import pytest
import torch
import torch.nn.functional as F

from reluinit.datasets import gaussian_data
from reluinit.nets import random_widths, sample_mlp
from reluinit.norms import distortion, norm_ratios


def _ratios(widths, init, n=128, input_dim=100, n_classes=10, seed=0):
    x, y = gaussian_data(n, input_dim, n_classes, seed=123)
    net = sample_mlp([input_dim, *widths, n_classes], init, readout=True, seed=seed)
    return norm_ratios(net, x, y, batch_size=64)


def test_gradient_ratio_matches_per_sample_autograd():
    """Brute force: differentiate each sample's loss w.r.t. the weight matrices themselves."""
    x, y = gaussian_data(6, 4, 3, seed=0)
    x = x.double()
    net = sample_mlp([4, 5, 7, 3], "glorot", readout=True, bias_std=0.1, seed=1, dtype=torch.float64)
    r = norm_ratios(net, x, y, batch_size=4)  # two batches, the second one partial
    for i in range(6):
        ws = [w.clone().requires_grad_(True) for w in net.weights]
        h = x[i:i + 1]
        hidden = []
        for l, (w, b) in enumerate(zip(ws, net.biases)):
            a = h @ w.T + b
            h = torch.relu(a) if l < 2 else a
            hidden.append(h)
        logits = h.detach().requires_grad_(True)
        delta = torch.autograd.grad(F.cross_entropy(logits, y[i:i + 1]), logits)[0]
        grads = torch.autograd.grad(F.cross_entropy(h, y[i:i + 1]), ws[:2])
        x_norm = x[i].norm()
        expected_grad = torch.stack([g.norm() for g in grads]) / (delta.norm() * x_norm)
        expected_act = torch.stack([hidden[0].norm(), hidden[1].norm()]) / x_norm
        assert torch.allclose(r["grad_ratio"][i], expected_grad, rtol=1e-10)
        assert torch.allclose(r["act_ratio"][i], expected_act.detach(), rtol=1e-10)


def test_he_preserves_both_norms_at_the_widest_quick_width():
    """OP-F1 at its widest quick width (4060, 10 layers): both means within 10% of 1."""
    for seed in (0, 1):
        r = _ratios([4060] * 10, "he_fan_out", seed=seed)
        for key in ("act_ratio", "grad_ratio"):
            mean = r[key].mean(0)
            assert (mean - 1).abs().max().item() < 0.10, (key, seed, mean)


def test_he_spread_shrinks_with_width():
    stds = {w: _ratios([w] * 10, "he_fan_out")["act_ratio"].std(0).mean().item() for w in (50, 200, 800)}
    assert stds[50] > stds[200] > stds[800]
    # Per layer the squared ratio has relative variance 5/width, so std ~ 1/sqrt(width).
    assert stds[50] / stds[800] == pytest.approx(4.0, rel=0.35)


def test_glorot_activations_shrink_with_depth():
    r = _ratios([800] * 10, "glorot")
    mean = r["act_ratio"].mean(0)
    assert (mean[1:] < mean[:-1]).all()
    # Each square Glorot layer halves E‖h‖²: the ratio falls like 2^(-l/2).
    assert mean[-1].item() < 0.1
    assert (mean[-1] / mean[-2]).item() == pytest.approx(2 ** -0.5, rel=0.1)


def test_gradient_ratio_follows_width_ratio_when_widths_vary():
    """With He (fan-out) and unequal widths, E‖δ_l‖² = (n_l / n_L) ‖δ‖², so
    mean grad_ratio² ≈ n_l / n_L: the OP-F3 effect, derived independently of the code."""
    widths = random_widths(400, 200, 6, seed=3)
    r = _ratios(widths, "he_fan_out", n=256)
    measured = r["grad_ratio"].square().mean(0)
    predicted = torch.tensor(widths, dtype=measured.dtype) / widths[-1]
    assert torch.allclose(measured, predicted, rtol=0.2), (measured, predicted)


def test_distortion():
    assert distortion(torch.tensor([1.0, 0.5, 2.0])).tolist() == [0.0, 0.75, 3.0]
