"""Where every output lives, derived from the results root, the experiment id and a part key.

All paths are built here so a table or figure can be found from its catalogue id alone. The
arguments may be Snakemake wildcards (``"{exp}"``); pass ``paper`` explicitly then.

Each scale has its own tree, ``scale_root(config["results"], scale)`` = ``results/<scale>``, so
a quick build and a paper build never read or overwrite each other's files. Below, ``results``
is that tree (``results/quick`` or ``results/paper``):

    results/<PAPER>/<ID>.csv            tidy table of one experiment (all its jobs combined)
    results/<PAPER>/<ID>/<part>.csv     one job's rows
    results/<PAPER>/<ID>/masks/<part>.pt  one job's pruning masks, bit-packed (rule `prune`)
    results/<PAPER>/<ID>/masks/<part>.csv what they do: kept fraction per layer, s_cr, collapse
    results/figures/<ID>.pdf|.png       the catalogue figure
    results/figures/<ID>.json           the scale and settings its table was built with
    results/reports/<PAPER>.ipynb|.html executed notebook of one paper
    results/claims.csv, results/reports/scorecard.html  every claim of claims.yaml, judged
    results/claims/<PAPER>.csv          the claims read from one paper's tables
    results/trained/<spec>/<arch>-run<r>.pt checkpoints of one trained net
    results/checkpoints/<PAPER>/<ID>/<part>/<run>.pt resumable state of a training run
    results/checkpoints/trained/<spec>/<arch>-run<r>.pt resumable state of one run of a `train_<spec>` job
    results/logs/..., results/benchmarks/...
"""

from __future__ import annotations

import re
from pathlib import Path

from .catalogue import paper_of


def id_key(exp: str) -> str:
    """An id as a Python name, ``OP-F1`` -> ``OP_F1``: how a job of several ids names each one's
    inputs, outputs and logs (rules measure_<paper> and figures_<paper>, and their scripts)."""
    return exp.replace("-", "_")


def target(exp: str) -> str:
    """The short target rule of an id: ``TG-F3a`` -> ``tg_f3a``."""
    return id_key(exp).lower()


def scale_root(results: str, scale: str) -> str:
    """The results tree of one scale under the configured ``results:`` folder."""
    return f"{results}/{scale}"


def table(results: str, exp: str, paper: str | None = None) -> str:
    return f"{results}/{paper or paper_of(exp)}/{exp}.csv"


def existing_table(results: str, exp: str) -> str:
    """The table to read: ``<ID>.csv``, or ``<ID>.csv.gz`` where the committed reference tree
    (``reluinit.report.reference``) keeps a large table gzipped (pandas reads either)."""
    from pathlib import Path

    plain = table(results, exp)
    return plain if Path(plain).exists() or not Path(plain + ".gz").exists() else plain + ".gz"


def part(results: str, exp: str, key: str, paper: str | None = None) -> str:
    return f"{results}/{paper or paper_of(exp)}/{exp}/{key}.csv"


def part_lock(results: str | Path, exp: str, key: str) -> Path:
    """The lock a part's one writer holds while it trains it (a workflow job or a harvest:
    ``integrity.exclusive``)."""
    return Path(results) / "locks" / exp / f"{key}.lock"


def masks(results: str, exp: str, key: str, paper: str | None = None, ext: str = "pt") -> str:
    """One part's pruning masks (``pt``) or their facts (``csv``), written by the ``prune`` rule."""
    return f"{results}/{paper or paper_of(exp)}/{exp}/masks/{key}.{ext}"


def figures(results: str, exp: str) -> list[str]:
    return [f"{results}/figures/{exp}.pdf", f"{results}/figures/{exp}.png"]


def built(results: str, exp: str) -> str:
    """The scale and settings a figure's table was built with (what its report caption says)."""
    return f"{results}/figures/{exp}.json"


def trained(results: str, spec: str, arch: str, run) -> str:
    return f"{results}/trained/{spec}/{arch}-run{run}.pt"


def trained_part(results: str, exp: str, part: str, paper: str | None = None) -> str:
    """The record a training job writes once its part's runs are trained (rule ``train_part``): each
    run's final checkpoint, by name and SHA-256, which the part's measuring job reads."""
    return f"{results}/{paper or paper_of(exp)}/{exp}/trained/{part}.json"


def checkpoints(results: str, exp: str, part: str, paper: str | None = None) -> str:
    """Folder of a training job's run checkpoints. Not a declared output: Snakemake deletes the
    outputs of a failed job, and a job killed by a time limit must find them to resume."""
    return f"{results}/checkpoints/{paper or paper_of(exp)}/{exp}/{part}"


def trained_by(checkpoint: str | Path) -> Path | None:
    """The output of the job that trains the run whose resumable state ``checkpoint`` is (the
    inverse of ``checkpoints`` and ``train_checkpoint``): its part's record of trained runs
    (``trained_part``), or its trained net; None for any other file."""
    parts = Path(checkpoint).parts
    at = max((i for i, p in enumerate(parts[:-1]) if p == "checkpoints"), default=None)
    if at is None or not parts[-1].endswith(".pt"):
        return None
    results, rest = str(Path(*parts[:at])) if at else ".", parts[at + 1:]
    if len(rest) == 3 and rest[0] == "trained":
        return Path(trained(results, rest[1], *rest[2][: -len(".pt")].rsplit("-run", 1)))
    if len(rest) == 4:
        return Path(trained_part(results, rest[1], rest[2], paper=rest[0]))
    return None


def train_rule(spec: str) -> str:
    """The name of the rule that trains training spec ``spec``'s nets, one job per architecture
    (``train_LR_MNIST``): a rule per spec, since a job's outputs are its runs, counted per spec."""
    return "train_" + re.sub(r"\W", "_", spec)


def train_checkpoint(results: str, spec: str, arch: str, run) -> str:
    """Resumable state of one run of a ``train_rule`` job (not a declared output, like ``checkpoints``)."""
    return f"{results}/checkpoints/trained/{spec}/{arch}-run{run}.pt"


def report(results: str, paper: str, ext: str) -> str:
    return f"{results}/reports/{paper}.{ext}"


def scorecard(results: str, ext: str) -> str:
    return f"{results}/claims.csv" if ext == "csv" else f"{results}/reports/scorecard.{ext}"


def paper_claims(results: str, paper: str) -> str:
    return f"{results}/claims/{paper}.csv"


def log(results: str, name: str) -> str:
    return f"{results}/logs/{name}.log"


def benchmark(results: str, name: str) -> str:
    return f"{results}/benchmarks/{name}.tsv"
