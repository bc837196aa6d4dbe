"""Counts that size work (nets, draws, samples, points, pieces, steps), bounded before planning.

A count is an integer setting named ``n_*`` (``n_classes`` aside: a shape, not work), ``*_nets``,
``*_pieces``, ``*_draws`` or one of ``COUNT_KEYS`` (runs, epochs, iterations, batch sizes), or a
list of them (``convergence_pieces``). Every count of the config (an experiment's, a training
spec's, a recipe's) is first held to ``MAX_COUNT``; then each is checked three ways before the
workflow plans a job, each refusal naming the key to lower:

- **jobs**: a count that makes jobs or training runs (LR-F2's ``n_nets``: a job per net; RP-T4's
  ``reps``: runs stacked in a job) may not make more than ``MAX_PARTS`` jobs or ``MAX_RUNS`` runs.
  The experiment's own ``parts`` is asked at two small values of the count (every other count
  capped the same way) and its growth projected to the value set, so planning never enumerates
  what it cannot hold.
- **time**: one unit of a count that works inside a job (a draw, a piece, a step, a net) costs at
  least one pass of one point through the net its widths describe (depth x width^2 multiply-adds)
  or, for a draw, one coordinate per ``k``; the counts done for each net (``PER_NET``) are done
  ``n_nets`` times; a job cannot do more than ``RATE`` of those a second.
  More than its declared runtime at that rate is refused. A floor, never a forecast.
- **memory**: the draws of a job are held at once (``sampling.subvector_norms``: one row of the
  largest ``k`` per draw, in float64); more than the memory its jobs declare is refused.

The widths are checked first (``oversized``): the widest net a job's settings describe, its weights
and one set of activations for its largest batch (``memory_floor``), against the memory the job
declares and, where jobs run on this machine, the memory it has.
"""

from __future__ import annotations

import math

from . import catalogue
from .config import _at_scale, settings

# Jobs and training runs one experiment may make at one scale: the papers' largest makes 378 of
# each (RP-T2), and planning holds each job's description in memory.
MAX_PARTS = 10_000
MAX_RUNS = 100_000
# Multiply-adds (or drawn coordinates) a second: above the peak of any two-thread CPU job in float64
# (two cores with two 8-wide fused multiply-add units each at 4 GHz make 2.6e11).
RATE = 1e12
# The values a count is probed at to see whether it makes jobs.
PROBE = 4
NOT_WORK = {"n_classes"}
COUNT_KEYS = {"reps", "runs", "epochs", "max_steps", "iterations", "batch_size", "batch_per_class"}
# No count may be larger: the papers' largest is 100,000 (EP-F14's n_steps). A count beyond it is a
# slip of the keyboard or a study this pipeline was not sized for; the floors below catch less.
MAX_COUNT = 10_000_000
# Counts done once for every net of a job (its pieces, points, lines, samples, steps of its walks).
PER_NET = {"n_pieces", "n_points", "n_lines", "n_samples", "n_steps", "n_walks", "n_arcs", "n_inputs"}


def _numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [value]
    return [x for v in value for x in _numbers(v)] if isinstance(value, list) else []


def widest(s: dict) -> tuple[int, int] | None:
    """(width, depth) of the widest fully connected net the sizes of settings ``s`` describe
    (``width*`` keys, ``depth``/``depths``), or None for settings without a width (the named models
    of RP's tables)."""
    widths = [w for k, v in s.items() if k.startswith("width") and k != "width_variations" for w in _numbers(v)]
    if "width_center" in s:
        widths.append(s["width_center"] + max(_numbers(s.get("width_variations", 0)) or [0]))
    if not widths:
        return None
    return int(max(widths)), int(max(_numbers(s.get("depth")) + _numbers(s.get("depths")) + [1]))


def declared_mb(exp: str, s: dict) -> int:
    """The memory a job of ``exp`` declares: its ``resources`` when it trains, rule ``measure``'s else."""
    from .plan import MEASURE, TRAIN

    return s.get("resources", {}).get("mem_mb", TRAIN["mem_mb"]) if catalogue.entry(exp).trains else MEASURE["mem_mb"]


def memory_floor(s: dict) -> tuple[int, str] | None:
    """(bytes, what) that a job of settings ``s`` needs at least: the widest fully connected net its
    sizes describe (``widest``; ``input_dim``, 784 for MNIST), its weights and one set of activations
    per layer for its largest batch (``n_samples``, ``n_pieces``, ``n_points``) in float64. A floor,
    not a forecast: a job may need several times more, never less; None for settings without a width."""
    net = widest(s)
    if net is None:
        return None
    width, depth = net
    inputs = int(s.get("input_dim") or (784 if s.get("dataset") == "mnist" else width))
    batch = int(max([1] + [s[k] for k in ("n_samples", "n_pieces", "n_points") if isinstance(s.get(k), int)]))
    need = 8 * (depth * width**2 + inputs * width + batch * width * (depth + 1))
    return need, f"width {width:,}, depth {depth}, {batch:,} points"


def oversized(config: dict, scale: str, machine_mb: int | None = None) -> list[str]:
    """One line per experiment whose settings at ``scale`` need more memory (``memory_floor``) than
    its jobs declare (``mem_mb``), or than ``machine_mb`` (this machine's, when jobs run here), naming
    the settings to lower: a job that would die in a torch allocation (or be killed) is refused
    before any job starts."""
    lines = []
    for exp in config["experiments"]:
        s = settings(config, exp, scale)
        floor = memory_floor(s)
        if floor is None:
            continue
        need, sizes = floor
        declared = declared_mb(exp, s)
        limit, whose = min((declared, "its jobs declare (mem_mb)"), (machine_mb or declared, "this machine has"))
        if need > limit * 2**20:
            batch = [k for k in ("n_samples", "n_pieces", "n_points") if isinstance(s.get(k), int)]
            keys = "its widths or depth" + (f" (or {max(batch, key=s.get)})" if batch else "")
            lines.append(f"{exp} at the {scale} scale needs at least {need / 2**30:,.1f} GB ({sizes}: weights and "
                         f"activations in float64), more than the {limit / 1024:,.1f} GB {whose}: lower {keys} "
                         f"under experiments.{exp}.{scale} in the config")
    return lines


def counts(s: dict) -> dict[str, int]:
    """``{key: largest value}`` of the counts in settings ``s`` (the recipe's ``epochs`` and
    ``max_steps`` as ``recipe.epochs``)."""
    found = {}
    for prefix, block in (("", s), ("recipe.", s.get("recipe") if isinstance(s.get("recipe"), dict) else {})):
        for key, value in block.items():
            if not (key.startswith("n_") or key.endswith(("_nets", "_pieces", "_draws")) or key in COUNT_KEYS) \
                    or key in NOT_WORK:
                continue
            values = value if isinstance(value, list) else [value]
            ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
            if ints:
                found[prefix + key] = max(ints)
    return found


def _with(s: dict, key: str, value) -> dict:
    """``s`` with count ``key`` (``recipe.epochs`` included) set to ``value`` (a list keeps its length)."""
    out = dict(s)
    block = out
    if key.startswith("recipe."):
        out["recipe"] = block = dict(out["recipe"])
        key = key.split(".", 1)[1]
    old = block[key]
    block[key] = [min(v, value) for v in old] if isinstance(old, list) else value
    return out


def _size(exp: str, s: dict) -> tuple[int, int] | None:
    """(jobs, training runs) that ``exp`` plans for settings ``s`` (a job that trains none counts one)."""
    try:
        parts = catalogue.parts(exp, s)
    except Exception:  # an id planned from another's parts (EP-F9's source), or settings it refuses later
        return None
    return len(parts), sum(len(p["runs"]) if isinstance(p, dict) and "runs" in p else 1 for p in parts.values())


def job_counts(exp: str, s: dict) -> dict[str, tuple[float, float]]:
    """``{key: (projected jobs, projected runs)}`` for each count of ``s`` above ``PROBE`` that
    makes jobs or training runs of ``exp``."""
    big = {k: v for k, v in counts(s).items() if v > PROBE}
    if not big:
        return {}
    small = s
    for key in big:
        small = _with(small, key, PROBE)
    found = {}
    for key, value in big.items():
        low, high = _size(exp, _with(small, key, PROBE // 2)), _size(exp, small)
        if low is None or high is None or high <= low:
            continue
        step = (value - PROBE) / (PROBE - PROBE // 2)
        found[key] = tuple(h + (h - lo) * step for lo, h in zip(low, high))
    return found


def unit_cost(s: dict, key: str) -> float:
    """Work (multiply-adds or drawn coordinates) one unit of count ``key`` costs at least: one pass
    of one point through the widest net of ``s`` (``widest``), or 1 without widths."""
    if key == "n_draws":
        return float(max(s.get("ks") or [1]))
    net = widest(s)
    return float(net[1]) * net[0] ** 2 if net else 1.0


def refused(config: dict, scale: str, machine_mb: int | None = None, probe: bool = True) -> list[str]:
    """One sentence per experiment whose widths (``oversized``) or counts at ``scale`` make too many
    jobs, or jobs longer or larger than they declare (or than ``machine_mb``), naming the key and
    the command that fixes it. ``probe=False`` (a command that plans no job: ``--list-rules``)
    leaves out the jobs a count makes, whose probe imports an experiment's code the first time."""
    from .plan import MEASURE, TRAIN, hours

    lines = oversized(config, scale, machine_mb)
    widths = len(lines)
    for block in ("experiments", "training", "recipes"):  # every count where it is set, the cap first
        for name, levels in (config.get(block) or {}).items():
            s = _at_scale(levels, scale)
            for key, value in counts({k: v for k, v in s.items() if k != "recipe"}).items():
                if value > MAX_COUNT:
                    lines.append(f"{block}.{name}.{scale}: {key} = {value:,} is more than the {MAX_COUNT:,} any count "
                                 f"may be here (the papers' largest is 100,000): lower {key} under {block}.{name}.{scale} "
                                 "in the config")
    if len(lines) > widths:
        return lines  # planning with such a count could itself not end
    for exp in config["experiments"]:
        s = settings(config, exp, scale)
        where = f"experiments.{exp}.{scale}"
        found = counts(s)
        makes = job_counts(exp, s) if probe else {}
        for key, (jobs, runs) in makes.items():
            if jobs > MAX_PARTS or runs > MAX_RUNS:
                many = f"{jobs:,.0f} jobs" if jobs > MAX_PARTS else f"{runs:,.0f} training runs"
                limit = f"{MAX_PARTS:,} jobs" if jobs > MAX_PARTS else f"{MAX_RUNS:,} runs"
                lines.append(f"{exp} at the {scale} scale: {key} = {found[key]:,} makes about {many}, more than "
                             f"the {limit} a workflow plans for one experiment: lower {key} under {where} in the config")
        trains = catalogue.entry(exp).trains
        runtime = s.get("resources", {}).get("runtime", TRAIN["runtime"]) if trains else MEASURE["runtime"]
        declared_h = max(hours(v) for v in runtime.values()) if isinstance(runtime, dict) else hours(runtime)
        inside = {k: v for k, v in found.items() if k not in makes}  # those spread over jobs: bounded above
        nets = inside.get("n_nets", 1)
        for key, value in inside.items():
            units = value * (nets if key in PER_NET else 1)
            floor_h = units * unit_cost(s, key) / RATE / 3600
            if floor_h > declared_h:
                times = f" times n_nets = {nets:,}" if key in PER_NET and nets > 1 else ""
                lower = f"n_nets or {key}" if times else key
                lines.append(f"{exp} at the {scale} scale: {key} = {value:,}{times} needs at least {_span(floor_h)} in one "
                             f"job (at {RATE:.0e} operations a second), more than the {_span(declared_h)} its jobs "
                             f"declare: lower {lower} under {where} in the config")
        if "n_draws" in s:
            declared = declared_mb(exp, s)
            need = 8 * s["n_draws"] * unit_cost(s, "n_draws")
            if need > declared * 2**20:
                lines.append(f"{exp} at the {scale} scale: n_draws = {s['n_draws']:,} holds at least "
                             f"{need / 2**30:,.1f} GB (each draw a row of {unit_cost(s, 'n_draws'):,.0f} values in "
                             f"float64), more than the {declared / 1024:,.1f} GB its jobs declare: lower n_draws "
                             f"under {where} in the config")
    return lines


def _span(h: float) -> str:
    if h >= 48:
        return f"{h / 24:,.0f} days" if h < 24 * 3650 else f"{h / 24 / 365:.1e} years"
    return f"{h:,.1f} hours" if h >= 1 else f"{math.ceil(h * 60)} minutes"
