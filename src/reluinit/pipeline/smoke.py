"""The smoke test of the paper scale: which jobs to run, whether they cover the paper's DAG, whether
their memory fits what the paper's jobs declare, and what a training step costs.

A job's *combinations* are the (experiment, model, dataset) triples its runs touch. ``subset``
picks, from the experiment catalogue at the smoke scale, one job per combination of every
experiment that `all` builds: for a random-net experiment its first job, for a training experiment
the last job holding the combination (the config's lists grow, so that is its largest: ResNet104,
3xVGG16, the FFNN of depth 100). A new experiment is covered without editing any test;
``uncovered`` names each combination of the paper DAG that no smoke job has.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import datasets
from . import catalogue, paths
from .config import settings
from .plan import (
    MEASURE,
    TRAIN,
    combos,
    default_experiments,
    job_runs,
    paper_combos,
    part_combos,
    prune_resources,
    train_resources,
)

# Host bytes a paper-scale job holds per pixel of a dataset it loads, at the peak of loading: the
# uint8 source (1), its float32 conversion (4), the [0, 1] scaling (4) and the contiguous copy (4).
# A GPU job's normalised device copy lives in GPU memory, not in the host's max_rss.
HOST_BYTES_PER_PIXEL = 13


def subset(config: dict, scale: str = "smoke") -> dict[str, list[str]]:
    """One job per combination of each experiment `all` builds, as ``{experiment: [part keys]}``."""
    chosen: dict[str, list[str]] = {}
    for exp in default_experiments(config, scale):
        e = catalogue.get(exp)
        s = settings(config, exp, scale)
        parts = e.parts(s)
        keys = list(parts)
        by_combo: dict = {}
        for key in keys if e.trains else reversed(keys):  # the last (training) or first (random nets) wins
            for c in part_combos(exp, s, parts[key], key):
                if c[0] == exp:
                    by_combo[c] = key
        chosen[exp] = sorted(set(by_combo.values()), key=keys.index)
    return chosen


def uncovered(config: dict, chosen: dict[str, list[str]], scale: str = "smoke") -> set[tuple[str, str, str]]:
    """Combinations of the paper DAG that none of the ``chosen`` smoke jobs has."""
    have = {c for exp, keys in chosen.items() for key in keys for c in combos(config, exp, key, scale)}
    return paper_combos(config) - have


def targets(config: dict, chosen: dict[str, list[str]], results: str) -> list[str]:
    """The part files of the ``chosen`` jobs under the smoke results tree ``results``."""
    return [paths.part(results, exp, key) for exp, keys in chosen.items() for key in keys]


def declared_mem_mb(config: dict, exp: str, key: str) -> int:
    """The memory the paper-scale job declares (what the smoke job is checked against)."""
    if catalogue.get(exp).trains:
        return train_resources(config, exp, key, "paper")["mem_mb"]
    return MEASURE["mem_mb"]


def data_extra_mb(names: set[str]) -> float:
    """Host memory (MB) the paper's datasets ``names`` need beyond their smoke stand-ins."""
    extra = 0
    for name in names:
        if name not in datasets.SHAPES:
            continue
        shape, _, n_train, n_test, _ = datasets.SHAPES[name]
        pixels = int(pd.Series(shape).prod())
        smoke_n = len(datasets.synthetic(name, True).y) + datasets.SYNTHETIC_TEST
        extra += HOST_BYTES_PER_PIXEL * pixels * (n_train + n_test - smoke_n)
    return extra / 1e6


def job_datasets(config: dict, exp: str, key: str) -> set[str]:
    """The datasets a paper-scale job loads (counted whole, train and test): its runs' own, else its
    experiment's."""
    s = settings(config, exp, "paper")
    names = {run["dataset"] for run in job_runs(catalogue.get(exp).parts(s)[key]) if "dataset" in run}
    names = names or {s[k] for k in ("dataset",) if k in s} | set(s.get("datasets", []))
    if "train" in s:
        names.add(s["train"]["dataset"])
    return names


def memory_table(config: dict, chosen: dict[str, list[str]], results: str) -> pd.DataFrame:
    """Each smoke job's peak resident memory (Snakemake benchmark ``max_rss``), projected to the
    paper's data, against the ``mem_mb`` its paper-scale job declares. The projection adds the host
    memory of the real datasets beyond the generated ones (``data_extra_mb``); it leaves in what the
    CPU holds that a GPU job keeps on its GPU (activations, a device copy of the data), so it errs
    high. `train_<spec>` jobs (LR's nets, an architecture's runs each) are included with their rule's
    memory, `prune` jobs with theirs (``plan.prune_resources``)."""
    rows = []
    for exp, keys in chosen.items():
        for key in keys:
            names = job_datasets(config, exp, key)
            loads = dict(datasets=" ".join(sorted(names)), data_extra_mb=data_extra_mb(names))
            rows.append(dict(job=f"{exp}/{key}", benchmark=_benchmark(results, paths.part(results, exp, key)),
                             declared_mem_mb=declared_mem_mb(config, exp, key), **loads))
            if catalogue.entry(exp).masks:  # its prune job, which loads the same datasets
                rows.append(dict(job=f"{exp}/masks/{key}",
                                 benchmark=_benchmark(results, paths.masks(results, exp, key)),
                                 declared_mem_mb=prune_resources(config, exp, key, "paper")["mem_mb"], **loads))
            s = settings(config, exp, "smoke")
            for spec, arch, _ in catalogue.get(exp).trained(s, key):  # its train_<spec> job (an architecture's runs)
                rows.append(dict(job=f"{spec}/{arch}",
                                 benchmark=paths.benchmark(results, f"trained/{spec}/{arch}"),
                                 datasets=s["train"]["dataset"], declared_mem_mb=TRAIN["mem_mb"],
                                 data_extra_mb=data_extra_mb({s["train"]["dataset"]})))
    table = pd.DataFrame(rows, columns=["job", "benchmark", "datasets", "declared_mem_mb", "data_extra_mb"])
    table = table.drop_duplicates("job")
    table["max_rss_mb"] = [_max_rss(b) for b in table["benchmark"]]
    table["projected_mb"] = table["max_rss_mb"] + table["data_extra_mb"]
    table["fits"] = table["projected_mb"] <= table["declared_mem_mb"]
    return table


def _benchmark(results: str, output: str) -> str:
    """The benchmark file of the job writing ``output`` (the rules name it after the output)."""
    return paths.benchmark(results, output[len(results) + 1:].rsplit(".", 1)[0])


def _max_rss(benchmark: str) -> float:
    if not Path(benchmark).exists():
        raise FileNotFoundError(f"{benchmark} is missing: the smoke job did not run with its benchmark")
    return float(pd.read_csv(benchmark, sep="\t")["max_rss"].iloc[0])


def cost_table(config: dict, chosen: dict[str, list[str]], results: str) -> pd.DataFrame:
    """CPU seconds per optimizer step of each training job, at the paper's batch size, from the
    ``train_seconds`` of its runs' epochs (the steps alone, first steps included) in its part table.
    One row per (experiment, model, dataset); the GPU's cost table extends it with a device column."""
    rows = []
    for exp, keys in chosen.items():
        if not catalogue.get(exp).trains:
            continue
        s = settings(config, exp, "smoke")
        for key in keys:
            table = pd.read_csv(paths.part(results, exp, key))
            epochs = table[(table["epoch"] > 0) & table["train_seconds"].notna()]
            steps = epochs.groupby("run")["step"].max().sum() if "run" in epochs else epochs["step"].max()
            mine = sorted(c for c in combos(config, exp, key, "smoke") if c[0] == exp)
            dataset = mine[0][2]
            recipe = s.get("recipes_by_dataset", {}).get(dataset, s["recipe"])
            rows.append(dict(experiment=exp, model=" ".join(sorted({c[1] for c in mine})),
                             dataset=" ".join(sorted({c[2] for c in mine})), batch_size=recipe["batch_size"],
                             runs=len(job_runs(catalogue.get(exp).parts(s)[key])), steps=int(steps),
                             seconds=float(epochs["train_seconds"].sum()), device="cpu", scale="smoke"))
    table = pd.DataFrame(rows)
    table["seconds_per_step"] = table["seconds"] / table["steps"]
    return table
