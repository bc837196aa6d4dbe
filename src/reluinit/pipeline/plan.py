"""What a build will ask a cluster for: every job of the DAG with its resources, and the bill.

The workflow's rules take their resources from here (``train_resources``, ``MEASURE``, ``TRAIN``),
so the table printed by

    python -m reluinit.pipeline.plan paper        # or quick, smoke; --config other.yaml; --csv out.csv

is what Snakemake submits: one row per measurement, pruning or training job (gpu, cpus, mem_mb, runtime)
and the totals (jobs, GPU-hours, CPU-hours, memory). Figure, report and fetch jobs are small
local jobs and are counted, not priced.

With ``--cost <gpu-cost.csv>`` (the GPU check's measured seconds per optimizer step of each
training family, ``python -m reluinit.gpucheck``) each training job is also priced from what it
runs: per run, its optimizer steps over the real training set times the measured seconds per step,
plus an evaluation of the test set per epoch; the table then shows the declared and the measured
hours side by side. A run whose family the cost table lacks keeps its declared hours (counted).
Where a family's runs differ in depth (RP's ffnn and cnn, depths 2 to 100) and the table records
the depth it timed, a run is priced per layer: a step of these nets is one layer of one width after
another, so its seconds scale as (depth + 1) / (timed depth + 1), the 1 the output layer.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd
import yaml

from . import catalogue, paths
from .config import read_config, read_yaml, settings

# Resources of the rules whose jobs all ask the same (rule `measure`, the rules `train_<spec>`: a job
# trains one architecture's runs of a training spec, stacked, in minutes on a CPU).
MEASURE = {"mem_mb": 8000, "runtime": "2h", "threads": 2}
TRAIN = {"mem_mb": 8000, "runtime": "6h", "threads": 2}
DEFAULT_TRAIN_RUNTIME = "1h"


def hours(runtime) -> float:
    """``"90m"``, ``"3h"``, ``"7d"`` or minutes as a number, in hours."""
    found = re.fullmatch(r"([0-9.]+)\s*([a-z]*)", str(runtime))
    units = {"": 1 / 60, "m": 1 / 60, "min": 1 / 60, "h": 1, "d": 24}
    if not found or found.group(2) not in units:
        raise ValueError(f"runtime {runtime!r}: expected a number of minutes or <n>m, <n>h, <n>d")
    return float(found.group(1)) * units[found.group(2)]


def train_resources(config: dict, exp: str, part: str, scale: str | None = None) -> dict:
    """A training job's resources from its experiment's ``resources`` settings: gpu, cpus per GPU,
    memory, and a runtime that may depend on the model (``runtime: {resnet32: "12h", ...}``); a job
    that runs several runs asks for the sum of theirs. Quick-scale jobs ask for no GPU; smoke jobs
    declare the paper's resources (what their peak memory is checked against)."""
    scale = scale or config["scale"]
    s = settings(config, exp, scale)
    return _resources(s, catalogue.parts(exp, s)[part]["runs"].values(), scale)


def prune_resources(config: dict, exp: str, part: str, scale: str | None = None) -> dict:
    """A ``prune`` job's resources: rule `measure`'s CPUs and runtime (it runs on the CPU, no GPU
    asked), and the memory its part's training job declares, at least `measure`'s. It scores the
    net that job trains, on a class-balanced batch up to eight times the training batch: RP-T2's
    ResNet104 holds 16 GB scoring CIFAR-100's 1,000 images (the smoke test checks each). An
    experiment that measures its masks without training (RP-F2) asks for `measure`'s memory."""
    trained = train_resources(config, exp, part, scale)["mem_mb"] if catalogue.entry(exp).trains else 0
    return {"mem_mb": max(MEASURE["mem_mb"], trained), "runtime": MEASURE["runtime"]}


def measure_trained_resources(config: dict, exp: str, part: str, scale: str | None = None) -> dict:
    """A ``measure_trained`` job's resources: rule `measure`'s CPUs and runtime (no GPU asked: it
    reads checkpoints and measures), and the memory its part's training job declares, at least
    `measure`'s (it loads the same data and nets)."""
    return {"mem_mb": max(MEASURE["mem_mb"], train_resources(config, exp, part, scale)["mem_mb"]),
            "runtime": MEASURE["runtime"]}


def run_hours(s: dict, model: str | None) -> float:
    """Hours the experiment's ``resources`` declare for one run of ``model`` (``runtime`` is one
    value, or one per model with an optional ``default``)."""
    per_model = s.get("resources", {}).get("runtime", DEFAULT_TRAIN_RUNTIME)
    if isinstance(per_model, dict):
        per_model = per_model.get(model, per_model.get("default", DEFAULT_TRAIN_RUNTIME))
    return hours(per_model)


def run_family(exp: str, s: dict, run: dict) -> tuple[str, str, dict]:
    """(model, dataset, recipe settings) of one training run of ``exp``: what a step costs depends
    on. A net the experiment builds for itself (EP's, TG's) is named after it: "EP-F8 net"."""
    model = run.get("model") or s.get("model") or f"{exp} net"
    dataset = run.get("dataset") or s.get("dataset")
    return str(model), dataset, s.get("recipes_by_dataset", {}).get(dataset, s.get("recipe"))


def run_depth(s: dict, run: dict) -> float:
    """A training run's depth (hidden layers), where its experiment sets one; NaN otherwise."""
    depth = run.get("depth", s.get("depth"))
    return float(depth) if isinstance(depth, (int, float)) else float("nan")


def run_steps(recipe: dict, dataset: str) -> dict:
    """What one run of ``recipe`` (settings) does over the real ``dataset``: its training and test
    images, steps per epoch, epochs and optimizer steps (``training.Recipe`` counts them)."""
    from ..datasets import SHAPES
    from ..training import Recipe

    n_train, n_test = SHAPES[dataset][2:4]
    r = Recipe.from_settings(recipe)
    per_epoch = -(-n_train // r.batch_size)
    return {"train_images": n_train, "test_images": n_test, "steps_per_epoch": per_epoch,
            "epochs": r.n_epochs(per_epoch), "steps": r.total_steps(per_epoch)}


COST_COLUMNS = ["model", "dataset", "recipe", "seconds_per_step", "eval_seconds_per_image"]


def read_cost(path: str | Path) -> pd.DataFrame:
    """A GPU check's ``gpu-cost.csv``, indexed by (model, dataset, recipe). ``ValueError`` naming the
    row and column of a value no measurement gives (``cost_refused``)."""
    cost = pd.read_csv(path)
    missing = [c for c in COST_COLUMNS if c not in cost.columns]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)}; a cost table is the gpu-cost.csv that "
                         f"`python -m reluinit.gpucheck --out DIR` writes")
    if refused := cost_refused(cost, path):
        raise ValueError(refused)
    for column in ("seconds_per_step", "eval_seconds_per_image", "depth"):
        if column in cost:
            cost[column] = pd.to_numeric(cost[column])
    return cost.drop_duplicates(["model", "dataset", "recipe"], keep="last").set_index(["model", "dataset", "recipe"])


# What a measured cost table holds: the family it timed, seconds above 0, and the depth it timed
# (empty where the family's nets set none).
COST_VALUES = {"model": "a model's name", "dataset": "a dataset's name", "recipe": "a recipe's name",
               "seconds_per_step": "a number of seconds above 0", "eval_seconds_per_image": "a number of seconds above 0",
               "depth": "a whole number of hidden layers, 0 or more, or empty where the family sets no depth"}


def cost_refused(cost: pd.DataFrame, path: str | Path) -> str | None:
    """The first value of a cost table that no GPU check measures (an empty key, a time that is not
    a finite number above 0, a depth that is not a whole number of 0 or more), as one sentence
    naming its row, line, family and column; None when every value is one. Such a value priced its
    runs at their declared hours (NaN), at less than nothing (negative) or without end (inf)."""
    bad = []
    for column in [c for c in COST_VALUES if c in cost]:
        raw = cost[column]
        value = pd.to_numeric(raw, errors="coerce")
        if column in ("model", "dataset", "recipe"):
            ok = raw.notna() & (raw.astype(str).str.strip() != "")
        elif column == "depth":
            ok = raw.isna() | ((value >= 0) & (value < float("inf")) & (value == value.round()))
        else:
            ok = (value > 0) & (value < float("inf"))
        if not ok.all():
            bad.append((int((~ok).to_numpy().argmax()), list(COST_VALUES).index(column), column))
    if not bad:
        return None
    row, _, column = min(bad)
    family = ", ".join("(empty)" if pd.isna(v) else str(v) for v in cost.loc[cost.index[row], ["model", "dataset", "recipe"]])
    value = cost[column].iloc[row]
    return (f"{path}, row {row + 1} (line {row + 2}: {family}): {column} is {'empty or NaN' if pd.isna(value) else value}, "
            f"where a cost table holds {COST_VALUES[column]}; correct it there, or time the family again with "
            f"`python -m reluinit.gpucheck --out DIR`")


def measured_hours(exp: str, s: dict, runs, cost: pd.DataFrame) -> tuple[float, int]:
    """Hours of a training job's ``runs`` priced from ``cost`` (module doc), and how many runs it
    could not price (their declared hours are used instead)."""
    total, unpriced = 0.0, 0
    for run in runs:
        model, dataset, recipe = run_family(exp, s, run)
        key = (model, dataset, recipe["name"])
        if key not in cost.index:
            key = same_step(cost, model, dataset, recipe)
        if key is None:
            total, unpriced = total + run_hours(s, model), unpriced + 1
            continue
        c, n = cost.loc[key], run_steps(recipe, dataset)
        seconds = n["steps"] * c["seconds_per_step"] + n["epochs"] * n["test_images"] * c["eval_seconds_per_image"]
        timed, depth = float(c.get("depth", float("nan"))), run_depth(s, run)
        if timed == timed and depth == depth:  # both known (not NaN): priced per layer (module doc)
            seconds *= (depth + 1) / (timed + 1)
        total += seconds / 3600
    return total, unpriced


def same_step(cost: pd.DataFrame, model: str, dataset: str, recipe: dict) -> tuple | None:
    """The cost table's row for a recipe it did not time, when it timed another of the same step:
    the same model and dataset at the same batch size and precision (an optimizer's constants,
    such as RP-T5's weight decay 5e-4 beside rp-cifar10's 1e-4, change no step's work); None when
    it timed none."""
    if not {"batch_size", "precision"} <= set(cost.columns):
        return None
    for key, row in cost.iterrows():
        if (key[:2] == (model, dataset) and row["batch_size"] == recipe.get("batch_size")
                and row["precision"] == recipe.get("precision")):
            return key
    return None


def _resources(s: dict, runs, scale: str) -> dict:
    r = s.get("resources", {})
    total = sum(run_hours(s, run.get("model")) for run in runs)
    out = {"mem_mb": r.get("mem_mb", 8000), "runtime": f"{max(1, round(total * 60))}m"}
    if r.get("gpu", 0) and scale != "quick":  # the quick scale is CPU-only by design
        out.update(gpu=r["gpu"], cpus_per_gpu=r.get("cpus_per_gpu", 8))
    return out


# The job of a measurement experiment that runs all of its parts (``batching: paper``).
ALL_PARTS = "all-parts"


def batching(config: dict, scale: str | None = None) -> str:
    """The scale's ``batching`` (``part`` or ``paper``): how its jobs are cut. The config's schema
    (workflow/schemas/config.schema.yaml, key ``batching``) describes both values."""
    scale = scale or config["scale"]
    return (config.get("batching") or {}).get(scale, "part")


def measure_jobs(config: dict, exp: str, scale: str | None = None) -> dict[str, list[str]]:
    """``{job key: [part keys]}`` of a measurement experiment at ``scale``: a job per part, or with
    ``batching: paper`` a single job ``all-parts`` that runs them in order and writes the rows they
    would have written one by one (an experiment of random nets always has that job, even with one
    part: its file is named before its parts are known, while the workflow is read). Training
    experiments always have a job per part (each a GPU job of its own, resumable)."""
    keys = list(catalogue.parts(exp, settings(config, exp, scale or config["scale"])))
    if batching(config, scale) == "paper" and (random_nets(exp) or len(keys) > 1) and not catalogue.entry(exp).trains:
        if ALL_PARTS in keys:
            raise ValueError(f"{exp} has a part named {ALL_PARTS!r}, the name of the job that runs all of them")
        return {ALL_PARTS: keys}
    return {key: [key] for key in keys}


def measure_groups(config: dict, exps: list[str], scale: str | None = None) -> dict[str, list[str]]:
    """``{rule name: [ids]}``: with ``batching: paper``, the jobs that measure a paper's experiments
    of random nets, one per paper (``measure_<paper>``), each experiment's parts in order (same
    files, same rows); ``{}`` otherwise. ``exps`` are the measuring experiments `all` builds; the
    others' jobs stay the rule ``measure``'s."""
    if batching(config, scale) != "paper":
        return {}
    groups: dict[str, list[str]] = {}
    for e in exps:
        if random_nets(e):
            groups.setdefault(f"measure_{catalogue.paper_of(e).lower()}", []).append(e)
    return groups


def figure_jobs(config: dict, exps: list[str], scale: str | None = None) -> dict[str, list[str]]:
    """``{rule name: [ids]}``: the jobs that draw the figures of ``exps`` (the ids `all` builds).
    One per id (``figure_<id>``), or with ``batching: paper`` one per paper for its figures of
    random nets (``figures_<paper>``), which writes each id's table, figure, record and log as its
    own job would, one id after another. A figure of trained or pruned nets keeps a job of its own
    there too, so that asking for one figure never trains or prunes the nets of another."""
    by_paper = batching(config, scale) == "paper"
    jobs: dict[str, list[str]] = {}
    for e in exps:
        name = f"figures_{catalogue.paper_of(e).lower()}" if by_paper and random_nets(e) else figure_rule(e)
        jobs.setdefault(name, []).append(e)
    return jobs


def random_nets(exp: str) -> bool:
    """Whether ``exp``'s table measures random nets only: no training, pruning or trained nets
    upstream of it (nor of the experiment whose runs it plots)."""
    entry = catalogue.entry(exp)
    entry = catalogue.entry(entry.source) if entry.source else entry
    return not (entry.trains or entry.masks or entry.trained)


def figure_rule(exp: str) -> str:
    """The rule that draws one id's figure on its own: ``figure_op_f1`` for OP-F1."""
    return f"figure_{paths.target(exp)}"


def default_experiments(config: dict, scale: str) -> list[str]:
    """Experiments `all` builds that have jobs of their own (not optional ones, not views)."""
    return [e for e in config["experiments"] if not catalogue.get(e).source
            and not settings(config, e, scale).get("optional", False)]


def jobs(config: dict, scale: str | None = None, exps: list[str] | None = None,
         cost: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per measurement, pruning, training and `train_<spec>` job of ``exps`` (default: what `all`
    builds). With ``cost`` (``read_cost``), training jobs also get ``measured_h`` and
    ``unpriced_runs`` (module doc), the other jobs their declared runtime as ``measured_h``."""
    scale = scale or config["scale"]
    rows, specs = [], {}
    for exp in exps or default_experiments(config, scale):
        e = catalogue.get(exp)
        s = settings(config, exp, scale)
        parts = e.parts(s)
        if e.trains:
            for key, kwargs in parts.items():
                r = _resources(s, kwargs["runs"].values(), scale)
                gpu, cpus = r.get("gpu", 0), r.get("gpu", 0) * r.get("cpus_per_gpu", 0) or 1
                rows.append(dict(rule="train_part", job=f"{exp}/{key}", gpu=gpu, cpus=cpus, **_priced(r)))
                if cost is not None:
                    rows[-1]["measured_h"], rows[-1]["unpriced_runs"] = measured_hours(
                        exp, s, kwargs["runs"].values(), cost)
                rows.append(dict(rule="measure_trained", job=f"{exp}/measured/{key}", gpu=0, cpus=MEASURE["threads"],
                                 **_priced(measure_trained_resources(config, exp, key, scale))))
        else:
            for job in measure_jobs(config, exp, scale):
                rows.append(dict(rule="measure", job=f"{exp}/{job}", gpu=0, cpus=MEASURE["threads"],
                                 **_priced(MEASURE)))
        if e.masks:
            for key in parts:
                rows.append(dict(rule="prune", job=f"{exp}/masks/{key}", gpu=0, cpus=MEASURE["threads"],
                                 **_priced(prune_resources(config, exp, key, scale))))
        for key in parts:
            for spec, arch, _ in e.trained(s, key):
                specs[(spec, arch)] = None
    for spec, arch in specs:  # one job trains an architecture's runs (rule train_<spec>)
        rows.append(dict(rule=paths.train_rule(spec), job=f"{spec}/{arch}", gpu=0, cpus=TRAIN["threads"],
                         **_priced(TRAIN)))
    columns = ["rule", "job", "gpu", "cpus", "mem_mb", "runtime_h"] + (["measured_h", "unpriced_runs"] if cost is not None
                                                                       else [])
    table = pd.DataFrame(rows, columns=columns)
    table["gpu_hours"] = table["gpu"] * table["runtime_h"]
    table["cpu_hours"] = table["cpus"] * table["runtime_h"]
    if cost is not None:
        table["measured_h"] = table["measured_h"].fillna(table["runtime_h"])
        table["unpriced_runs"] = table["unpriced_runs"].fillna(0).astype(int)
        table["gpu_hours_measured"] = table["gpu"] * table["measured_h"]
    return table


def _priced(r: dict) -> dict:
    """A job's memory and runtime in hours, from its resources."""
    return {"mem_mb": r["mem_mb"], "runtime_h": hours(r["runtime"])}


def train_rules(config: dict) -> list[str]:
    """The rules that train the training specs' nets (``paths.train_rule``), one per spec."""
    return [paths.train_rule(spec) for spec in config.get("training") or {}]


def totals(table: pd.DataFrame) -> pd.DataFrame:
    """Jobs, GPU-hours, CPU-hours, the longest runtime and the largest memory, per rule and in all."""
    agg = dict(jobs=("job", "size"), gpu_hours=("gpu_hours", "sum"), cpu_hours=("cpu_hours", "sum"),
               longest_h=("runtime_h", "max"), max_mem_mb=("mem_mb", "max"))
    total = [len(table), table["gpu_hours"].sum(), table["cpu_hours"].sum(), table["runtime_h"].max(),
             table["mem_mb"].max()]
    if "gpu_hours_measured" in table:  # priced from a cost table: the measured bill beside the declared one
        agg.update(gpu_hours_measured=("gpu_hours_measured", "sum"), unpriced_runs=("unpriced_runs", "sum"))
        total += [table["gpu_hours_measured"].sum(), table["unpriced_runs"].sum()]
    by_rule = table.groupby("rule").agg(**agg)
    by_rule.loc["total"] = total
    return by_rule


def fmt_hours(h: float) -> str:
    """Hours as the price tables print them and the docs quote them: whole hours, tenths under 10."""
    return f"{h:,.0f}" if h >= 10 else f"{h:.1f}"


def price(table: pd.DataFrame, ids: list[str] | None = None) -> pd.DataFrame:
    """What each catalogue id costs, one row per id (of ``ids``, in that order; default: every id
    with a GPU job): its training jobs, the GPU-hours they declare and, when ``table`` was priced
    from a cost table (``jobs(cost=...)``), measure, the CPU-hours of all its jobs (pruning and
    measuring included) and its longest job. A reader buys tables, not rules: this is the bill per
    table that the cluster page quotes."""
    experiment = table["job"].str.split("/").str[0]
    agg = dict(training_jobs=("gpu", lambda g: int((g > 0).sum())), gpu_hours=("gpu_hours", "sum"))
    if "gpu_hours_measured" in table:
        agg["gpu_hours_measured"] = ("gpu_hours_measured", "sum")
    agg.update(cpu_hours=("cpu_hours", "sum"), longest_h=("runtime_h", "max"))
    by_id = table.assign(id=experiment).groupby("id", sort=False).agg(**agg)
    if ids is None:
        ids = [i for i in by_id.index if by_id.loc[i, "gpu_hours"] > 0]
    return by_id.loc[ids]


def shared_note(config: dict, scale: str, ids: list[str] | None = None) -> str:
    """The runs tables (of ``ids``; default what `all` builds) take from other tables (config
    ``shared``), in one sentence: those runs are trained, and priced, once, under their source's
    jobs. "" where no table takes any."""
    from . import shared

    taken = [(e, shared.source(config, e, scale), len(shared.shared_runs(config, e, scale)))
             for e in ids or default_experiments(config, scale)]
    said = [f"{e} takes {n:,} of its runs from {src}" for e, src, n in taken if n]
    return (f"Shared runs (config `shared`): {'; '.join(said)}; each is trained and priced once, in its "
            f"source's jobs, which the taking table's target alone also runs.") if said else ""


def numbers(config: dict, scale: str = "paper", cost: pd.DataFrame | None = None) -> dict[str, str]:
    """The bill's numbers as the documentation quotes them (``<!-- plan:jobs -->1,736<!-- /plan -->``
    and the like in README.md and docs/*.md, written by ``--write-docs``): pages never carry a typed
    count. With ``cost`` also the measured total (``gpu_hours_measured``) and per GPU-priced id
    ``<ID>.gpu_hours``, ``<ID>.gpu_hours_measured``, ``<ID>.training_jobs``, ``<ID>.longest_h``."""
    table = jobs(config, scale, cost=cost)
    summary = totals(table)
    count = table["rule"].value_counts()
    out = {"jobs": f"{len(table):,}", "train_part": f"{count.get('train_part', 0):,}",
           "prune": f"{count.get('prune', 0):,}", "measure": f"{count.get('measure', 0):,}",
           "train": f"{sum(count.get(r, 0) for r in train_rules(config)):,}", "gpu_hours": f"{summary.loc['total', 'gpu_hours']:,.0f}",
           "cpu_hours": f"{summary.loc['total', 'cpu_hours']:,.0f}", "longest_h": f"{table['runtime_h'].max():g}",
           "max_mem_gb": f"{table['mem_mb'].max() / 1000:g}"}
    if cost is not None:
        out["gpu_hours_measured"] = f"{summary.loc['total', 'gpu_hours_measured']:,.0f}"
    for exp, row in price(table).iterrows():
        out.update({f"{exp}.training_jobs": f"{int(row['training_jobs']):,}", f"{exp}.gpu_hours": fmt_hours(row["gpu_hours"]),
                    f"{exp}.longest_h": fmt_hours(row["longest_h"])})
        if cost is not None:
            out[f"{exp}.gpu_hours_measured"] = fmt_hours(row["gpu_hours_measured"])
    return out


def profile_conflicts(config: dict, profile: str | Path, scale: str = "paper",
                      table: pd.DataFrame | None = None) -> list[str]:
    """What a SLURM profile's ``set-resources`` would ask for differently from what the rules declare
    (gpu, cpus_per_gpu, mem_mb, runtime), one line per rule and resource: [] when the profile asks
    for exactly what ``jobs`` prints (``table``: its table, when already made)."""
    overrides = (yaml.safe_load(Path(profile).read_text()) or {}).get("set-resources") or {}
    table = jobs(config, scale) if table is None else table
    declared = {**{r: {"gpu": 0, "mem_mb": TRAIN["mem_mb"], "runtime": TRAIN["runtime"]} for r in train_rules(config)},
                "measure": {"gpu": 0, "mem_mb": MEASURE["mem_mb"], "runtime": MEASURE["runtime"]}}
    lines = []
    for rule, asked in overrides.items():
        for key, value in (asked or {}).items():
            if key not in ("gpu", "cpus_per_gpu", "mem_mb", "runtime"):
                continue  # a partition, an account, a QOS: the cluster's, not the job's size
            if rule in declared and key in declared[rule]:
                mine = declared[rule][key]
                same = hours(value) == hours(mine) if key == "runtime" else value == mine
            else:  # train_part and prune: per job, from the experiments' resources
                rows = table[table["rule"] == rule]
                column = {"gpu": "gpu", "mem_mb": "mem_mb", "runtime": "runtime_h"}.get(key)
                same = column is not None and len(rows) and set(rows[column]) == {hours(value) if key == "runtime" else value}
            if not same:
                lines.append(f"{profile}: set-resources {rule}: {key}={value}, where the rule declares "
                             f"{declared.get(rule, {}).get(key, 'per job, from its experiment')}")
    return lines


# The GPU check whose cost table the documentation prices from: the newest committed run whose
# training ran at the recipes' own precision (`precision: fp32` without TF32, from that run on).
DOCS_COST = "reference/gpu/nvidia-h100-2026-11-27/gpu-cost.csv"
# RP's tables that train on CIFAR and Tiny ImageNet: what a reader takes to a GPU cluster.
RP_GPU_TABLES = ["RP-T1", "RP-T2", "RP-T3", "RP-T5", "RP-T9"]
INLINE = re.compile(r"<!-- plan:([\w.-]+) -->(.*?)<!-- /plan -->", re.S)
BLOCK = re.compile(r"(<!-- plan:rp-tables: generated by [^\n]*-->\n)(.*?)(<!-- end of plan:rp-tables -->)", re.S)


def cost_run(path: str | Path) -> str:
    """"NVIDIA H100 80GB HBM3, 2026-11-27": the card and the date of the GPU check that wrote the
    cost table ``path`` (its folder's facts.csv and name), which every quoted price names."""
    folder = Path(path).parent
    if not (folder / "facts.csv").exists():  # a cost table copied elsewhere: its card is unknown
        return "card not recorded"
    facts = pd.read_csv(folder / "facts.csv").set_index("fact")["value"]
    date = re.search(r"\d{4}-\d\d-\d\d", folder.name)
    return f"{facts['device_name']}, {date.group(0)}" if date else str(facts["device_name"])


# --- the (experiment, model, dataset) combinations of the paper's DAG -----------------------------

NO_MODEL, NO_DATASET = "its own net", "random inputs"


def job_runs(kwargs: dict) -> list[dict]:
    """The runs of one job's part (a part of several runs lists them under ``runs``)."""
    return list(kwargs["runs"].values()) if "runs" in kwargs else [kwargs]


def combos(config: dict, exp: str, key: str, scale: str) -> set[tuple[str, str, str]]:
    """The (experiment, model, dataset) triples of one job, and those of the `train_<spec>` jobs it reads
    (as ``("train <spec>", arch, dataset)``)."""
    s = settings(config, exp, scale)
    return part_combos(exp, s, catalogue.get(exp).parts(s)[key], key)


def part_combos(exp: str, s: dict, kwargs: dict, key: str) -> set[tuple[str, str, str]]:
    """``combos`` of one part, given its settings ``s`` and its keyword arguments ``kwargs``."""
    e = catalogue.get(exp)
    out = set()
    for run in job_runs(kwargs):
        model = run.get("model") or run.get("arch") or s.get("model") or NO_MODEL
        dataset = run.get("dataset") or s.get("dataset") or s.get("train", {}).get("dataset") or NO_DATASET
        out.add((exp, str(model), dataset))
    for spec, arch, _ in e.trained(s, key):
        out.add((f"train {spec}", arch, s["train"]["dataset"]))
    return out


def paper_combos(config: dict, scale: str = "paper") -> set[tuple[str, str, str]]:
    """Every combination the DAG of `all` has at ``scale``."""
    out = set()
    for exp in default_experiments(config, scale):
        s = settings(config, exp, scale)
        for key, kwargs in catalogue.get(exp).parts(s).items():
            out |= part_combos(exp, s, kwargs, key)
    return out


def rp_tables_markdown(config: dict, root: Path, cost_path: str = DOCS_COST) -> str:
    """The cluster page's block on RP's GPU tables: one command per table (and one for all), then
    per id its data, models, training jobs, declared and measured GPU-hours and longest job; then
    what each job asks for and the claims each table answers (``reference/paper/claims.csv``).
    Seven narrow columns: the content column holds no more at 1400 px."""
    from ..datasets import SHAPES

    table = jobs(config, "paper", RP_GPU_TABLES, cost=read_cost(root / cost_path))
    bill = price(table, RP_GPU_TABLES)
    found = paper_combos(config)
    claims = pd.read_csv(root / "reference" / "paper" / "claims.csv")["table"].value_counts()
    data = {e: list(dict.fromkeys(SHAPES[d][4] for _, _, d in sorted(c for c in found if c[0] == e)))
            for e in RP_GPU_TABLES}
    width = max(len(paths.target(e)) for e in RP_GPU_TABLES)
    commands = [f"snakemake {paths.target(e):<{width}} --profile profiles/slurm   # {', '.join(data[e])}"
                for e in RP_GPU_TABLES]
    lines = ["```bash", *commands, "```", "",
             "| table | data | models | training jobs | GPU-h declared | GPU-h measured | longest job |",
             "|---|---|---|---|---|---|---|"]
    for exp, row in bill.iterrows():
        models = sorted({m for e, m, _ in found if e == exp}, key=lambda m: (m.rstrip("0123456789x"), len(m), m))
        lines.append(f"| {exp} | {', '.join(data[exp])} | {_models(models)} | {int(row['training_jobs']):,} | "
                     f"{fmt_hours(row['gpu_hours'])} | {fmt_hours(row['gpu_hours_measured'])} | "
                     f"{fmt_hours(row['longest_h'])} h |")
    total = bill.sum()
    lines.append(f"| all five | | | {int(total['training_jobs']):,} | {fmt_hours(total['gpu_hours'])} | "
                 f"{fmt_hours(total['gpu_hours_measured'])} | {fmt_hours(bill['longest_h'].max())} h |")
    asks = {rule: table[table["rule"] == rule] for rule in ("train_part", "prune")}
    gb = {rule: " or ".join(f"{m / 1000:g}" for m in sorted(set(rows["mem_mb"]))) for rule, rows in asks.items()}
    return "\n".join(lines) + (
        f"\n\nMeasured: priced from `{cost_path}` ({cost_run(root / cost_path)}). Each training job asks for "
        f"{_one(asks['train_part']['gpu'])} GPU, {_one(asks['train_part']['cpus'])} CPUs and {gb['train_part']} GB; "
        f"the pruning job before it {_one(asks['prune']['cpus'])} CPUs and {gb['prune']} GB "
        f"({fmt_hours(table['cpu_hours'].sum())} CPU-hours in all five). The five tables answer "
        f"{sum(claims.get(e, 0) for e in RP_GPU_TABLES)} claims ("
        f"{', '.join(f'{e} {claims.get(e, 0)}' for e in RP_GPU_TABLES)}). "
        f"{shared_note(config, 'paper', RP_GPU_TABLES)}".rstrip() + "\n")


def _one(values: pd.Series) -> str:
    """The one value every job of a rule asks for (the docs say it once)."""
    found = sorted(set(values))
    return "/".join(f"{v:g}" for v in found)


def _models(models: list[str]) -> str:
    """``resnet32/50/104`` for ``resnet32, resnet50, resnet104``: a narrow cell."""
    groups: dict[str, list[str]] = {}
    for m in models:
        stem = m.rstrip("0123456789")
        groups.setdefault(stem, []).append(m[len(stem):])
    return ", ".join(stem + "/".join(n for n in sizes) for stem, sizes in groups.items())


def claim_counts(root: Path) -> dict[str, str]:
    """How many claims ``claims.yaml`` holds, for the pages that quote it: ``claims.statements``
    (one line each under ``claims:``), ``claims.cells`` (the paper tables' cells), ``claims.all``."""
    from ..report import claims

    loaded = claims.load(root / "claims.yaml")
    cells = sum(c.cell is not None for c in loaded)
    return {"claims.statements": f"{len(loaded) - cells:,}", "claims.cells": f"{cells:,}", "claims.all": f"{len(loaded):,}"}


def suite_counts(root: Path) -> dict[str, str]:
    """How many tests the suite holds (``tests.all``) and how many ``make test-fast`` runs
    (``tests.fast``), as pytest collects them in ``root`` (about 30 s)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                          "-m", "not workflow and not slurm and not smoke"], cwd=root, capture_output=True, text=True)
    found = re.search(r"(\d+)/(\d+) tests collected", run.stdout)
    if not found:
        raise SystemExit(f"pytest could not collect the suite in {root}:\n{(run.stdout + run.stderr)[-2000:]}\n"
                         "fix the error it names, then: python -m reluinit.pipeline.plan --write-docs")
    fast, whole = map(int, found.groups())
    return {"tests.all": f"{whole:,}", "tests.fast": f"{fast:,}"}


def docs_text(text: str, config: dict, root: Path, cached: dict | None = None) -> str:
    """``text`` (a page of README.md or docs/) with its plan numbers written in: each
    ``<!-- plan:KEY -->...<!-- /plan -->`` gets ``numbers()[KEY]`` (priced from ``DOCS_COST``), the
    ``plan:rp-tables`` block ``rp_tables_markdown``. GitHub shows the Markdown as it is, so the
    numbers live in it, and a test checks they are current."""
    cached = {} if cached is None else cached
    if INLINE.search(text):
        if "numbers" not in cached:
            cached["numbers"] = {**numbers(config, "paper", cost=read_cost(root / DOCS_COST)), **claim_counts(root)}
        if "tests.all" not in cached["numbers"] and any(key.startswith("tests.") for key, _ in INLINE.findall(text)):
            cached["numbers"].update(suite_counts(root))
        text = INLINE.sub(lambda m: f"<!-- plan:{m.group(1)} -->{cached['numbers'][m.group(1)]}<!-- /plan -->", text)
    if BLOCK.search(text):
        if "rp" not in cached:
            cached["rp"] = rp_tables_markdown(config, root)
        text = BLOCK.sub(lambda m: m.group(1) + cached["rp"] + m.group(3), text)
    return text


def docs_pages(root: Path) -> list[Path]:
    """The pages that may quote the plan: README.md and docs/**/*.md."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def write_docs(root: Path) -> list[Path]:
    """Rewrite the plan's numbers in every page (``docs_text``); the pages it changed."""
    config, cached, changed = read_yaml(root / "config.yaml"), {}, []
    for page in docs_pages(root):
        text = page.read_text()
        new = docs_text(text, config, root, cached)
        if new != text:
            page.write_text(new)
            changed.append(page)
    return changed


AUDIT = "reference/paper/RP/mask-audit.csv.gz"


def collapsed_cells(audit: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of a mask audit (``python -m reluinit.tools.mask_audit``) whose net empties a
    layer or its classifier: table, dataset, model, activation, method, sparsity, layers emptied,
    classifier weights kept, whether a path from input to output is left and whether the net is
    therefore at chance, the paper's accuracy, chance and whether the paper reports more than chance
    there (1.5 points above it: ours); the nets at chance first, those the paper trains first among them."""
    cells = audit.drop_duplicates(["table", "dataset", "model", "activation", "method", "sparsity"])
    bad = cells[cells["emptied_layers"] > 0].copy()
    bad["paper_above_chance"] = bad["paper_acc"] > bad["chance"] + 1.5
    return bad.sort_values(["at_chance", "paper_above_chance", "table"], ascending=[False, False, True], kind="stable")[
        ["table", "dataset", "model", "activation", "method", "sparsity", "emptied_layers", "classifier_kept",
         "connected", "at_chance", "paper_acc", "chance", "paper_above_chance", "stand_in"]]


def collapse_note(root: Path, ids: list[str] | None = None) -> str:
    """What the committed mask audit (``AUDIT`` under ``root``) says a build would pay for in vain:
    the cells of ``ids`` (default: all) whose nets empty a layer or the classifier, or that no cell
    does; "" without an audit."""
    path = root / AUDIT
    if not path.exists():
        return ""
    audit = pd.read_csv(path)
    if ids:
        audit = audit[audit["table"].isin(ids)]
    bad = collapsed_cells(audit)
    n_cells = len(audit.drop_duplicates(["table", "dataset", "model", "activation", "method", "sparsity"]))
    head = f"Mask audit ({AUDIT}: seed 0, the paper's sizes; SNIP/GraSP on a stand-in batch): "
    if bad.empty:
        return head + f"no net of its {n_cells} cells empties a layer or its classifier."
    shown = bad.assign(paper_acc=bad["paper_acc"].map(lambda v: "-" if v != v else f"{v:g}"))
    dead = bad[bad["at_chance"].astype(bool)]
    return (head + f"{len(bad)} of its {n_cells} cells empty a layer or the classifier; {len(dead)} of them leave "
            f"no path to the output or no classifier, so they train at chance "
            f"({int(dead['paper_above_chance'].sum())} where the paper reports more); the others keep a path "
            f"around the emptied layer:\n" + "\n".join(f"  {line}" for line in shown.to_string(index=False).splitlines()))


def print_price(bill: pd.DataFrame, scale: str, cost: str | None) -> None:
    """The price per catalogue id and the sum of those shown."""
    bill = bill.copy()
    bill.loc["sum"] = bill.sum(numeric_only=True)
    bill.loc["sum", "longest_h"] = bill["longest_h"].iloc[:-1].max()
    measured = f"; gpu_hours_measured: priced from {cost} ({cost_run(cost)})" if cost else ""
    print(f"\nPrice per catalogue id ({scale} scale; gpu_hours: what its jobs declare{measured}):\n")
    hours_columns = [c for c in bill.columns if c != "training_jobs"]
    print(bill.to_string(formatters={"training_jobs": lambda n: f"{n:,.0f}", **{c: fmt_hours for c in hours_columns}}))


def write_csv(table: pd.DataFrame, path: str) -> str | None:
    """Write ``table`` to ``path`` (``--csv``); the sentence that says why it could not, or None."""
    try:
        table.to_csv(path, index=False)
    except OSError as e:
        why = e.strerror if Path(path).parent.is_dir() else f"{Path(path).parent} is no folder"
        return f"--csv {path}: cannot write it ({why}); give a file in a folder that exists and you can write, e.g. --csv plan.csv"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reluinit.pipeline.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("scale", nargs="?", default="paper", choices=["paper", "quick", "smoke"])
    parser.add_argument("--config", default="config.yaml", help="the workflow config (default: config.yaml)")
    parser.add_argument("--csv", help="also write every job's row to this CSV file")
    parser.add_argument("--all-jobs", action="store_true", help="print every job, not one line per experiment")
    parser.add_argument("--cost", metavar="CSV", help="a GPU check's gpu-cost.csv: also price training jobs from "
                                                      "measured seconds per step (reference/gpu/<run>/gpu-cost.csv)")
    parser.add_argument("--ids", nargs="+", metavar="ID", help="print only the price of these catalogue ids "
                                                               "(RP-T1 RP-T2 ...): GPU-hours per id, then their sum")
    parser.add_argument("--write-docs", action="store_true", help="write the plan's numbers into README.md and "
                        f"docs/ (priced from {DOCS_COST}) and exit")
    args = parser.parse_args(argv)
    if args.write_docs:
        root = Path(args.config).resolve().parent
        for page in write_docs(root):
            print(f"updated {page.relative_to(root)}")
        return 0
    if not Path(args.config).exists():
        parser.error(f"no config at {args.config}: run from the workflow's folder or pass --config")
    if args.cost and not Path(args.cost).exists():
        parser.error(f"no cost table at {args.cost}: `python -m reluinit.gpucheck --out DIR` writes DIR/gpu-cost.csv")
    try:
        config, cost = read_config(args.config), read_cost(args.cost) if args.cost else None
    except ValueError as e:  # not YAML, a key set twice, a value the schema refuses; a cost no check measures
        parser.error(str(e))
    if args.ids:
        unknown = [i for i in args.ids if i not in default_experiments(config, args.scale)]
        if unknown:
            parser.error(f"{', '.join(unknown)}: not an id `all` builds at the {args.scale} scale "
                         f"(CATALOGUE.md lists them)")
        table = jobs(config, args.scale, args.ids, cost=cost)
        if args.csv and (refused := write_csv(table, args.csv)):
            parser.error(refused)
        print_price(price(table, args.ids), args.scale, args.cost)
        if shared_note(config, args.scale, args.ids):
            print(f"\n{shared_note(config, args.scale, args.ids)}")
        if args.scale != "quick" and collapse_note(Path(args.config).resolve().parent, args.ids):
            print(f"\n{collapse_note(Path(args.config).resolve().parent, args.ids)}")
        return 0
    table = jobs(config, args.scale, cost=cost)
    if args.csv and (refused := write_csv(table, args.csv)):
        parser.error(refused)
    pd.set_option("display.width", 160)
    pd.set_option("display.max_rows", None)
    if args.all_jobs:
        print(table.to_string(index=False))
    else:  # one line per experiment and rule: the same resources repeat over its jobs
        table["experiment"] = table["job"].str.split("/").str[0]
        measured = dict(gpu_hours_measured=("gpu_hours_measured", "sum"),
                        unpriced_runs=("unpriced_runs", "sum")) if cost is not None else {}
        per_exp = table.groupby(["rule", "experiment"], sort=False).agg(
            jobs=("job", "size"), gpu=("gpu", "max"), cpus=("cpus", "max"), mem_mb=("mem_mb", "max"),
            runtime_h=("runtime_h", "max"), gpu_hours=("gpu_hours", "sum"), cpu_hours=("cpu_hours", "sum"),
            **measured)
        print(f"Jobs of `snakemake all` at the {args.scale} scale, resources as the rules declare them "
              f"(runtime_h: the longest job's):\n")
        print(per_exp.round(2).to_string())
    print_price(price(table), args.scale, args.cost)
    if shared_note(config, args.scale):
        print(f"\n{shared_note(config, args.scale)}")
    if args.scale != "quick" and collapse_note(Path(args.config).resolve().parent):
        print(f"\n{collapse_note(Path(args.config).resolve().parent)}")
    summary = totals(table)
    print(f"\nTotals ({args.scale} scale; figure, report and fetch jobs are local and not priced):\n")
    print(summary.round(1).to_string())
    print(f"\n{int(summary.loc['total', 'jobs'])} jobs, {summary.loc['total', 'gpu_hours']:.0f} GPU-hours, "
          f"{summary.loc['total', 'cpu_hours']:.0f} CPU-hours requested")
    profile = Path(args.config).parent / "profiles" / "slurm" / "config.yaml"
    if profile.exists():
        conflicts = profile_conflicts(config, profile, args.scale, table)
        print("Under the SLURM profile every job asks for these resources (its partition and account are "
              "yours to set)" if not conflicts else "The SLURM profile asks for other resources:\n" + "\n".join(conflicts))
    if cost is not None:
        print(f"Priced from {args.cost}: {summary.loc['total', 'gpu_hours_measured']:.0f} GPU-hours measured "
              f"against {summary.loc['total', 'gpu_hours']:.0f} declared "
              f"({int(summary.loc['total', 'unpriced_runs'])} training runs not in the cost table keep their "
              f"declared hours)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
