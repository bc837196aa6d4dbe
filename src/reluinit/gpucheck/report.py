"""``gpu-report.md``: every stage's numbers, what was skipped and why, from the tables on disk."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from .common import REPORT


def _read(out: Path, name: str) -> pd.DataFrame | None:
    path = out / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def _md(table: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """A markdown table (no tabulate dependency)."""
    def cell(v):
        if isinstance(v, float):
            return "" if pd.isna(v) else format(v, floatfmt)
        return str(v).replace("|", "/")
    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def write(check) -> Path:
    out = check.out
    spent = time.perf_counter() - check.started
    parts = [f"# GPU check: {check.device}\n",
             f"Commit {check.commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; budget "
             f"{check.budget_s:.0f} s, {spent:.0f} s spent{'; --tiny (toy sizes)' if check.tiny else ''}. "
             f"Command: `python -m reluinit.gpucheck --out {out} --device {check.device} --budget-s "
             f"{check.budget_s:.0f}{' --tiny' if check.tiny else ''}`.\n",
             "## Stages\n", _md(pd.DataFrame(check.stages, columns=["name", "status", "seconds", "estimate_s", "note"])),
             ""]
    facts = _read(out, "facts")
    if facts is not None:
        parts += ["## Facts\n", _md(facts), ""]
    parts += _engines(_read(out, "engines"))
    parts += _agreement(_read(out, "agreement"))
    parts += _throughput(_read(out, "throughput"), check)
    parts += _ensembles(_read(out, "ensembles"))
    parts += _packing(_read(out, "packing"))
    parts += _cells(_read(out, "reference-check"))
    path = out / REPORT
    path.write_text("\n".join(parts) + "\n")
    return path


def _agreement(t: pd.DataFrame | None) -> list[str]:
    if t is None:
        return []
    g = t.groupby("check", sort=False).agg(items=("item", "size"), passing=("passes", "sum"),
                                           largest_difference=("difference", lambda d: pd.to_numeric(d).abs().max()),
                                           criterion=("criterion", "first"))
    failing = t[~t["passes"].astype(bool)]
    out = ["## Agreement with the CPU\n", _md(g.reset_index()), "",
           "Notes: " + "; ".join(dict.fromkeys(f"{r.check} {r.item}: {r.note}" if r.check in ("pruning masks", "training")
                                              else f"{r.check}: {r.note}" for r in t.itertuples())), ""]
    if len(failing):
        out += ["Not passing:\n", _md(failing[["check", "item", "device_value", "cpu_value", "difference"]]), ""]
    return out


def _throughput(t: pd.DataFrame | None, check) -> list[str]:
    if t is None:
        return []
    cols = ["family", "experiments", "steps_per_s", "images_per_s", "seconds_per_epoch", "projected_hours",
            "declared_hours", "baseline_steps_per_s", "engine_gain", "status"]
    out = ["## Throughput per training family\n",
           "Steps per second of the engine at the paper's batch size, precision and layout (generated tensors of "
           "the real shapes); seconds per epoch over the real training set with one test-set evaluation; one "
           "paper run's projected hours beside those its config declares; the plain DataLoader baseline on the "
           "same model.\n", _md(t[cols], ".3g"), ""]
    cost_path = check.out / "gpu-cost.csv"
    if cost_path.exists() and not check.tiny:
        out += [_bill(check, cost_path)]
    return out


_bills: dict = {}


def _bill(check, cost_path: Path) -> str:
    """The paper DAG priced from the cost table (computed once per table: it takes seconds)."""
    key = (str(cost_path), cost_path.stat().st_mtime_ns)
    if key not in _bills:
        try:
            from ..pipeline.plan import jobs, read_cost, totals

            bill = totals(jobs(check.config, "paper", cost=read_cost(cost_path)))
            _bills[key] = (f"Paper DAG priced from these costs (`python -m reluinit.pipeline.plan paper --cost gpu-cost.csv`): "
                           f"**{bill.loc['total', 'gpu_hours_measured']:,.0f} GPU-hours measured against "
                           f"{bill.loc['total', 'gpu_hours']:,.0f} declared**; "
                           f"{int(bill.loc['total', 'unpriced_runs'])} training runs of families not measured keep "
                           f"their declared hours.\n")
        except Exception as e:  # the bill is a summary; the tables stand without it
            _bills[key] = f"The paper DAG could not be priced from the costs: {type(e).__name__}: {e}\n"
    return _bills[key]


def _engines(t: pd.DataFrame | None) -> list[str]:
    if t is None:
        return []
    cols = ["family", "engine", "k", "steps_timed", "repeats", "seconds_per_step", "spread", "kernel_seconds_per_step",
            "run_steps_per_s", "gain_over_eager", "compile_seconds", "max_rel_difference_vs_eager", "status"]
    return ["## Engines: eager, compiled, graphed\n",
            "The same runs' steps (`reluinit.engine`) from the same weights on the same batches: wall seconds per "
            "step (median of the repeats; spread = (slowest - fastest) / median), the device's kernel time per step, "
            "the gain over eager, seconds spent compiling (with the warm-up steps) and the largest relative weight "
            "difference from the eager run after the same steps.\n",
            _md(t[cols], ".3g"), ""]


def _ensembles(t: pd.DataFrame | None) -> list[str]:
    if t is None:
        return []
    cols = ["nets", "k", "steps", "alone_s", "stacked_s", "ratio", "training_ratio", "stacked_run_steps_per_s",
            "max_rel_difference",
            "max_rel_difference_float64"]
    return ["## Many small nets: one by one and stacked\n",
            "K runs of each net trained one by one and as one stacked model (`reluinit.ensemble`), MNIST shapes, "
            "the recipes' batch sizes; the largest relative weight difference in fp32 and, on 2 runs, in float64.\n",
            _md(t[cols], ".3g"), ""]


def _packing(t: pd.DataFrame | None) -> list[str]:
    if t is None:
        return []
    g = t.groupby("processes").agg(aggregate_steps_per_s=("aggregate_steps_per_s", "first"),
                                   gain_over_one=("gain_over_one", "first"), memory_mb_each=("memory_mb", "max"))
    return ["## Packing: several training processes on one device\n",
            "ResNet32 (doubled filters, rp-cifar10 recipe) on generated CIFAR-10 shapes, every process timed at "
            "once.\n", _md(g.reset_index(), ".3g"), ""]


def _cells(t: pd.DataFrame | None) -> list[str]:
    if t is None:
        return []
    g = t.groupby(["experiment", "cell", "quantity"], sort=False).agg(
        values=("device_value", "size"), within=("within", lambda w: int(w.fillna(False).astype(bool).sum())),
        largest_difference=("relative_difference", "max"), tolerance=("tolerance", "first"),
        device_s_per_net=("device_seconds_per_net", "first"), reference_s_per_net=("reference_seconds_per_net", "first"),
        points=("points", "first"))
    notes = sorted({f"{r.experiment}: {r.note}" for r in t.itertuples() if isinstance(r.note, str) and r.note})
    return ["## The paper scale on the device, against reference/paper/\n", _md(g.reset_index(), ".3g"), "",
            *(["Notes: " + "; ".join(notes), ""] if notes else [])]
