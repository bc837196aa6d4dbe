"""The committed reference results: what the pipeline gives at the papers' own sizes, readable
without running anything (``reference/paper/``, the layout of ``results/paper/``).

    python -m reluinit.report.reference export [--results results/paper] [--out reference/paper]
    python -m reluinit.report.reference render [--root reference/paper] [--figures]
    python -m reluinit.report.reference targets      (the Snakemake targets that build it: `make reference`)
    python -m reluinit.report.reference restore      (an unfinished experiment's finished jobs, back into results/)
    python -m reluinit.report.reference refingerprint   (today's fingerprints on parts.csv, after code moved)
    python -m reluinit.report.reference record <table>  (a table's digests, after an edit meant: committed.py)

``export`` copies from a paper-scale results tree what a reader needs: each experiment's tidy
table (gzipped above ``GZIP_ABOVE`` bytes, deterministically, so an unchanged table is an
unchanged file), its figure as PNG with the settings record beside it, and ``runs.csv``: jobs,
summed job seconds and the code commit of each experiment. ``render`` then judges every claim on
the tree (``claims.csv``, ``claims/<PAPER>.csv``, ``reports/scorecard.html``), executes every
paper's notebook on it (``reports/<PAPER>.html``), and writes ``reference/README.md`` and the
README's verdict table (the documentation's gallery, ``reluinit.report.gallery``, reads the tree
when the site is built). ``ORACLE`` lists the cheap cells ``tests/test_reference.py`` recomputes
at the paper scale and requires to equal the committed tables, so a change that alters a
paper-scale number fails until the reference is regenerated on purpose.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from .. import integrity
from ..fingerprint import settings_fingerprint
from ..pipeline import catalogue, paths, provenance, shared
from ..pipeline.catalogue import PAPERS, paper_of
from ..pipeline.config import read_yaml, settings
from . import claims, committed, reports
from .committed import DIGESTS, DamagedPart, digests, part_bytes

GZIP_ABOVE = 500_000  # bytes of CSV

# What the reference holds: every experiment that needs no GPU.
EXPERIMENTS = ["OP-F1", "OP-F2", "OP-F3",
               "LR-F1", "LR-F2", "LR-F3", "LR-F4", "LR-F5", "LR-F6", "LR-F7", "LR-F8",
               "TG-F1", "TG-F2", "TG-F3a", "TG-F3b", "TG-F4", "TG-F5", "TG-F6",
               "EP-F1", "EP-F2", "EP-F3", "EP-F5", "EP-F7", "EP-F12", "EP-F13", "EP-F14", "EP-F15", "EP-F16",
               "EP-F18",
               "RP-F1", "RP-Th1", "RP-T7", "RP-F3", "RP-F5",
               "X-F1"]

# Cheap cells of the reference recomputed by the regression oracle: (experiment, part, settings
# changed, rows of the committed table they must equal, relative tolerance). A cut keeps entries
# of a sweep whose seeds do not depend on the cut, so the numbers are those of the full run. An MNIST
# experiment's cell reads the official set from $RELUINIT_MNIST_DIR (.ci/run fetches it). OP-F1's
# nets compute in float32, whose rounding differs between CPUs' kernels: recomputed on an Intel
# Xeon, its ratios part from the AMD EPYC's table by up to 9e-7 (activations) and 2.6e-6
# (gradients, through 10 layers), so its tolerance is 1e-5, about 80 float32 steps and far below
# any change of code; the others compute in float64 and keep 1e-9.
ORACLE = [
    ("OP-F1", "he_fan_out-w100", {}, "init == 'he_fan_out' and width == 100", 1e-5),
    ("LR-F3", "all", {"max_teeth_depth": 3}, "n <= 3", 1e-9),
    ("RP-T7", "nets", {"gammas": [5.0], "n_nets": 3}, "gamma == 5 and net < 3", 1e-9),
    ("TG-F4", "subvectors", {}, "u == u", 1e-9),
    ("EP-F14", "sweeps", {"widths": [10], "n_nets": 1}, "width == 10 and net == 0", 1e-9),
    # on the official MNIST's test points 0 and 1 (the test reads the set from $RELUINIT_MNIST_DIR)
    ("EP-F2", "relu", {"sigma_w2": [1], "widths": [25], "n_nets": 1},
     "activation == 'relu' and sigma_w2 == 1 and width == 25 and net == 0", 1e-9),
]


def read_table(root: str | Path, exp: str) -> pd.DataFrame:
    return pd.read_csv(paths.existing_table(str(root), exp))


def _copy_table(src: Path, dest_csv: Path, gzip_above: int = GZIP_ABOVE) -> Path:
    """``src`` as ``dest_csv``, or gzipped beside it (``.csv.gz``) when larger than ``gzip_above`` bytes."""
    dest_csv.parent.mkdir(parents=True, exist_ok=True)
    for stale in (dest_csv, dest_csv.with_suffix(".csv.gz")):
        stale.unlink(missing_ok=True)
    if src.stat().st_size <= gzip_above:
        shutil.copyfile(src, dest_csv)
        return dest_csv
    dest = dest_csv.with_suffix(".csv.gz")
    with open(src, "rb") as f, open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                                       filename="", compresslevel=9) as out:
        shutil.copyfileobj(f, out)
    return dest


def _ran_parts(results: Path, exp: str) -> list[str]:
    """The parts of ``exp`` that ran in this results tree: those with a Snakemake benchmark file."""
    return sorted(f.stem for f in (results / "benchmarks" / paper_of(exp) / exp).glob("*.tsv"))


def _seconds(benchmark: Path) -> float:
    """A job's wall seconds, from its Snakemake benchmark file."""
    return float(pd.read_csv(benchmark, sep="\t")["s"].iloc[0])


def _part_seconds(results: Path, exp: str, part: str) -> float:
    """A part's job seconds: its benchmark's wall time or, where more, the training seconds its rows
    carry (one per run and epoch). A job resumed from the checkpoints of a run that a session's end
    killed trained its first epochs before the benchmark's clock started; its rows still time them."""
    wall = _seconds(Path(paths.benchmark(str(results), f"{paper_of(exp)}/{exp}/{part}")))
    rows = Path(paths.part(str(results), exp, part))
    wanted = ("run", "epoch", "seconds")
    table = pd.read_csv(rows, usecols=lambda c: c in wanted) if rows.exists() else pd.DataFrame()
    if not set(wanted) <= set(table.columns):
        return wall
    return max(wall, float(table.drop_duplicates(["run", "epoch"])["seconds"].sum()))


def _data(table: pd.DataFrame) -> str:
    """What the inputs were: the dataset (or point set) column's values, else random inputs."""
    for col in ("dataset", "points"):
        if col in table:
            return "; ".join(sorted(set(table[col].astype(str))))
    return "random nets (no dataset)"


def _commit() -> str:
    """The commit of the checkout this code runs from (``+local changes`` where its code or config
    differs), not the working directory's: a harvest may run one checkout's code (a snapshot
    worktree on ``PYTHONPATH``) from another's folder."""
    checkout = Path(__file__).resolve().parents[3]  # src/reluinit/report/reference.py

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=checkout).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "workflow", "config.yaml")
    return git("rev-parse", "--short", "HEAD") + ("+local changes" if dirty else "")


def _machine() -> str:
    """The CPU this process runs on: float kernels differ between CPUs, so a trained net's last
    digits (and, through training, more) can too; ``runs.csv`` says which CPU made each table."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# A part's row: what made it (seconds, commit, CPU or GPU, code and settings fingerprints) and what
# it holds (``sha256``, ``bytes`` and ``rows`` of its CSV, uncompressed), which ``restore`` checks.
PARTS_COLUMNS = ["experiment", "part", "job_seconds", "commit", "machine", "code", "settings", "sha256", "bytes",
                 "rows"]
# Read as text: a short hash such as 663e607 or 12345e6 would otherwise read as a float.
TEXT = {"commit": str, "machine": str, "code": str, "settings": str, "sha256": str}


def kept_part(root: str | Path, exp: str, part: str) -> Path | None:
    """The file of ``part`` of ``exp`` in a reference tree (``.csv``, or ``.csv.gz`` above
    ``GZIP_ABOVE``), or None."""
    plain = Path(paths.part(str(root), exp, part))
    return next((f for f in (plain, plain.with_suffix(".csv.gz")) if f.exists()), None)


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder`` (a part's checkpoints)."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


def fingerprints(exp: str, config_file: str | Path = "config.yaml", scale: str = "paper") -> dict[str, str]:
    """What a part of ``exp`` was measured by, for ``restore`` to check before it reuses one: the
    code fingerprint of the experiment's measurement (the one its Snakemake job carries) and a
    hash of its settings at ``scale`` (the paper's; a harvest's ``--tiny`` tree, the quick scale's)."""
    config = read_yaml(config_file)
    s = json.dumps(settings_fingerprint(settings(config, exp, scale)), sort_keys=True)
    return {"code": provenance.code_fingerprint(catalogue.get(exp).measure),
            "settings": hashlib.sha256(s.encode()).hexdigest()[:16]}


def _part_row(results: Path, exp: str, part: str, carried: pd.DataFrame, made_by: dict) -> dict:
    """A finished job of ``exp``: timed by its benchmark file when it ran in this results tree
    (whose checkout's code and config, ``made_by``, made it), else as recorded when an earlier
    session exported it (a restored part has no benchmark)."""
    bench = Path(paths.benchmark(str(results), f"{paper_of(exp)}/{exp}/{part}"))
    held = Path(paths.part(str(results), exp, part))
    held = digests(held.read_bytes()) if held.exists() else {}
    if bench.exists():
        return {"experiment": exp, "part": part, "job_seconds": round(_part_seconds(results, exp, part), 1), **made_by,
                **_harvested(results, exp, part), **held}
    if part in carried.index:
        return carried.loc[part].to_dict() | {"experiment": exp, "part": part, **held}
    return {"experiment": exp, "part": part, **held}


def _harvested(results: Path, exp: str, part: str) -> dict:
    """The commit and device of a part made by ``reluinit.harvest`` (its ``harvest.csv``), which
    are not this checkout's and CPU."""
    record = results / "harvest.csv"
    if not record.exists():
        return {}
    made = pd.read_csv(record, dtype=TEXT)
    made = made[(made["experiment"] == exp) & (made["part"] == part) & (made["status"] == "finished")]
    return {} if made.empty else {"commit": made["commit"].iloc[-1], "machine": made["machine"].iloc[-1]}


def _with_digests(row: dict, out: Path) -> dict:
    """A carried part row, with the digests of its file in the reference where the row has none
    (exported before parts carried them). A part folded into its experiment's finished table before
    then is no longer kept: its SHA-256 and bytes are unknown, and its rows are counted from the
    table's ``part`` column."""
    if isinstance(row.get("sha256"), str):
        return row
    kept = kept_part(out, row["experiment"], row["part"])
    if kept:
        return row | digests(part_bytes(kept))
    table = Path(paths.existing_table(str(out), row["experiment"]))
    if table.exists() and pd.isna(pd.to_numeric(row.get("rows"), errors="coerce")):
        done = pd.read_csv(table, usecols=lambda c: c == "part")
        if "part" in done:
            return row | {"rows": int((done["part"] == row["part"]).sum())}
    return row


# A part a run left unfinished (a harvest's budget ran out) keeps its checkpoints in the reference
# when they are this small, so that the next machine resumes it (``restore`` brings them back).
CHECKPOINTS_MAX_BYTES = 10_000_000

# What ``restore`` says of a trained experiment's parts (docs/reference.md, "Regenerating it").
STACKED = ("a run that trains again in a stack of another size than it first did (alone after a damaged "
           "checkpoint, or under another runs_per_job) rounds float32 differently: its losses, lengths, growth "
           "factors and post-training sigmas then differ from the stacked run's by up to a few 1e-7 relative "
           "(TG-F6's length_out by 3.3e-7 to 4.7e-7); its accuracies, epochs and steps did not in the runs "
           "measured (docs/reference.md)")


def _keep_checkpoints(results: Path, out: Path, exp: str, done: set[str]) -> None:
    """Copy the checkpoints of ``exp``'s unfinished parts (sealed files, as the run wrote them) into
    the reference when each part's are at most ``CHECKPOINTS_MAX_BYTES``; drop those of parts done."""
    kept = Path(paths.checkpoints(str(out), exp, "x")).parent
    for folder in sorted(kept.glob("*")) if kept.is_dir() else []:
        if folder.name in done:
            shutil.rmtree(folder)
    for folder in sorted(Path(paths.checkpoints(str(results), exp, "x")).parent.glob("*")):
        if folder.name not in done and folder.is_dir() and folder_bytes(folder) <= CHECKPOINTS_MAX_BYTES:
            shutil.rmtree(kept / folder.name, ignore_errors=True)
            shutil.copytree(folder, kept / folder.name)


def takers(config: dict, exp: str, scale: str = "paper") -> list[str]:
    """The experiments of ``config`` whose tables take runs from ``exp``'s parts (config ``shared``)."""
    return [e for e in config["experiments"] if e in catalogue.ENTRIES and shared.source(config, e, scale) == exp]


def _keep_taken_parts(results: Path, out: Path, status: dict[str, str], finished: dict[str, list[dict]],
                      config: dict, scale: str) -> list[dict]:
    """A done experiment's parts stay in the reference while an experiment that takes runs from
    them is unfinished (its table is assembled from their files after ``restore``), and go once
    every such experiment is done. ``finished``: the experiments done in this export, with the
    rows of their parts that parts.csv does not hold yet (returned for those kept)."""
    rows = []
    for exp, state in status.items():
        folder = Path(paths.part(str(out), exp, "x")).parent
        if state != "done" or exp not in catalogue.ENTRIES:
            continue
        waiting = [e for e in takers(config, exp, scale) if status.get(e) != "done"]
        if not waiting:
            shutil.rmtree(folder, ignore_errors=True)  # finished: no parts
            continue
        if exp in finished:  # its parts as this results tree holds them (the table was assembled from them)
            for f in sorted(Path(paths.part(str(results), exp, "x")).parent.glob("*.csv")):
                _copy_table(f, Path(paths.part(str(out), exp, f.stem)), gzip_above=0)
            rows += finished[exp]
    return rows


def _joined(values) -> str | None:
    kept = sorted({str(v) for v in values if v is not None and not pd.isna(v)})
    return "; ".join(kept) or None


def export(results: str | Path, out: str | Path, experiments: list[str] = EXPERIMENTS, scale: str = "paper",
           config_file: str | Path = "config.yaml") -> pd.DataFrame:
    """Copy the tables, PNG figures and settings records of ``experiments`` found under
    ``results``; record what is absent. Returns (and writes) ``runs.csv``.

    An experiment that runs across sessions (too long for one) is exported part by part:
    ``parts.csv`` keeps one row per finished job (seconds, commit, CPU), so its time and the
    commits and CPUs that made it stay known after ``restore`` and the run that completes it.
    A finished experiment keeps its parts while another's table that takes runs from them (config
    ``shared``) is unfinished: that table is assembled from their files (``restore``). The tables
    copied get their digests in ``tables.csv`` (``committed.record``); an id the catalogue does not
    have is refused before anything is written."""
    unknown = [e for e in experiments if e not in catalogue.ENTRIES]
    if unknown:
        bare = {e.upper().replace("-", "").replace("_", ""): e for e in catalogue.ENTRIES}  # opf1, OP_F1: OP-F1
        like = ([bare[k]] if (k := unknown[0].upper().replace("-", "").replace("_", "")) in bare
                else difflib.get_close_matches(unknown[0], list(catalogue.ENTRIES), n=3))
        raise ValueError(f"no experiment {unknown[0]!r} in the catalogue{' (did you mean ' + ' or '.join(like) + '?)' if like else ''}: "
                         f"export takes catalogue ids (CATALOGUE.md lists them), e.g. `python -m "
                         f"reluinit.report.reference export --experiments {like[0] if like else EXPERIMENTS[0]}`")
    results, out = Path(results), Path(out)
    old = pd.read_csv(out / "runs.csv", dtype=TEXT).set_index("experiment") if (out / "runs.csv").exists() else None
    old_parts = (pd.read_csv(out / "parts.csv", dtype=TEXT) if (out / "parts.csv").exists()
                 else pd.DataFrame(columns=PARTS_COLUMNS))
    rows, part_rows = [], []
    here = {"commit": _commit(), "machine": _machine()}  # this checkout and CPU, once per export

    @functools.cache
    def made_by(exp: str) -> dict:  # ... and the fingerprints of exp's code and settings, once per experiment
        return here | fingerprints(exp, config_file, scale=scale)

    finished = {}  # an experiment done in this export: its parts' rows, kept while a taker is unfinished
    copied = []  # the experiments whose tables this export writes (their digests: tables.csv)

    for exp in experiments:
        carried = old_parts[old_parts["experiment"] == exp].set_index("part")
        src = Path(paths.table(str(results), exp))
        png = Path(paths.figures(str(results), exp)[1])
        if not (src.exists() and png.exists()):
            if old is not None and exp in old.index and old.loc[exp, "status"] == "done":
                rows.append(old.loc[exp].to_dict() | {"experiment": exp})  # exported earlier, kept
                part_rows += [r | {"part": p} for p, r in carried.to_dict("index").items()]
                continue
            # unfinished: keep its finished jobs' rows, so a later session resumes from them (restore),
            # with those exported earlier that this results tree lacks (not restored, or not yet rerun)
            done = sorted(Path(paths.part(str(results), exp, "x")).parent.glob("*.csv"))
            for f in done:  # kept for restore and the claims, not for reading: gzipped, whatever their size
                _copy_table(f, Path(paths.part(str(out), exp, f.stem)), gzip_above=0)
            ran = {f.stem for f in done}
            parts = sorted([_part_row(results, exp, f.stem, carried, made_by(exp)) for f in done]
                           + [_with_digests(r | {"experiment": exp, "part": p}, out)
                              for p, r in carried.to_dict("index").items() if p not in ran and kept_part(out, exp, p)],
                           key=lambda r: r["part"])
            part_rows += parts
            _keep_checkpoints(results, out, exp, {r["part"] for r in parts})
            rows.append({"experiment": exp, "status": f"partial: {len(parts)} jobs done" if parts else "absent",
                         "jobs": len(parts),
                         "job_seconds": round(pd.DataFrame(parts, columns=PARTS_COLUMNS)["job_seconds"].sum(), 1)
                         if parts else None,
                         "commit": _joined(p.get("commit") for p in parts),
                         "machine": _joined(p.get("machine") for p in parts)})
            continue
        shutil.rmtree(Path(paths.checkpoints(str(out), exp, "x")).parent, ignore_errors=True)  # nor checkpoints
        dest = _copy_table(src, Path(paths.table(str(out), exp)))
        copied.append(exp)
        for f in (png, Path(paths.built(str(results), exp))):
            if not f.exists():
                continue
            target = out / f.relative_to(results)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
        ran_rows = [_part_row(results, exp, p, carried, made_by(exp)) for p in _ran_parts(results, exp)]
        ran = {r["part"] for r in ran_rows}
        figure = Path(paths.benchmark(str(results), f"figures/{exp}"))  # the job that drew table and figure
        jobs = len(ran_rows) + figure.exists()
        seconds = sum(r["job_seconds"] for r in ran_rows) + (_seconds(figure) if figure.exists() else 0.0)
        # this checkout made the table and figure; each part says what made it (a harvest's commit)
        commits = [here["commit"]] + [r.get("commit") for r in ran_rows]
        machines = [here["machine"]] + [r.get("machine") for r in ran_rows]
        if len(carried):  # finished across sessions: the earlier sessions' jobs count too
            earlier = carried[~carried.index.isin(ran)]
            jobs, seconds = jobs + len(earlier), seconds + earlier["job_seconds"].sum()
            commits += list(earlier["commit"])
            machines += list(earlier["machine"])
            part_rows += [r | {"part": p} for p, r in earlier.to_dict("index").items()]
            part_rows += ran_rows
        finished[exp] = ran_rows if not len(carried) else []  # rows parts.csv lacks, should its parts stay
        table = pd.read_csv(src)
        rows.append({"experiment": exp, "status": "done", "rows": len(table), "file": str(dest.relative_to(out)),
                     "jobs": jobs, "job_seconds": round(seconds, 1), "commit": _joined(commits),
                     "machine": _joined(machines), "data": _data(table)})
    if old is not None:  # experiments not exported this time keep their rows (a harvest exports its own)
        rows += [r | {"experiment": e} for e, r in old.to_dict("index").items() if e not in experiments]
    part_rows += [r for r in old_parts.to_dict("records") if r["experiment"] not in experiments]
    part_rows += _keep_taken_parts(results, out, {r["experiment"]: r["status"] for r in rows}, finished,
                                   read_yaml(config_file), scale)
    order = {e: i for i, e in enumerate(EXPERIMENTS)}
    rows.sort(key=lambda r: (order.get(r["experiment"], len(order)), r["experiment"]))
    runs = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(out / "runs.csv", index=False)
    committed.record(out, copied)
    if part_rows:
        _write_parts(pd.DataFrame(part_rows, columns=PARTS_COLUMNS), out / "parts.csv")
    else:
        (out / "parts.csv").unlink(missing_ok=True)
    trained = [{"spec": d.name, "jobs": len(list(d.glob("*.tsv"))),
                "job_seconds": round(sum(_seconds(f) for f in d.glob("*.tsv")), 1)}
               for d in sorted((results / "benchmarks" / "trained").glob("*"))]
    if trained:  # nets trained by `train_<spec>` jobs and measured by several experiments (LR-F5 to F8)
        pd.DataFrame(trained).to_csv(out / "training.csv", index=False)
    return runs


# Why an experiment of ``EXPERIMENTS`` may be absent from the reference (reference/README.md).
ABSENT_WHY: dict[str, str] = {
    "RP-T8": "trains nets on ImageNet, which this pipeline cannot load yet (it does not fit in device memory and "
             "there is no streaming loader): configured, not buildable ({docs}troubleshooting.md)",
    "RP-F3": "retrained at the paper's protocol (issue 75): three seeds a cell, MNIST normalised by (0.5, "
             "0.5) as the authors' data code does, the deciding cells under momentum 0.9 and the ordered grid at chi 0.9 "
             "(774 runs of 10,000 SGD steps, 31 core-hours on AMD EPYC cores: {docs}reference.md); the one-seed grid it replaces is "
             "in the history ({docs}papers/rp.md, 'The ordered point'). Harvested part by part on the CPU, resumed "
             "where it stopped: python -m reluinit.harvest --only RP-F3 --device cpu --threads 1 --data-dir DIR "
             "--out harvest --budget-s SECONDS (one per core), then python -m reluinit.report.reference export "
             "--results harvest/paper --experiments RP-F3",
    "RP-F5": "retrained as RP-F3 was (issue 75): ELU at three seeds a cell (486 runs in 54 parts, 18 "
             "core-hours on AMD EPYC cores: {docs}reference.md), its tanh panels RP-F3's runs, whose parts the reference keeps until RP-F5 is "
             "done: python -m reluinit.harvest --only RP-F5 (as RP-F3), then python -m reluinit.report.reference "
             "export --results harvest/paper --experiments RP-F5",
    "RP-T4": "not run yet: the depth-10, 50 and 100 tanh cnn, 3 set-ups x 3 seeds (27 runs of 10,000 SGD "
             "steps) on the full MNIST. On one CPU core (beside RP-F3/F5 training) a step takes 0.97 s at "
             "depth 10, 4.1 s at 50 and 7.4 s at 100 (2.7, 11 and 20 hours a run: about 310 core-hours in "
             "all); one depth-100 run takes about 15 minutes on an NVIDIA H100 (11.4 steps/s, "
             "reference/gpu/nvidia-h100-2026-11-27): for a GPU, through the harvest (python -m "
             "reluinit.harvest --only RP-T4)",
}

DATA_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "tiny_imagenet": "Tiny ImageNet", "imagenet": "ImageNet",
              "mnist": "full MNIST"}


PAGE_TITLES = {"cluster.md": "Running on a cluster", "troubleshooting.md": "Troubleshooting", "papers/rp.md": "RP"}


def linked(text: str, docs: str = "docs/") -> str:
    """``text`` with each ``({docs}<page>.md...)`` made a Markdown link to that documentation page,
    ``docs`` being the path from where the text is shown to ``docs/`` ("docs/" from the README,
    "../docs/" from reference/README.md, "" in the site)."""
    return re.sub(r"\{docs\}([\w/-]+\.md)", lambda m: f"[{PAGE_TITLES.get(m.group(1), m.group(1))}]({docs}{m.group(1)})",
                  text)


def absent_why(exp: str, config: dict | None = None, docs: str = "docs/") -> str:
    """Why a catalogue id is not in the reference: ``ABSENT_WHY`` where a session said, else what
    its catalogue entry and paper settings need that the reference's machine (2 CPU cores, no
    network, the 10,000-digit MNIST subset) has not; its pages linked from ``docs`` (``linked``)."""
    if exp in ABSENT_WHY:
        return linked(ABSENT_WHY[exp], docs)
    entry = catalogue.entry(exp)  # what it trains and plots, without importing its code
    if entry.source:
        return f"plots the trained nets of {entry.source}, which need a GPU"
    config = config if config is not None else read_yaml("config.yaml")
    s = settings(config, exp, "paper")
    data = [DATA_NAMES.get(d, d) for d in s.get("datasets", [s["dataset"]] if "dataset" in s else [])
            if d != "mnist" or entry.trains]
    if not data and not entry.trains:
        return "not in the reference's list (reference.EXPERIMENTS)"
    what = ("trains nets" if entry.trains else "measures") + (f" on {' and '.join(data)}" if data else "") + (
        " on a GPU" if entry.trains else "")
    where = "a GPU cluster" if entry.trains else "a machine that can download it"
    return linked(f"{what}: run snakemake {paths.target(exp)} on {where} ({{docs}}cluster.md)", docs)


BEGIN = "<!-- reference scorecard: generated by `python -m reluinit.report.reference render`; tests/test_reference.py checks it -->"
END = "<!-- end of reference scorecard -->"


def restore(root: str | Path, results: str | Path, scale: str = "paper",
            config_file: str | Path = "config.yaml") -> tuple[list[Path], list[str], list[str]]:
    """Copy the finished jobs of unfinished experiments (and those of a finished one whose runs an
    unfinished table takes, ``export``) from the reference back into a results tree, so the
    campaign resumes where it stopped instead of redoing them. A part is restored only
    when ``parts.csv`` records it, its measuring code and settings are today's (Snakemake cannot
    tell a copied file's age), and its content is what was exported (SHA-256, bytes, rows); it is
    written atomically and sealed, as a job writes it. Returns the files restored, for each part
    left out as stale why (its job reruns), and for each refused as damaged, and each table of the
    tree edited since its export (``committed.edited``), one line naming it and the command that
    rebuilds it."""
    root = Path(root)
    made = (pd.read_csv(root / "parts.csv", dtype=TEXT).set_index(["experiment", "part"]) if (root / "parts.csv").exists()
            else pd.DataFrame())
    restored, left_out, refused, now = [], [], committed.edited(root), {}
    for f in sorted(root.glob("*/*/*.csv*")):
        exp, part = f.parent.name, _part_name(f)
        target = Path(results) / f.relative_to(root).with_suffix("" if f.suffix == ".gz" else ".csv")
        if exp not in catalogue.ENTRIES:
            continue
        if target.exists():  # the tree's own file is kept; say whether it is the reference's
            left_out.append(_already_there(f, target, exp, part))
            continue
        if exp not in now:  # once per experiment (setdefault would hash its code for every part)
            now[exp] = fingerprints(exp, config_file, scale)
        fix = f"rebuild it with `{integrity.rebuild_command(target, force=False)}`"
        if (exp, part) not in made.index:
            refused.append(f"{f}: parts.csv has no record of part {part!r} of {exp} (renamed, or not exported): "
                           f"{_unrecorded_fix(f, exp, made, root)}")
            continue
        then = made.loc[(exp, part)].to_dict()
        stale = [k for k in ("code", "settings") if then.get(k) != now[exp][k]]
        if stale:
            left_out.append(f"{exp} {part}: its {' and '.join(stale)} differ{'s' if len(stale) == 1 else ''} from "
                            f"today's ({', '.join(f'{k} {then.get(k)} -> {now[exp][k]}' for k in stale)}), so its job reruns")
            continue
        try:
            data = part_bytes(f)
            table = pd.read_csv(io.BytesIO(data))
        except (DamagedPart, ValueError, pd.errors.ParserError) as e:
            refused.append(f"{f}: damaged: {e}; {fix}")
            continue
        if not isinstance(then.get("sha256"), str):
            refused.append(f"{f}: parts.csv records no digest for it, so it cannot be checked: {fix}")
            continue
        wrong = committed.differences(digests(data, table), then)
        if wrong:
            refused.append(f"{f}: altered: its {', '.join(wrong)}; {fix}")
            continue
        integrity.write_atomic(target, lambda tmp, data=data: Path(tmp).write_bytes(data),
                               shape={"rows": len(table), "columns": [str(c) for c in table.columns]})
        restored.append(target)
    for folder in sorted(root.glob("checkpoints/*/*/*")):  # unfinished parts' checkpoints: their runs resume
        target = Path(results) / folder.relative_to(root)
        if folder.parts[-2] in catalogue.ENTRIES and folder.is_dir() and not target.exists():
            shutil.copytree(folder, target)
            restored.append(target)
    return restored, left_out, refused


def _already_there(kept: Path, target: Path, exp: str, part: str) -> str:
    """What ``restore`` says of a part the results tree holds already: never overwritten."""
    import shlex

    try:
        same = part_bytes(kept) == target.read_bytes()
    except (DamagedPart, OSError):
        same = False
    if same:
        return f"{exp} {part}: {target} is there already, the same as the reference's"
    try:
        integrity.verify(target)
        state = "differs from the reference's"
    except integrity.DamagedFile:  # not another run's part: a damaged one, which no job would read
        state = "does not match its seal (damaged: no job reads it)"
    return (f"{exp} {part}: kept {target}, which is there already and {state}; to take the "
            f"reference's instead, `rm {shlex.quote(str(target))}` and restore again")


def _part_name(f: Path) -> str:
    """A kept part's key, from its file's name (``group0.csv`` or ``group0.csv.gz``)."""
    return f.name.removesuffix(".gz").removesuffix(".csv")


def _unrecorded_fix(f: Path, exp: str, made: pd.DataFrame, root: Path) -> str:
    """What to do with a part file ``parts.csv`` does not name: where it is the one such file and one
    recorded part has no file, it is that part renamed and goes back to its name (restore then
    checks its digests); otherwise it goes (a part restore does not bring back is made by its job)."""
    recorded = set(made.loc[exp].index) if exp in made.index.get_level_values(0) else set()
    names = {_part_name(p) for p in f.parent.glob("*.csv*")}
    lacking, unrecorded = sorted(recorded - names), names - recorded
    if len(lacking) == 1 and len(unrecorded) == 1:
        return f"rename it back with `mv {f} {f.with_name(lacking[0] + ''.join(f.suffixes))}` and restore again"
    return f"delete it (`rm {f}`): a part restore does not bring back is made again by its job"


def refingerprint(root: str | Path) -> list[str]:
    """Give every part of ``parts.csv`` today's code and settings fingerprints, after a change that
    moved or renamed code without changing a number (the oracle, ``tests/test_reference.py``, and
    the quick build's tables say so): without it ``restore`` would refuse those parts and rerun
    their jobs. Digests missing from a row are taken from its file. Returns one line per
    fingerprint changed."""
    path = Path(root) / "parts.csv"
    if not path.exists():
        return []
    parts = pd.read_csv(path, dtype=TEXT).reindex(columns=PARTS_COLUMNS)
    now = {exp: fingerprints(exp) for exp in parts["experiment"].unique()}  # once per experiment
    changed = []
    for i, row in parts.iterrows():
        for k in ("code", "settings"):
            if row[k] != now[row["experiment"]][k]:
                changed.append(f"{row['experiment']} {row['part']}: {k} {row[k]} -> {now[row['experiment']][k]}")
                parts.loc[i, k] = now[row["experiment"]][k]
        for k, v in _with_digests(row.to_dict(), Path(root)).items():
            if k in DIGESTS:
                parts.loc[i, k] = v
    _write_parts(parts, path)
    return changed


def _write_parts(parts: pd.DataFrame, path: Path) -> None:
    """``parts.csv``, its counts as whole numbers (a part without digests leaves them empty)."""
    counts = {k: pd.to_numeric(parts[k]).round().astype("Int64") for k in ("bytes", "rows")}
    parts.assign(**counts).to_csv(path, index=False)


def redraw(root: str | Path) -> list[str]:
    """Draw every figure of the tree again from its committed table and settings record (PNG, as
    ``export`` copies it): after a change to the plotting code, the reference shows what a build
    draws today without rerunning a measurement. Returns the ids drawn."""
    from ..pipeline import steps
    from . import plotting

    root = Path(root)
    drawn = []
    for record in sorted((root / "figures").glob("*.json")):
        exp = record.stem
        table = Path(paths.existing_table(str(root), exp))
        if exp not in catalogue.ENTRIES or not table.exists():
            continue
        settings = json.loads(record.read_text())["settings"]
        data = pd.read_csv(table, low_memory=False)  # a view's table carries its own id (steps.draw)
        plotting.save(steps.picture(exp, data, settings), [root / "figures" / f"{exp}.png"])
        drawn.append(exp)
    return drawn


def render(root: str | Path, claims_file: str = "claims.yaml", notebooks: bool = True,
           readme: str | Path | None = "README.md", figures: bool = False) -> pd.DataFrame:
    """Judge every claim on the tree, execute each paper's notebook on it (HTML only), and write
    ``reference/README.md`` and the README's verdict block; with ``figures``, first draw every
    figure again (``redraw``; the ids drawn in ``attrs["drawn"]``). Refused before anything is written
    (naming the fix) for a folder that holds no tree, and for a tree whose tables are not those its
    export recorded, or whose part files are not those `parts.csv` records (``committed.edited``,
    ``committed.parts_edited``: their claims would be judged on numbers no run made)."""
    root = Path(root)
    if not (root / "runs.csv").is_file():
        raise FileNotFoundError(f"{root} holds no reference tree (no runs.csv): give --root the folder `export` "
                                f"wrote (default reference/paper), or make one with `python -m "
                                f"reluinit.report.reference export --out {root}`")
    listed = claims.load(claims_file)
    edited = committed.edited(root) + committed.parts_edited(root)
    if edited:
        raise committed.EditedTable("; and ".join(edited))
    drawn = redraw(root) if figures else []
    config_file = Path(claims_file).with_name("config.yaml")  # its `shared` runs fill partial tables
    config = read_yaml(config_file) if config_file.exists() else None
    card = claims.scorecard(listed, str(root), "paper", config=config)
    card.attrs["drawn"] = drawn
    (root / "claims").mkdir(parents=True, exist_ok=True)
    card.to_csv(paths.scorecard(str(root), "csv"), index=False)
    for paper in PAPERS:
        card[card["paper"] == paper].to_csv(paths.paper_claims(str(root), paper), index=False)
    Path(paths.scorecard(str(root), "html")).parent.mkdir(parents=True, exist_ok=True)
    claims.write_html(card, paths.scorecard(str(root), "html"), "paper", listed, PAPERS)
    if notebooks:
        for paper in PAPERS:
            _notebook(root, paper)
    runs = pd.read_csv(root / "runs.csv", dtype=TEXT)
    if (root / "training.csv").exists():
        runs.attrs["training"] = pd.read_csv(root / "training.csv")
    if (root / "parts.csv").exists():  # parts folded into a finished table before parts carried digests
        parts = pd.read_csv(root / "parts.csv", dtype=TEXT)
        runs.attrs["undigested"] = sorted(parts.loc[parts["sha256"].isna(), "experiment"].unique())
    (root.parent / "README.md").write_text(reference_readme(card, runs))
    if readme:
        text = Path(readme).read_text()
        start, stop = text.index(BEGIN), text.index(END) + len(END)
        Path(readme).write_text(text[:start] + verdict_block(card, runs, reasons=False) + text[stop:])
    return card


def verdict_block(card: pd.DataFrame, runs: pd.DataFrame, absent: bool = False, reasons: bool = True,
                  docs: str = "docs/") -> str:
    """``verdicts`` between the markers ``render`` finds it by in the README."""
    return "\n".join([BEGIN, "", verdicts(card, runs, absent, reasons, docs), "", END])


def verdicts(card: pd.DataFrame, runs: pd.DataFrame, absent: bool = False, reasons: bool = True,
             docs: str = "docs/") -> str:
    """Verdict counts per paper at the paper scale, and (``reasons``) one line per claim not
    reproduced with its reason (the claim's ``why``); with ``absent``, one line per catalogue id the
    tree lacks, with why (``absent_why``). The README shows the counts alone (``reasons=False``);
    reference/README.md and the documentation show everything."""
    counts = claims.summary(card)
    done = runs[runs["status"] == "done"].groupby(runs["experiment"].map(paper_of)).size()
    shown = list(counts.columns)  # the paper's claims by verdict, then checks and calibrations; "invalid" when a claim is
    lines = [f"| paper | {' | '.join(shown)} | experiments in the reference |",
             "|---|" + "---|" * len(shown) + "---|"]
    for paper in PAPERS:
        if paper in counts.index:
            c = counts.loc[paper]
            lines.append(f"| {paper} | {' | '.join(str(c[v]) for v in shown)} | "
                         f"{done.get(paper, 0)} of {sum(paper_of(e) == paper for e in catalogue.ENTRIES)} |")
    finished = set(runs.loc[runs["status"] == "done", "experiment"])
    lacking = [e for e in catalogue.ENTRIES if e not in finished]
    if absent and lacking:
        config = read_yaml("config.yaml")
        lines += ["", "Catalogue ids not in the reference, and why (its machine: 2 CPU cores, no GPU, and no network "
                      "to download CIFAR, Tiny ImageNet or ImageNet):", ""]
        lines += [f"- **{e}**: {absent_why(e, config, docs)}" for e in lacking]
    if reasons:
        for verdict, heading in ((claims.NOT_REPRODUCED, "Not reproduced at the paper scale, and why"),
                                 (claims.INCONCLUSIVE, "Inconclusive at the power we have, and what would decide it"),
                                 (claims.FAILS, "Checks that fail (a bug), and why"),
                                 (claims.NOT_MET, "Calibrations not met (a setting of ours that missed the paper), and why")):
            said = card[card["verdict"] == verdict]
            if said.empty:
                continue
            lines += ["", f"{heading}:", ""]
            for _, row in said.iterrows():
                se = f" ± {_num(row['se'])} (standard error)" if pd.notna(row.get("se")) else ""
                note = f" {row['note']}." if verdict == claims.INCONCLUSIVE and row["note"] else ""
                why = row["why"] or ("" if verdict == claims.INCONCLUSIVE else claims.NO_REASON)
                lines.append(f"- **{row['claim']}** ({row['table']}): measured {_num(row['measured'])}{se}, expected "
                             f"{claims.expected(row)}.{note} {why}".rstrip())
        for _, row in card[card["verdict"] == claims.INVALID].iterrows():
            lines.append(f"- **{row['claim']}** ({row['table']}): not judged, {row['note']}.")
    return "\n".join(lines)


def _int(x) -> str:
    return "" if x is None or pd.isna(x) else f"{x:,.0f}"


def _num(x) -> str:
    return "nan" if pd.isna(x) else f"{x:.4g}"


# Said only while a table of the tree read the offline stand-in (datasets._label names it so).
_SUBSET_NOTE = (" `MNIST, 10,000-digit subset` is 10,000 real digits in torchvision's format (8,000\n"
                "  training, 2,000 test images): a table that says so read its test points (TG's 100 and 1000) from\n"
                "  the subset's test split, not from the official test set.")


def reference_readme(card: pd.DataFrame, runs: pd.DataFrame) -> str:
    """reference/README.md: what the tree holds, how it was made, and its verdicts."""
    def each(column: str) -> list[str]:  # a row made across sessions names several, "; "-joined
        return sorted({v for cell in runs[column].dropna() for v in str(cell).split("; ")})
    commits = ", ".join(each("commit"))
    undigested = runs.attrs.get("undigested", [])
    machines = "; ".join(each("machine")) if "machine" in runs else "one CPU"
    out = [
        "# Reference results at the paper scale",
        "",
        "Generated by `python -m reluinit.report.reference export` and `render` (src/reluinit/reference.py): do not edit.",
        "",
        "`paper/` has the layout of `results/paper/`: each experiment's tidy table (`<PAPER>/<ID>.csv`,",
        f"gzipped as `.csv.gz` above {GZIP_ABOVE / 1e6:g} MB; pandas reads either), its figure",
        "(`figures/<ID>.png`) and settings record (`figures/<ID>.json`), every claim judged",
        "(`claims.csv`, `claims/<PAPER>.csv`, `reports/scorecard.html`) and each paper's executed notebook",
        "(`reports/<PAPER>.html`). `runs.csv` lists every experiment: rows, jobs, summed job seconds, data;",
        "`tables.csv` what each table held (SHA-256, bytes, rows), which `render` and `restore` check first;",
        "an unfinished experiment keeps its finished jobs' rows instead of its table (`<PAPER>/<ID>/<part>.csv.gz`),",
        "and a finished one keeps them beside its table while another's unfinished table takes runs from them;",
        "`parts.csv` lists the jobs of an experiment that ran across sessions (seconds, commit and CPU of each)",
        "and what each part's file held (SHA-256, bytes, rows), which `restore` checks"
        + (f"; {' and '.join(e + chr(39) + 's' for e in undigested)} parts were folded\n"
           "into its table before parts carried digests, so they have their rows alone, counted from its `part` column."
           if undigested else "."),
        "",
        f"- **Code**: commit {commits} (each table's measuring code is that commit's: Snakemake reruns a job",
        "  whose code fingerprint changed).",
        f"- **Machine**: 2 cores, 24 GiB, no GPU (torch on the CPU, 2 threads), CPUs: {machines}; `runs.csv` names",
        "  each table's CPU (`machine`). Job seconds are wall seconds on those 2 cores, summed over an",
        "  experiment's jobs. Float kernels differ between CPUs: a net that trains for many steps can end",
        "  in other last digits on another CPU (EP-F18's losses, recomputed on an Intel Xeon, part from",
        "  the AMD EPYC's in their 5th digit from the 4th epoch on); measurements of random nets agree.",
        "- **Data**: MNIST cannot be downloaded on that machine; the `data` column below says which MNIST each",
        "  experiment read. `mnist` is the official set (60,000 training and 10,000 test images, from MNIST's",
        "  original files)." + (_SUBSET_NOTE if "data" in runs and runs["data"].astype(str).str.contains("subset").any() else ""),
        "- **Commands**: `make reference DATA_DIR=<folder with MNIST>` runs them all: `snakemake <targets>",
        "  --cores 2 --keep-going --config scale=paper data_dir=<folder>` with the targets",
        f"  `{' '.join(paths.target(e) for e in EXPERIMENTS)}`",
        "  (this tree was built in stages of those, cheapest first), then",
        "  `python -m reluinit.tools.precision --data-dir <folder> --out reference/paper/precision.csv`",
        "  (what float32 changes in TG's sweeps), `python -m reluinit.report.reference export` and",
        "  `python -m reluinit.report.reference render`.",
        "",
        "## Experiments",
        "",
        "| experiment | status | rows | jobs | job seconds | data |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in runs.iterrows():
        if r["status"] == "done":
            out.append(f"| {r['experiment']} | done | {int(r['rows']):,} | {int(r['jobs'])} | {r['job_seconds']:,.0f} | "
                       f"{r['data']} |")
        else:
            why = linked(ABSENT_WHY.get(r["experiment"], "not finished when this tree was exported: the campaign resumes "
                                                            "in a later session"), "../docs/")  # it runs on a CPU
            out.append(f"| {r['experiment']} | {r['status']}: {why} | | {_int(r.get('jobs'))} | "
                       f"{_int(r.get('job_seconds'))} | |")
    trained = runs.attrs.get("training")
    if trained is not None:
        for _, r in trained.iterrows():
            out.append(f"\nThe nets of training spec {r['spec']} (measured by LR-F5 to F8) trained in {int(r['jobs'])} "
                       f"jobs, {r['job_seconds']:,.0f} job seconds, not counted above.")
    out += ["", "## Verdicts", "", verdicts(card, runs, absent=True, docs="../docs/"), ""]
    return "\n".join(out)


def _notebook(root: Path, paper: str) -> None:
    """Execute a paper's notebook on the tree (``reports.execute``); its figures are linked
    (``../figures/<ID>.png``), not embedded a second time, which keeps the committed tree small."""
    before = os.environ.get("RELUINIT_FIGURES")
    os.environ["RELUINIT_FIGURES"] = "link"  # read by the notebook's kernel, which inherits it
    try:
        with tempfile.TemporaryDirectory() as tmp:
            reports.execute(f"notebooks/{paper}.ipynb", Path(tmp) / f"{paper}.ipynb",
                            paths.report(str(root), paper, "html"), scale="paper", results=str(root))
    finally:
        if before is None:
            del os.environ["RELUINIT_FIGURES"]
        else:
            os.environ["RELUINIT_FIGURES"] = before


def main() -> None:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="what", required=True)
    e = sub.add_parser("export")
    e.add_argument("--results", default="results/paper")
    e.add_argument("--out", default="reference/paper")
    e.add_argument("--experiments", nargs="*", default=EXPERIMENTS,
                   help="ids to export (default: the reference's list; a harvest's parts: their ids)")
    e.add_argument("--scale", default="paper", help="the scale the results were made at (quick: a harvest's --tiny tree)")
    r = sub.add_parser("render")
    r.add_argument("--root", default="reference/paper")
    r.add_argument("--no-notebooks", action="store_true")
    r.add_argument("--figures", action="store_true", help="also draw every figure again from its committed table "
                                                             "(after a change to the plotting code)")
    sub.add_parser("targets")
    f = sub.add_parser("refingerprint", help="today's fingerprints on parts.csv, after code moved without a number changing")
    f.add_argument("--root", default="reference/paper")
    u = sub.add_parser("restore", help="copy unfinished experiments' finished jobs back into results/paper")
    u.add_argument("--root", default="reference/paper")
    u.add_argument("--results", default="results/paper")
    u.add_argument("--scale", default="paper", help="the scale the parts were made at (quick: a harvest's --tiny tree)")
    d = sub.add_parser("record", help="re-record the digests of tables edited on purpose (tables.csv)")
    d.add_argument("tables", nargs="+", help="table files, e.g. reference/paper/OP/OP-F1.csv.gz")
    a = top.parse_args()
    try:
        _run(a)
    except (ValueError, FileNotFoundError, DamagedPart) as e:  # one sentence with its fix, no traceback
        raise SystemExit(f"error: {e}") from None


def _run(a: argparse.Namespace) -> None:
    if a.what == "targets":
        print(" ".join(paths.target(e) for e in EXPERIMENTS))
        return
    if a.what == "refingerprint":
        print("\n".join(refingerprint(a.root)) or "every part already carries today's fingerprints")
        return
    if a.what == "restore":
        restored, left_out, refused = restore(a.root, a.results, a.scale)
        for f in restored:
            print("restored", f)
        for why in left_out:
            print("not restored:", why)
        for why in refused:
            print("refused:", why, file=sys.stderr)
        if any(catalogue.entry(f.parent.name).trains for f in restored if f.parent.name in catalogue.ENTRIES):
            print(f"note: {STACKED}")
        if refused:
            raise SystemExit(f"{len(refused)} file(s) refused as damaged or edited (above); the others were restored")
        return
    if a.what == "record":
        print("\n".join(committed.record_files(a.tables)))
        return
    if a.what == "export":
        runs = export(a.results, a.out, a.experiments, a.scale)
        print(runs.to_string(index=False))
    else:
        card = render(a.root, notebooks=not a.no_notebooks, figures=a.figures)
        if a.figures:
            print("drew", " ".join(card.attrs["drawn"]))
        print(claims.summary(card).to_string())
    print(f"machine: {platform.node()}, {platform.processor() or platform.machine()}")


if __name__ == "__main__":
    main()
