"""The catalogue's experiments: one module per paper (and one per paper's trained nets), each a set of
plain functions that ``reluinit.pipeline.catalogue`` names. This package only wires the library: an
experiment turns its settings (one scale's block of ``config.yaml``) into tidy tables and figures
through four functions (docs/adding-an-experiment.md):

* ``parts(settings) -> {key: kwargs}``: independent jobs (one Snakemake job each),
* ``measure(settings, key, device, inputs) -> DataFrame``: one job's rows, one row per
  measurement; ``inputs`` are the files ``trained(settings, key)`` names, in that order,
* ``figure(table, settings) -> Figure``: the catalogue figure from the combined table,
* ``summary(table) -> DataFrame``: the numbers a reader compares with the paper (these two in
  ``reluinit.figures.<module>``, which imports no torch, or in the experiment's own module),

and optionally ``trained(settings, key) -> [(spec, arch, run)]``, the trained nets a job reads,
and ``masks(settings, key, device, inputs) -> {run key: {"masks": ..., **facts}}``, the job that
prunes a part's nets first (rule ``prune``; its file reaches ``measure`` as ``masks=<path>``).
Experiments that train run as the workflow's training jobs (GPU, long runtimes; rule
``train_part``): their ``measure`` also gets ``checkpoints``, a folder where each training run keeps
its resumable checkpoint, and ``training_jobs`` writes their ``parts`` and ``measure``.

Nothing outside this package imports from it; ``reluinit.pipeline.catalogue`` finds the functions by name.
This module holds what the experiments share: seeds per job, runs, their grouping into jobs.
"""

from __future__ import annotations

from ..sampling import part_seed

__all__ = ["part_seed", "resolve_part", "product_runs", "own_runs", "run_checkpoint", "group_runs", "ensembled",
           "training_jobs"]


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


def own_runs(runs: dict[str, dict], s: dict) -> dict[str, dict]:
    """``runs`` less those the experiment takes from another (config ``shared``: a run whose value of
    every field listed under ``shared.cells`` is one of the values listed there is trained by the
    ``shared.from`` experiment, and its rows read from there; ``reluinit.pipeline.shared``). Filtered
    after ``product_runs``: the runs that stay keep the keys and seeds of the full product."""
    cells = (s.get("shared") or {}).get("cells") or {}
    for k, run in runs.items():
        missing = [f for f in cells if f not in run]
        if missing:  # a misspelt field: said here, not as runs silently trained twice
            raise ValueError(f"shared.cells names {', '.join(map(repr, missing))}, which run {k} does not have; "
                             f"its fields: {', '.join(run)}")
    return {k: run for k, run in runs.items() if not cells or not all(run[f] in vs for f, vs in cells.items())}


def run_checkpoint(checkpoints: str | None, run_key: str, settings: dict, run: dict):
    """A training run's checkpoint in a job's ``checkpoints`` folder (none without one),
    fingerprinted by the experiment's ``settings`` and the run's own values (axes, seed): a
    checkpoint of other settings is not resumed (``training.Checkpoint``)."""
    from ..fingerprint import settings_fingerprint
    from ..training import Checkpoint

    if not checkpoints:
        return None
    return Checkpoint(f"{checkpoints}/{run_key}.pt", settings_fingerprint(settings, **run))


def group_runs(runs: dict[str, dict], per_job: int, by: list[str] | tuple[str, ...] = ()) -> dict[str, dict]:
    """Parts of ``per_job`` training runs each (in order): a part's kwargs are ``{"runs": {run key:
    run kwargs}}``. With one run per job a part is named after its run, else ``group<i>``.

    ``by`` (run fields, config ``group_by``): the runs are first split by their values of these
    fields (splits in order of first appearance, runs in order within each) and chunked within
    each split, ``group<i>`` counting on across them: a job holds only runs that share these
    values (RP-T4: one depth, so its nets stack) while the axes' order, which fixes every run's
    key and seed, stays as it is. Without ``by``, chunks of the run order as they come."""
    keys = list(runs)
    for k in keys:
        missing = [f for f in by if f not in runs[k]]
        if missing:  # a misspelt field: said here, not as a KeyError from deep in the plan
            raise ValueError(f"group_by names {', '.join(map(repr, missing))}, which run {k} does not have; "
                             f"its fields: {', '.join(runs[k])}")
    if per_job <= 1:
        return {k: {"runs": {k: runs[k]}} for k in keys}
    splits: dict[tuple, list[str]] = {}
    for k in keys:
        splits.setdefault(tuple(runs[k][f] for f in by), []).append(k)
    chunks = [split[i:i + per_job] for split in splits.values() for i in range(0, len(split), per_job)]
    return {f"group{i}": {"runs": {k: runs[k] for k in chunk}} for i, chunk in enumerate(chunks)}


def ensembled(settings: dict) -> bool:
    """Whether runs under ``settings`` may train stacked with others (``RunSpec.stack``,
    ``reluinit.ensemble``): yes unless their recipe says ``ensemble: false``."""
    recipe = settings.get("recipe")
    return not isinstance(recipe, dict) or bool(recipe.get("ensemble", True))


def training_jobs(runs_of, spec_of, *, load=None, settings_of=None, prune_one=None, during=()):
    """``parts`` and ``measure`` of an experiment that trains: its runs are ``runs_of(settings)``,
    grouped ``runs_per_job`` to a job (``group_runs``; with ``group_by``, only runs equal in those
    run fields share one); a job's runs are values, ``spec_of(settings, run, data, device,
    checkpoint) -> training.RunSpec`` each (the spec's ``then`` makes its rows of the trained run),
    trained together by ``training.train_runs`` (stacked where their nets stack; a recipe's
    ``ensemble: false`` keeps its runs apart), and their rows returned together in order.
    ``measure.specs(settings, key, device, checkpoints, masks, first)`` is the list of specs a job
    trains, each built once (what the GPU check times).

    Training and measuring are two jobs in the workflow: ``measure.train(settings, key, device,
    checkpoints, masks, control)`` trains a job's runs and returns the record of their final
    checkpoints (rule ``train_part``); ``measure(..., trained=True)`` trains nothing and makes the
    rows from those checkpoints (each spec's ``then``; rule ``measure_trained``, under the code
    fingerprint of ``measure``: an edit of a measurement of trained nets reruns it alone). Without
    ``trained`` (a direct call) ``measure`` trains what is not trained yet first. What a run
    measures during training (``on_epoch``) is kept in its checkpoint by the training job:
    ``during`` names those functions, whose code fingerprint the training job carries (an edit
    retrains: their rows need the weights of every epoch, which no job keeps).

    Runs another experiment trains for this one (config ``shared``, ``own_runs``) are in no part.

    ``settings_of(settings, run)``: a run's own settings where they differ by run (RP-T2: the
    recipe of its dataset); ``load(settings, device)``: what the runs train on, loaded once per job
    and dataset (default: ``training.load_data``, the train and test splits on the device).

    With ``prune_one(settings, run, data, device) -> {"masks": Masks or None, **facts}`` the runs are
    pruned by a job of their own (rule ``prune``): the third function returned, ``masks(settings,
    key, device, inputs) -> {run key: ...}``, is that job; ``measure`` then gets its file
    (``masks=<path>``; without one it prunes itself) and ``spec_of`` each run's masks (``masks=``),
    and a run's checkpoint is resumed only under the same masks."""
    import pandas as pd

    from ..pruning import load_masks, masks_digest

    def parts(s: dict) -> dict[str, dict]:
        return group_runs(own_runs(runs_of(s), s), s.get("runs_per_job", 1), s.get("group_by", ()))

    def each_run(s, key, device):
        """``(run key, run, its settings, its data, device)`` for each run of job ``key``, the data
        loaded once per dataset."""
        from ..nets import resolve_device
        from ..training import load_data

        dev, loaded = resolve_device(device), {}
        for run_key, run in parts(s)[key]["runs"].items():
            rs = settings_of(s, run) if settings_of else s
            if rs.get("dataset") not in loaded:
                loaded[rs.get("dataset")] = (load or load_data)(rs, dev)
            yield run_key, run, rs, loaded[rs.get("dataset")], dev

    def specs(s: dict, key: str, device: str = "auto", checkpoints: str | None = None, masks: str | None = None,
              first: int | None = None):
        """The ``training.RunSpec`` of each run of job ``key`` (its ``first`` runs only, when given),
        in order. Without a masks file (a direct call, the smoke subset) the job prunes its runs
        itself."""
        pruned = load_masks(masks) if masks else {}
        out = []
        for run_key, run, rs, data, dev in each_run(s, key, device):
            if first is not None and len(out) >= first:
                break
            if not prune_one:
                spec = spec_of(rs, run, data, dev, run_checkpoint(checkpoints, run_key, rs, run))
            else:
                m = pruned[run_key]["masks"] if masks else prune_one(rs, run, data, dev)["masks"]
                m = {n: t.to(dev) for n, t in m.items()} if m else None
                checkpoint = run_checkpoint(checkpoints, run_key, rs, {**run, "masks": masks_digest(m)})
                spec = spec_of(rs, run, data, dev, checkpoint, masks=m)
            spec.stack = spec.stack and ensembled(rs)
            spec.name = run_key
            out.append(spec)
        return out

    def train(s: dict, key: str, device: str = "auto", checkpoints: str | None = None, masks: str | None = None,
              control=None) -> list[dict]:
        """Train job ``key``'s runs (``control``: ``training.Control``, a deadline and stops from
        outside); each run's record: its key, final epoch, whether it diverged, and its checkpoint."""
        from ..training import train_runs

        job = specs(s, key, device, checkpoints, masks)
        runs = train_runs(job, control=control)
        return [{"run": spec.name, "epochs": run.final["epoch"], "diverged": run.diverged,
                 "checkpoint": str(spec.checkpoint.path) if spec.checkpoint else None} for spec, run in zip(job, runs)]

    def measure(s: dict, key: str, device: str = "auto", inputs=(), checkpoints: str | None = None,
                masks: str | None = None, control=None, trained: bool = False) -> pd.DataFrame:
        """Job ``key``'s rows: its specs, trained (``trained``: read from their finished checkpoints
        only, ``training.NotTrained`` otherwise), each made into rows by its ``then``."""
        from ..training import How, train_runs

        job = specs(s, key, device, checkpoints, masks)
        runs = train_runs(job, How(train=not trained), control=control)
        return pd.concat([spec.result(run) for spec, run in zip(job, runs)], ignore_index=True)

    measure.specs, measure.train, measure.during = specs, train, tuple(during)
    if prune_one is None:
        return parts, measure

    def masks(s: dict, key: str, device: str = "auto", inputs=()) -> dict[str, dict]:
        return {run_key: prune_one(rs, run, data, dev) for run_key, run, rs, data, dev in each_run(s, key, device)}

    return parts, measure, masks
