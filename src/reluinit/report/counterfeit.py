"""Counterfeits: does each verdict refuse data that has no effect in it?

A claim shows in ``fails:`` one result that would fail it; this module asks the opposite question
of every judged claim (kinds claim and check): given tables with the claim's own columns, cells and
number of draws, generated under a null that makes its statement false, how often does its own
``evaluate`` still say "reproduced" (or "check holds")? The families of nulls:

- ``no_effect``: the values the claim compares drawn from one distribution: each row's value is a
  common centre (the pooled mean of the claim's rows, a constant such as 1 for a growth factor, or
  the column it is compared with, such as a lower bound) plus the row's residual about its cell's
  mean, the residuals shuffled over the rows: the spread measured in our own tables, the effect gone;
- ``another_law``: the cell means along an axis replaced by another curve through the same first and
  last values (a power law with a constant term for "exponential", a line for "quadratic", a flat
  line for "grows", ...), the residuals kept;
- ``collapse``: every seed or net of a trained cell at chance (a net predicting one class: its share
  of MNIST's test set, 8.92% to 11.35%; 10% on CIFAR-10, 1% on CIFAR-100, 0.5% on Tiny ImageNet),
  for every cell claim of every table, run or not (a table not in the reference is built from the
  claim's cells, three seeds each);
- ``fewer_draws``: the claim's data cut to one net, seed or draw (``unit``), drawn at random, with
  the noise that draw has.

A claim says in ``claims.yaml`` (``nulls:``) which column holds its effect and how each family
applies, or why one cannot make it false (``skip:``); a claim that says nothing of a family is
refused, so that every judged claim faces every family or says why not. Every null draws
``TRIALS`` tables from its own seed. ``python -m reluinit.report.counterfeit`` writes
``reference/paper/counterfeit.csv`` (one row per claim and family: ``trials``,
``reproduced_share`` and what else helps) and prints its CPU time; the bar is ours: no (claim,
family) above ``BAR`` reproduced.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..pipeline import paths
from . import claims as C

FAMILIES = ("no_effect", "another_law", "collapse", "fewer_draws")
TRIALS = 100
BAR = C.COUNTERFEIT_BAR  # ours: the largest share of counterfeits a verdict may pass
PASSED = (C.REPRODUCED, C.HOLDS)
# A net at chance predicts one class: it scores that class's share of the test set. MNIST's test
# classes (0..9) hold these many of its 10,000 digits; the CIFAR and Tiny ImageNet test sets are balanced.
MNIST_TEST_CLASSES = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)
CHANCE = {"cifar10": 0.1, "cifar100": 0.01, "tiny_imagenet": 0.005}
CURVES = ("power", "linear", "quadratic", "sqrt", "exponential", "flat", "log")
# Why a family cannot make a claim false, in the words several claims share (``skip: {family: key}``);
# any other text is the claim's own reason.
REASONS = {
    "untrained": "nothing is trained: the table has no accuracy to collapse",
    "not_accuracy": "reads trained nets' geometry, not their accuracy: collapsed nets would leave its filter, "
                    "not counterfeit its measure",
    "bound": "a proven bound holds draw by draw: one draw tests the same statement on less data, not a false one",
    "bound_law": "a proven bound that the measured values clear by a wide margin: a curve through the same "
                 "ends stays above it; the counterfeit that crosses it is no_effect's (values at the bound)",
    "sameness": "the claim states that cells agree: drawing them from one distribution is its statement, "
                "not a null of it",
    "ends": "reads only the first and last cells of its axis: any curve through the same ends gives the same "
            "value, so no curve counterfeits it",
    "one_cell": "reads one cell: there is no axis along which to bend its values",
    "aggregated": "the table holds one value per cell, each a mean over draws it does not keep: there is no "
                  "draw to cut to",
    "exact": "an exact construction (or a number computed, not sampled): only a bug can fail it, and no null "
             "of our data applies",
    "level": "a level the paper states for one quantity: no cells to compare and no axis to bend; its "
             "counterfeit is a value off its window, which `fails` gives",
    "packed": "its draws are packed in one cell (one value per net): no rows to cut or shuffle",
}
COLUMNS = ["claim", "paper", "kind", "table", "family", "trials", "reproduced_share", "inconclusive_share",
           "verdict", "null", "why"]


@dataclass(frozen=True)
class Nulls:
    """How the counterfeits of one claim are made (``claims.yaml``, a claim's ``nulls:``).

    ``value``: the column its effect is in; ``cells``: the columns whose values the claim compares
    (a cell's mean is its effect, the rest of its rows its noise); ``unit``: the column of its
    independent draws (default: the claim's ``unit``); ``no_effect``: the common centre ("pooled",
    a number, or a column); ``law``: ``{along: column, by: [columns], curve: name or [names]}``;
    ``collapse``: the dataset whose chance level a trained cell collapses to, or ``dataset`` to read
    it from that column; ``skip``: ``{family: why it cannot make the claim false}``."""
    value: str | None = None
    cells: tuple = ()
    unit: str | None = None
    no_effect: str | float | None = None
    law: dict | None = None
    collapse: str | None = None
    skip: dict = field(default_factory=dict)

    @classmethod
    def of(cls, claim: C.Claim) -> Nulls:
        spec = dict(claim.nulls or {})
        unknown = set(spec) - {"value", "cells", "unit", "no_effect", "law", "collapse", "skip"}
        if unknown:
            raise ValueError(f"claim {claim.id}: nulls has unknown key(s) {', '.join(sorted(unknown))}")
        spec["cells"] = tuple(spec.get("cells") or ())
        spec["unit"] = spec.get("unit") or claim.unit
        spec["skip"] = {f: REASONS.get(why, why) for f, why in (spec.get("skip") or {}).items()}
        nulls = cls(**spec)
        bad = set(nulls.skip) - set(FAMILIES)
        if bad:
            raise ValueError(f"claim {claim.id}: nulls skips unknown famil(ies) {', '.join(sorted(bad))}")
        if nulls.law and not set(_curves(nulls.law)) <= set(CURVES):
            raise ValueError(f"claim {claim.id}: nulls' law curve {nulls.law.get('curve')!r} is none of "
                             f"{', '.join(CURVES)}")
        return nulls

    def applies(self, family: str) -> bool:
        return {"no_effect": self.no_effect is not None, "another_law": self.law is not None,
                "collapse": self.collapse is not None, "fewer_draws": self.unit is not None}[family]


def _curves(law: dict) -> list[str]:
    curve = law.get("curve", "power")
    return [curve] if isinstance(curve, str) else list(curve)


def judged(claim: C.Claim) -> bool:
    """Whether the harness tries ``claim``: a claim of the paper or a check (a calibration is shown,
    not judged)."""
    return claim.kind in (C.CLAIM, C.CHECK)


# ------------------------------------------------------------------------------------------ nulls
def _residuals(t: pd.DataFrame, n: Nulls) -> pd.Series:
    """Each row's value about its cell's mean (its noise), or 0 where the claim names no cells."""
    v = t[n.value].astype(float)
    if not n.cells:
        return v - v.mean()
    return v - v.groupby([t[c] for c in n.cells], dropna=False).transform("mean")


def no_effect(t: pd.DataFrame, n: Nulls, rng: np.random.Generator) -> pd.DataFrame:
    """The cells drawn from one distribution: a common centre plus the rows' shuffled residuals."""
    out = t.copy()
    noise = _residuals(t, n).to_numpy()
    centre = (t[n.value].astype(float).mean() if n.no_effect == "pooled"
              else t[n.no_effect].astype(float).to_numpy() if isinstance(n.no_effect, str)
              else float(n.no_effect))
    out[n.value] = centre + rng.permutation(noise)
    return out


def _through(curve: str, x: np.ndarray, x0: float, x1: float, y0: float, y1: float,
             rng: np.random.Generator) -> np.ndarray:
    """A curve of the family ``curve`` through (x0, y0) and (x1, y1), at ``x``."""
    if curve == "flat":
        return np.full_like(x, (y0 + y1) / 2, dtype=float)
    if curve == "exponential":
        if y0 <= 0 or y1 <= 0:
            return np.interp(x, [x0, x1], [y0, y1])
        return y0 * (y1 / y0) ** ((x - x0) / (x1 - x0))
    if curve == "power":
        # a + b x^p, a >= 0 (a count or length is no less than nothing at depth 0): p at least the
        # power that joins the ends with no constant, and up to 2 more, drawn per trial
        base = np.log(y1 / y0) / np.log(x1 / x0) if min(x0, y0, y1) > 0 and y1 > y0 else 1.0
        p = max(base, 1.0) + rng.uniform(0, 2)
    else:
        p = {"linear": 1.0, "quadratic": 2.0, "sqrt": 0.5, "log": None}[curve]
    f = (lambda z: np.log(z)) if p is None else (lambda z: np.power(z, p))
    b = (y1 - y0) / (f(x1) - f(x0))
    return y0 + b * (f(x) - f(x0))


def another_law(t: pd.DataFrame, n: Nulls, rng: np.random.Generator) -> pd.DataFrame:
    """Each group's cell means along ``law.along`` replaced by another curve through the same first and
    last values (one of ``law.curve``, drawn per trial), each row keeping a residual (shuffled);
    ``law.one``: one group drawn per trial takes the curve, the others keep their own means (a claim
    that the groups agree)."""
    out = t.copy()
    along, by = n.law["along"], list(n.law.get("by") or [])
    curve = _curves(n.law)[rng.integers(len(_curves(n.law)))]
    noise = rng.permutation(_residuals(t, n).to_numpy())
    values = np.empty(len(t))
    groups = t.groupby(by, dropna=False).indices if by else {None: np.arange(len(t))}
    bent = list(groups)[rng.integers(len(groups))] if n.law.get("one") else None
    for key, idx in groups.items():
        g = t.iloc[idx]
        if bent is not None and key != bent:  # the others keep their own cell means
            values[idx] = g.groupby(along)[n.value].transform("mean").to_numpy(float)
            continue
        means = g.groupby(along)[n.value].mean()
        x = means.index.to_numpy(float)
        y = _through(curve, x, x[0], x[-1], float(means.iloc[0]), float(means.iloc[-1]), rng)
        values[idx] = np.interp(g[along].to_numpy(float), x, y)
    out[n.value] = values + noise
    return out


def _chance(t: pd.DataFrame, n: Nulls, runs: pd.Series, rng: np.random.Generator) -> pd.Series:
    """Each run's accuracy at chance: one class's share of its dataset's test set."""
    keys = pd.unique(runs)
    if n.collapse == "dataset":
        data = t.groupby(runs)["dataset"].first()
    else:
        data = pd.Series(n.collapse, index=keys)
    shares = np.asarray(MNIST_TEST_CLASSES, float) / sum(MNIST_TEST_CLASSES)
    level = {k: (shares[rng.integers(10)] if data[k] == "mnist" else CHANCE[data[k]]) for k in keys}
    return runs.map(level).astype(float)


def collapse(t: pd.DataFrame, n: Nulls, rng: np.random.Generator) -> pd.DataFrame:
    """Every seed or net of every cell at chance."""
    out = t.copy()
    key = "run" if "run" in t else n.unit
    runs = t[key] if key else pd.Series(np.arange(len(t)), index=t.index)
    out[n.value] = _chance(t, n, runs.astype(str) + "|" + _cell_key(t, n), rng)
    return out


def _cell_key(t: pd.DataFrame, n: Nulls) -> pd.Series:
    cols = [c for c in n.cells if c in t]
    return t[cols].astype(str).agg("|".join, axis=1) if cols else pd.Series("", index=t.index)


def fewer_draws(t: pd.DataFrame, n: Nulls, rng: np.random.Generator) -> pd.DataFrame:
    """One draw (``unit`` value) of the claim's data, picked at random, with its own noise."""
    units = pd.unique(t[n.unit])
    return t[t[n.unit] == units[rng.integers(len(units))]]


MAKERS = {"no_effect": no_effect, "another_law": another_law, "collapse": collapse, "fewer_draws": fewer_draws}


# ----------------------------------------------------------------------------------------- judging
def verdict(claim: C.Claim, table: pd.DataFrame) -> str:
    """The claim's own verdict on ``table`` (``claims.evaluate`` at the paper scale), where its value
    meets its expectation. A value that misses it cannot pass (``evaluate`` would say "not reproduced",
    or "inconclusive" within its margin): it is read from the measure alone, as not reproduced (or
    "check fails"), without the standard error ``evaluate`` would bootstrap. So ``inconclusive_share``
    counts the tables that meet the expectation but not by the margin: a lower bound on all that
    ``evaluate`` would call inconclusive."""
    t = C.rows(claim, table)
    if not t.empty:
        op, value, tol = claim.expectation()
        try:
            measured = C._value(claim, t)
        except Exception:  # noqa: BLE001 - a counterfeit its measure cannot read: evaluate says so
            measured = None
        if measured is not None and not C.judge(op, value, tol, measured):
            return {C.CLAIM: C.NOT_REPRODUCED, C.CHECK: C.FAILS}[claim.kind]
    try:
        return C.evaluate(claim, table, "paper")["verdict"]
    except Exception as e:  # noqa: BLE001 - a counterfeit the claim cannot judge is not a pass
        return f"{C.INVALID}: {type(e).__name__}"


def base(claim: C.Claim, root: Path, cache: dict, cells: dict) -> pd.DataFrame | None:
    """The rows the claim reads in the reference under ``root`` (every column of its table, so that a
    draw's column it does not declare can be cut), or, for a table the reference does not hold (a GPU
    experiment), one built from the paper table's cells (``cells``: its cell claims by table): three
    seeds a cell, the cell's keys, the value to be collapsed."""
    if claim.table not in cache:
        p = Path(paths.existing_table(str(root), claim.table))
        cache[claim.table] = pd.read_csv(p) if p.exists() else None
    table = cache[claim.table]
    if table is None:
        built = _built([claim] if claim.cell is not None else cells.get(claim.table, []), claim.columns)
        return None if built is None else (built.query(claim.where) if claim.where and claim.cell is None else built)
    return table.query(claim.where) if claim.where else table


def _built(cell_claims: list, columns) -> pd.DataFrame | None:
    """A table of the cells of ``cell_claims``: their keys, three seeds each (``rep``, ``run``) and the
    claim's other ``columns`` blank, to be collapsed."""
    if not cell_claims:
        return None
    t = pd.DataFrame([{**c.cell, "rep": r, "run": f"{c.id}#{r}"} for c in cell_claims for r in range(3)])
    for c in columns:
        if c not in t:
            t[c] = np.nan
    return t


def cell_nulls(claim: C.Claim) -> Nulls:
    """A cell of a paper table faces the collapse of its seeds (its value column the block's last
    accuracy column), unless its expectation admits chance (the paper's cell is itself at chance):
    collapsed seeds are then what it reports, not a counterfeit of it."""
    value = [c for c in claim.columns if c.endswith("_acc")][-1]
    other = "one cell of a paper table: the other families compare cells, which a cell claim does not"
    skip = {f: other for f in FAMILIES if f != "collapse"}
    if claim.chance is None or C.judge(*claim.expectation(), claim.chance):
        skip["collapse"] = (f"the paper's cell, {claim.reported}, is at chance" if claim.chance is not None
                            else "its block gives no chance level")
        return Nulls(value=value, cells=tuple(claim.cell), unit="rep", skip=skip)
    return Nulls(value=value, cells=tuple(claim.cell), unit="rep", collapse=(claim.nulls or {}).get("collapse"),
                 skip=skip)


def trials(claim: C.Claim, nulls: Nulls, family: str, t: pd.DataFrame, n: int) -> list[str]:
    """``n`` counterfeits of ``family`` from ``t``, each judged: their verdicts."""
    seed = zlib.crc32(f"{claim.id}/{family}".encode())
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append(verdict(claim, MAKERS[family](t, nulls, rng)))
    return out


def run(root: str | Path = "reference/paper", claims_file: str | Path = "claims.yaml", ids=None,
        n: int = TRIALS, families=FAMILIES) -> pd.DataFrame:
    """One row per (judged claim, family): its counterfeits' share of passing verdicts, or why the
    family does not apply."""
    root = Path(root)
    cache: dict = {}
    rows = []
    listed = C.load(claims_file)
    cells: dict = {}
    for c in listed:
        if c.cell is not None:
            cells.setdefault(c.table, []).append(c)
    for claim in listed:
        if not judged(claim) or (ids and claim.id not in ids and claim.block not in ids):
            continue
        nulls = cell_nulls(claim) if claim.cell is not None else Nulls.of(claim)
        t = base(claim, root, cache, cells)
        for family in families:
            row = {"claim": claim.id, "paper": claim.paper, "kind": claim.kind, "table": claim.table,
                   "family": family, "trials": 0, "reproduced_share": np.nan, "inconclusive_share": np.nan,
                   "verdict": "", "null": "", "why": ""}
            if family in nulls.skip:
                row["why"] = nulls.skip[family]
            elif t is None or t.empty or (cache[claim.table] is None and family != "collapse"):
                # only a collapse can be drawn from a table built from the cells' keys
                row["why"] = (f"table {claim.table} is not in the reference (a GPU experiment): no data of ours to "
                              f"draw this null from")
            elif not nulls.applies(family):
                raise ValueError(f"claim {claim.id}: its nulls say nothing of {family}; give its spec in "
                                 f"claims.yaml (nulls:) or say why it cannot make the claim false "
                                 f"(nulls: skip: {{{family}: ...}})")
            else:
                got = trials(claim, nulls, family, t, n)
                row.update(trials=n, reproduced_share=float(np.mean([v in PASSED for v in got])),
                           inconclusive_share=float(np.mean([v == C.INCONCLUSIVE for v in got])),
                           verdict=pd.Series(got).value_counts().idxmax(), null=_describe(nulls, family))
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _describe(n: Nulls, family: str) -> str:
    """The null in a few words, for the CSV."""
    if family == "no_effect":
        centre = n.no_effect if isinstance(n.no_effect, str) else f"{n.no_effect:g}"
        return f"{n.value} = {centre} + shuffled residuals about {'/'.join(n.cells) or 'the mean'}"
    if family == "another_law":
        return (f"{n.value} along {n.law['along']}{' per ' + '/'.join(n.law['by']) if n.law.get('by') else ''}: "
                f"{' or '.join(_curves(n.law))} through the same ends")
    if family == "collapse":
        return f"{n.value} at chance ({n.collapse}) in every {n.unit or 'run'}"
    return f"one {n.unit}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m reluinit.report.counterfeit", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default="reference/paper", help="the results tree whose tables are the base")
    p.add_argument("--claims", default="claims.yaml")
    p.add_argument("--out", default=None, help="CSV to write (default: ROOT/counterfeit.csv)")
    p.add_argument("--trials", type=int, default=TRIALS)
    p.add_argument("--only", nargs="*", help="claim ids (or a cell block's id)")
    a = p.parse_args(argv)
    start = time.process_time()
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # counterfeits take logs of what they made
        warnings.simplefilter("ignore", RuntimeWarning)
        card = run(a.root, a.claims, a.only, a.trials)
    seconds = time.process_time() - start
    out = Path(a.out or Path(a.root) / "counterfeit.csv")
    card.to_csv(out, index=False, float_format="%.4g")
    tried = card[card.trials > 0]
    over = tried[tried.reproduced_share > BAR]
    print(f"{len(tried)} (claim, family) pairs tried, {int(tried.trials.sum())} counterfeits, "
          f"{len(card) - len(tried)} not applicable (each says why); {len(over)} above {BAR:.0%} reproduced; "
          f"CPU time {seconds:.0f} s; written to {out}")
    for _, r in over.iterrows():
        print(f"  {r.claim} {r.family}: {r.reproduced_share:.0%} of {r.trials} pass ({r.null})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
