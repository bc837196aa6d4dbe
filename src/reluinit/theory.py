"""The papers' bounds and predictions, as plain functions of their parameters."""

from __future__ import annotations

import math

from scipy.optimize import brentq


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
    target = math.log(2.0 / delta) / width
    if op_rate(1.0 - 1e-12) < target:
        return math.nan
    return brentq(lambda e: op_rate(e) - target, 0.0, 1.0 - 1e-12, xtol=1e-14)


# Lemma 2 (activations) and Lemma 5 (gradients) state the same bound; both names are kept so
# that each figure panel reads as the paper does.
lemma2_epsilon = op_epsilon
lemma5_epsilon = op_epsilon
