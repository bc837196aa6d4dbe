"""The papers' bounds and predictions, as plain functions of their parameters."""

from __future__ import annotations

import math

# --- OP: norm preservation ---------------------------------------------------------------

def op_rate(eps: float) -> float:
    """Exponent per unit of width in OP's Lemmas 2 and 5: ``eps/4 + log(2 / (1 + sqrt(1 + eps)))``.

    Both lemmas give ``Pr(|‖v‖² - ‖u‖²| <= eps ‖u‖²) >= 1 - 2 exp(-m * op_rate(eps))``.
    """
    return eps / 4.0 + math.log(2.0 / (1.0 + math.sqrt(1.0 + eps)))


def op_failure_probability(width: int, eps: float) -> float:
    """Failure probability bound of Lemma 2 (forward) and Lemma 5 (backward) at width ``m``."""
    return 2.0 * math.exp(-width * op_rate(eps))


def op_epsilon(width: int, delta: float = 0.05) -> float:
    """Smallest eps in [0, 1) for which Lemma 2/5 guarantee distortion <= eps with prob 1 - delta.

    Solves ``2 exp(-m op_rate(eps)) = delta`` (``op_rate`` increases on eps > 0). Returns NaN
    when no eps below 1 is guaranteed, i.e. the lemma says nothing at this width.
    """
    from scipy.optimize import brentq  # here: scipy's import costs every job that reads a bound 0.5 s

    target = math.log(2.0 / delta) / width
    if op_rate(1.0 - 1e-12) < target:
        return math.nan
    return brentq(lambda e: op_rate(e) - target, 0.0, 1.0 - 1e-12, xtol=1e-14)


# Lemma 2 (activations) and Lemma 5 (gradients) state the same bound; both names are kept so
# that each figure panel reads as the paper does.
lemma2_epsilon = op_epsilon
lemma5_epsilon = op_epsilon


# --- trajectory growth (TG Corollaries 1-3, EP Theorem 3) ---------------------------------------


def tg_growth_lower_bound(dist: str, sigma_w: float, alpha: float) -> float:
    """TG's per-layer lower bound on E[‖dz(d+1)‖] / ‖dz(d)‖ for sparse random ReLU nets whose
    weights are scaled by 1/sqrt(k) (Corollaries 1-3; ``sigma_w``: standard deviation before scaling).

    Theorem 2 gives ``alpha M sqrt(k) / 2`` when ``E|u^T w| >= M ‖u‖`` for a row ``w`` of P. Here
    ``M sqrt(k)`` is sqrt(2/pi) sigma_w (Gaussian), C/(2 sqrt 2) with C = sqrt(3) sigma_w (uniform,
    Lemma 10) and sum_{|w|<=C} |w| / (sqrt(2) N_w) = C(C+1) / (sqrt(2)(2C+1)) (discrete, Lemma 11
    as proved), so the width cancels.
    """
    from .sampling import discrete_C

    if dist == "gaussian":
        m = sigma_w * math.sqrt(2 / math.pi)
    elif dist == "uniform":
        m = math.sqrt(3) * sigma_w / (2 * math.sqrt(2))
    elif dist == "discrete":
        C = discrete_C(sigma_w)
        m = C * (C + 1) / (math.sqrt(2) * (2 * C + 1))
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return alpha * m / 2


def ep_hardtanh_growth_bounds(k: int, sigma_w: float) -> tuple[float, float]:
    """EP Theorem 3 for hard-tanh nets without bias, per layer: the lower bound of equation (c)
    of its proof (valid for sigma_w >= 1) and the upper bound of equation (2) (the identity in
    place of hard-tanh: a chi variable with k degrees of freedom times sigma_w / sqrt(k))."""
    s = sigma_w
    lower = (((2 * math.pi) ** -0.25 * math.sqrt(s * k) / math.sqrt(s * math.sqrt(2 * math.pi) + k - 1)
              - math.sqrt(k) * (1 - 1 / s) ** (k - 1)) / math.sqrt(2))
    upper = math.sqrt(2) * math.exp(math.lgamma((k + 1) / 2) - math.lgamma(k / 2)) * s / math.sqrt(k)
    return lower, upper


# --- RP: critical sparsity ---------------------------------------------------------------------------


def rp_theorem1_bound(chi: float, L: int, N: int, log=math.log) -> float:
    """RP Theorem 1's bound on E[s_cr] for SBP in the ordered phase (chi < 1), without its
    O(1 / (kappa^2 sqrt(L N^2))) term: (1/L)(1 + log(kappa L N^2) / kappa), kappa = |log chi| / 8,
    one logarithm ``log`` throughout (the paper states no base). At kappa = 0.2, L = N = 100 it is
    the paper's "27%" with ``log=math.log10`` (chi = 10^-1.6) and 62% with the natural logarithm
    (chi = e^-1.6)."""
    kappa = abs(log(chi)) / 8
    return (1 + log(kappa * L * N**2) / kappa) / L


def rp_mbp_bound(gamma: float, weights_l0: int, n_grid: int = 100_001, n_eps: int = 400) -> float:
    """RP Proposition 4's bound on E[s_cr] for MBP (large depth, O(1/sqrt(L N^2)) dropped):

        inf over eps in (0, 2) of  x + M (1 - x)^(1 + g^(2 - eps)) / (1 + g^(2 - eps)),
        x = x_{eps, g} = inf{y : for all x > y, g Q_x > Q_{1 - (1 - x)^(g^(2 - eps))}},

    Q_x the x-quantile of |N(0, 1)|, M = zeta_{l0} N^2 the weights of the layer l0 with the smallest
    variance. ``gamma`` is the variance ratio alpha_{l0} / alpha_l, so the weights' scale ratio
    entering the comparison is g = sqrt(gamma) (the proof compares |W^{l0}| with |W^l|); the paper
    writes gamma there. Quantiles of 1 - u for tiny u are taken in log space.
    """
    import numpy as np
    from scipy.special import ndtri_exp
    from scipy.stats import norm

    g = math.sqrt(gamma)
    xs = np.linspace(1e-9, 1 - 1e-9, n_grid)
    q = norm.ppf((1 + xs) / 2)
    best = math.inf
    for eps in np.linspace(1e-3, 2 - 1e-3, n_eps):
        p = g ** (2 - eps)
        q_tail = -ndtri_exp(p * np.log1p(-xs) - math.log(2))  # Q_{1-u} = Phi^-1(1 - u/2), u = (1-x)^p
        bad = np.flatnonzero(~(g * q > q_tail))
        if len(bad) and bad[-1] == len(xs) - 1:
            continue  # x_{eps, g} is infinite: no bound from this eps
        x = float(xs[bad[-1] + 1]) if len(bad) else 0.0
        best = min(best, x + weights_l0 * (1 - x) ** (1 + p) / (1 + p))
    return float(best)
