"""The steps several workflow scripts share, written once: one training job of an experiment
(train_part.py), one measuring job (scripts measure.py, measure_trained.py and measure_paper.py,
one per rule) and one figure drawn from an experiment's parts (figure.py and figures_paper.py). The scripts only unpack what Snakemake
hands them; a paper's job calls the step once per id, into the files that id's own job writes."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd

from .. import integrity
from . import catalogue, jobs, paths, plan
from .shared import take


def train(exp_id: str, job: str, s: dict, inputs: list, output: str, masks_files: list, log_path: str, *,
          config: dict, scale: str, device: str, threads: int, checkpoints: str, control=None) -> None:
    """One training job of an experiment that trains (rule ``train_part``): its part's runs trained,
    each resuming from its checkpoint in ``checkpoints``, and the record of their final checkpoints
    (name, SHA-256, epochs) written to ``output`` (``paths.trained_part``), which the part's
    measuring job reads. ``control``: the runs' ``training.Control`` (the harvest's, with its
    deadline; by default a fresh one, which SIGTERM stops: ``jobs.stopped_into``)."""
    from .. import integrity as seals
    from ..training import Control

    log = jobs.start(log_path, threads)
    jobs.verified(list(inputs) + list(masks_files))
    exp = catalogue.get(exp_id)
    (key,) = plan.measure_jobs(config, exp_id, scale)[job]
    control = jobs.stopped_into(control or Control())
    results = paths.scale_root(config["results"], scale)
    log.info("%s part %s at the %s scale, training: %s", exp_id, key, scale, s)
    with _one_writer(exp, results, exp_id, key, log):
        try:
            runs = exp.train(s, key, device, checkpoints, masks=masks_files[0] if masks_files else None,
                             control=control)
        except Exception as e:
            jobs.blame_settings(e, s, exp_id, scale, output)
            raise
        for run in runs:  # the run's checkpoint by name and content: the measuring job reads no other
            path = run.pop("checkpoint")
            run.update(checkpoint=Path(path).name if path else None, sha256=seals.digest(path) if path else None)
    jobs.write_json({"experiment": exp_id, "part": key, "scale": scale, "runs": runs}, output)
    log.info("%s part %s: %d runs trained, recorded in %s", exp_id, key, len(runs), output)


def trained_checkpoints(record_path: str, checkpoints: str) -> None:
    """Check that each run a training job recorded (``train``) still has the checkpoint it recorded:
    a file missing, damaged or since changed is named, with the command that retrains it, and not
    read."""
    import json

    from .. import integrity as seals

    jobs.verified([record_path])
    record = json.loads(Path(record_path).read_text())
    fix = seals.rebuild_command(record_path)
    for run in record["runs"]:
        if run["checkpoint"] is None:
            raise jobs.StaleTraining(f"{record_path} records run {run['run']} without a checkpoint, so no job can measure "
                                f"it: retrain the part with `{fix}`")
        path = Path(checkpoints) / run["checkpoint"]
        if not path.exists():
            raise jobs.StaleTraining(f"{path}, the checkpoint of run {run['run']} that {record_path} records, is missing: "
                                f"retrain the part with `{fix}`")
        seals.verify(path)
        if seals.digest(path) != run["sha256"]:
            raise jobs.StaleTraining(f"{path} is not the checkpoint of run {run['run']} that {record_path} records (its "
                                f"SHA-256 differs: written since, by another run): retrain the part with `{fix}`")


def measure(exp_id: str, job: str, s: dict, inputs: list, output: str, masks_files: list, log_path: str, *,
            config: dict, scale: str, device: str, threads: int, checkpoints: str | None = None,
            trained: str | None = None) -> None:
    """One experiment's job ``job`` (a part, or ``plan.ALL_PARTS``): its parts in order, each
    seeing the job's inputs less the other parts' trained nets and masks (its own in its order),
    and their rows written to ``output``. An experiment that trains: ``trained``, the record its
    part's training job wrote (``train``), whose checkpoints in ``checkpoints`` it measures,
    training nothing (rule ``measure_trained``)."""
    log = jobs.start(log_path, threads)
    jobs.verified(list(inputs) + list(masks_files))  # trained nets and masks: whole, or the job stops naming one
    exp = catalogue.get(exp_id)
    keys = plan.measure_jobs(config, exp_id, scale)[job]
    masks = dict(zip(keys, masks_files))  # the parts' masks, from their `prune` jobs
    results = paths.scale_root(config["results"], scale)
    own = {key: {paths.trained(results, *t) for t in exp.trained(s, key)} | ({masks[key]} if key in masks else set())
           for key in keys}
    frames, declared = {}, catalogue.undefined(exp_id)
    for key in keys:
        log.info("%s part %s at the %s scale: %s", exp_id, key, scale, s)
        others = set().union(*(own[k] for k in keys if k != key)) - own[key]
        extra = {}
        if exp.trains:
            trained_checkpoints(trained, checkpoints)
            extra = {"checkpoints": checkpoints, "trained": True}
        if key in masks:
            extra["masks"] = masks[key]
        try:
            frames[key] = exp.measure(s, key, device, [f for f in inputs if f not in others], **extra)
        except Exception as e:
            jobs.blame_settings(e, s, exp_id, scale, output)
            raise
        jobs.check_finite(frames[key], exp_id, declared, output, settings=s, scale=scale)
    jobs.write_parts(frames, output, experiment=exp_id, scale=scale)


def _one_writer(exp, results, exp_id: str, key: str, log):
    """A training part is trained by one process at a time (``paths.part_lock``): a job finds a
    job of an earlier run still training it (an orphan of a killed Snakemake, on the cluster) or a
    harvest, and waits for it, then resumes from what it left."""
    if not exp.trains:
        return contextlib.nullcontext()

    def waiting(holder: str) -> None:
        log.warning("%s part %s is being trained by %s (a job of an earlier run, or a harvest): waiting for it to "
                    "end, then resuming from its checkpoints", exp_id, key, holder)

    return integrity.exclusive(paths.part_lock(results, exp_id, key), wait=True, waiting=waiting)


def draw(exp_id: str, parts: list, s: dict, out, log_path: str, scale: str, shared: dict | None = None) -> None:
    """Combine one experiment's parts into its tidy table, plot its catalogue figure as PDF and PNG,
    write the scale and settings it was built with (what the report caption reads back), and log
    the numbers a reader compares with the paper (the experiment's summary). ``out``: the paths
    ``table``, ``pdf``, ``png`` and ``built``. ``shared``: ``{part file: [run keys]}``, parts of
    another experiment among ``parts`` of which the table takes only these runs' rows (config
    ``shared``; they keep that experiment's id and part, which trained them)."""
    from ..report import plotting

    log = jobs.start(log_path, threads=None)  # no torch here; each id's log is its own
    summary = catalogue.figures_of(exp_id)[1]  # reluinit.figures.<module>: tables in, figures out
    shared = shared or {}
    frames = [jobs.read_table(p) for p in parts]  # each checked against its seal
    frames = [take(f, shared[p], where=p) if p in shared else f for p, f in zip(parts, frames)]
    if shared:
        log.info("%s: the rows of %d runs from %d part(s) of another table (config `shared`)", exp_id,
                 sum(map(len, shared.values())), len(shared))
    table = pd.concat(frames, ignore_index=True)
    if catalogue.ENTRIES[exp_id].source:  # a view of another experiment's runs: its own id on its rows
        table["experiment"] = exp_id
    jobs.check_finite(table, exp_id, catalogue.undefined(exp_id), out["table"])  # a part written before the check
    jobs.write_table(table, out["table"])
    plotting.save(picture(exp_id, table, s), [out["pdf"], out["png"]])
    jobs.write_json({"scale": scale, "settings": portable(s)}, out["built"])
    log.info("%s summary:\n%s", exp_id, summary(table).to_string(index=False))


def picture(exp_id: str, table: pd.DataFrame, s: dict):
    """``exp_id``'s catalogue figure of ``table``, with a note under its panels on the values it
    could not draw (``undrawn``): what a figure job saves, and what ``reference render --figures``
    redraws from a committed table."""
    import logging

    from ..report import plotting

    fig = catalogue.figures_of(exp_id)[0](table, s)
    note = undrawn(table, catalogue.undefined(exp_id))
    if note:  # seaborn drops them without a word: the figure says how many and why
        plotting.footnote(fig, note)
        logging.getLogger("reluinit").info("%s: %s", exp_id, note)
    return fig


def undrawn(table: pd.DataFrame, declared: dict[str, str]) -> str:
    """The figure's note on the values it cannot draw: the NaN and inf of its table's declared
    columns (``catalogue.undefined``; a training run's empty history cells aside), grouped by what
    they mean; "" when there are none."""
    found = jobs.nonfinite(table, [c for c, why in declared.items() if c in table and why not in catalogue.BLANKS])
    by_meaning: dict[tuple[str, str], list[str]] = {}
    for col, n in found.items():
        by_meaning.setdefault((declared[col], n), []).append(col)
    parts = [f"{n}{' each' if len(cols) > 1 else ''} in {', '.join(cols)} ({why})"
             for (why, n), cols in by_meaning.items()]
    return "Not drawn: " + "; ".join(parts) if parts else ""


def portable(s: dict) -> dict:
    """Settings as a figure's record keeps them: a data folder given as an absolute path is shown by
    its setting's name (``<data_dir>``), not by the path of the machine that built it."""
    from pathlib import Path

    return {k: ("<data_dir>" if k == "data_dir" and Path(str(v)).is_absolute()
                else portable(v) if isinstance(v, dict) else v) for k, v in s.items()}
