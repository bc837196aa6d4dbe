"""What every workflow script does around the science: logging, threads, reading and writing
result files (sealed: ``reluinit.integrity``)."""

from __future__ import annotations

import errno
import functools
import io
import logging
import os
import platform
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd

from .. import integrity
from .catalogue import UNSET

# A job's log marks what the user should do with this; the workflow's final words repeat the
# newest such line of the run (the Snakefile's `onerror`).
TODO_PREFIX = "what to do: "


def start(log_path: str | None, threads: int | None = 1) -> logging.Logger:
    """Send this job's log records (and warnings, and an uncaught exception with its traceback) to
    ``log_path`` and size torch's thread pool; ``threads=None``: a job that only reads tables (a
    figure, the scorecard) and never imports torch, about 2 s of a quick job's start-up."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
        handlers.append(_kept_unless_finished(Path(log_path)))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.captureWarnings(True)
    log = logging.getLogger("reluinit")
    sys.excepthook = _log_uncaught
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _log_stopped)
    if threads is None:
        log.info("python %s, pandas %s", platform.python_version(), pd.__version__)
        return log
    if Path(".snakemake").is_dir():  # a workflow's job: compiled steps (``engine``) shared by its jobs
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(".snakemake", "torchinductor").resolve()))
    import torch

    torch.set_num_threads(max(1, threads))
    log.info("python %s, torch %s, %d threads, cuda available: %s", platform.python_version(),
             torch.__version__, torch.get_num_threads(), torch.cuda.is_available())
    return log


class _Attempt(logging.Handler):
    """A second name (a hard link) for this attempt's log, removed when the job ends without an error
    logged: Snakemake deletes a job's log before it runs the job again (``--retries``, a rerun after a
    SLURM time limit), so an attempt that failed or was killed stays beside the next one's as
    ``<log>.<start time>-<pid>.unfinished``."""

    def __init__(self, kept: Path):
        super().__init__(logging.ERROR)
        self.kept, self.failed = kept, False

    def emit(self, record: logging.LogRecord) -> None:
        self.failed = True

    def forget_if_finished(self) -> None:
        if not self.failed:
            self.kept.unlink(missing_ok=True)


def _kept_unless_finished(log_path: Path) -> logging.Handler:
    import atexit
    import time

    kept = log_path.with_name(f"{log_path.name}.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.unfinished")
    attempt = _Attempt(kept)
    try:
        log_path.touch()
        os.link(log_path, kept)
    except OSError:  # a file system without hard links: no second name
        return logging.NullHandler()
    atexit.register(attempt.forget_if_finished)
    return attempt


def stopped_into(control):
    """``control`` (a ``training.Control``) made the one that SIGTERM stops: while its runs save an
    epoch (``Control.uninterrupted``) the job ends once the last of them is saved (``_log_stopped``).
    Returned, for the job to hand to its trainer."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, functools.partial(_log_stopped, control=control))
    return control


def _log_stopped(signum, frame, control=None) -> None:
    """SIGTERM (SLURM's time limit, ``scancel``, preemption): the job's log says what stopped it and
    what to do, the line the run's final words repeat, then the job ends: as the signal would have
    ended it, or, while a stack's runs save an epoch (``control``'s ``uninterrupted``, the
    ``training.Control`` the job's trainer received: ``stopped_into``), with exit status 128 + the
    signal once the last of them is saved, so that they resume together, in the stack they left
    (SLURM's KillWait, 30 s by default, leaves time for it)."""
    logging.getLogger("reluinit").error(
        "%sthis job was stopped by %s (a SLURM time limit, scancel or preemption): run the same snakemake command "
        "again, and a training job resumes from its last checkpoint; if it met its time limit again, raise its "
        "experiment's `runtime` under `resources:` (config.yaml, or a --configfile over it)", TODO_PREFIX,
        signal.Signals(signum).name)
    if control is not None and control.holding():
        control.interrupt(SystemExit(128 + signum))
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _log_uncaught(kind, error, tb) -> None:
    """The job's log gets what killed it (a script's traceback otherwise reaches only the terminal);
    an error that ends in its fix (a damaged input, an undeclared NaN, a claim that cannot be read)
    and a full disk also get it as the line the workflow's final words repeat."""
    log = logging.getLogger("reluinit")
    log.critical("the job failed: %s: %s", kind.__name__, error, exc_info=(kind, error, tb))
    if getattr(error, "ends_in_fix", False):  # DamagedFile, NotFinite, a claim's error
        log.error("%s%s", TODO_PREFIX, error)
    elif isinstance(error, OSError) and error.errno == errno.ENOSPC:
        folder = Path(error.filename).parent if error.filename else Path.cwd()
        writing = f", writing {Path(error.filename).name.removesuffix('.tmp')}" if error.filename else ""
        log.error("%sthe disk holding %s is full (%s%s): free space there (`df -h %s` shows how much is left) and "
                  "run the same snakemake command again; the jobs that finished are kept", TODO_PREFIX, folder,
                  error.strerror, writing, folder)


def verified(paths) -> list:
    """``paths`` (Snakemake inputs), each checked against its seal before any is read: a damaged one
    stops the job with one line that names it and the command that rebuilds it."""
    paths = files(paths)
    try:
        integrity.verify_all(p for p in paths if Path(p).is_file())
    except integrity.DamagedFile as e:
        log = logging.getLogger("reluinit")
        log.error("%s", e)
        log.error("%s%s", TODO_PREFIX, e)
        sys.exit(1)
    return paths


def files(named) -> list:
    """A Snakemake named input's files as a list (Snakemake gives a name of one file as the file)."""
    return [named] if isinstance(named, str) else list(named)


def write_table(df: pd.DataFrame, path: str | Path, **constants) -> None:
    """Write a tidy table as CSV, with ``constants`` (experiment, scale, ...) as leading columns,
    atomically and sealed (its rows and columns with its checksum)."""
    _lead(df, constants)
    integrity.write_atomic(path, lambda tmp: df.to_csv(tmp, index=False),
                           shape={"rows": len(df), "columns": [str(c) for c in df.columns]})
    logging.getLogger("reluinit").info("wrote %d rows to %s", len(df), path)


def read_table(path: str | Path) -> pd.DataFrame:
    """A table written by ``write_table``, checked against its seal first (``integrity.verify``)."""
    integrity.verify(path)
    return pd.read_csv(path)


class StaleTraining(RuntimeError):
    """A measuring job's trained runs are not what their training job recorded: named, with the
    command that retrains them, and never read."""
    ends_in_fix = True


class NotFinite(ValueError):
    """NaN or inf in a column whose experiment does not say it may hold them: never sealed."""
    ends_in_fix = True


def nonfinite(table: pd.DataFrame, columns=None, rows=None) -> dict[str, str]:
    """``{column: "3 NaN, 1 inf"}`` for each numeric column (of ``columns``, default all) that holds
    values that are not finite numbers in ``rows`` (an index of ``table``; default all): pandas'
    aggregates and seaborn skip them without a word. A table that stacks kinds of rows (its ``kind``
    column: a training run's epochs beside its measurements) leaves each kind's columns empty on the
    other kinds' rows: such blanks are not counted. A column with no value in the whole table is
    counted (measured, and lost) unless it is a setting these runs do not have (``catalogue.UNSET``,
    such as RP-T5's ``depth``)."""
    kinds = [g.index for _, g in table.groupby("kind", dropna=False)] if "kind" in table else [table.index]
    found = {}
    for col in table.columns if columns is None else columns:
        values = table[col]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        bad = ~np.isfinite(values.astype(float))
        if values.isna().all():  # no value anywhere: a setting these runs lack, or a measurement lost
            counted = bad.copy() if col not in UNSET else pd.Series(False, index=table.index)
        else:
            counted = pd.Series(False, index=table.index)
            for index in kinds:
                if not values[index].isna().all():  # another kind's column, empty on this kind's rows
                    counted[index] = bad[index]
        if rows is not None:
            counted = counted[rows]
        nan = int((counted & values.isna()).sum())
        inf = int(counted.sum()) - nan
        if nan or inf:
            found[col] = ", ".join(f"{n} {what}" for n, what in ((nan, "NaN"), (inf, "inf")) if n)
    return found


def check_finite(table: pd.DataFrame, exp_id: str, declared: dict[str, str], output: str | Path,
                 settings: dict | None = None, scale: str | None = None) -> None:
    """Refuse (``NotFinite``) a table of ``exp_id`` with NaN or inf in a column outside ``declared``
    (``catalogue.undefined``: the columns the experiment says may hold them, and what they mean).
    ``settings`` (the experiment's at ``scale``): a setting of magnitude 1e15 or more, where every
    paper's are small numbers, is named as the likely cause, by its config key."""
    bad = {c: n for c, n in nonfinite(table).items() if c not in declared}
    if bad:
        found = "; ".join(f"{n} in column {c}" for c, n in bad.items())
        cause = huge_cause(settings or {}, exp_id, scale)
        raise NotFinite(f"{exp_id}: the rows for {output} hold values that are not numbers ({found}), in column(s) "
                        f"{exp_id} does not declare may hold them, so nothing was written{cause}; fix the measurement, or "
                        f"declare what such a value means in the catalogue entry's `undefined` "
                        f"(reluinit.pipeline.catalogue, docs/adding-an-experiment.md), then rerun "
                        f"`{integrity.rebuild_command(output)}`")


def huge_cause(settings: dict, exp_id: str, scale: str | None) -> str:
    """"; the config sets <key> = <value>, ...: a likely cause (...)" naming each setting of
    ``exp_id`` of magnitude 1e15 or more by its config key, or "" where there is none."""
    huge = _huge_settings(settings, f"experiments.{exp_id}.{scale}")
    return (f"; the config sets {', '.join(huge)}, far beyond any value the papers use: a likely cause "
            f"(correct it in config.yaml or your --configfile)" if huge else "")


def blame_settings(error: BaseException, settings: dict, exp_id: str, scale: str, output: str | Path) -> None:
    """Where a job of ``exp_id`` fails (``error``) under a setting of magnitude 1e15 or more, the
    line the run's final words repeat names that setting as the likely cause, with the rerun (a
    finite but absurd ``sigma_w`` fails inside torch, far from the config key)."""
    cause = huge_cause(settings, exp_id, scale)
    if cause and not getattr(error, "ends_in_fix", False):
        logging.getLogger("reluinit").error("%s%s: the job failed (%s: %s)%s, then rerun `%s`", TODO_PREFIX, exp_id,
                                            type(error).__name__, str(error).split("\n")[0], cause,
                                            integrity.rebuild_command(output))


def _huge_settings(value, key: str) -> list[str]:
    """``key = value`` for every number of magnitude 1e15 or more in ``value`` (nested settings)."""
    if isinstance(value, dict):
        return [h for k, v in value.items() for h in _huge_settings(v, f"{key}.{k}")]
    if isinstance(value, (list, tuple)):
        return [h for i, v in enumerate(value) for h in _huge_settings(v, f"{key}[{i}]")]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) >= 1e15:
        return [f"{key} = {value!r}"]
    return []


def write_json(record, path: str | Path) -> None:
    """A small record (a figure's settings) as JSON, atomically and sealed."""
    import json

    integrity.write_atomic(path, lambda tmp: Path(tmp).write_text(json.dumps(record, default=str)))


def write_parts(frames: dict[str, pd.DataFrame], path: str | Path, **constants) -> None:
    """Write one job's rows, each part's under its ``part`` key. Several parts (a job that runs all
    of an experiment's) are written as their files would read back, concatenated: the table the
    figure job makes is the same whether the parts ran in one job or in one each."""
    if len(frames) == 1:
        ((key, df),) = frames.items()
        return write_table(df, path, **constants, part=key)
    read_back = [pd.read_csv(io.StringIO(_lead(df, {**constants, "part": key}).to_csv(index=False)))
                 for key, df in frames.items()]
    write_table(pd.concat(read_back, ignore_index=True), path)


def _lead(df: pd.DataFrame, constants: dict) -> pd.DataFrame:
    for i, (name, value) in enumerate(constants.items()):
        df.insert(i, name, value)
    return df
