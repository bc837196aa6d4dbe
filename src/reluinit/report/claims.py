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
      why: ...                # optional: what a disagreement means (read on the scorecard)
      also: {label: ..., where: ...}   # optional (or a list): the same measure under another filter, in the note
      note: ...               # optional: a fixed remark on how the claim reads the table, in the note
      whole: true             # optional: reads a region or the whole grid, so a table still
                              # arriving part by part (``reference export``) judges it only once
                              # every run of its region is there (``planned_runs``)
      kind: claim             # or check (a proven bound, our construction), calibration (a setting of ours
                              # chosen to meet the paper: shown, not judged)
      expect_from: paper      # or ours, or "paper, our tolerance": who set the expectation
      unit: net_seed          # optional: the column naming each independent draw (net, seed) a bootstrap
                              # resamples for the measure's standard error
      se: ...                 # optional, instead: an expression giving that standard error
      quote: "..."            # the paper's words the claim stands on (verbatim)
      ours: "..."             # what the paper does not give: tolerances, thresholds, settings ("" if none)
      fails: "..."            # a plausible result that would fail it

``quote``, ``ours`` and ``fails`` make the audit record, ``docs/claims.md``
(``python -m reluinit.report.claims record > docs/claims.md``).

``measure`` is a Python expression over ``t`` (the filtered table, restricted to ``columns`` so
that every column a claim reads is declared), numpy's arithmetic (``NUMPY``), the helpers below,
plain builtins (``SAFE_BUILTINS``) and table methods (``METHODS``); ``where`` compares declared
columns. ``check_expression`` refuses anything else when the file loads (an import, a file, a
dunder, ``@`` locals, a method that reads, writes or evaluates), naming the claim and the construct. A ``cells``
block lists the cells of a paper table (RP's accuracy tables) compactly; each cell becomes one
claim. Verdicts of a claim of the paper: "reproduced", "not reproduced", "inconclusive" (with a
``unit``, its value lies within two standard errors of its threshold: a bootstrap over the nets or
seeds cannot tell the verdict); of a check: "check holds" or "check fails"; of a calibration:
"calibration (shown)" where met, "calibration not met" where not (its value shown beside what it was
chosen to meet, not judged: the setting of ours missed it, counted apart); any may be "not run at
this scale" (a paper-scale claim at the quick scale, or a table the workflow has not built), or
"invalid" when the rows a claim reads
hold NaN or inf in a column its experiment does not declare may hold them (the note counts them;
a declared one is named in the note, with what it means: ``catalogue.undefined``). ``why`` says what a verdict other than
"reproduced" means (stand-in data, toy sizes, a number the paper's own bound rules out), so that
the scorecard never shows a bare disagreement; a cell block's ``why`` covers all its cells.
"""

from __future__ import annotations

import ast
import builtins
import math
import os
import re
import signal
from dataclasses import dataclass, fields
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .. import integrity
from ..pipeline import catalogue, jobs, paths
from ..pipeline.config import read_yaml, yaml_problem
from ..pipeline.shared import take

# What a claim is (``kind``), and so what its verdict can be:
# - "claim": a statement of the paper about what happens: reproduced, not reproduced, or
#   inconclusive (its measured value within two standard errors of its threshold: the power we
#   have cannot tell);
# - "check": a proven bound, or the exactness of a construction of ours: it holds, or fails (only a
#   bug can fail it);
# - "calibration": a setting of ours chosen so that the paper's statement holds: shown, not judged.
CLAIM, CHECK, CALIBRATION = "claim", "check", "calibration"
KINDS = (CLAIM, CHECK, CALIBRATION)
REPRODUCED, NOT_REPRODUCED, NOT_RUN = "reproduced", "not reproduced", "not run at this scale"
INCONCLUSIVE = "inconclusive"
HOLDS, FAILS, SHOWN, NOT_MET = "check holds", "check fails", "calibration (shown)", "calibration not met"
INVALID = "invalid"  # its rows hold NaN or inf where the table's experiment promises numbers
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, HOLDS, FAILS, SHOWN, NOT_MET, NOT_RUN, INVALID)
# Where a claim's expectation comes from (``expect_from``): a number or threshold the paper states,
# one of ours (the paper gives words: "weakly", "trainable"), or the paper's number in a window of ours.
PAPER, OURS, PAPER_OUR_TOLERANCE = "paper", "ours", "paper, our tolerance"
EXPECT_FROM = (PAPER, OURS, PAPER_OUR_TOLERANCE)
COLUMNS = ["claim", "paper", "kind", "place", "statement", "table", "expected", "expect_from", "measured", "se",
           "scale", "verdict", "note", "why"]
TEXT_COLUMNS = ["claim", "paper", "kind", "place", "statement", "table", "expected", "expect_from", "scale",
                "verdict", "note", "why"]
# Resamples of a claim's bootstrap standard error (``unit``), drawn from a fixed seed: a scorecard
# judged twice from the same tables is the same file.
BOOTSTRAP_N, BOOTSTRAP_SEED = 200, 0


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


def packed(text) -> pd.Series:
    """The numbers of one ``;``-joined cell (RP-F1's ``chi_measured_<stage>_nets``: one per net)."""
    return pd.Series([float(v) for v in str(text).split(";") if v.strip()], dtype=float)


def cells(t: pd.DataFrame, by=("setup", "depth", "sparsity"), value: str = "final_test_acc") -> pd.Series:
    """One value per cell of a grid trained at several seeds: the mean of ``value`` over the cell's
    runs (each run read once, ``runs``), indexed by ``by``."""
    return runs(t).groupby(list(by))[value].mean()


def common_grid(values: pd.Series) -> pd.DataFrame:
    """``values`` indexed by (x, column), each column measured on its own x points, as a table with a
    column per second key, each interpolated linearly onto every x inside the range all columns cover:
    TG's discrete weights sit on their own sigma_w grid (sqrt(C(C+1)/3)), so comparing the three
    distributions "for a given sigma_w" reads the other two between their points."""
    cols = {k: v.droplevel(1).sort_index() for k, v in values.groupby(level=1)}
    lo, hi = max(c.index.min() for c in cols.values()), min(c.index.max() for c in cols.values())
    x = np.unique(np.concatenate([c.index[(c.index >= lo) & (c.index <= hi)] for c in cols.values()]))
    return pd.DataFrame({k: np.interp(x, c.index, c.to_numpy(float)) for k, c in cols.items()}, index=x)


def _fit_error(y: np.ndarray, curves, lo: float, hi: float) -> float:
    """The smallest root-mean-square relative error of ``a + b f`` (b >= 0, a >= 0) to ``y`` over the
    curves ``f = curves(k)`` (one row per value of k, a column) of a shape parameter k in [lo, hi],
    each fitted by weighted least squares (weights 1/y: relative errors): a grid of k, then a finer
    one around its best."""
    def errors(k):
        f = curves(k[:, None])
        f = f / f.max(axis=1, keepdims=True)  # scales b only: keeps the 2x2 systems well conditioned
        w2 = y ** -2.0
        s11, s12, s22 = w2.sum(), (w2 * f).sum(axis=1), (w2 * f ** 2).sum(axis=1)
        t1, t2 = (w2 * y).sum(), (w2 * f * y).sum(axis=1)
        det = s11 * s22 - s12 ** 2
        b = np.maximum(np.where(det > 1e-12 * s11 * s22, s11 * t2 - s12 * t1, 0.0) / np.where(det > 0, det, 1), 0.0)
        a = (t1 - s12 * b) / s11
        # a >= 0 (a count or length is no less than nothing at depth 0): the best b at a = 0 where not
        b = np.where(a < 0, np.maximum(t2 / s22, 0.0), b)
        a = np.maximum(a, 0.0)
        return np.sqrt(((((a[:, None] + b[:, None] * f) - y) / y) ** 2).mean(axis=1))

    k = np.linspace(lo, hi, 400)
    i = int(np.argmin(errors(k)))
    fine = np.linspace(k[max(i - 1, 0)], k[min(i + 1, len(k) - 1)], 400)
    return float(min(errors(k).min(), errors(fine).min()))


def exponential(m: pd.Series, skip: int = 1) -> float:
    """How much better an exponential than a power law fits the growth of ``m`` (indexed by depth),
    both with a constant term: a + b r^d against a + b d^p (each with its best r or p, a, and b >= 0,
    by least squares on the relative error), over the depths from the second smallest on (the first is
    a single layer). The value is the power law's error over the sum of both: 1 where only an
    exponential fits, 0 where only a power law does (100 + d^2 included, which a ratio of growths reads
    as exponential), 1/2 where both fit alike (the data cannot tell). The exponentials fitted grow by a
    factor of 2 to 1e30 over the depths read: a slower one is a straight line there, which the power law
    p = 1 fits as well. 0 where ``m`` does not grow from its first depth to the middle one and from
    there to the last (flat or falling: no growth to shape). ``skip``: how many of the smallest depths are
    left out (1: a single layer; 0 for an axis, such as width, whose first point is no special case)."""
    depths = sorted(m.index)[skip:]
    d = np.array(depths, dtype=float)
    y = np.asarray(m.loc[depths], dtype=float)
    if len(d) < 3 or not np.all(np.isfinite(y)) or y.min() <= 0:
        return 0.0
    mid = int(np.argmin(np.abs(d - (d[0] + d[-1]) / 2)))
    if not (y[mid] > y[0] and y[-1] > y[mid]):
        return 0.0
    span = d[-1] - d[0]
    e_exp = _fit_error(y, lambda g: np.exp(g * (d - d[0]) / span), np.log(2), np.log(1e30))
    e_pow = _fit_error(y, lambda p: d ** p, 0.05, 12.0)
    return 0.5 if e_exp + e_pow == 0 else e_pow / (e_exp + e_pow)


HELPERS = {"np": np, "slope": slope, "rate": rate, "corr": corr, "spearman": spearman,
           "r2": r2, "runs": runs, "cells": cells, "packed": packed, "common_grid": common_grid, "exponential": exponential}

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
    why: str = ""
    # The same measure under another row filter, shown in the note beside the verdict's number
    # ({"label": ..., "where": ...}, or a list of them): e.g. TG's growth over all layers beside
    # layers 2..L, RP-F3's verdicts under the readings the paper leaves open (momentum 0.9, chi 0.9).
    also: dict | list | None = None
    note: str = ""  # a fixed remark shown in the note (how the claim reads the table)
    # Judged once every run of its region is done (the whole table where the plan cannot say which):
    # a count or extreme over a region of cells would change as its missing runs arrive (RP-F3's
    # trainable cells), where one cell's value would not.
    whole: bool = False
    kind: str = CLAIM  # KINDS
    expect_from: str = ""  # EXPECT_FROM: required of every claim (a cell block's are the paper's)
    unit: str | None = None  # the column of the draws a bootstrap resamples (standard error)
    se: str | None = None  # or an expression over ``t`` giving the standard error (draws packed in one cell)
    quote: str = ""  # the paper's words it stands on
    ours: str = ""   # the choices that are not the paper's
    fails: str = ""  # a plausible result that would fail it
    # How its counterfeits are made (``reluinit.report.counterfeit``, ``Nulls``): the column its effect
    # is in, the cells it compares, each family's null or why one cannot make the claim false.
    nulls: dict | None = None
    # A cell of a paper table (cell blocks only): its key values, and the paper's "mean ± sd".
    cell: dict | None = None
    reported: str = ""
    table_title: str = ""  # what the paper table reports (the block's claim)
    chance: float | None = None  # a cell's accuracy at chance, in its table's unit (the block's ``chance``)

    @property
    def block(self) -> str:
        """The claim id without a cell's key (``RP-T2[cifar10/...]`` -> ``RP-T2``)."""
        return self.id.split("[")[0]

    @property
    def alsos(self) -> list[dict]:
        """``also`` as a list (one mapping, several, or none)."""
        return [self.also] if isinstance(self.also, dict) else list(self.also or [])

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
    (widened to ``min_tolerance``) is what the paper reports. A row may end with its own
    expectation, where the paper's number means something a window around it would not test
    (MNIST's "10.00 ± 0.0" is chance: a net predicting one class scores that class's share).
    ``chance`` (the table's accuracy at chance, one number or one per value of the ``dataset`` key)
    marks the cells whose window reaches chance although the paper's mean lies above it (a wide sd
    over three seeds: some seeds trained, some not): those are judged on their best seed
    (``best_measure``), which the paper's mean m and population sd s over n = 3 seeds place in
    [m + s / sqrt(2), m + s sqrt(2)], widened to ``min_tolerance``; a mean in its window would pass
    with every seed at chance."""
    out = []
    keys = block["keys"]
    chance = block.get("chance")
    for row in block["rows"]:
        key_values, (value, spread, *own) = row[: len(keys)], row[len(keys):]
        cell = dict(zip(keys, key_values))
        where = " and ".join(f"{k} == {v!r}" for k, v in zip(keys, key_values))
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, key_values))
        least = float(block.get("min_tolerance", 0))
        tol = max(float(spread), least)
        level = chance.get(cell.get("dataset")) if isinstance(chance, dict) else chance
        expect = own[0] if own else f"{value} ± {tol:g}"
        source = OURS if own else PAPER_OUR_TOLERANCE if tol > float(spread) else PAPER
        read, measure, note = (f" (judged as {expect})" if own else ""), block["measure"], \
            block.get("note", "") if own else ""
        if (not own and level is not None and "best_measure" in block and float(value) > level + least
                and float(value) - tol <= level + least):
            lo, hi = float(value) + float(spread) / math.sqrt(2) - least, float(value) + float(spread) * math.sqrt(2) + least
            expect, measure, source = f"{(lo + hi) / 2:.4g} ± {(hi - lo) / 2:.4g}", block["best_measure"], OURS
            read = f" (judged on its best seed, {lo:.4g} to {hi:.4g})"
            note = (f"the paper's {value} ± {spread} reaches chance ({level:g}) within its window; its best seed "
                    f"lies in [m + s/sqrt(2), m + s sqrt(2)] for a mean m and population sd s over three seeds, "
                    f"widened by {least:g}: judged there")
        out.append(Claim(
            id=f"{block['id']}[{'/'.join(map(str, key_values))}]", paper=block["paper"],
            place=block["place"], claim=f"{block['claim']} ({label}): {value} ± {spread}{read}",
            table=block["table"], columns=list(dict.fromkeys(keys + block["columns"])),
            measure=measure, expect=expect, where=where, note=note,
            scale=block.get("scale", "paper"), why=block.get("why", ""), quote=block.get("quote", ""),
            ours=block.get("ours", ""), fails=block.get("fails", ""), nulls=block.get("nulls"),
            cell=cell, reported=f"{value} ± {spread}", expect_from=source,
            table_title=block["claim"], chance=level))
    return out


class ClaimError(ValueError):
    """A claim that cannot be read or judged: the message names the file and line of ``claims.yaml``
    (where known), the claim, and what to change there."""
    ends_in_fix = True  # a job's log repeats it as what to do (``jobs.TODO_PREFIX``)


def load(path: str | Path) -> list[Claim]:
    """Every claim of ``claims.yaml``, cell blocks expanded; ids must be unique. A file that is not
    YAML, a claim with an unknown or missing key, or an expression claims may not use is refused
    here, naming the file, the line and the claim."""
    try:
        doc = read_yaml(path)
    except yaml.YAMLError:  # the file, line and column, not YAML's "<unicode string>"
        raise ClaimError(yaml_problem(path)) from None
    lines = _lines(path)
    claims = []
    for section in ("claims", "cells"):
        for entry in doc.get(section) or []:
            _check_shape(entry, section, f"{path}, line {lines.get(_get(entry, 'id'), '?')}")
            claims += [Claim(**entry)] if section == "claims" else _cell_claims(entry)
    seen = set()
    for c in claims:
        at = f"{path}, line {lines.get(c.id, lines.get(c.block, '?'))}"
        if c.id in seen:
            raise ClaimError(f"{at}: claim id {c.id} is used twice; give it another id")
        seen.add(c.id)
        try:
            if c.kind not in KINDS:
                raise ValueError(f"claim {c.id}: kind {c.kind!r} is none of {', '.join(KINDS)}")
            if catalogue.paper_of(c.table) != c.paper:  # its scorecard is its table's paper's
                raise ValueError(f"claim {c.id}: its paper is {c.paper} but its table {c.table} is "
                                 f"{catalogue.paper_of(c.table)}'s; give it `paper: {catalogue.paper_of(c.table)}` "
                                 f"or a table of {c.paper}")
            if c.unit and c.unit not in c.columns:
                raise ValueError(f"claim {c.id}: unit {c.unit!r} is not among its columns; add it there")
            c.expectation()  # fail on an unreadable expectation when loading, not when judging
            check_measure(c.id, c.measure, c.columns)
            if c.se:
                check_measure(c.id, c.se, c.columns)
            if any(not isinstance(a, dict) or set(a) != {"label", "where"} for a in c.alsos):
                raise ValueError(f"claim {c.id}: also holds {c.also!r}; give a mapping {{label: ..., where: ...}} or a "
                                 f"list of them")
            for where in (c.where, *(a["where"] for a in c.alsos)):
                if where:
                    check_expression(c.id, "where", where, c.columns)
            if c.expect_from not in EXPECT_FROM:
                raise ValueError(f"claim {c.id}: expect_from {c.expect_from!r} is none of {', '.join(EXPECT_FROM)}: "
                                 f"say who set its expectation ('paper': the paper states it)")
        except ValueError as e:
            raise ClaimError(f"{at}: {e}") from None
    return claims


_CELL_ONLY = {"cell", "reported", "table_title", "chance"}
# What the suite and the audit record need of every claim beyond the dataclass's own required fields.
REQUIRED = ("id", "paper", "place", "claim", "table", "columns", "measure", "expect", "expect_from", "quote", "fails")
# A cell block (``cells:``, a paper table): the fields its rows expand into claims with.
CELL_REQUIRED = ("id", "paper", "place", "claim", "table", "keys", "columns", "measure", "rows", "quote", "fails")


def _get(entry, key):
    return entry.get(key) if isinstance(entry, dict) else None


def _check_shape(entry, section: str, at: str) -> None:
    """Refuse, in one sentence naming the claim and the fix, an entry in the wrong section of
    ``claims.yaml`` or one that lacks a field the record needs (before a bare KeyError could)."""
    name = f"claim {_get(entry, 'id') or '(no id)'}"
    if not isinstance(entry, dict):
        raise ClaimError(f"{at}: {section}: holds {entry!r}, not a claim; write each claim as a mapping "
                         f"(- id: ..., paper: ..., ...)")
    is_cells = "rows" in entry or "keys" in entry
    if section == "cells" and not is_cells:
        raise ClaimError(f"{at}: {name} sits under `cells:`, which holds paper tables (keys, rows); move it "
                         f"up into the `claims:` section, above the line `cells:`")
    if section == "claims" and is_cells:
        raise ClaimError(f"{at}: {name} is a paper table (it has keys/rows) under `claims:`; move it below "
                         f"the line `cells:`")
    allowed = {f.name for f in fields(Claim)} if section == "claims" else \
        set(CELL_REQUIRED) | {"min_tolerance", "note", "scale", "why", "ours", "nulls", "chance", "best_measure"}
    required = REQUIRED if section == "claims" else CELL_REQUIRED
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ClaimError(f"{at}: {name} has unknown key(s) {', '.join(unknown)}; a claim's keys are "
                         f"{', '.join(sorted(allowed - _CELL_ONLY))}")
    missing = [k for k in required if entry.get(k) in (None, "")]
    if missing:
        raise ClaimError(f"{at}: {name} lacks {', '.join(missing)}; add "
                         + ", ".join(f"`{k}: {_HINTS.get(k, '...')}`" for k in missing))


_HINTS = {"quote": '"the paper\'s words it stands on (Section, page)"', "fails": '"a plausible result that would fail it"',
          "expect_from": "paper | ours | paper, our tolerance", "expect": '"0.8 ± 0.1" (or "> 0", "<= 0.1", "== true")',
          "columns": "[the table columns measure and where read]", "measure": "t.value.mean()",
          "keys": "[the columns a row's first values select]", "rows": "[[key values..., paper mean, paper ±], ...]"}


def _lines(path: str | Path) -> dict[str, int]:
    """The line of ``claims.yaml`` at which each claim (and cell block) starts, by id."""
    root = yaml.compose(Path(path).read_text())
    found = {}
    for section in root.value if isinstance(root, yaml.MappingNode) else []:
        for item in section[1].value if isinstance(section[1], yaml.SequenceNode) else []:
            for key, value in item.value if isinstance(item, yaml.MappingNode) else []:
                if key.value == "id":
                    found[value.value] = item.start_mark.line + 1
    return found


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


def rows(claim: Claim, table: pd.DataFrame, where: str | None = "claim") -> pd.DataFrame:
    """What the claim reads: ``table``'s rows that its filter (or ``where``, when given) keeps, in the
    columns it declares; raises on a claim that names a column the table lacks."""
    missing = missing_columns(claim, table)
    if missing:
        raise ClaimError(f"claim {claim.id}: table {claim.table} has no column(s) {', '.join(missing)}; its columns are "
                         f"{', '.join(map(str, table.columns))}: correct the claim's columns in claims.yaml")
    check_measure(claim.id, claim.measure, claim.columns)
    t = table[claim.columns]
    where = claim.where if where == "claim" else where
    if where:
        check_expression(claim.id, "where", where, claim.columns)
        t = t.query(where)
    return t


def measure(claim: Claim, table: pd.DataFrame, where: str | None = "claim") -> float | None:
    """The claim's number on ``table`` (None when no row matches its filter, or ``where`` when
    given); raises on a claim that names a column the table lacks."""
    t = rows(claim, table, where)
    return None if t.empty else _value(claim, t)


def _value(claim: Claim, t: pd.DataFrame, expression: str | None = None) -> float:
    """The claim's ``measure`` (or ``expression``, checked as it is) on its rows ``t``."""
    return float(eval(expression or claim.measure, {"__builtins__": SAFE_BUILTINS, **HELPERS}, {"t": t}))  # noqa: S307


# What a claim may use: it evaluates data, not code. ``check_expression`` parses a ``measure`` or
# ``where`` and refuses, when claims.yaml loads, any node, name or attribute outside these lists, so
# nothing reaches an import, a file, the interpreter or a pandas method that runs what it is given.
# Builtins a measure may call (no import, open, eval, getattr: nothing that reaches past the table).
SAFE_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "len", "list", "max", "min", "range", "round",
    "set", "sorted", "str", "sum", "tuple", "zip")}
# numpy's functions and constants a measure may name (``np.log``): arithmetic, no I/O, no submodules.
NUMPY = frozenset({
    "abs", "all", "any", "arange", "argmax", "argmin", "array", "asarray", "ceil", "clip", "corrcoef", "cumsum", "diff",
    "e", "exp", "expm1", "floor", "hypot", "inf", "isfinite", "isnan", "linspace", "log", "log10", "log1p", "log2",
    "max", "maximum", "mean", "median", "min", "minimum", "nan", "nanmax", "nanmean", "nanmin", "percentile", "pi",
    "polyfit", "prod", "quantile", "round", "sign", "sqrt", "std", "sum", "var", "where"})
# Methods and attributes of tables, series, group-bys, arrays and strings a claim may use (a table's
# declared columns are attributes too, but for one named as pandas names an attribute: PANDAS_NAMES). None
# writes, reads or evaluates text.
METHODS = frozenset({
    "abs", "agg", "aggregate", "all", "any", "apply", "astype", "between", "clip", "contains", "corr", "count", "cov",
    "cummax", "cummin", "cumprod", "cumsum", "diff", "drop_duplicates", "dropna", "empty", "endswith", "fillna",
    "first", "groupby", "head", "idxmax", "idxmin", "iloc", "index", "is_monotonic_decreasing",
    "is_monotonic_increasing", "isin", "isna", "item", "last", "loc", "lower", "max", "mean", "median", "min", "mode",
    "name", "nlargest", "notna", "nsmallest", "nunique", "pct_change", "pipe", "prod", "quantile", "rank",
    "reset_index", "round", "shape", "shift", "size", "sort_index", "sort_values", "startswith", "std", "str", "sum",
    "tail", "transform", "unique", "upper", "values", "var"})
# Methods that take a function, or a method's name as a string (pandas then calls that method: ``agg('to_csv',
# path)`` would write a file): their string arguments must name an allowed method or a column.
TAKERS = frozenset({"agg", "aggregate", "apply", "pipe", "transform"})
# Every name pandas (or numpy) answers as an attribute of a table, series, group-by, index or array.
# ``t.to_csv`` is the method even where the table has a column ``to_csv``: a declared column of such a
# name is no attribute a claim may use (read it as ``t['to_csv']``), so declaring it opens nothing.
PANDAS_NAMES = frozenset(name for kind in (pd.DataFrame, pd.Series, pd.Index, pd.core.groupby.DataFrameGroupBy,
                                           pd.core.groupby.SeriesGroupBy, np.ndarray) for name in dir(kind))
# The largest power a claim may write as a number (``x ** 2``): ``10 ** 10 ** 10`` would compute for ever.
MAX_EXPONENT = 100
_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv,
          ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor, ast.UnaryOp, ast.USub, ast.UAdd, ast.Not, ast.Invert,
          ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot,
          ast.Call, ast.keyword, ast.Name, ast.Load, ast.Store, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice,
          ast.Tuple, ast.List, ast.Dict, ast.Set, ast.IfExp, ast.Lambda, ast.arguments, ast.arg, ast.ListComp,
          ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.comprehension, ast.NamedExpr)


def check_measure(claim_id: str, expression: str, columns=()) -> None:
    """``check_expression`` of a claim's ``measure``."""
    check_expression(claim_id, "measure", expression, columns)


def check_expression(claim_id: str, field: str, expression: str, columns=()) -> None:
    """Refuse a ``measure`` (or, ``field="where"``, a row filter) that is not one expression or that
    uses anything outside the lists above, naming the claim and the construct: the documentation
    invites users to add claims, and a claim must not run code of its own."""
    if field == "where" and "@" in expression:  # pandas query's local variables: the caller's whole scope
        raise ValueError(f"claim {claim_id}: its where uses '@' (a local variable), which claims may not: a where "
                         "compares the table's declared columns with constants")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"claim {claim_id}: its {field} is not a Python expression ({e.msg}): {expression}") from None
    attributes = METHODS | {c for c in columns if c not in PANDAS_NAMES}
    columns = set(columns)
    bound = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names = columns | bound if field == "where" else {"t"} | (set(HELPERS) - {"np"}) | set(SAFE_BUILTINS) | bound
    numpy_refs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                  and n.value.id == "np" and field != "where"}

    def refuse(what: str):
        allowed = ("the table's declared columns, constants, comparisons and and/or/not" if field == "where" else
                   f"t with np's arithmetic (np.log, np.sqrt, ...), the helpers "
                   f"({', '.join(sorted(set(HELPERS) - {'np'}))}) and plain builtins ({', '.join(SAFE_BUILTINS)})")
        raise ValueError(f"claim {claim_id}: its {field} uses {what}, which claims may not: a {field} reads {allowed}, "
                         "and table methods from reluinit.report.claims.METHODS (no files, imports or code)")

    found = []  # (where in the text, what): the first is named
    for node in ast.walk(tree):
        at = getattr(node, "col_offset", 0)
        if not isinstance(node, _NODES):
            found.append((at, f"a {type(node).__name__} ({ast.unparse(node)[:40]!r})"))
        elif isinstance(node, ast.Name):
            if node.id.startswith("__") or (node.id not in names and id(node) not in numpy_refs):
                found.append((at, repr(node.id)))
        elif isinstance(node, ast.Attribute):
            ok = node.attr in NUMPY if id(node.value) in numpy_refs else node.attr in attributes
            if not ok or node.attr.startswith("_"):
                column = (f" (a pandas method or attribute, not its column {node.attr}: read that as t[{node.attr!r}])"
                          if node.attr in columns and id(node.value) not in numpy_refs else "")
                found.append((node.end_col_offset - len(node.attr), repr(node.attr) + column))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _too_high(node):
            found.append((at, f"the power {ast.unparse(node)[:40]!r} (an exponent written in numbers is one "
                              f"number of at most {MAX_EXPONENT}, and a power of numbers is not raised again)"))
        elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
            found.append((at, f"the constant {node.value!r}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TAKERS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                bad = _unwritten(arg, attributes, bound, numpy_refs)
                if bad is not None:
                    shown = repr(bad.value) if isinstance(bad, ast.Constant) else ast.unparse(bad)[:40]
                    found.append((bad.col_offset, f"{node.func.attr}({shown})"))
    if found:
        refuse(min(found, key=lambda f: f[0])[1])  # the first in the text (of a tie, the outer node)


def _too_high(node: ast.BinOp) -> bool:
    """Whether a power could compute for ever on Python's integers: an exponent written as numbers
    only that is not one number of at most ``MAX_EXPONENT``, or a power of numbers raised again."""
    def written(n):  # numbers and operators only: Python computes it exactly, however large
        return all(isinstance(x, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)) for x in ast.walk(n))

    exponent = node.right.operand if isinstance(node.right, ast.UnaryOp) else node.right
    if written(node.right) and not (isinstance(exponent, ast.Constant) and isinstance(exponent.value, (int, float))
                                    and not isinstance(exponent.value, bool) and abs(exponent.value) <= MAX_EXPONENT):
        return True
    return written(node) and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Pow) for x in ast.walk(node.left))


def _unwritten(node: ast.AST, named: set, bound: set, numpy_refs: set) -> ast.AST | None:
    """The first part of a taker's argument that is not written out, or None. pandas calls the method a
    string names, so a string must be a literal naming an allowed method or a column; anything that
    computes a value (``'to_' + 'csv'``, ``str(...)``, a subscript, a bound name) could compute
    ``'to_csv'``. Written out: such strings, numbers, lambdas (their bodies are checked as
    everything else), arithmetic on numbers (``100 - 5``), ``np.<function>``, names not ``bound`` in
    the expression (a helper or builtin; the name check refuses any other), and lists, tuples and
    dicts of them (a dict's keys literals: ``{**x}`` unpacks what it does not show)."""
    if isinstance(node, ast.Constant):
        return node if isinstance(node.value, str) and node.value not in named else None
    if isinstance(node, (ast.BinOp, ast.UnaryOp)) and all(
            isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)) and not (
                isinstance(n, ast.Constant) and not isinstance(n.value, (int, float))) for n in ast.walk(node)):
        return None
    if isinstance(node, ast.Lambda) or (isinstance(node, ast.Name) and node.id not in bound):
        return None
    if isinstance(node, ast.Attribute) and id(node.value) in numpy_refs:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = node.elts
    elif isinstance(node, ast.Dict):
        unpacked = next((k or node for k in node.keys if not isinstance(k, ast.Constant)), None)
        if unpacked is not None:  # a computed key, or None: ``{**x}``
            return unpacked
        parts = node.values
    else:
        return node
    return next((bad for bad in (_unwritten(e, named, bound, numpy_refs) for e in parts) if bad is not None), None)


def evaluate(claim: Claim, table: pd.DataFrame | None, scale: str, planned: pd.DataFrame | None = None) -> dict:
    """One scorecard row: the claim, what the paper expects, what we measure, and the verdict.
    ``planned``: the runs the claim's table will hold when complete (``planned_runs``), by which a
    ``whole`` claim on a partial table is judged once every run of its region is there."""
    op, value, tol = claim.expectation()
    row = _blank_row(claim, scale)
    if scale == "smoke":  # truncated runs on generated data: they show the jobs run, nothing more
        row["note"] = "smoke scale: truncated jobs on synthetic data, nothing is judged"
        return row
    if claim.scale not in ("any", scale):
        row["note"] = f"judged at the {claim.scale} scale only"
        return row
    if table is None:
        row["note"] = f"table {claim.table} not built"
        return row
    region = claim.whole and table.attrs.get("partial")
    if region:
        done, total = region_progress(claim.where, table, planned)
        if not total or done < total:
            row["note"] = (f"reads a region of {claim.table}'s cells: judged once every run of it is done ({done} of "
                           f"its {total} runs so far, in {table.attrs['partial']} finished jobs)" if total else
                           f"reads a region of {claim.table}'s cells: judged once all its jobs are done "
                           f"({table.attrs['partial']} finished so far)")
            return row
    if table.empty and "file" in table.attrs:  # a whole table of no rows: nothing was measured
        row["note"] = (f"table {claim.table} is empty (0 rows): rebuild it with "
                       f"`{integrity.rebuild_command(table.attrs['file'])}`")
        return row
    t = rows(claim, table)
    if t.empty:  # e.g. a sparsity or model this configuration does not train, or not run yet
        row["note"] = ("no rows match: its cells are not among the finished jobs yet" if table.attrs.get("partial")
                       else "no rows match: not in this configuration")
        return row
    declared = catalogue.undefined(claim.table)
    found = jobs.nonfinite(table, claim.columns, rows=t.index)  # blanks judged on the whole table
    invalid = {c: n for c, n in found.items() if c not in declared}
    if invalid:  # pandas would drop them and judge the rest: the claim says so instead
        row["verdict"] = INVALID
        row["note"] = (f"invalid: {'; '.join(f'{n} in column {c}' for c, n in invalid.items())}, which "
                       f"{claim.table} does not declare may hold them; rebuild the table")
        return row
    row["measured"] = measured = _value(claim, t)
    notes = [claim.note] if claim.note else []
    if region:
        notes.insert(0, f"partial: every one of the {total} runs its region holds is done (in "
                        f"{table.attrs['partial']} finished jobs); the rest of the table is not run yet")
    elif table.attrs.get("partial"):
        notes.insert(0, f"partial: judged on the rows of {table.attrs['partial']} finished jobs, the rest not run yet")
    notes += [f"the rows read hold {n} in {c} ({declared[c]})" for c, n in found.items()
              if declared[c] not in catalogue.BLANKS]
    for also in claim.alsos:
        notes.append(f"{also['label']}: {_also(claim, table, also['where'], planned)}")
    if not np.isfinite(measured):
        notes.insert(0, "the measure is not finite")
    met = judge(op, value, tol, measured)
    if claim.unit or claim.se:
        draws = t[claim.unit].nunique() if claim.unit else None
        row["se"] = se = _value(claim, t, claim.se) if claim.se else standard_error(claim, t)
        if claim.kind == CLAIM and draws is not None and draws < 2:
            notes.append(f"inconclusive: it reads one {claim.unit} value, which has no spread to tell its "
                         f"verdict from chance; more {claim.unit} values would decide it")
            row["note"] = "; ".join(notes)
            row["verdict"] = INCONCLUSIVE
            return row
        width = margin(draws)
        if claim.kind == CLAIM and np.isfinite(measured) and undecided(op, value, tol, measured, se, width):
            over = ("over its draws" if claim.se else f"a bootstrap over its {draws} {claim.unit} values"
                    if draws >= SMALL else f"a jackknife over its {draws} {claim.unit} values")
            over += f", Student's t with {draws - 1} degrees of freedom" if draws else ""
            notes.append(f"inconclusive: {measured:.4g} lies within {width:.3g} standard errors ({se:.2g}, {over}) "
                         f"of where its verdict turns; more draws would decide it")
            row["note"] = "; ".join(notes)
            row["verdict"] = INCONCLUSIVE
            return row
    if claim.kind == CALIBRATION:
        notes.append(f"a setting of ours was chosen to meet it: {'met' if met else 'not met'}, not judged")
    row["note"] = "; ".join(notes)
    row["verdict"] = {CLAIM: (REPRODUCED, NOT_REPRODUCED), CHECK: (HOLDS, FAILS),
                      CALIBRATION: (SHOWN, NOT_MET)}[claim.kind][0 if met else 1]
    return row


def _also(claim: Claim, table: pd.DataFrame, where: str, planned: pd.DataFrame | None) -> str:
    """The claim's measure under an ``also`` filter, as its note prints it; on a partial table a
    ``whole`` claim's is shown once every run of that filter's region is done, as the verdict is."""
    if claim.whole and table.attrs.get("partial"):
        done, total = region_progress(where, table, planned)
        if not total:
            return "once the whole table is done"
        if done < total:
            return f"once every run of it is done ({done} of its {total} so far)"
    other = measure(claim, table, where)
    return "no rows" if other is None else f"{other:.4g}"


def planned_runs(config: dict, exp: str, scale: str) -> pd.DataFrame | None:
    """One row per run ``exp``'s complete table will hold, with the run's fields and ``run`` its key
    in the rows: its own parts' runs and those it takes from another experiment (config ``shared``,
    under their key there). None for an experiment that trains no runs of its own or is not in
    ``config``."""
    from ..pipeline import shared
    from ..pipeline.config import settings

    if exp not in config.get("experiments", {}) or not catalogue.entry(exp).trains:
        return None
    runs = [{**run, "run": key} for part in catalogue.parts(exp, settings(config, exp, scale)).values()
            for key, run in part["runs"].items()]
    src = shared.source(config, exp, scale)
    if src:
        theirs = catalogue.parts(src, settings(config, src, scale))
        runs += [{**theirs[part]["runs"][twin], "run": twin} for part, twin in shared.twins(config, exp, scale).values()]
    return pd.DataFrame(runs)


def region_runs(where: str | None, planned: pd.DataFrame | None) -> set[str]:
    """The run keys of ``planned`` (``planned_runs``) that the filter ``where`` keeps: the runs a
    ``whole`` claim waits for. Empty where that cannot be told (no plan, or a filter on a column
    only the results have): the claim then waits for the whole table."""
    if planned is None or planned.empty:
        return set()
    try:
        kept = planned.query(where) if where else planned
    except (KeyError, NameError, TypeError, ValueError):  # pandas' UndefinedVariableError is both of the first
        return set()
    return set(kept["run"])


def region_progress(where: str | None, table: pd.DataFrame, planned: pd.DataFrame | None) -> tuple[int, int]:
    """(runs of the region ``where`` selects that ``table`` holds, runs it selects): (0, 0) where
    the plan cannot say which runs those are."""
    region = region_runs(where, planned)
    return (len(region & set(table["run"])) if region and "run" in table else 0), len(region)


def edges(op: str, value: float, tol: float) -> list[float]:
    """Where a claim's verdict turns: its threshold, or the two ends of its window."""
    return [value - tol, value + tol] if op == "≈" else [value]


def undecided(op: str, value: float, tol: float, measured: float, se: float, width: float = 2.0) -> bool:
    """Whether ``measured`` lies within ``width`` standard errors ``se`` of where the verdict turns
    (``margin``: 2, or a t-quantile for few draws). An exact expectation ("== 1": every architecture,
    every cell) has no such margin: it is judged as measured, its standard error shown."""
    if op == "==" or not (np.isfinite(se) and se > 0):
        return False
    return bool(min(abs(measured - e) for e in edges(op, value, tol)) < width * se)


# Below SMALL draws a bootstrap has too few distinct resamples (3 values: 10) and reads its standard
# error low by sqrt((n - 1) / n) (18% at 3): a jackknife over the draws gives the standard error
# instead (for a mean, exactly sd / sqrt(n)). Whatever the estimate, a standard error from n draws is
# itself uncertain: the margin is Student's two-sided 95% quantile with n - 1 degrees of freedom
# (4.303 at 3 draws, 2.776 at 5, 2.262 at 10), and 2 from about 60 draws on.
SMALL = 5


def margin(draws: int | None) -> float:
    """How many standard errors from its threshold a claim's value must lie to be judged: Student's
    two-sided 95% quantile for ``draws`` draws (``n - 1`` degrees of freedom), at least 2; 2 where the
    draws are not counted (a ``se`` expression without a ``unit``)."""
    if draws is None or draws < 2:
        return 2.0
    from scipy.stats import t as student

    return max(2.0, float(student.ppf(0.975, draws - 1)))


def standard_error(claim: Claim, t: pd.DataFrame, n: int = BOOTSTRAP_N, seed: int = BOOTSTRAP_SEED) -> float:
    """The bootstrap standard error of ``claim``'s measure on its rows ``t``: its ``unit`` values
    (the nets or seeds drawn) resampled with replacement ``n`` times, each drawn value's rows
    relabelled apart (a draw taken twice counts twice, ``run`` keys too), the measure recomputed;
    the sd of those values (about their first, which leaves the sd as it is and makes identical
    values exactly 0: ``np.std`` of 200 copies of 0.1135 is 2.8e-17, a rounding of their mean that
    would call a cell whose every seed sits on its threshold undecided). NaN with fewer than two draws."""
    units = pd.unique(t[claim.unit])
    if len(units) < 2:
        return float("nan")
    where = {u: np.flatnonzero((t[claim.unit] == u).to_numpy()) for u in units}
    if len(units) < SMALL:
        return _jackknife(claim, t, units, where)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n):
        picked = rng.integers(len(units), size=len(units))
        rows = [where[units[i]] for i in picked]
        drawn = t.iloc[np.concatenate(rows)].copy()
        label = np.repeat(np.arange(len(picked)), [len(r) for r in rows])
        drawn[claim.unit] = label
        if "run" in drawn and claim.unit != "run":
            drawn["run"] = drawn["run"].astype(str) + "#" + label.astype(str)
        value = _value(claim, drawn)
        if np.isfinite(value):
            values.append(value)
    return float(np.std(np.subtract(values, values[0]), ddof=1)) if len(values) > 1 else float("nan")


def _jackknife(claim: Claim, t: pd.DataFrame, units, where: dict) -> float:
    """The jackknife standard error of ``claim``'s measure over its few ``unit`` values (``SMALL``):
    the measure with each value's rows left out in turn, sqrt((n - 1) / n * sum of squared deviations
    from their mean); for a mean over the draws it is exactly their sd / sqrt(n)."""
    n = len(units)
    values = [_value(claim, t.iloc[np.concatenate([where[v] for v in units if v != u])]) for u in units]
    values = np.asarray([v for v in values if np.isfinite(v)], float)
    if len(values) < n:
        return float("nan")
    values = values - values[0]  # about the first, as the bootstrap: identical values give exactly 0
    return float(np.sqrt((n - 1) / n * ((values - values.mean()) ** 2).sum()))


# What one claim may spend: a measure is data, but one such as ``sum(range(10**15))`` passes every
# check of its text and would hold the claims job for ever, and ``'x' * 10**12`` would take the
# machine's memory. Claims are judged in a child process under these limits; the claim that hits
# one is named on its row (verdict "invalid") and the others are judged as usual.
LIMITS = {"cpu_seconds": 60, "memory_bytes": 8 * 2**30}


def scorecard(claims: list[Claim], results: str, scale: str, limits: dict | None = None,
              config: dict | None = None) -> pd.DataFrame:
    """Every claim evaluated against the tables under ``results`` (tables read once each), in a
    child process under ``limits`` (``LIMITS``): a claim whose measure runs past its CPU seconds or
    memory gets an "invalid" row that says so and names it, and the child starts again after it.
    ``config``: the workflow config, whose ``shared`` runs a partial table (``_table``) takes from
    the tables it shares them with, and whose plan says which runs a ``whole`` claim's region holds
    (``planned_runs``; without it such a claim waits for the whole table)."""
    import multiprocessing as mp

    limits = {**LIMITS, **(limits or {})}
    shared = _shared_runs(config, {c.table for c in claims}, scale) if config else {}
    planned = {t: planned_runs(config, t, scale) for t in sorted({c.table for c in claims if c.whole})} if config else {}
    rows: list[dict] = []
    ctx = mp.get_context("fork")
    while len(rows) < len(claims):
        todo = claims[len(rows):]
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_judge_all, args=(todo, results, scale, limits, send, shared, planned),
                            daemon=True)
        child.start()
        send.close()
        while len(rows) < len(claims):
            try:
                kind, got = receive.recv()
            except EOFError:  # the child died on the claim it was judging
                child.join()
                what = (f"ran past {limits['cpu_seconds']} s of CPU" if child.exitcode == -signal.SIGXCPU
                        else f"ended the process judging it (exit code {child.exitcode})")
                rows.append(_over_limit(claims[len(rows)], scale, what))
                break
            if kind == "error":  # a claim that names what its table lacks stops the scorecard, with its fix
                child.join()
                raise got
            rows.append(got)
        child.join()
    return pd.DataFrame(rows, columns=COLUMNS)


def _judge_all(claims: list[Claim], results: str, scale: str, limits: dict, send, shared: dict | None = None,
               planned: dict | None = None) -> None:
    """The child of ``scorecard``: each claim judged under the limits, its row sent as it is done."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], resource.RLIM_INFINITY))
    tables: dict[str, pd.DataFrame | None] = {}
    for c in claims:
        if c.table not in tables:
            tables[c.table] = _table(results, c.table, (shared or {}).get(c.table))
        used = int(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]))
        resource.setrlimit(resource.RLIMIT_CPU, (used + limits["cpu_seconds"], resource.RLIM_INFINITY))
        try:
            row = evaluate(c, tables[c.table], scale, (planned or {}).get(c.table))
        except MemoryError:
            row = _over_limit(c, scale, f"needed more than {limits['memory_bytes'] / 2**30:g} GB of memory")
        except ClaimError as e:  # a claim that cannot be read against its table: handed to the parent
            send.send(("error", e if _picklable(e) else RuntimeError(f"claim {c.id}: {e}")))
            return
        except (Exception, RecursionError) as e:  # noqa: BLE001 - its measure failed: this claim, not the card
            message = str(e).splitlines()[0] if str(e) else ""
            row = _blank_row(c, scale, INVALID, f"invalid: its measure raised {type(e).__name__}"
                             f"{': ' + message if message else ''}; correct it in claims.yaml (claim {c.id})")
        send.send(("row", row))
    send.close()


def _picklable(e: Exception) -> bool:
    import pickle

    try:
        pickle.dumps(e)
    except Exception:  # noqa: BLE001
        return False
    return True


def _blank_row(claim: Claim, scale: str, verdict: str = NOT_RUN, note: str = "") -> dict:
    """A scorecard row of ``claim`` with nothing measured yet."""
    return {"claim": claim.id, "paper": claim.paper, "kind": claim.kind, "place": claim.place,
            "statement": claim.claim, "table": claim.table, "expected": str(claim.expect),
            "expect_from": claim.expect_from, "measured": float("nan"), "se": float("nan"),
            "scale": scale, "verdict": verdict, "note": note, "why": claim.why}


def _over_limit(claim: Claim, scale: str, what: str) -> dict:
    """The row of a claim whose measure hit a limit of ``scorecard``."""
    return _blank_row(claim, scale, INVALID,
                f"invalid: its measure {what} and was stopped; make it cheaper in claims.yaml (claim {claim.id})")


def _table(results: str, exp: str, shared: dict[str, list[str]] | None = None) -> pd.DataFrame | None:
    """``exp``'s table under ``results``; for an experiment still running across sessions (the
    reference keeps its finished jobs, ``reference export``), its finished parts' rows together,
    with those of the runs it takes from other experiments (``shared``: ``{experiment: [run keys]}``)
    that their tables or finished parts hold, marked ``attrs["partial"]`` with the count of jobs they
    come from: its claims are judged on the cells those hold, and say so; None when there is none."""
    p = Path(paths.existing_table(results, exp))
    if p.exists():
        whole = pd.read_csv(p)
        whole.attrs["file"] = paths.table(results, exp)  # what rebuilds it, should it be empty
        return whole
    parts = sorted(Path(paths.part(results, exp, "x")).parent.glob("*.csv*"))
    frames = [pd.read_csv(f) for f in parts if f.name.endswith((".csv", ".csv.gz"))]
    jobs_done = len(frames)
    for src, runs in (shared or {}).items():
        theirs = _table(results, src)
        taken = take(theirs, runs) if theirs is not None else None
        if taken is not None and len(taken):
            frames.append(taken)
            jobs_done += taken["part"].nunique() if "part" in taken else 1
    if not frames:
        return None
    table = pd.concat(frames, ignore_index=True)
    table.attrs["partial"] = jobs_done
    return table


def _shared_runs(config: dict, exps, scale: str) -> dict[str, dict[str, list[str]]]:
    """``{experiment: {source: [its run keys]}}``: the runs each of ``exps`` takes from another
    (config ``shared``), for ``_table``."""
    from ..pipeline import shared

    out = {}
    for exp in sorted(exps):
        if exp in config["experiments"] and shared.source(config, exp, scale):
            twins = shared.twins(config, exp, scale)
            out[exp] = {shared.source(config, exp, scale): [run for _, run in twins.values()]}
    return out


def read(path: str | Path) -> pd.DataFrame:
    """A scorecard CSV as written: empty notes stay empty strings (pandas would read them as
    NaN and a page would print 'nan'); only ``measured`` is numeric."""
    card = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=False)
    for c in ("measured", "se"):
        if c in card:
            card[c] = pd.to_numeric(card[c].replace("", np.nan))
    return card.reindex(columns=COLUMNS, fill_value="")


# The columns of ``summary``: the paper's claims by verdict, then the checks and the calibrations,
# each kind counted apart; "invalid" only where a claim is.
SUMMARY = {"reproduced": (CLAIM, REPRODUCED), "not reproduced": (CLAIM, NOT_REPRODUCED),
           "inconclusive": (CLAIM, INCONCLUSIVE), "claims not run": (CLAIM, NOT_RUN),
           "checks holding": (CHECK, HOLDS), "checks failing": (CHECK, FAILS),
           "calibrations": (CALIBRATION, SHOWN), "calibrations not met": (CALIBRATION, NOT_MET),
           "invalid": (None, INVALID)}


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Counts per paper of the paper's claims by verdict, of the checks and of the calibrations
    (``SUMMARY``), the kinds apart; a check or calibration not run counts nowhere but its row."""
    kind = card["kind"].replace("", CLAIM) if "kind" in card else pd.Series(CLAIM, index=card.index)
    counts = {name: card[(card["verdict"] == v) & ((kind == k) if k else True)].groupby("paper").size()
              for name, (k, v) in SUMMARY.items()}
    out = pd.DataFrame(counts).fillna(0).astype(int)
    out = out.reindex(list(dict.fromkeys(card["paper"]))) if len(card) else out
    shown = [c for c in SUMMARY if c != "invalid" or out.get(c, pd.Series(dtype=int)).sum()]
    return out.reindex(columns=shown, fill_value=0).fillna(0).astype(int)


_COLOURS = {REPRODUCED: "#cce5cc", NOT_REPRODUCED: "#f4c7c3", NOT_RUN: "#e8e8e8", INVALID: "#f9d9a8",
            INCONCLUSIVE: "#fff2b3", HOLDS: "#dde8f4", FAILS: "#f4c7c3", SHOWN: "#eeeeee", NOT_MET: "#f9e0c8"}
NO_REASON = "no reason given in claims.yaml"


def _measured(value) -> str:
    return "" if pd.isna(value) else f"{value:.4g}"


def _not_run(r) -> str:
    """Why a cell has no number of ours, in a few words (its row's note): a toy table of the quick
    scale may have run beside a paper table whose cells are judged at the paper scale only."""
    note = "" if r is None else str(r["note"])
    m = re.match(r"judged at the (\w+) scale only", note)
    if m:
        return f"{m.group(1)} scale only"
    if "not built" in note:
        return "table not built"
    if "not in this configuration" in note:
        return "cell not in this configuration"
    return "not run yet" if "not among the finished jobs" in note else "not run"


def cell_blocks(claims: list[Claim]) -> dict[str, list[Claim]]:
    """The cells of each paper table (``RP-T1``: its cells, in claims.yaml's order)."""
    blocks: dict[str, list[Claim]] = {}
    for c in claims:
        if c.cell is not None:
            blocks.setdefault(c.block, []).append(c)
    return blocks


def pivot(card: pd.DataFrame, cells: list[Claim]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One paper table as the paper lays it out: a column per method (or per the first key of a
    table without methods), a row per the other keys; each cell gives the paper's mean ± sd and
    ours. Returns (text, verdict) frames of the same shape, for colouring."""
    keys = list(cells[0].cell)
    across = "method" if "method" in keys else keys[0]
    down = [k for k in keys if k != across]
    rows = card.set_index("claim")
    text: dict = {}
    verdict: dict = {}
    for c in cells:
        r = rows.loc[c.id] if c.id in rows.index else None
        ours = _not_run(r) if r is None or r["verdict"] == NOT_RUN else _measured(r["measured"])
        where = tuple(c.cell[k] for k in down) or ("",)
        text.setdefault(c.cell[across], {})[where] = f"{c.reported} | ours {ours}"
        verdict.setdefault(c.cell[across], {})[where] = NOT_RUN if r is None else r["verdict"]
    order = list(dict.fromkeys(tuple(c.cell[k] for k in down) or ("",) for c in cells))
    index = (pd.MultiIndex.from_tuples(order, names=down) if len(down) > 1
             else pd.Index([o[0] for o in order], name=down[0] if down else None))
    frames = [pd.DataFrame({col: [d[col].get(o, "") for o in order] for col in d}, index=index)
              for d in (text, verdict)]
    for f in frames:
        f.columns.name = across
    return frames[0], frames[1]


def styled_pivot(card: pd.DataFrame, cells: list[Claim]):
    """``pivot`` as a pandas Styler, each cell coloured by its verdict (for notebooks and pages).
    Its HTML ids derive from the table's id, not a random uuid, so a page rendered twice from the
    same claims is the same file."""
    text, verdict = pivot(card, cells)
    return text.style.set_uuid(re.sub(r"\W", "_", cells[0].table)).apply(
        lambda col: [f"background-color: {_COLOURS.get(v, 'white')}" for v in verdict[col.name]]
    ).format_index(lambda v: f"{v:g}" if isinstance(v, float) else v)  # 0.85, not 0.850000


def _links(table: str, paper: str, here: Path, results: Path) -> str:
    """Links from the page in ``here`` to the figure of ``table`` and its notebook section; the
    figure only where the tree holds the table (a tree with part of the catalogue, the reference,
    has no figure for the rest; the figure itself may be built after this page)."""
    fig = Path(paths.figures(str(results), table)[1])
    notebook = Path(paths.report(str(results), paper, "html"))
    rel = lambda p: Path(os.path.relpath(p, here)).as_posix()  # noqa: E731
    figure = (f"<a href='{rel(fig)}'>figure</a> · " if Path(paths.existing_table(str(results), table)).exists()
              else "")
    return f"{figure}<a href='{rel(notebook)}#{escape(table)}'>notebook</a>"


def _row(r, links: str) -> str:
    reason = [r["note"]] if r["note"] else []
    if r["verdict"] not in (REPRODUCED, HOLDS):
        reason.append(r["why"] or (NO_REASON if r["verdict"] == NOT_REPRODUCED else ""))
    cells = [f"<a id='{escape(r['claim'])}'></a>{escape(r['claim'])}", escape(r["place"]),
             escape(r["statement"]), escape(expected(r)), _measured(r["measured"]),
             escape(r["verdict"]), escape("; ".join(x for x in reason if x)), links]
    colour = _COLOURS.get(r["verdict"], "white")
    return f"<tr style='background-color: {colour}'>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def expected(r) -> str:
    """A scorecard row's expectation, labelled with who set it: "0.22 ± 0.03 (the paper's 0.22, our
    tolerance)", "== 1 (ours)", "> 0 (the paper)"."""
    label = {PAPER: "the paper", OURS: "ours", PAPER_OUR_TOLERANCE: "the paper's value, our tolerance"}
    source = r.get("expect_from", "")
    return f"{r['expected']} ({label[source]})" if source in label else str(r["expected"])


def counts_line(card: pd.DataFrame) -> str:
    """"12 reproduced, 3 not reproduced, ...; 4 checks holding; 1 calibration": each kind apart."""
    n = summary(card).sum()
    said = [f"{n[c]} {c}" for c in SUMMARY if c in n and (n[c] or c in ("reproduced", "not reproduced"))]
    return ", ".join(said)


_STYLE = """body {font-family: sans-serif; max-width: 1300px; margin: 1em auto; line-height: 1.35}
table {border-collapse: collapse; margin: 0.5em 0 1.5em} td, th {border: 1px solid #bbb;
padding: 3px 6px; vertical-align: top; font-size: 0.9em} th {background: #f4f4f4}
nav a {margin-right: 1em}"""
_HEAD = ["claim", "place", "statement", "expected (set by)", "measured", "verdict", "why not / note", "see"]


def stand_in_data(results: str | Path) -> list[str]:
    """The datasets named in the run's tables that are not a dataset's official splits (the smoke
    scale's synthetic tensors, a subset of real MNIST): a reader must see them first."""
    found = set()
    for table in sorted(Path(results).glob("*/*.csv*")):
        cols = lambda c: c in ("dataset", "points")  # noqa: E731
        try:
            values = pd.read_csv(table, usecols=cols).stack().astype(str)
        except (ValueError, pd.errors.EmptyDataError):
            continue
        found |= {v for v in values.unique() if "subset" in v or "synthetic" in v}
    return sorted(found)


def _data_note(results: Path) -> list[str]:
    data = stand_in_data(results)
    if not data:
        return []
    return [f"<p><b>Data:</b> some tables were made with data other than a dataset's official splits: "
            f"{escape('; '.join(data))} (each table's <code>dataset</code> column says which; the documentation's "
            f"'Running it yourself' page and the reference's README say what it changes).</p>"]


# The largest share of tables with no effect in them a judged claim may pass (ours;
# ``reluinit.report.counterfeit``, which makes and judges them, reads it from here).
COUNTERFEIT_BAR = 0.05


def _counterfeit_note(results: Path, here: Path) -> list[str]:
    """A paragraph linking the tree's ``counterfeit.csv`` (``reluinit.report.counterfeit``), where there
    is one: what share of tables with no effect in them each judged claim would pass."""
    found = results / "counterfeit.csv"
    if not found.exists():
        return []
    card = pd.read_csv(found)
    tried = card[card["trials"] > 0]
    over = int((tried["reproduced_share"] > COUNTERFEIT_BAR).sum())
    link = Path(os.path.relpath(found, here)).as_posix()
    return [f"<p><b>Counterfeits:</b> every judged claim was also tried on tables of its own shape with no "
            f"effect in them (no effect, another law, every seed at chance, fewer draws): "
            f"{len(tried)} (claim, family) pairs, {int(tried['trials'].sum())} tables; {over} passed more than {COUNTERFEIT_BAR:.0%} "
            f"of theirs. Each claim's share, and why a family does not apply to it, is in "
            f"<a href='{link}'><code>counterfeit.csv</code></a> (<code>python -m reluinit.report.counterfeit</code>).</p>"]


def page(card: pd.DataFrame, path: str | Path, scale: str, claims: list[Claim] = (),
         titles: dict[str, str] | None = None) -> str:
    """The scorecard page written to ``path``: verdict counts first, then one section per paper
    (anchor ``paper-<PAPER>``): its stated claims, each linked to its figure and notebook
    section and, when not reproduced, saying why; then each paper table's cells (``claims``
    gives them) as one pivot."""
    here = Path(path).parent
    results = here.parent  # the page lives in results/<scale>/reports/
    titles = titles or {}
    blocks = cell_blocks(list(claims))
    in_blocks = {c.id for cells in blocks.values() for c in cells}
    papers = list(dict.fromkeys(card["paper"]))
    nav = "".join(f"<a href='#paper-{p}'>{p}</a>" for p in papers)
    counts = summary(card).reindex(papers)
    counts.index = [f"<a href='#paper-{p}'>{p}</a>" for p in counts.index]
    out = [f"<h1>Claims scorecard, {scale} scale</h1>",
           f"<p><b>{len(card)} claims: {counts_line(card)}.</b> Every claim of <code>claims.yaml</code> "
           f"judged against this run's tables. Claims that need the paper's sizes say '{NOT_RUN}' "
           f"at the quick scale; a claim not reproduced says why. The same rows are in "
           f"<code>claims.csv</code>.</p>",
           *_data_note(results), *_counterfeit_note(results, here), f"<nav>{nav}</nav>", counts.to_html(escape=False)]
    for p in papers:
        mine = card[card["paper"] == p]
        stated = mine[~mine["claim"].isin(in_blocks)]
        notebook = Path(os.path.relpath(paths.report(str(results), p, "html"), here)).as_posix()
        out.append(f"<h2 id='paper-{p}'>{escape(p)}: {escape(titles.get(p, ''))}</h2>"
                   f"<p>{len(mine)} claims: {counts_line(mine)}. <a href='{notebook}'>The paper's notebook</a>.</p>")
        if len(stated):
            out.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in _HEAD) + "</tr>"
                       + "".join(_row(r, _links(r["table"], p, here, results)) for _, r in stated.iterrows())
                       + "</table>")
        for block, cells in blocks.items():
            if cells[0].paper != p:
                continue
            rows = mine[mine["claim"].isin([c.id for c in cells])]
            why = cells[0].why
            out.append(f"<h3 id='{escape(block)}'>{escape(block)}: {escape(cells[0].place)}, "
                       f"{escape(cells[0].table_title)}</h3>"
                       f"<p>{len(cells)} cells ({counts_line(rows)}), each: the paper's mean ± sd | ours. "
                       f"{_links(cells[0].table, p, here, results)}. {escape(why)}</p>"
                       + styled_pivot(card, cells).to_html())
    html = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>Claims scorecard ({scale})</title><style>{_STYLE}</style></head><body>"
            + "\n".join(out) + "</body></html>")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(html)
    return html


def write_html(card: pd.DataFrame, path: str | Path, scale: str, claims: list[Claim] = (),
               titles: dict[str, str] | None = None) -> None:
    """The scorecard page (``page``) for the report, where it comes first."""
    page(card, path, scale, claims, titles)


def failing(claim: Claim) -> str:
    """The measured values that would fail ``claim``, read from its expectation."""
    op, value, tol = claim.expectation()
    if op == "≈":
        return f"outside {value - tol:g} to {value + tol:g}"
    return {">": f"<= {value:g}", ">=": f"< {value:g}", "<": f">= {value:g}", "<=": f"> {value:g}",
            "==": f"anything but {value:g}"}[op]


def _kinds_line(claims: list[Claim]) -> str:
    """The record's counts: each kind apart, and who set the expectations (a cell block counted as
    its cells)."""
    kinds = pd.Series([c.kind for c in claims]).value_counts()
    source = pd.Series([c.expect_from for c in claims]).value_counts()
    return (f"{len(claims)} entries judged one by one ({sum(c.cell is not None for c in claims)} of them cells of "
            f"paper tables): {kinds.get(CLAIM, 0)} claims of the papers, {kinds.get(CHECK, 0)} checks and "
            f"{kinds.get(CALIBRATION, 0)} calibrations. Expectations set by the paper: {source.get(PAPER, 0)}; "
            f"the paper's value in a window of ours: {source.get(PAPER_OUR_TOLERANCE, 0)}; ours (the paper gives "
            f"words): {source.get(OURS, 0)}.")


_SET_BY = {PAPER: "set by the paper", OURS: "set by us", PAPER_OUR_TOLERANCE: "the paper's value in a window of ours"}


def _text(text: str) -> str:
    return " ".join(str(text).split())


def record(claims: list[Claim]) -> str:
    """``docs/claims.md``: every claim, per paper, with the paper's words it stands on, what it
    measures, the values and a plausible result that would fail it, and the choices that are ours;
    a block of table cells as one entry."""
    title = {"TG": "TG: trajectory growth", "EP": "EP: expressive power", "OP": "OP: norm preservation",
             "LR": "LR: linear regions", "RP": "RP: robust pruning", "X": "X: across the papers (ours)"}
    lines = ["<!-- generated by `python -m reluinit.report.claims record > docs/claims.md` from claims.yaml: "
             "edit the claims there -->", "", "# Claims, read against the papers", "",
             "Every claim of `claims.yaml` as its paper states it: the paper's words it stands on, what the "
             "claim measures (its expectation), which measured values would fail it and a plausible result "
             "that would, and the choices that are ours, not the paper's. Each says who set its expectation "
             "(the paper, or us where the paper gives words, not a number); a check is a proven bound or a "
             "construction of ours, which only a bug can fail, and a calibration a setting we chose so that "
             "the paper's statement holds. A block of a paper table's cells "
             "is one entry: each cell is judged as the paper's mean ± its spread, widened as the block says. "
             "The verdicts at the papers' sizes are on the [scorecard](reference/paper/reports/scorecard.html) "
             "and in the [gallery](gallery.md).", "", _kinds_line(claims), ""]
    seen_blocks = set()
    for paper in title:
        mine = [c for c in claims if c.paper == paper]
        if not mine:
            continue
        lines += [f"## {title[paper]}", ""]
        for c in mine:
            if c.cell is not None:
                if c.block in seen_blocks:
                    continue
                seen_blocks.add(c.block)
                n = sum(1 for d in claims if d.block == c.block)
                what, fail = f"{c.table_title}: {n} cells, each the paper's mean ± sd", "a cell outside its window"
            else:
                kind = {CLAIM: "", CHECK: "A check (only a bug can fail it): ",
                        CALIBRATION: "A calibration (a setting of ours chosen to meet it: shown, not judged): "}[c.kind]
                what = f"{kind}{c.claim} (expects `{c.expect}`, {_SET_BY[c.expect_from]})"
                fail = f"measured {failing(c)}"
            fail += f": {_text(c.fails)}" if c.fails else ""
            what = _text(what)
            lines += [f"### {c.block}", "", f"*{_text(c.place)}*, table {c.table}. {what[:1].upper() + what[1:]}", "",
                      f"- **The paper**: {_text(c.quote)}", f"- **Fails when** {fail}",
                      f"- **Ours**: {_text(c.ours) or 'nothing: the paper states it all'}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m reluinit.report.claims", description="the claims' audit record")
    ap.add_argument("command", choices=["record"], help="record: docs/claims.md from claims.yaml, to stdout")
    ap.add_argument("--claims", default="claims.yaml")
    a = ap.parse_args(argv)
    print(record(load(a.claims)), end="\n")


if __name__ == "__main__":
    main()
