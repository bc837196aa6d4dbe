"""Mean-field signal propagation in wide random nets: variance and correlation maps, the edge of
chaos (EOC), and the phase of an initialization (RP, after Poole et al. and Schoenholz et al.).

For weights N(0, sigma_w^2 / fan_in) and biases N(0, sigma_b^2), the pre-activation variance of
one input evolves as ``q -> sigma_w^2 E[phi(sqrt(q) z)^2] + sigma_b^2`` and the correlation of two
inputs as ``c -> (sigma_w^2 E[phi(u1) phi(u2)] + sigma_b^2) / q*`` at the variance's fixed point
q*, with (u1, u2) Gaussian of variance q* and correlation c. The slope of the correlation map at
c = 1 is ``chi = sigma_w^2 E[phi'(sqrt(q*) z)^2]``: chi < 1 is the ordered phase, chi > 1 the
chaotic one, and chi = 1 the edge of chaos. Expectations are Gauss-Legendre quadratures split
at 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.optimize import brentq

Fn = Callable[[np.ndarray], np.ndarray]

# (phi, phi') for each activation.
ACTIVATIONS: dict[str, tuple[Fn, Fn]] = {
    "relu": (lambda x: np.maximum(x, 0.0), lambda x: (x > 0).astype(float)),
    "tanh": (np.tanh, lambda x: 1.0 / np.cosh(x) ** 2),
    "elu": (lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))), lambda x: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0.0)))),
}

# E[f(z)] for z ~ N(0, 1) by Gauss-Legendre on [-12, 0] and [0, 12] separately: the activations'
# derivatives (and ReLU-like maps) have a kink at 0, which a Gauss-Hermite rule over the whole
# line integrates only to ~0.5% (ELU's chi); on each half the integrand is smooth.
_X, _V = leggauss(200)
_Z = np.concatenate([6.0 * (_X - 1), 6.0 * (_X + 1)])
_W = np.concatenate([6.0 * _V, 6.0 * _V]) * np.exp(-_Z**2 / 2) / math.sqrt(2 * math.pi)


def gauss(f: Fn) -> float:
    """E[f(z)] for a standard normal z."""
    return float(np.dot(_W, f(_Z)))


def gauss2(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
    """E[f(z1, z2)] for independent standard normals."""
    return float(_W @ f(_Z[:, None], _Z[None, :]) @ _W)


def _fns(activation: str) -> tuple[Fn, Fn]:
    try:
        return ACTIVATIONS[activation]
    except KeyError:
        raise ValueError(f"unknown activation {activation!r}; known: {sorted(ACTIVATIONS)}") from None


def variance_map(q: float, sigma_w: float, sigma_b: float, activation: str) -> float:
    phi, _ = _fns(activation)
    return sigma_w**2 * gauss(lambda z: phi(math.sqrt(q) * z) ** 2) + sigma_b**2


def q_star(sigma_w: float, sigma_b: float, activation: str, q0: float = 1.0, tol: float = 1e-12,
           max_iter: int = 10_000) -> float:
    """The variance map's fixed point, by iteration from ``q0`` (inf if the variance diverges).

    For ReLU the map is linear, q -> sigma_w^2 q / 2 + sigma_b^2, and the fixed point is closed-form.
    """
    if activation == "relu":
        slope = sigma_w**2 / 2
        if slope < 1:
            return sigma_b**2 / (1 - slope)
        return q0 if sigma_b == 0 and slope == 1 else math.inf
    q = q0
    for _ in range(max_iter):
        nxt = variance_map(q, sigma_w, sigma_b, activation)
        if not math.isfinite(nxt) or nxt > 1e12:
            return math.inf
        if abs(nxt - q) <= tol * max(1.0, q):
            return nxt
        q = nxt
    return q


def chi(sigma_w: float, sigma_b: float, activation: str) -> float:
    """Slope of the correlation map at c = 1: sigma_w^2 E[phi'(sqrt(q*) z)^2]."""
    _, dphi = _fns(activation)
    if activation == "relu":  # phi' is 0 or 1 with probability 1/2 whatever the variance
        return sigma_w**2 / 2
    q = q_star(sigma_w, sigma_b, activation)
    if not math.isfinite(q):
        return math.inf
    return sigma_w**2 * gauss(lambda z: dphi(math.sqrt(q) * z) ** 2)


def correlation_map(c: float, sigma_w: float, sigma_b: float, activation: str) -> float:
    """One step of the correlation map at the variance's fixed point."""
    phi, _ = _fns(activation)
    q = q_star(sigma_w, sigma_b, activation)
    s = math.sqrt(q)
    cc = math.sqrt(max(0.0, 1 - c * c))
    e = gauss2(lambda z1, z2: phi(s * z1) * phi(s * (c * z1 + cc * z2)))
    return (sigma_w**2 * e + sigma_b**2) / q


def eoc_sigma_w(sigma_b: float, activation: str, bracket: tuple[float, float] = (0.3, 5.0)) -> float:
    """The sigma_w on the edge of chaos for this sigma_b: chi(sigma_w, sigma_b) = 1.

    ReLU's chi is sigma_w^2 / 2 whatever q*, so its EOC is sigma_w^2 = 2 (with sigma_b = 0, the only
    bias for which the variance then stays finite).
    """
    if activation == "relu":
        return math.sqrt(2.0)
    return brentq(lambda sw: chi(sw, sigma_b, activation) - 1.0, *bracket, xtol=1e-12)


def phase(sigma_w: float, sigma_b: float, activation: str, tol: float = 1e-6) -> str:
    """``ordered`` (chi < 1), ``chaotic`` (chi > 1) or ``eoc``."""
    x = chi(sigma_w, sigma_b, activation)
    return "eoc" if abs(x - 1) <= tol else ("ordered" if x < 1 else "chaotic")


# Theorem 1 writes kappa = |log chi| / 8 without a base. Each reading fixes both the net (chi) and
# the bound: "ln" builds chi = exp(-8 kappa) and evaluates the bound with ln (62% at kappa = 0.2,
# L = N = 100); "log10" builds chi = 10^(-8 kappa) and evaluates it with log10: the paper's 27%.
READINGS = {"ln": math.log, "log10": math.log10}


def ordered_sigma_w(kappa: float, sigma_b: float, activation: str, reading: str = "ln") -> float:
    """The sigma_w (below the EOC, where chi < 1) at which |log chi| = 8 kappa, the logarithm of
    ``reading``."""
    log_fn = READINGS[reading]
    return brentq(lambda sw: log_fn(chi(sw, sigma_b, activation)) + 8 * kappa, 1e-3,
                  eoc_sigma_w(sigma_b, activation))


def sigma_w_for_chi(target: float, sigma_b: float, activation: str) -> float:
    """The sigma_w below the EOC at which chi(sigma_w, sigma_b) = ``target`` (0 < target < 1): a point
    of the ordered phase named by how fast it forgets its input, the same for every activation.

        >>> round(chi(sigma_w_for_chi(0.8, 1.0, "tanh"), 1.0, "tanh"), 6)
        0.8
    """
    if not 0 < target < 1:
        raise ValueError(f"an ordered point has 0 < chi < 1, not {target}")
    if activation == "relu":  # chi = sigma_w^2 / 2, whatever q*
        return math.sqrt(2.0 * target)
    return brentq(lambda sw: chi(sw, sigma_b, activation) - target, 1e-3, eoc_sigma_w(sigma_b, activation),
                  xtol=1e-12)


def edge_of_chaos(activation: str, sigma_b: float = 0.0) -> tuple[float, float]:
    """(sigma_w, chi) on the edge of chaos of ``activation`` ("relu", "tanh", "elu") for bias scale
    ``sigma_b``: the weight scale at which chi = 1, and chi evaluated there (1 up to the root
    finder's tolerance).

    Two cases are exact, not found numerically: ReLU's edge is sigma_w = sqrt(2) with sigma_b = 0
    (for sigma_b > 0 the variance diverges wherever chi = 1, so there is no edge: ``ValueError``),
    and tanh's at sigma_b = 0 is sigma_w = 1, chi = 1 (q* = 0 there, and tanh'(0) = 1; iterating
    the variance map towards q* = 0 converges too slowly to show it).

        >>> [round(v, 4) for v in edge_of_chaos("relu")]
        [1.4142, 1.0]
        >>> [round(v, 4) for v in edge_of_chaos("tanh", 0.2)]
        [1.3041, 1.0]
    """
    _fns(activation)
    if not (math.isfinite(sigma_b) and sigma_b >= 0):
        raise ValueError(f"sigma_b must be a finite number >= 0 (a standard deviation); got {sigma_b}")
    if activation == "relu":
        if sigma_b > 0:
            raise ValueError(f"ReLU has no edge of chaos at sigma_b = {sigma_b} > 0: chi = sigma_w^2 / 2 is 1 only at "
                             f"sigma_w = sqrt(2), where the variance map q -> q + sigma_b^2 has no fixed point; use "
                             f"sigma_b = 0")
        return math.sqrt(2.0), 1.0
    if activation == "tanh" and sigma_b == 0:
        return 1.0, 1.0
    sigma_w = eoc_sigma_w(sigma_b, activation)
    return sigma_w, chi(sigma_w, sigma_b, activation)
