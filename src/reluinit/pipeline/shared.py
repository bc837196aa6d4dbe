"""Runs one experiment's table takes from another's (config ``shared``), trained once.

The paper's tables share cells: RP's Table 2 prints Table 1's CIFAR-10 SNIP and SBP-SR cells at
90, 95 and 98%, and Table 9 its ReLU SBP-SR cells. An experiment's block says so, e.g. RP-T2's
``shared: {from: RP-T1, cells: {dataset: [cifar10], method: [snip, sbp_sr]}}``: its runs whose value
of every field under ``cells`` is one listed there are in none of its parts (``experiments.own_runs``
drops them after numbering the full product, so the runs that stay keep their keys and seeds). Its
table is its own parts' rows and, for each shared run, the rows of its *twin*: the ``from``
experiment's run with the same fields (all but ``key`` and ``seed``), taken by the ``run`` column
from the twin's part file. ``twins`` pairs them when the workflow plans the table's figure job
(``table_parts`` in workflow/rules/inputs.smk, ``steps.draw``) and stops, naming the fix, at a
shared run with no twin or whose twin trains under other settings (``catalogue.trained_with``).
"""

from __future__ import annotations

import json

import pandas as pd

from . import catalogue, provenance
from .config import settings

# A run's fields that name it rather than say what trains: a twin has its own.
NAMING = ("key", "seed")


class SharedRunsError(ValueError):
    """A shared run with no twin, or whose twin trains otherwise: the sentence ends with the fix."""
    ends_in_fix = True


def source(config: dict, exp: str, scale: str | None = None) -> str | None:
    """The experiment ``exp`` takes runs from (its ``shared.from``), or None."""
    return (settings(config, exp, scale).get("shared") or {}).get("from")


def _runs(exp: str, s: dict) -> dict[str, tuple[str, dict]]:
    """``{run key: (part key, run)}`` over the parts of ``exp`` under settings ``s``."""
    return {key: (part, run) for part, kwargs in catalogue.parts(exp, s).items() for key, run in kwargs["runs"].items()}


def _shared(exp: str, s: dict) -> dict[str, dict]:
    own = _runs(exp, s)
    full = _runs(exp, {k: v for k, v in s.items() if k != "shared"})
    return {key: run for key, (_, run) in full.items() if key not in own}


def shared_runs(config: dict, exp: str, scale: str | None = None) -> dict[str, dict]:
    """``exp``'s runs that its table takes from another's, ``{run key: run}`` in its runs' order ({}
    for a table that takes none)."""
    s = settings(config, exp, scale)
    return _shared(exp, s) if s.get("shared") else {}


def _fields(run: dict) -> str:
    return json.dumps({k: v for k, v in run.items() if k not in NAMING}, sort_keys=True, default=str)


def twins(config: dict, exp: str, scale: str | None = None) -> dict[str, list[str]]:
    """``{run key: [part key, run key]}``: each run ``exp`` takes from its ``shared.from`` experiment,
    with its twin's part and key there; ``SharedRunsError`` where a run has none, or one that trains
    under other settings. Remembered per version of the code and settings (``provenance.memo``)."""
    scale = scale or config["scale"]
    s = settings(config, exp, scale)
    if not s.get("shared"):
        return {}
    src = s["shared"]["from"]
    if src == exp or src not in config["experiments"] or not catalogue.entry(src).trains:
        raise SharedRunsError(f"{exp} takes runs from {src} (`shared.from` of experiments.{exp} in config.yaml), "
                              f"which is not another experiment of the config that trains: name one there")
    src_s = settings(config, src, scale)
    return provenance.memo("shared", [exp, s, src, src_s, scale], lambda: _twins(exp, s, src, src_s, scale))


def _twins(exp: str, s: dict, src: str, src_s: dict, scale: str) -> dict[str, list[str]]:
    theirs = {_fields(run): (part, key, run) for key, (part, run) in _runs(src, src_s).items()}
    where = f"`shared` of experiments.{exp} in config.yaml"
    found = {}
    for key, run in _shared(exp, s).items():
        if _fields(run) not in theirs:
            fields = ", ".join(f"{k} {v}" for k, v in run.items() if k not in NAMING)
            raise SharedRunsError(
                f"{exp}'s run {key} is one of the cells it takes from {src} ({where}), but {src} has no run "
                f"with its fields ({fields}) at the {scale} scale: add them to {src}'s settings, or take the "
                f"cell out of {exp}'s shared.cells so that {exp} trains it")
        part, twin, their_run = theirs[_fields(run)]
        mine, its = catalogue.trained_with(exp, s, run), catalogue.trained_with(src, src_s, their_run)
        if mine != its:
            from ..fingerprint import changes

            raise SharedRunsError(
                f"{exp}'s run {key} takes the rows of {src}'s run {twin} ({where}), which trains under other "
                f"settings at the {scale} scale ({src} -> {exp}: {'; '.join(changes(its, mine))}): make these "
                f"settings of experiments.{src} and experiments.{exp} equal in config.yaml, or take the cell "
                f"out of {exp}'s shared.cells so that {exp} trains it")
        found[key] = [part, twin]
    return found


def source_parts(config: dict, exp: str, scale: str | None = None) -> dict[str, list[str]]:
    """``{part key of the source: [its run keys that exp's table takes]}`` ({} where it takes none)."""
    out: dict[str, list[str]] = {}
    for part, twin in twins(config, exp, scale).values():
        out.setdefault(part, []).append(twin)
    return out


def take(rows: pd.DataFrame, runs, where: str | None = None) -> pd.DataFrame:
    """The rows of ``runs`` (run keys) in ``rows`` (a source's part or table), by its ``run`` column.
    With ``where`` (the part file they were read from) every run must have some: a part older than
    its runs is named with the command that rebuilds it."""
    missing = sorted(set(runs) - set(rows["run"])) if where else []
    if missing:
        from ..integrity import rebuild_command

        raise SharedRunsError(f"{where} holds no rows of run(s) {', '.join(missing)}, which another table takes "
                              f"from it (config `shared`): it was written before them; rebuild it with "
                              f"`{rebuild_command(where)}`")
    return rows[rows["run"].isin(list(runs))]
