"""Initialization schemes: every one the papers use, in one place.

A scheme gives the standard deviation of a layer's Gaussian weights from its fan-in, its fan-out
and whether it is a readout (a last linear layer with no activation after it) or a convolution:

* ``he``: Kaiming/He normal as torch and most papers use it, variance 2 / fan_in;
* ``he_fan_out``: He as OP states it (Lemma 1, Theorem 1), variance 2 / n with n the width of the
  ReLU layer the matrix touches: its fan-out for a layer followed by a ReLU (forward norm
  preserved, Lemma 1), its fan-in for the readout (the variance Lemma 4 needs to carry the output
  error back into the last ReLU layer with its norm preserved);
* ``glorot``: Glorot/Xavier normal, variance 2 / (fan_in + fan_out);
* ``kaiming_fan_out``: the RP authors' ResNet init, convolutions variance 2 / fan_out (out
  channels x kernel size), linear layers (the classifier) std 0.01 and biases 0;
* ``sigma`` (also ``gaussian``, EP's and TG's name): variance sigma_w^2 / fan_in, any point of the
  phase diagram (sigma_w^2 = 2 is He; the edge of chaos is ``init_point``'s ``eoc``).

TG's sparse and discrete families, which also draw a mask, are ``sampling``'s. ``initialize``
applies a scheme to any torch model's conv and linear layers; ``nets.sample_mlp`` draws an
``MLP`` under one. ``weight_layers`` names the layers a scheme draws (and a pruner prunes).
"""

from __future__ import annotations

import math

import torch
from torch import nn

SCHEMES = ("he", "he_fan_out", "glorot", "kaiming_fan_out", "sigma", "gaussian")


def weight_std(scheme: str, fan_in: int, fan_out: int, *, readout: bool = False, conv: bool = False,
               sigma_w: float | None = None) -> float:
    """The standard deviation of a layer's weights under ``scheme`` (module doc)."""
    if scheme == "he":
        return math.sqrt(2.0 / fan_in)
    if scheme == "he_fan_out":
        return math.sqrt(2.0 / (fan_in if readout else fan_out))
    if scheme == "glorot":
        return math.sqrt(2.0 / (fan_in + fan_out))
    if scheme == "kaiming_fan_out":
        return math.sqrt(2.0 / fan_out) if conv else 0.01
    if scheme in ("sigma", "gaussian"):
        if sigma_w is None:
            raise ValueError(f"init {scheme!r} needs sigma_w")
        return sigma_w / math.sqrt(fan_in)
    raise ValueError(f"unknown init {scheme!r}; known: {', '.join(SCHEMES)}")


WEIGHT_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def weight_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The conv (1-, 2- and 3-D) and linear layers, in order: what is initialized by scheme and
    what is pruned. A transposed convolution (its weight is ``[in, out, ...]``, so fan-in and
    scores read it differently) raises a ``TypeError`` naming it, not left out unsaid."""
    found = []
    for n, m in model.named_modules():
        if isinstance(m, nn.modules.conv._ConvTransposeNd):
            raise TypeError(f"layer {n} ({type(m).__name__}): transposed convolutions are not supported; the "
                            f"layers read are {', '.join(t.__name__ for t in WEIGHT_LAYERS)}")
        if isinstance(m, WEIGHT_LAYERS):
            found.append((n, m))
    return found


@torch.no_grad()
def initialize(model: nn.Module, scheme: str = "he", sigma_w: float | None = None, sigma_b: float = 0.0,
               seed: int = 0) -> nn.Module:
    """Every conv and linear layer of ``model`` (``weight_layers``) drawn under ``scheme``,
    biases N(0, sigma_b^2) (0 under ``kaiming_fan_out``), in float64 from one CPU generator seeded
    with ``seed``, then cast into the layers. Batch norms keep torch's weight 1, bias 0."""
    gen = torch.Generator().manual_seed(seed)
    for _, m in weight_layers(model):
        conv = m.weight.dim() > 2
        fan_in = m.weight[0].numel()
        fan_out = m.weight.shape[0] * (m.weight[0, 0].numel() if conv else 1)
        std = weight_std(scheme, fan_in, fan_out, conv=conv, sigma_w=sigma_w)
        bias_std = 0.0 if scheme == "kaiming_fan_out" else sigma_b
        m.weight.copy_(torch.randn(m.weight.shape, generator=gen, dtype=torch.float64) * std)
        if m.bias is not None:
            m.bias.copy_(torch.randn(m.bias.shape, generator=gen, dtype=torch.float64) * bias_std)
    return model


def init_point(init: str, activation: str, eoc_sigma_b: float = 0.0,
               ordered: dict | None = None) -> tuple[str, float | None, float]:
    """(scheme, sigma_w, sigma_b) of RP's initialization names: ``he`` (Kaiming), ``eoc`` (the edge
    of chaos of ``activation`` at ``eoc_sigma_b``; ReLU's is He) or ``ordered`` (a point of the
    ordered phase at ``ordered``'s sigma_b: its sigma_w, or the sigma_w at which ``activation``'s
    chi equals its ``chi``, so that one point serves every activation)."""
    if init == "he":
        return "he", math.sqrt(2.0), 0.0
    if init == "eoc":
        from .meanfield import eoc_sigma_w

        return "sigma", eoc_sigma_w(eoc_sigma_b, activation) if activation != "relu" else math.sqrt(2.0), eoc_sigma_b
    if init == "ordered":
        if not ordered or "sigma_b" not in ordered or ("sigma_w" in ordered) == ("chi" in ordered):
            raise ValueError(f"init 'ordered' needs sigma_b and one of sigma_w or chi, not {ordered}")
        if "chi" in ordered:
            from .meanfield import sigma_w_for_chi

            return "sigma", sigma_w_for_chi(ordered["chi"], ordered["sigma_b"], activation), ordered["sigma_b"]
        return "sigma", ordered["sigma_w"], ordered["sigma_b"]
    raise ValueError(f"unknown initialization {init!r}; known: he, eoc, ordered")
