"""The claims scorecard: every quantitative claim of the five papers, checked against our tables.

``claims.yaml`` (project root) lists the claims. Each names the catalogue table it is computed
from, the columns it reads, an optional row filter, an expression giving one number, and what
the paper says that number is::

    - id: OP-1
      paper: OP
      place: Figure 1
      claim: He keeps the mean activation ratio within 0.1 of 1 at every layer (width 4060)
      table: OP-F1
      columns: [init, width, layer, act_ratio]
      where: init == 'he_fan_out' and width == 4060     # pandas query, optional
      measure: (t.groupby('layer').act_ratio.mean() - 1).abs().max()
      expect: "<= 0.1"        # or "> 0", "== true", or "1.5 ± 0.15" (absolute tolerance)
      scale: any              # or paper: not judged on the quick scale's toy sizes

``measure`` is a Python expression over ``t`` (the filtered table, restricted to ``columns`` so
that every column a claim reads is declared), ``np``, ``pd`` and the helpers below. A ``cells``
block lists the cells of a paper table (RP's accuracy tables) compactly; each cell becomes one
claim. Verdicts: "reproduced", "not reproduced", or "not run at this scale" (a paper-scale claim
at the quick scale, or a table the workflow has not built).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import paths

REPRODUCED, NOT_REPRODUCED, NOT_RUN = "reproduced", "not reproduced", "not run at this scale"
COLUMNS = ["claim", "paper", "place", "statement", "table", "expected", "measured", "scale",
           "verdict", "note"]


# Helpers a claim's expression may call.
def slope(x, y) -> float:
    """Least-squares slope of y on x."""
    return float(np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)[0])


def rate(x, y) -> float:
    """Per-unit growth factor of y in x: exp of the slope of log y on x (> 1: exponential growth)."""
    return math.exp(slope(x, np.log(np.asarray(y, float))))


def corr(x, y) -> float:
    return float(np.corrcoef(np.asarray(x, float), np.asarray(y, float))[0, 1])


def spearman(x, y) -> float:
    return float(pd.Series(np.asarray(x, float)).corr(pd.Series(np.asarray(y, float)), method="spearman"))


def r2(x, y) -> float:
    """Coefficient of determination of the straight-line fit of y on x."""
    return corr(x, y) ** 2


def runs(t: pd.DataFrame, key: str = "run") -> pd.DataFrame:
    """One row per training run (run-level columns repeat on every epoch row)."""
    return t.drop_duplicates(key)


HELPERS = {"np": np, "pd": pd, "slope": slope, "rate": rate, "corr": corr, "spearman": spearman,
           "r2": r2, "runs": runs}

_EXPECT = re.compile(r"\s*(<=|>=|==|<|>|≈)?\s*([-+0-9.eE]+|true|false)\s*(?:±\s*([0-9.eE]+))?\s*$")


@dataclass
class Claim:
    id: str
    paper: str
    place: str
    claim: str
    table: str
    columns: list[str]
    measure: str
    expect: str
    where: str | None = None
    scale: str = "any"

    def expectation(self) -> tuple[str, float, float]:
        """(comparison, value, tolerance) parsed from ``expect``."""
        m = _EXPECT.fullmatch(str(self.expect))
        if not m:
            raise ValueError(f"claim {self.id}: cannot read expect {self.expect!r} "
                             "(use '<= 0.1', '> 0', '== true' or '1.5 ± 0.15')")
        op, value, tol = m.groups()
        value = {"true": 1.0, "false": 0.0}[value] if value in ("true", "false") else float(value)
        if tol is not None:
            return "≈", value, float(tol)
        if op in (None, "≈"):
            raise ValueError(f"claim {self.id}: '{self.expect}' needs a tolerance ('± x')")
        return op, value, 0.0


def _cell_claims(block: dict) -> list[Claim]:
    """One claim per cell of a paper table: the cell's keys select the rows, its value ± spread
    (widened to ``min_tolerance``) is what the paper reports."""
    out = []
    keys = block["keys"]
    for row in block["rows"]:
        *key_values, value, spread = row
        where = " and ".join(f"{k} == {v!r}" for k, v in zip(keys, key_values))
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, key_values))
        tol = max(float(spread), float(block.get("min_tolerance", 0)))
        out.append(Claim(
            id=f"{block['id']}[{'/'.join(map(str, key_values))}]", paper=block["paper"],
            place=block["place"], claim=f"{block['claim']} ({label}): {value} ± {spread}",
            table=block["table"], columns=list(dict.fromkeys(keys + block["columns"])),
            measure=block["measure"], expect=f"{value} ± {tol:g}", where=where,
            scale=block.get("scale", "paper")))
    return out


def load(path: str | Path) -> list[Claim]:
    """Every claim of ``claims.yaml``, cell blocks expanded; ids must be unique."""
    doc = yaml.safe_load(Path(path).read_text())
    claims = [Claim(**c) for c in doc.get("claims", [])]
    for block in doc.get("cells", []):
        claims += _cell_claims(block)
    seen = set()
    for c in claims:
        if c.id in seen:
            raise ValueError(f"claim id {c.id} is used twice")
        seen.add(c.id)
        c.expectation()  # fail on an unreadable expectation when loading, not when judging
    return claims


def judge(op: str, value: float, tol: float, measured: float) -> bool:
    if not np.isfinite(measured):
        return False
    return {
        "≈": lambda: abs(measured - value) <= tol,
        "<": lambda: measured < value,
        "<=": lambda: measured <= value,
        ">": lambda: measured > value,
        ">=": lambda: measured >= value,
        "==": lambda: measured == value,
    }[op]()


def missing_columns(claim: Claim, table: pd.DataFrame) -> list[str]:
    return [c for c in claim.columns if c not in table.columns]


def measure(claim: Claim, table: pd.DataFrame) -> float | None:
    """The claim's number on ``table`` (None when no row matches its filter); raises on a claim
    that names a column the table lacks."""
    missing = missing_columns(claim, table)
    if missing:
        raise KeyError(f"claim {claim.id}: table {claim.table} has no column(s) {missing}")
    t = table[claim.columns]
    if claim.where:
        t = t.query(claim.where)
    if t.empty:
        return None
    value = eval(claim.measure, dict(HELPERS), {"t": t})  # noqa: S307 - the project's own claims file
    return float(value)


def evaluate(claim: Claim, table: pd.DataFrame | None, scale: str) -> dict:
    """One scorecard row: the claim, what the paper expects, what we measure, and the verdict."""
    op, value, tol = claim.expectation()
    row = {"claim": claim.id, "paper": claim.paper, "place": claim.place, "statement": claim.claim,
           "table": claim.table, "expected": str(claim.expect), "measured": float("nan"),
           "scale": scale, "verdict": NOT_RUN, "note": ""}
    if scale == "smoke":  # truncated runs on generated data: they show the jobs run, nothing more
        row["note"] = "smoke scale: truncated jobs on synthetic data, nothing is judged"
        return row
    if claim.scale not in ("any", scale):
        row["note"] = f"judged at the {claim.scale} scale only"
        return row
    if table is None:
        row["note"] = f"table {claim.table} not built"
        return row
    measured = measure(claim, table)
    if measured is None:  # e.g. a sparsity or model this configuration does not train
        row["note"] = "no rows match: not in this configuration"
        return row
    row["measured"] = measured
    if not np.isfinite(measured):
        row["note"] = "the measure is not finite"
    row["verdict"] = REPRODUCED if judge(op, value, tol, measured) else NOT_REPRODUCED
    return row


def scorecard(claims: list[Claim], results: str, scale: str) -> pd.DataFrame:
    """Every claim evaluated against the tables under ``results`` (tables read once each)."""
    tables: dict[str, pd.DataFrame | None] = {}
    rows = []
    for c in claims:
        if c.table not in tables:
            p = Path(paths.table(results, c.table))
            tables[c.table] = pd.read_csv(p) if p.exists() else None
        rows.append(evaluate(c, tables[c.table], scale))
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Counts of verdicts per paper."""
    if card.empty:
        return pd.DataFrame(columns=[REPRODUCED, NOT_REPRODUCED, NOT_RUN])
    counts = card.groupby(["paper", "verdict"]).size().unstack(fill_value=0)
    return counts.reindex(columns=[REPRODUCED, NOT_REPRODUCED, NOT_RUN], fill_value=0)


_COLOURS = {REPRODUCED: "#cce5cc", NOT_REPRODUCED: "#f4c7c3", NOT_RUN: "#e8e8e8"}


def write_html(card: pd.DataFrame, path: str | Path, scale: str) -> None:
    """The scorecard as one HTML page: verdict counts per paper, then every claim, coloured by
    verdict (for the Snakemake report, where it comes first)."""
    def colour(row):
        return [f"background-color: {_COLOURS.get(row['verdict'], 'white')}"] * len(row)

    body = card.drop(columns=["scale"]).style.apply(colour, axis=1).format(
        {"measured": lambda v: "" if pd.isna(v) else f"{v:.4g}"}).hide(axis="index").to_html()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(
        f"<html><head><meta charset='utf-8'><title>Claims scorecard ({scale})</title></head><body>"
        f"<h1>Claims scorecard, {scale} scale</h1><p>Every claim of <code>claims.yaml</code> judged "
        f"against this run's tables. Claims that need the paper's sizes say "
        f"'{NOT_RUN}' at the quick scale.</p>{summary(card).to_html()}<h2>Claims</h2>{body}</body></html>")
