"""The counterfeit harness (reluinit.report.counterfeit): judged claims tried on tables with no effect
in them. These run a few claims of each family on the committed reference in seconds, show that the
harness finds a claim that passes a null (and that a standard error over its draws refuses it), and
check the committed ``reference/paper/counterfeit.csv`` against claims.yaml and the bar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from reluinit.report import claims, counterfeit

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "reference" / "paper"


@pytest.mark.parametrize("claim_id, family", [
    ("TG-1", "no_effect"),        # growth drawn at its lower bound: the check fails
    ("X-2", "another_law"),       # a power law with a constant term through the same ends: not exponential
    ("X-2", "no_effect"),         # transitions flat in depth
    ("RP-16", "collapse"),        # every seed of the grid at chance: no cell trains
    ("RP-T1[resnet32/sbp_sr/0.9]", "collapse"),  # a cell of a table the reference does not hold, built
    ("LR-1", "fewer_draws"),      # one run: no spread to judge it by
    ("TG-4", "another_law"),      # growth quadratic or square-root in sigma_w: not linear
])
def test_a_few_claims_of_each_family_refuse_their_counterfeits(claim_id, family):
    card = counterfeit.run(REFERENCE, ROOT / "claims.yaml", ids=[claim_id], n=8, families=(family,))
    row = card[card.claim == claim_id].iloc[0]
    assert row.trials == 8, row.why
    assert row.reproduced_share == 0, row


def _fake_root(tmp_path, rng) -> Path:
    """A results tree holding a table of OP-F3's name: 40 draws at each of two variations, the
    ratio's mean the same at both (no effect in it)."""
    table = pd.DataFrame({"variation": np.repeat([1, 500], 40), "sample": np.tile(np.arange(40), 2),
                          "grad_ratio": 1 + rng.normal(0, 0.1, 80)})
    (tmp_path / "OP").mkdir()
    table.to_csv(tmp_path / "OP" / "OP-F3.csv", index=False)
    return tmp_path


def _claims_file(tmp_path, **changes) -> Path:
    claim = dict(id="T-1", paper="OP", place="here", claim="the ratio is larger at the largest variation",
                 table="OP-F3", columns=["variation", "grad_ratio", "sample"],
                 measure="t[t.variation == t.variation.max()].grad_ratio.mean() - t[t.variation == t.variation.min()].grad_ratio.mean()",
                 expect="> 0", expect_from="ours", quote="q", fails="f",
                 nulls={"value": "grad_ratio", "cells": ["variation"], "no_effect": "pooled",
                        "skip": {"another_law": "one_cell", "collapse": "untrained", "fewer_draws": "aggregated"}})
    claim.update(changes)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [claim]}, allow_unicode=True))
    return path


def test_the_harness_finds_a_comparison_that_noise_passes_and_a_standard_error_refuses_it(tmp_path):
    """"Larger than" judged on two means with no margin passes about half the tables with no effect in
    them; the same claim with its draws' standard error (``unit``) is inconclusive there instead."""
    root = _fake_root(tmp_path, np.random.default_rng(0))
    weak = counterfeit.run(root, _claims_file(tmp_path), n=40, families=("no_effect",)).iloc[0]
    assert 0.25 < weak.reproduced_share < 0.75
    strong = counterfeit.run(root, _claims_file(tmp_path, unit="sample"), n=40, families=("no_effect",)).iloc[0]
    # about 2.5% expected (a one-sided tail beyond Student's 2.02 standard errors): 40 trials allow a few
    assert strong.reproduced_share <= 0.1 and strong.inconclusive_share > 0.3


def test_a_claim_that_says_nothing_of_a_family_is_refused_by_name(tmp_path):
    root = _fake_root(tmp_path, np.random.default_rng(1))
    path = _claims_file(tmp_path, nulls={"value": "grad_ratio", "no_effect": "pooled", "cells": ["variation"]})
    with pytest.raises(ValueError, match=r"T-1.*another_law.*nulls: skip"):
        counterfeit.run(root, path, n=2)


def test_another_law_keeps_the_ends_and_bends_between_them():
    rng = np.random.default_rng(0)
    x = np.arange(1.0, 11.0)
    for curve in ("power", "linear", "quadratic", "sqrt", "exponential", "log"):
        y = counterfeit._through(curve, x, 1.0, 10.0, 3.0, 300.0, rng)
        assert y[0] == pytest.approx(3.0) and y[-1] == pytest.approx(300.0), curve
    power = counterfeit._through("power", x, 1.0, 10.0, 3.0, 300.0, rng)
    assert claims.exponential(pd.Series(power, index=x)) < 0.5  # a power law with a constant term
    exp = counterfeit._through("exponential", x, 1.0, 10.0, 3.0, 300.0, rng)
    assert claims.exponential(pd.Series(exp, index=x)) > 0.5


def test_a_collapsed_mnist_run_scores_one_class_share():
    """A net at chance predicts one class: on MNIST's test set it scores 8.92% to 11.35%."""
    n = counterfeit.Nulls(value="final_test_acc", unit="rep", collapse="mnist")
    t = pd.DataFrame({"run": [f"r{i}" for i in range(200)], "rep": 0, "final_test_acc": 0.9})
    got = counterfeit.collapse(t, n, np.random.default_rng(0)).final_test_acc
    shares = np.asarray(counterfeit.MNIST_TEST_CLASSES) / 10_000
    assert set(np.round(got, 4)) <= set(np.round(shares, 4)) and got.max() <= 0.1135


def test_the_committed_counterfeits_cover_every_judged_claim_under_the_bar():
    """The acceptance of issue 96: every judged claim and family has a row (tried at least 100 times,
    or the reason it does not apply), none above the bar, and the file is as claims.yaml now reads."""
    card = pd.read_csv(REFERENCE / "counterfeit.csv", keep_default_na=False, na_values=[""])
    judged = [c.id for c in claims.load(ROOT / "claims.yaml") if counterfeit.judged(c)]
    assert sorted(set(card.claim)) == sorted(judged), "reference/paper/counterfeit.csv is stale: run " \
        "`python -m reluinit.report.counterfeit`"
    assert (card.groupby("claim").family.apply(set) == set(counterfeit.FAMILIES)).all()
    tried = card[card.trials > 0]
    assert (tried.trials >= counterfeit.TRIALS).all()
    assert (card[card.trials == 0].why.str.len() > 0).all()
    assert (tried.reproduced_share <= counterfeit.BAR).all(), tried[tried.reproduced_share > counterfeit.BAR]
