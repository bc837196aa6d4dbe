"""Random fully connected nets from TG's families: sparse Gaussian, uniform and discrete weights.

TG (Definitions 1-4): each weight is kept with probability ``alpha`` (the density) and is then
drawn from P, else it is exactly 0; biases come from their own distribution Q. As in TG's
simulations the weights are scaled by ``1/sqrt(k)`` (k = fan-in):

* ``gaussian``: P = N(0, sigma_w^2 / k), Q = N(0, bias^2),
* ``uniform``: P = U(-C/sqrt(k), C/sqrt(k)) with C = sqrt(3) sigma_w (so its standard deviation
  before scaling is sigma_w), Q = U(-bias, bias),
* ``discrete``: P uniform on (1/sqrt(k)) {-C, ..., C} for an integer C (standard deviation
  sqrt(C(C+1)/3) before scaling), Q uniform on {-bias, bias}.

``sigma_w`` always means the standard deviation of P before the ``1/sqrt(k)`` scaling, the
x-axis of TG's Figure 3a; ``sigma_of_discrete(C)`` gives it for the discrete family. EP's nets
are the dense Gaussian case (alpha = 1, ``bias`` = sigma_b).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .nets import MLP

DISTRIBUTIONS = ("gaussian", "uniform", "discrete")


def sigma_of_discrete(C: int) -> float:
    """Standard deviation of the uniform distribution on the integers ``{-C, ..., C}``."""
    return math.sqrt(C * (C + 1) / 3.0)


def discrete_C(sigma_w: float) -> int:
    """The integer ``C`` whose discrete set has standard deviation ``sigma_w`` (it must exist)."""
    C = round((-1 + math.sqrt(1 + 12 * sigma_w**2)) / 2)
    if C < 1 or not math.isclose(sigma_of_discrete(C), sigma_w, rel_tol=1e-9):
        raise ValueError(f"no integer C gives a discrete set with standard deviation {sigma_w} "
                         f"(C=1, 2, 3, 4 give {', '.join(f'{sigma_of_discrete(c):.4g}' for c in range(1, 5))})")
    return C


def _draw(dist: str, shape: tuple[int, ...], sigma: float, gen: torch.Generator, device, dtype) -> torch.Tensor:
    """Entries from P (or Q) with standard deviation ``sigma``, before sparsification."""
    if dist == "gaussian":
        return torch.randn(shape, generator=gen, device=device, dtype=dtype) * sigma
    if dist == "uniform":
        c = math.sqrt(3) * sigma
        return (torch.rand(shape, generator=gen, device=device, dtype=dtype) * 2 - 1) * c
    raise AssertionError(dist)


def random_net(
    widths: list[int],
    dist: str = "gaussian",
    sigma_w: float = 1.0,
    *,
    alpha: float = 1.0,
    bias: float = 0.0,
    activation: str = "relu",
    seed: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
) -> MLP:
    """A random net with layer widths ``[n_0, ..., n_L]`` from one of TG's families (module doc).

    Weights are drawn on the CPU with a generator seeded with ``seed`` and then moved to ``device``:
    the same seed gives the same net on every device (CUDA's random stream differs from the CPU's,
    which once made the GPU's nets other nets than the reference's).
    """
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; known: {DISTRIBUTIONS}")
    if not 0 < alpha <= 1:
        raise ValueError(f"density alpha must be in (0, 1], got {alpha}")
    cpu = torch.device("cpu")
    gen = torch.Generator().manual_seed(seed)
    C = discrete_C(sigma_w) if dist == "discrete" else None
    weights, biases = [], []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        shape = (fan_out, fan_in)
        if dist == "discrete":
            w = torch.randint(-C, C + 1, shape, generator=gen).to(dtype) / math.sqrt(fan_in)
            b = (torch.randint(0, 2, (fan_out,), generator=gen).to(dtype) * 2 - 1) * bias
        else:
            w = _draw(dist, shape, sigma_w / math.sqrt(fan_in), gen, cpu, dtype)
            b = _draw(dist, (fan_out,), bias / (math.sqrt(3) if dist == "uniform" else 1.0), gen, cpu, dtype)
        if alpha < 1:
            w = w * (torch.rand(shape, generator=gen, dtype=dtype) < alpha)
        weights.append(w.to(device))
        biases.append(b.to(device))
    return MLP(weights, biases, activation=activation)


def subvector_norms(u: torch.Tensor, alpha: float, n_draws: int, seed: int) -> np.ndarray:
    """‖u_J‖ for ``n_draws`` random index sets J that keep each coordinate with probability
    ``alpha`` (TG Lemma 7 and Appendix B: between alpha ‖u‖ and sqrt(alpha) ‖u‖ in expectation)."""
    gen = torch.Generator().manual_seed(seed)  # on the CPU: the same index sets on every device
    keep = (torch.rand((n_draws, len(u)), generator=gen, dtype=u.dtype) < alpha).to(u.device)
    return torch.linalg.vector_norm(keep * u, dim=1).cpu().numpy()


def part_seed(base: int, index: int) -> int:
    """A seed for job (or run) ``index`` of an experiment seeded ``base``, independent of the
    others' streams (``numpy.random.SeedSequence``), so a job's numbers do not depend on which
    other jobs run."""
    return int(np.random.SeedSequence([base, index]).generate_state(1)[0] & 0x7FFFFFFF)
