"""What every workflow script does around the science: logging, threads, writing tables."""

from __future__ import annotations

import io
import logging
import platform
from pathlib import Path

import pandas as pd


def start(log_path: str | None, threads: int | None = 1) -> logging.Logger:
    """Send this job's log records (and warnings) to ``log_path`` and size torch's thread pool;
    ``threads=None``: a job that only reads tables (a figure, the scorecard) and never imports torch,
    about 2 s of a quick job's start-up."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.captureWarnings(True)
    log = logging.getLogger("reluinit")
    if threads is None:
        log.info("python %s, pandas %s", platform.python_version(), pd.__version__)
        return log
    import torch

    torch.set_num_threads(max(1, threads))
    log.info("python %s, torch %s, %d threads, cuda available: %s", platform.python_version(),
             torch.__version__, torch.get_num_threads(), torch.cuda.is_available())
    return log


def files(named) -> list:
    """A Snakemake named input's files as a list (Snakemake gives a name of one file as the file)."""
    return [named] if isinstance(named, str) else list(named)


def write_table(df: pd.DataFrame, path: str | Path, **constants) -> None:
    """Write a tidy table as CSV, with ``constants`` (experiment, scale, ...) as leading columns."""
    _lead(df, constants)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    logging.getLogger("reluinit").info("wrote %d rows to %s", len(df), path)


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
