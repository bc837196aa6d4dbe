"""Paper-scale training parts on whatever machine is at hand for a few minutes (a GPU, say), with
no Snakemake and no papermill:

    python -m reluinit.harvest --budget-s 600 --data-dir data --out harvest [--device auto] [--only TG-F6]
                               [--first RP-F3/group36 ...]

It lists the training parts of the paper-scale plan that ``reference/paper/`` lacks and whose data
the machine has, most valuable first (the parts of the experiment closest to complete, then the
cheapest, by the plan's declared hours; ``--first`` puts named parts ahead), and runs as many as
the budget holds, each through the code the workflow's ``train_part`` job runs
(``pipeline.steps.measure``: the same settings, seeds, rows and checkpoints). A part still running when the budget ends stops there, mid-epoch if need be
(``stopped_at``), and is listed as unfinished: a later harvest with the same
``--out`` resumes it, and so does one on another machine once ``reference export`` has kept its
checkpoints (up to 10 MB a part) and ``reference restore`` has brought them into its ``--out``. ``--out`` becomes a results tree of the scale (``<out>/paper``, the layout of
``results/paper``) with each finished part, its benchmark file (seconds), log, ``harvest.csv``
(part, status, seconds, device, commit) and ``harvest-report.md``. Harvests may share one ``--out``
(one per core): each runs the next part no other holds (``part_lock``). Into the reference:

    python -m reluinit.report.reference export --results harvest/paper --experiments TG-F6

which records each part's digests in ``parts.csv``; ``reference restore`` then brings them into
any checkout's ``results/paper``, where Snakemake finds them done. ``--tiny`` runs the quick
scale's parts on its bundled data (CI). ``--reference`` (default ``reference/paper``, so run it from
the checkout) must be a reference tree or an empty folder, and ``--out`` a folder it can write:
anything else is refused before any part runs. An experiment that prunes (RP's) has each part's masks made
first, by the workflow's own ``prune`` script; the reference keeps the trained parts, not the masks,
and Snakemake, finding a part done, does not ask for its masks again.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .. import datasets, integrity
from ..pipeline import catalogue, paths, plan, steps
from ..pipeline.config import read_yaml, settings

log = logging.getLogger("reluinit")

COLUMNS = ["experiment", "part", "status", "seconds", "device", "machine", "commit", "note"]
# Seconds kept back from the budget for the bookkeeping after the last part (report, records).
MARGIN_S = 5.0


def experiments(config: dict, scale: str, only: list[str] | None = None) -> list[str]:
    """The experiments whose training parts a harvest runs (``only`` those, where given)."""
    chosen = []
    for exp in plan.default_experiments(config, scale):
        entry = catalogue.entry(exp)
        if not entry.trains or (only and exp not in only):
            continue
        chosen.append(exp)
    unknown = sorted(set(only or []) - set(config["experiments"]))
    if unknown:
        raise SystemExit(f"--only names {', '.join(unknown)}, not an experiment of config.yaml: "
                         f"`python -m reluinit.pipeline.plan paper` lists them")
    return chosen


def data_problem(name: str, data_dir: str | Path, scale: str) -> str | None:
    """Why ``name`` does not load here without a download (missing, or there but damaged: the
    dataset check's own sentence, with its fix), or None when it does (the quick scale's stand-ins
    always do)."""
    if datasets.resolve(name, scale) in datasets.BUNDLED:
        return None
    try:
        datasets.load(name, data_dir, train=False, scale=scale)
    except datasets.DatasetUnavailable as e:
        return str(e)
    except (OSError, RuntimeError) as e:
        return f"{name} could not be read under {data_dir} ({type(e).__name__}: {e})"
    return None


def in_reference(reference: Path, exp: str, part: str) -> bool:
    """Whether the reference holds ``part`` of ``exp``, as a part or inside its finished table."""
    from ..report.reference import kept_part

    return Path(paths.existing_table(str(reference), exp)).exists() or kept_part(reference, exp, part) is not None


def candidates(config: dict, scale: str, reference: Path, results: Path, only: list[str] | None = None,
               first: list[str] | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """The parts to run, in order: ``experiment``, ``part``, ``hours`` (declared), and the parts of
    their experiment still to do. An experiment with the fewest hours left goes first, so that one
    completes (its figure and claims) before another starts; within it, the cheapest part first.
    ``first`` (``EXP/part`` names, the plan's) go before all of these, in the order given: the cells
    a verdict waits for, say; those already done are passed over."""
    exps, skipped = experiments(config, scale, only), {}
    rows, planned = [], set()
    priced = plan.jobs(config, scale, exps).set_index("job") if exps else pd.DataFrame()
    for exp in exps:
        s = settings(config, exp, scale)
        names = [s["dataset"]] if "dataset" in s else list(s.get("datasets", []))
        problems = [p for p in (data_problem(n, config["data_dir"], scale) for n in names) if p]
        if problems:
            skipped[exp] = "; ".join(problems)
            continue
        for part in plan.measure_jobs(config, exp, scale):
            planned.add(f"{exp}/{part}")
            if in_reference(reference, exp, part) or Path(paths.part(str(results), exp, part)).exists():
                continue
            rows.append({"experiment": exp, "part": part, "hours": float(priced.loc[f"{exp}/{part}", "runtime_h"])})
    unknown = [name for name in first or [] if name not in planned]
    if unknown:
        raise SystemExit(f"--first names {', '.join(unknown)}, not a part this harvest could run (EXP/part, "
                         f"of {', '.join(exps) or 'no experiment'} at the {scale} scale, whose data is here): "
                         f"`python -m reluinit.pipeline.plan {scale} --all-jobs` names them (its train_part jobs, e.g. "
                         "RP-F3/group36)")
    table = pd.DataFrame(rows, columns=["experiment", "part", "hours"])
    if table.empty:
        return table, skipped
    left = table.groupby("experiment")["hours"].transform("sum")
    # parts in their plan's order where the hours tie (group2 before group10: a depth's jobs in turn)
    order = table.groupby("experiment").cumcount()
    rank = {name: i for i, name in enumerate(first or [])}
    named = (table["experiment"] + "/" + table["part"]).map(rank).fillna(len(rank))
    table = table.assign(hours_left=left, order=order, named=named).sort_values(
        ["named", "hours_left", "experiment", "hours", "order"], kind="stable").drop(columns=["order", "named"])
    return table.reset_index(drop=True), skipped


# The workflow's ``prune`` job, run here as Snakemake runs it (its ``snakemake`` object stood in for),
# so that a harvested part's masks are made by the rule's own code, not a copy of it.
PRUNE_SCRIPT = Path(__file__).resolve().parents[3] / "workflow" / "scripts" / "prune.py"


def prune(config: dict, scale: str, results: Path, exp: str, key: str, device: str, threads: int) -> str:
    """One part's masks, as the workflow's ``prune`` job writes them, with its benchmark file. Made
    each time (seconds for RP's MNIST nets): masks an earlier harvest left may be of other settings,
    and a run resuming from its checkpoint checks the masks' digest. Pruning is not cut by the
    budget; the part's training then stops after its first epoch if the time has come."""
    import runpy
    from types import SimpleNamespace

    if not PRUNE_SCRIPT.exists():
        raise SystemExit(f"{exp} prunes, and the workflow's {PRUNE_SCRIPT.name} is not at {PRUNE_SCRIPT}: run the "
                         "harvest from a checkout of the repository (`pip install -e .` there)")
    name = f"{catalogue.paper_of(exp)}/{exp}/masks/{key}"  # the rule's log and benchmark name
    out = SimpleNamespace(masks=paths.masks(str(results), exp, key), facts=paths.masks(str(results), exp, key, ext="csv"))
    job = SimpleNamespace(input=[], output=out, wildcards=SimpleNamespace(exp=exp, part=key), threads=threads,
                          params=SimpleNamespace(settings=settings(config, exp, scale), scale=scale, device=device),
                          log=[paths.log(str(results), name)])
    t0 = time.monotonic()
    runpy.run_path(str(PRUNE_SCRIPT), init_globals={"snakemake": job})
    _benchmark(results, name, time.monotonic() - t0)
    return out.masks


def part_masks(config: dict, scale: str, results: Path, exp: str, part: str, device: str, threads: int) -> list[str]:
    """The masks of a part's runs where its experiment prunes (one file per key of the job), else none."""
    if not catalogue.entry(exp).masks:
        return []
    return [prune(config, scale, results, exp, key, device, threads) for key in plan.measure_jobs(config, exp, scale)[part]]


def _benchmark(results: Path, name: str, seconds: float) -> None:
    """A job's seconds where Snakemake's ``benchmark:`` file would hold them (``reference export`` reads them)."""
    bench = Path(paths.benchmark(str(results), name))
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(f"s\th:m:s\n{seconds:.2f}\t{time.strftime('%H:%M:%S', time.gmtime(seconds))}\n")


def run_part(config: dict, scale: str, results: Path, exp: str, part: str, device: str, threads: int,
             masks: list[str] | None = None, control=None) -> None:
    """One training part, as the workflow's ``train_part`` and ``measure_trained`` jobs run it
    (``steps.train``, then ``steps.measure``), with ``masks`` (``part_masks``, made here when not
    given) where the experiment prunes, under ``control`` (a ``training.Control``: the harvest's
    deadline and budget stop)."""
    if masks is None:
        masks = part_masks(config, scale, results, exp, part, device, threads)
    s, name = settings(config, exp, scale), f"{catalogue.paper_of(exp)}/{exp}/{part}"
    checkpoints, record = paths.checkpoints(str(results), exp, part), paths.trained_part(str(results), exp, part)
    steps.train(exp, part, s, [], record, masks, paths.log(str(results), name), config=config, scale=scale,
                device=device, threads=threads, checkpoints=checkpoints, control=control)
    steps.measure(exp, part, s, [], paths.part(str(results), exp, part), masks,
                  paths.log(str(results), f"{catalogue.paper_of(exp)}/{exp}/measured/{part}"), config=config,
                  scale=scale, device=device, threads=threads, checkpoints=checkpoints, trained=record)


def commit() -> str:
    """This checkout's commit (``+local changes`` where its code differs), as ``reference export`` records it."""
    from ..report.reference import _commit

    return _commit() or "unknown"


def device_name(device: str) -> str:
    """What ran it: the GPU's name, or the CPU's."""
    import torch

    from ..nets import resolve_device
    from ..report.reference import _machine

    d = resolve_device(device)
    return torch.cuda.get_device_name(d) if d.type == "cuda" else _machine()


def harvest(budget_s: float, data_dir: str | Path, out: str | Path, device: str = "auto", only: list[str] | None = None,
            tiny: bool = False, reference: str | Path = "reference/paper", config_file: str | Path = "config.yaml",
            threads: int | None = None, first: list[str] | None = None) -> pd.DataFrame:
    """Run parts until ``budget_s`` seconds are spent (module doc); returns ``harvest.csv``'s rows of this run."""
    from .. import training
    from ..nets import resolve_device

    started = time.monotonic()
    scale = "quick" if tiny else "paper"
    config = read_yaml(config_file)
    config.update(data_dir=str(data_dir), results=str(out), scale=scale)
    results = Path(paths.scale_root(str(out), scale))
    todo, skipped = candidates(config, scale, Path(reference), results, only, first)  # refused before any file
    writable_tree(results, out)
    import torch

    threads = threads or torch.get_num_threads()
    made = dict(device=str(resolve_device(device)), machine=device_name(device), commit=commit())
    rows = []

    def record(**row) -> None:  # into harvest.csv at once: a harvest killed later keeps what it finished
        rows.append(row | made)
        _append(results / "harvest.csv", rows[-1])

    for exp, why in skipped.items():
        record(experiment=exp, part="", status="skipped", seconds=0.0, note=why)
    deadline = started + budget_s - MARGIN_S
    log.info("harvest: %d part(s) to run in %.0f s; a part still running %.0f s from now stops there, mid-epoch, "
             "and resumes from its last epoch's checkpoint", len(todo), budget_s, budget_s - MARGIN_S)
    for exp, part in zip(todo["experiment"], todo["part"]):
        if time.monotonic() >= deadline:
            record(experiment=exp, part=part, status="not started", seconds=0.0, note="the budget ran out first")
            continue
        with part_lock(results, exp, part) as mine:
            if not mine or Path(paths.part(str(results), exp, part)).exists():
                log.info("harvest: %s %s %s; the next part", exp, part,
                         "is being run by another harvest of this --out" if not mine else "was finished by another")
                continue
            t0 = time.monotonic()
            try:
                control = training.Control(deadline)
                with stopped_at(deadline, control):
                    masks = part_masks(config, scale, results, exp, part, device, threads)  # own benchmark files
                    t0 = time.monotonic()
                    run_part(config, scale, results, exp, part, device, threads, masks, control)
                status, note = "finished", ""
                seconds = time.monotonic() - t0
                _benchmark(results, f"{catalogue.paper_of(exp)}/{exp}/{part}", seconds)
            except (training.OutOfTime, BudgetEnded) as e:
                status, note, seconds = "unfinished", f"{e}; rerun the harvest with the same --out to resume it", \
                    time.monotonic() - t0
        log.info("harvest: %s %s %s in %.1f s", exp, part, status, seconds)
        record(experiment=exp, part=part, status=status, seconds=round(seconds, 2), note=note)
    table = pd.DataFrame(rows, columns=COLUMNS)
    (results / "harvest-report.md").write_text(report(table, scale, budget_s, time.monotonic() - started, results))
    return table


@contextlib.contextmanager
def part_lock(results: Path, exp: str, part: str) -> Iterator[bool]:
    """Whether this process holds ``part`` for as long as the block runs (``integrity.exclusive`` on
    ``paths.part_lock``, the lock a workflow job training the part holds too), so that harvests
    sharing one ``--out`` (one per core) never run the same part, each taking the next free one."""
    with integrity.exclusive(paths.part_lock(results, exp, part), wait=False) as mine:
        yield mine


class BudgetEnded(BaseException):
    """The harvest's budget ended mid-part. Not an ``Exception``: no handler of the code it stops (a
    damaged checkpoint's, which would move the checkpoint aside) takes it for an error of its own."""


@contextlib.contextmanager
def stopped_at(at: float, control) -> Iterator[None]:
    """Inside, ``BudgetEnded`` is raised at ``at`` (``time.monotonic()``) wherever the part is,
    between two of torch's operations: the harvest ends within its budget plus one operation, not one
    epoch (an epoch of RP-T4's depth-100 CNN is over an hour on a CPU). Every file a part writes is
    written atomically and sealed (``integrity.write_atomic``), and the checkpoints of a stack's runs
    are written all or none (``control``, the part's ``training.Control``: the stop waits in its
    ``uninterrupted``), so what the stop cuts is only the epoch in progress; its last checkpoint
    resumes the run. Outside the main thread (no signals) the part stops at the end of an epoch
    instead (the control's deadline)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        control.interrupt(BudgetEnded("out of time: stopped at the budget's end, mid-epoch; its last epoch's "
                                       "checkpoint resumes it (before its first epoch's, it starts again)"))

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(at - time.monotonic(), 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _append(path: Path, row: dict) -> None:
    """One row more in ``harvest.csv`` (its header first when new)."""
    pd.DataFrame([row], columns=COLUMNS).astype(str).to_csv(path, mode="a", header=not path.exists(), index=False)


def checkpoint_mb(results: Path, exp: str, part: str) -> float:
    """Megabytes of a part's checkpoints (an unfinished part's, which the reference keeps when small)."""
    from ..report.reference import folder_bytes

    return folder_bytes(Path(paths.checkpoints(str(results), exp, part))) / 1e6


def report(table: pd.DataFrame, scale: str, budget_s: float, spent_s: float, results: Path) -> str:
    """``harvest-report.md``: what ran, how long, what is left and how to bring it into the reference."""
    from ..report.reference import CHECKPOINTS_MAX_BYTES

    done = table[table["status"] == "finished"]
    lines = [f"# Harvest at the {scale} scale", "",
             f"Budget {budget_s:.0f} s, spent {spent_s:.0f} s on {table['machine'].iloc[0] if len(table) else '?'} "
             f"({table['device'].iloc[0] if len(table) else '?'}), commit {table['commit'].iloc[0] if len(table) else '?'}.",
             "", "| experiment | part | status | seconds | note |", "|---|---|---|---|---|"]
    for _, r in table.iterrows():
        note = r["note"]
        if r["status"] == "unfinished":
            mb = checkpoint_mb(results, r["experiment"], r["part"])
            kept = "kept by `reference export`" if mb * 1e6 <= CHECKPOINTS_MAX_BYTES else "too large for the reference"
            note += f" (checkpoints {mb:.1f} MB, {kept})"
        lines.append(f"| {r['experiment']} | {r['part']} | {r['status']} | {float(r['seconds']):.1f} | {note} |")
    exps = " ".join(sorted(set(done["experiment"])))
    lines += ["", f"{len(done)} part(s) finished."]
    if len(done):
        lines += ["Into the reference (parts.csv records their digests), then into a results tree:", "",
                  f"    python -m reluinit.report.reference export --results {results} --experiments {exps}",
                  f"    python -m reluinit.report.reference restore{'' if scale == 'paper' else f' --scale {scale}'}"]
    return "\n".join(lines) + "\n"


# A year: the longest budget its alarm (``stopped_at``) can hold, and more than any machine is lent.
MAX_BUDGET_S = 365 * 24 * 3600.0


def budget_seconds(text: str) -> float:
    """``--budget-s``: a finite number of seconds, more than the margin kept for the bookkeeping
    (``MARGIN_S``) and at most ``MAX_BUDGET_S``; anything else is refused by name."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not MARGIN_S < value <= MAX_BUDGET_S:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text} seconds: give more than {MARGIN_S:g} (the margin the harvest keeps "
                                         f"for its report) and at most {MAX_BUDGET_S:,.0f} (a year), e.g. --budget-s 600")
    return value


def thread_count(text: str) -> int:
    """``--threads``: a whole number of CPU threads, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of threads") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} threads: give at least 1, e.g. --threads 2 (or leave it out: "
                                         "torch's own choice)")
    return value


def out_folder(text: str) -> str:
    """``--out``: a folder to write the results tree into (made if missing), not an existing file,
    and one this process may write into (its nearest existing folder, as the system says)."""
    path = Path(text)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise argparse.ArgumentTypeError(f"{p} is a file, where the results tree's folder {text} would be: "
                                                 "give a folder, e.g. --out harvest")
            if not os.access(p, os.W_OK | os.X_OK):
                raise argparse.ArgumentTypeError(unwritable(p, text, "read-only" if _read_only(p) else "permission denied"))
            break
    return text


def _read_only(folder: Path) -> bool:
    return bool(os.statvfs(folder).f_flag & os.ST_RDONLY) if hasattr(os, "statvfs") else False


def unwritable(folder: Path, out: str | Path, why: str) -> str:
    """The one sentence for an ``--out`` the harvest cannot write its results tree into."""
    return (f"{folder} cannot be made or written to ({why}), so the harvest cannot make its results tree {out} there: give "
            "--out a folder you can write to, e.g. --out harvest")


def writable_tree(results: Path, out: str | Path) -> None:
    """Make the results tree ``results`` and write a file into it, before any part runs: a folder
    that cannot be made (or written) is refused in one sentence (``unwritable``)."""
    probe = results / f".harvest-{os.getpid()}.probe"
    try:
        results.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        folder = Path(e.filename) if e.filename and Path(e.filename) != probe else results
        raise SystemExit(unwritable(folder, out, e.strerror or type(e).__name__)) from None


def reference_folder(text: str) -> str:
    """``--reference``: the reference tree (``reference export`` writes it: ``runs.csv`` and a folder
    per paper), or an empty folder (no part held); a path that is none of these would run every
    part again, and is refused."""
    path = Path(text)
    if not path.is_dir():
        why = "is a file" if path.exists() else "does not exist"
    elif any(not f.name.startswith(".") for f in path.iterdir()) and not (path / "runs.csv").is_file() and not any(
            (path / paper).is_dir() for paper in catalogue.PAPERS):
        why = f"holds neither runs.csv nor a paper's folder ({', '.join(catalogue.PAPERS)})"
    else:
        return text
    raise argparse.ArgumentTypeError(f"{text} {why}, so every part would run again: give the reference tree that "
                                     "`python -m reluinit.report.reference export` writes, e.g. --reference "
                                     "reference/paper from the checkout (or an empty folder, to run every part)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reluinit.harvest", description=__doc__.splitlines()[0])
    p.add_argument("--budget-s", type=budget_seconds, required=True, help="seconds this harvest may take, all in "
                   f"(more than {MARGIN_S:g}, at most {MAX_BUDGET_S:,.0f})")
    p.add_argument("--data-dir", default="data", help="where the datasets are (MNIST: bash install.sh DIR)")
    p.add_argument("--out", type=out_folder, required=True, help="results tree to write (the same one resumes an earlier harvest)")
    p.add_argument("--device", default="auto", help="auto (cuda when present), cuda or cpu")
    p.add_argument("--only", nargs="*", help="experiment ids to harvest (default: every one it can)")
    p.add_argument("--first", nargs="*", metavar="EXP/PART", help="parts to run before the others, in this order "
                   "(e.g. RP-F3/group36: the cells a verdict waits for); the rest follow in the usual order")
    p.add_argument("--tiny", action="store_true", help="the quick scale's parts on bundled data (CI)")
    p.add_argument("--reference", type=reference_folder, default="reference/paper",
                   help="the reference tree: parts held here are not run again")
    p.add_argument("--threads", type=thread_count, default=None, help="CPU threads (default: torch's choice)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    table = harvest(a.budget_s, a.data_dir, a.out, a.device, a.only, a.tiny, a.reference, threads=a.threads,
                    first=a.first)
    print(table.to_string(index=False))
    print(f"report: {Path(paths.scale_root(a.out, 'quick' if a.tiny else 'paper')) / 'harvest-report.md'}; "
          f"machine {platform.node()}", file=sys.stderr)
    return 0
