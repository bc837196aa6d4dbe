"""One description of a fully connected network, and random sampling of its weights.

A net is a list of weight matrices ``W_l`` of shape ``[n_l, n_{l-1}]`` with biases; every
layer but an optional linear readout is followed by the activation. The same object is
measured at initialization, pruned and trained, so every paper reads it the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "hardtanh": torch.nn.functional.hardtanh,
    "linear": lambda z: z,
}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` means CUDA when present, else the CPU."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# --- initialization schemes -------------------------------------------------------------
# Each scheme maps (fan_in, fan_out, readout) to the standard deviation of a layer's
# Gaussian weights. ``readout`` is True for a final linear layer with no activation after it.
InitStd = Callable[[int, int, bool], float]

INITS: dict[str, InitStd] = {
    # Kaiming/He normal as torch and most papers use it: variance 2 / fan_in.
    "he": lambda fan_in, fan_out, readout: math.sqrt(2.0 / fan_in),
    # He as stated in OP (Lemma 1, Theorem 1): variance 2 / n, n the width of the ReLU layer
    # the matrix touches. For a layer followed by a ReLU that is its fan-out (forward norm
    # preserved, Lemma 1); for the readout it is its fan-in, the variance Lemma 4 needs to
    # carry the output error back into the last ReLU layer with its norm preserved.
    "he_fan_out": lambda fan_in, fan_out, readout: math.sqrt(2.0 / (fan_in if readout else fan_out)),
    # Glorot/Xavier normal: variance 2 / (fan_in + fan_out).
    "glorot": lambda fan_in, fan_out, readout: math.sqrt(2.0 / (fan_in + fan_out)),
}


@dataclass
class MLP:
    """A fully connected net: ``h_l = act(W_l h_{l-1} + b_l)``, the readout (if any) linear."""

    weights: list[torch.Tensor]
    biases: list[torch.Tensor]
    activation: str = "relu"
    readout: bool = False
    masks: list[torch.Tensor] | None = field(default=None)

    @property
    def widths(self) -> list[int]:
        """Input width followed by every layer's output width."""
        return [self.weights[0].shape[1]] + [w.shape[0] for w in self.weights]

    @property
    def n_hidden(self) -> int:
        return len(self.weights) - int(self.readout)

    def to(self, dtype: torch.dtype) -> "MLP":
        """The same net in another float type (a net drawn in float64 and measured in float32
        is the same net as its float64 original, up to rounding)."""
        cast = lambda ts: None if ts is None else [t.to(dtype) for t in ts]  # noqa: E731
        return MLP(cast(self.weights), cast(self.biases), self.activation, self.readout, cast(self.masks))

    def effective_weights(self) -> list[torch.Tensor]:
        if self.masks is None:
            return self.weights
        return [w * m for w, m in zip(self.weights, self.masks)]

    def forward(self, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Pre-activations of the hidden layers and the output, for a batch ``x [B, n_0]``.

        The output is the readout's value if there is one, else the last hidden activation.
        """
        act = ACTIVATIONS[self.activation]
        h = x
        preacts = []
        for l, (w, b) in enumerate(zip(self.effective_weights(), self.biases)):
            a = torch.addmm(b, h, w.T)
            if self.readout and l == len(self.weights) - 1:
                return preacts, a
            preacts.append(a)
            h = act(a)
        return preacts, h


def parse_arch(arch: str) -> list[int]:
    """Hidden widths from a name like ``"d4w16"`` (depth 4, width 16)."""
    import re

    m = re.fullmatch(r"d(\d+)w(\d+)", arch)
    if not m:
        raise ValueError(f"architecture {arch!r} is not of the form d<depth>w<width>")
    return [int(m.group(2))] * int(m.group(1))


def sample_mlp(
    widths: list[int],
    init: str = "he",
    *,
    activation: str = "relu",
    readout: bool = False,
    bias_std: float = 0.0,
    sigma_w: float | None = None,
    seed: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> MLP:
    """Sample a net with layer widths ``widths = [n_0, n_1, ..., n_L]`` under ``init``.

    ``init="gaussian"`` is the random-net convention of EP and TG: weights N(0, sigma_w^2 / fan_in)
    (``sigma_w^2 = 2`` is He).

    Weights are drawn on the CPU from a generator seeded with ``seed`` (so a seed gives the
    same net on every device) and then moved to ``device``.
    """
    if init == "gaussian":
        if sigma_w is None:
            raise ValueError("init 'gaussian' needs sigma_w")
        std_of = lambda fan_in, fan_out, readout: sigma_w / math.sqrt(fan_in)  # noqa: E731
    elif init in INITS:
        std_of = INITS[init]
    else:
        raise ValueError(f"unknown init {init!r}; known: {sorted(INITS) + ['gaussian']}")
    if any(n < 1 for n in widths):
        raise ValueError(f"widths must be positive, got {widths}")
    gen = torch.Generator().manual_seed(seed)
    weights, biases = [], []
    n_layers = len(widths) - 1
    for l in range(n_layers):
        fan_in, fan_out = widths[l], widths[l + 1]
        std = std_of(fan_in, fan_out, readout and l == n_layers - 1)
        w = torch.randn(fan_out, fan_in, generator=gen, dtype=torch.float64) * std
        b = torch.randn(fan_out, generator=gen, dtype=torch.float64) * bias_std
        weights.append(w.to(device=device, dtype=dtype))
        biases.append(b.to(device=device, dtype=dtype))
    return MLP(weights, biases, activation=activation, readout=readout)
