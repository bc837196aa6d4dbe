"""Registry of catalogue experiments: how each is split into jobs, measured, plotted, summarised.

An experiment turns its settings (one scale's block of ``config.yaml``) into tidy tables and
figures. The workflow is generic over this interface, so adding an experiment means writing
these four functions, registering them here, and adding a config block and a rule line:

* ``parts(settings) -> {key: kwargs}``: independent jobs (one Snakemake job each),
* ``measure(settings, key, device, inputs) -> DataFrame``: one job's rows, one row per
  measurement; ``inputs`` are the files ``trained(settings, key)`` names, in that order,
* ``trained(settings, key) -> [(spec, arch, run)]`` (optional): the trained nets a job reads,
* ``figure(table, settings) -> Figure``: the catalogue figure from the combined table,
* ``summary(table) -> DataFrame``: the numbers a reader compares with the paper.

Experiments that train (``trains=True``) run as the workflow's training jobs (GPU, long runtimes;
rule ``train_part``): their ``measure`` also gets ``checkpoints``, a folder where each training
run keeps its resumable checkpoint, and their parts usually group several runs (``group_runs``).
An experiment with a ``source`` plots another experiment's table (one set of training runs, several
figures): it has no jobs of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

PAPERS = {
    "TG": "Trajectory growth lower bounds for random sparse deep ReLU networks",
    "EP": "On the expressive power of deep neural networks",
    "OP": "The benefits of over-parameterization at initialization in deep ReLU networks",
    "LR": "Complexity of linear regions in deep networks",
    "RP": "Robust pruning at initialization",
    "X": "Across the papers (ours)",
}


@dataclass(frozen=True)
class Experiment:
    id: str
    parts: Callable[[dict], dict[str, dict]]
    measure: Callable[..., pd.DataFrame]
    figure: Callable[[pd.DataFrame, dict], object]
    summary: Callable[[pd.DataFrame], pd.DataFrame]
    trained: Callable[[dict, str], list[tuple[str, str, int]]] = lambda settings, key: []
    trains: bool = False
    source: str | None = None

    @property
    def paper(self) -> str:
        return paper_of(self.id)


REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    REGISTRY[exp.id] = exp
    return exp


def get(exp_id: str) -> Experiment:
    _load(paper_of(exp_id))
    try:
        return REGISTRY[exp_id]
    except KeyError:
        raise KeyError(f"no experiment {exp_id!r}; known: {sorted(REGISTRY)}") from None


def paper_of(exp_id: str) -> str:
    """``"OP-F1" -> "OP"``."""
    return exp_id.split("-", 1)[0]


def part_seed(base: int, index: int) -> int:
    """A seed for job ``index`` of an experiment, independent of the others' streams."""
    return int(np.random.SeedSequence([base, index]).generate_state(1)[0] & 0x7FFFFFFF)


def resolve_part(parts: dict[str, dict], base_seed: int, key: str) -> tuple[dict, int]:
    """A job's kwargs and its seed, from the experiment's ``parts`` and its key."""
    return parts[key], part_seed(base_seed, list(parts).index(key))


def product_runs(s: dict, axes: dict[str, list]) -> dict[str, dict]:
    """Every combination of ``axes`` and repetition (``rep`` over ``s["reps"]``) as a training run
    named by its values (``"resnet32-snip-sparsity0.9-rep0"``), with its own seed from ``s["seed"]``."""
    import itertools

    names = list(axes) + ["rep"]
    values = list(axes.values()) + [list(range(s.get("reps", 1)))]
    runs = {}
    for i, combo in enumerate(itertools.product(*values)):
        run = dict(zip(names, combo))
        key = "-".join(str(v) if isinstance(v, str) else f"{n}{v}" for n, v in run.items())
        runs[key] = {**run, "key": key, "seed": part_seed(s["seed"], i)}
    return runs


def run_checkpoint(checkpoints: str | None, run_key: str, settings: dict, run: dict):
    """A training run's checkpoint in a job's ``checkpoints`` folder (none without one),
    fingerprinted by the experiment's ``settings`` and the run's own values (axes, seed): a
    checkpoint of other settings is not resumed (``training.Checkpoint``)."""
    from ..provenance import settings_fingerprint
    from ..training import Checkpoint

    if not checkpoints:
        return None
    return Checkpoint(f"{checkpoints}/{run_key}.pt", settings_fingerprint(settings, **run))


def group_runs(runs: dict[str, dict], per_job: int) -> dict[str, dict]:
    """Parts of ``per_job`` training runs each (in order): a part's kwargs are ``{"runs": {run key:
    run kwargs}}``. With one run per job a part is named after its run, else ``group<i>``."""
    keys = list(runs)
    if per_job <= 1:
        return {k: {"runs": {k: runs[k]}} for k in keys}
    chunks = [keys[i:i + per_job] for i in range(0, len(keys), per_job)]
    return {f"group{i}": {"runs": {k: runs[k] for k in chunk}} for i, chunk in enumerate(chunks)}


def _load(paper: str) -> None:
    """Import the modules of ``paper`` (importing a module registers its experiments); only
    those, so a job pays for the imports of its own paper alone. Unknown papers load all."""
    import importlib

    for module in MODULES.get(paper, sorted({m for ms in MODULES.values() for m in ms})):
        importlib.import_module(f"{__name__}.{module}")


def _load_all() -> None:
    for paper in MODULES:
        _load(paper)


# The modules that register each paper's experiments.
MODULES = {"TG": ["tg", "tg_train"], "EP": ["ep", "ep_train"], "OP": ["op"], "LR": ["lr"], "RP": ["rp", "rp_train"],
           "X": ["x"]}
