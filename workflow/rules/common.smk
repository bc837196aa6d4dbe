# Shared helpers: config validation, the library on the path, settings and paths by id.
import functools
import os
import shutil
import subprocess
import time
import re
import sys
from pathlib import Path
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.20")

# The science lives in the importable package under src/ (reluinit.pipeline.workflow_env says how
# jobs find it).
_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, _SRC)

from reluinit.pipeline import workflow_env  # noqa: E402

workflow_env.export(_SRC)

from reluinit.pipeline import catalogue, paths, plan, provenance  # noqa: E402
from reluinit.report import claims, reports  # noqa: E402
from reluinit.pipeline.config import explain, settings, training_settings, unknown_recipes  # noqa: E402

# What planning computes from the library's code (a job's parts, code fingerprints), kept per
# version of its source for the next Snakemake process here: each SLURM job's, the next build's.
provenance.MEMO_DIR = Path(os.environ.get("RELUINIT_MEMO") or ".snakemake/reluinit").absolute()

try:
    validate(config, "../schemas/config.schema.yaml")
except WorkflowError as e:
    # Snakemake raises from jsonschema's error; turn it into one line naming the key.
    cause = e.__cause__ or e.__context__
    raise WorkflowError(explain(cause) if hasattr(cause, "absolute_path") else str(e)) from None
if unknown_recipes(config):  # as the run's last words (the settings read below would raise a KeyError)
    print(unknown_recipes(config)[0], file=sys.stderr, flush=True)
    raise SystemExit(1)

SCALE = config["scale"]
# One results tree per scale (results/quick, results/paper, results/smoke): none reads another's files.
RESULTS = paths.scale_root(config["results"], SCALE)
DATA = config["data_dir"]
EXPERIMENTS = list(config["experiments"])
PAPERS = sorted({catalogue.paper_of(e) for e in EXPERIMENTS})
# Experiments that train run as `train_part` jobs (GPU, long); views plot another's table;
# optional ones (RP-T8, ImageNet) are configured but left out of `all`.
# (read from the catalogue's entries: parsing the workflow imports no experiment's code, so a
# Snakemake process, such as each SLURM job's, imports torch and seaborn only for the jobs it runs)
TRAINING = [e for e in EXPERIMENTS if catalogue.entry(e).trains and not catalogue.entry(e).source]
PRUNING = [e for e in EXPERIMENTS if catalogue.entry(e).masks and not catalogue.entry(e).source]
SOURCES = {e: catalogue.entry(e).source for e in EXPERIMENTS if catalogue.entry(e).source}
for _view, _source in SOURCES.items():
    if _source not in EXPERIMENTS:
        raise WorkflowError(f"{_view} plots the runs of {_source}: configure {_source} too")
DEFAULT = [e for e in EXPERIMENTS if not settings(config, e).get("optional", False)]


def exp_settings(exp):
    """The experiment's settings at the configured scale."""
    return settings(config, exp)


def train_settings(spec):
    return training_settings(config, spec)


def measure_inputs(w):
    """Files a measurement (or training) job reads: its parts' pruning masks (an experiment that
    prunes), checkpoints of the trained nets they measure, and the fetch record of the dataset it
    draws inputs from (none at the quick scale)."""
    s = exp_settings(w.exp)
    trained = [paths.trained(RESULTS, *t) for key in job_parts(w) for t in catalogue.trained(w.exp, s, key)]
    return list(dict.fromkeys(masks_file(w) + trained + dataset_inputs(w)))


def job_parts(w):
    """The parts a measurement (or training) job runs: its own, or all of its experiment's where
    the scale's `measure_jobs` is `one` (reluinit.pipeline.plan.measure_jobs)."""
    jobs = measure_jobs(w.exp)
    if w.part not in jobs:
        raise WorkflowError(f"{w.exp} has no job {w.part!r} at the {SCALE} scale; its jobs: {', '.join(jobs)}")
    return jobs[w.part]


@functools.cache
def measure_jobs(exp):
    return plan.measure_jobs(config, exp, SCALE)


def dataset_inputs(w):
    """The fetch records of the datasets an experiment's settings name (none at the quick scale)."""
    s = exp_settings(w.exp)
    names = ([s["dataset"]] if "dataset" in s else []) + s.get("datasets", [])
    return [f for name in names for f in dataset_input(name)]


def masks_file(w):
    """The masks of the job's parts (written by their `prune` jobs) where the experiment prunes:
    ``[]``, or one path per part in the job's order."""
    return [paths.masks(RESULTS, w.exp, key) for key in job_parts(w)] if catalogue.entry(w.exp).masks else []


# --- code fingerprints: a job reruns when the library code it runs changes ---------------------
# (training jobs have none on purpose: they rerun on their settings; see the README)


def fingerprint(*label, of):
    """The code fingerprint of the objects ``of()`` returns, computed once per version of the
    library's source (provenance.memo): following the code means importing it, torch and seaborn
    included, which the next Snakemake process to plan these jobs then skips."""
    return provenance.memo("code", list(label), lambda: provenance.code_fingerprint(*of()))


@functools.cache
def measure_code(exp):
    return fingerprint("measure", exp, of=lambda: [catalogue.get(exp).measure])


@functools.cache
def measures_code(exps):
    """The measuring code of a job of several experiments (a paper's random nets)."""
    return fingerprint("measure", *exps, of=lambda: [catalogue.get(e).measure for e in exps])


@functools.cache
def masks_code(exp):
    return fingerprint("masks", exp, of=lambda: [catalogue.get(exp).masks])


@functools.cache
def figure_code(exp):
    return figures_code((exp,))


@functools.cache
def figures_code(exps):
    """The plotting code of a job drawing ``exps`` (one id's figure and summary, or a paper's)."""

    def code():
        from reluinit.report import plotting

        return [f for e in exps for f in catalogue.figures_of(e)] + [plotting.save]

    return fingerprint("figures", *exps, of=code)


@functools.cache  # two rules (claims, scorecard) ask
def claims_code():
    return fingerprint("claims", of=lambda: [claims.load, claims.scorecard, claims.write_html, claims.summary])


@functools.cache
def notebook_code():
    return fingerprint("notebook", of=lambda: [f for f in vars(reports).values() if callable(f)])


def table_parts(exp):
    """The job files an experiment's table is made of, in part order (a view's are its source's)."""
    source = SOURCES.get(exp, exp)
    return [paths.part(RESULTS, source, job) for job in measure_jobs(source)]


def train_resources(w):
    """A training job's resources (reluinit.pipeline.plan.train_resources, which `python -m reluinit.pipeline.plan`
    prints for every job)."""
    return _train_resources(w.exp, w.part)


@functools.cache  # asked once per resource and job: the runs are listed once per job
def _train_resources(exp, part):
    return plan.train_resources(config, exp, part, SCALE)


def prune_resources(w):
    """A prune job's resources (reluinit.pipeline.plan.prune_resources): its part's training memory."""
    return _prune_resources(w.exp, w.part)


@functools.cache
def _prune_resources(exp, part):
    return plan.prune_resources(config, exp, part, SCALE)


def train_threads(w):
    """The CPUs a training job was given (cpus_per_gpu); one at the quick scale, where tiny nets
    train faster two jobs at a time, one thread each, than sharing threads."""
    return 1 if SCALE == "quick" else train_resources(w).get("cpus_per_gpu", 2)


def one_of(ids):
    """A wildcard constraint matching exactly these ids (and nothing when there are none)."""
    return "|".join(re.escape(e) for e in ids) or "(?!)"


def checkpoint_dir(w):
    return paths.checkpoints(RESULTS, w.exp, w.part)


def paper_title(paper):
    return f"{paper}: {catalogue.PAPERS[paper]}"


def figure_files(exp):
    """The figure (PDF, PNG) and what it was built with (its caption reads that), so that a
    target asking for a figure brings its caption's record up to date too."""
    return paths.figures(RESULTS, exp) + [paths.built(RESULTS, exp)]


def figure_png(exp, caption="../report/figure.rst"):
    """A figure's PNG as the Snakemake report shows it: under its paper, labelled by its id."""
    return report(
        figure_files(exp)[1],
        caption=caption,
        category=catalogue.paper_of(exp),
        subcategory=exp,
        labels={"figure": exp},
    )


def log_file(name):
    return paths.log(RESULTS, name)


def benchmark_file(name):
    return paths.benchmark(RESULTS, name)


# --- datasets ----------------------------------------------------------------------------

TORCHVISION_DATASETS = ["mnist", "cifar10", "cifar100"]


def dataset_input(name):
    """Rule input for a dataset: its fetch record, or nothing when what is loaded at this scale
    ships with an installed package (the quick stand-ins, reluinit.datasets.QUICK_STAND_INS)."""
    def bundled():
        from reluinit.datasets import BUNDLED, resolve  # imports torch: asked once per version (provenance.memo)

        return resolve(name, SCALE) in BUNDLED

    if provenance.memo("bundled", [name, SCALE], bundled):
        return []
    return [f"{DATA}/fetched/{name}.json"]


# --- the smoke test of the paper scale -----------------------------------------------------


def smoke_jobs(w):
    """The part files of the smoke subset (reluinit.pipeline.smoke.subset); only at the smoke scale."""
    from reluinit.pipeline import smoke  # imports torch (through datasets): only where the smoke scale runs

    if SCALE != "smoke":
        raise WorkflowError("`smoke` runs at the smoke scale: snakemake smoke --cores 2 --config scale=smoke")
    return smoke.targets(config, smoke.subset(config), RESULTS)


# --- reports -----------------------------------------------------------------------------

REPORT_PAPERS = [p for p in PAPERS if Path(workflow.basedir, "notebooks", f"{p}.ipynb").exists()]


def report_files(paper):
    return [paths.report(RESULTS, paper, "ipynb"), paths.report(RESULTS, paper, "html")]


def paper_inputs(paper):
    """Tables and figures of the experiments of ``paper`` built by default (not the optional
    ones, such as RP-T8 on ImageNet): what its notebook reads."""
    exps = [e for e in DEFAULT if catalogue.paper_of(e) == paper]
    return {
        "tables": [paths.table(RESULTS, e) for e in exps],
        "figures": [f for e in exps for f in figure_files(e)],
    }


# --- the usual mistakes: each stops the run with one sentence saying what to do ---------------

_STARTED = time.time()


def stop(sentence):
    """End the run with ``sentence`` as its last words: a WorkflowError raised here would be
    followed by the Snakefile line that raised it, and one raised in `onerror` by Snakemake's own
    "At least one job did not complete successfully"."""
    print(sentence, file=sys.stderr, flush=True)
    raise SystemExit(1)


def catalogue_id_targets(argv):
    """Command-line words that are catalogue ids (`OP-F1`) rather than targets (`op_f1`).
    Snakemake hands its targets to the DAG only after reading this file and then says just "No rule
    to produce OP-F1", so the command line is the one place to catch this mistake early."""
    ids = {e.lower(): e for e in EXPERIMENTS}
    return [ids[w.lower()] for w in argv if w.lower() in ids and not Path(w).exists()]


if workflow.is_main_process and catalogue_id_targets(sys.argv[1:]):
    _named = catalogue_id_targets(sys.argv[1:])
    stop(
        f"{', '.join(_named)} {'is a catalogue id' if len(_named) == 1 else 'are catalogue ids'}, not {'a target' if len(_named) == 1 else 'targets'}: "
        f"build {'it' if len(_named) == 1 else 'them'} with `snakemake "
        f"{' '.join(paths.target(e) for e in _named)}` (the id in lower case, - as _); "
        "`snakemake --list-target-rules` lists every target."
    )


def check_slurm():
    """Before any job is submitted through the SLURM executor, check once that SLURM's commands are
    on the PATH and its controller answers: without this the plugin fails only after a minute of
    repeated "No such file or directory: 'sacct'" or "Unable to contact slurm controller"."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    leave = "or leave out `--profile profiles/slurm` to run on this machine"
    missing = [cmd for cmd in ("sbatch", "scontrol") if shutil.which(cmd) is None]
    if missing:
        stop(
            f"The SLURM executor needs SLURM's commands, but `{missing[0]}` is not on the PATH: run "
            f"Snakemake on the cluster's login node (or load its slurm module), {leave}."
        )
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=60)
        answer = (ping.stdout + ping.stderr).strip().splitlines()
        ok = ping.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as e:
        answer, ok = [str(e)], False
    if not ok:
        stop(
            f"The SLURM controller does not answer (`scontrol ping`: {answer[0] if answer else 'no output'}): "
            f"start slurmctld or run from a node that reaches it, {leave}."
        )


def check_device():
    """`device: cuda` on a machine whose torch sees no CUDA device stops the run before any job
    (each would die on the driver's traceback); on a cluster the jobs' nodes decide, not this one."""
    plugin = workflow.executor_plugin
    if not str(config["device"]).startswith("cuda") or (plugin is not None and plugin.name != "local"):
        return
    import torch

    if not torch.cuda.is_available():
        stop(
            f"device={config['device']} in the config, but torch sees no CUDA device on this machine: run with "
            "`--config device=auto` (CUDA where there is one, else the CPU) or `device=cpu`, or submit to GPU nodes "
            "with `--profile profiles/slurm`."
        )


def sweep_damaged():
    """Results that are not what their writer sealed (a table, part file, mask or net cut short or
    changed; reluinit.integrity.sweep) are moved aside before the DAG is built, each named once:
    a target's file is then rebuilt by this run, and a file only other jobs read is rebuilt when
    one of them next runs, or at once with the command given. Never read either way."""
    from reluinit import integrity

    scale = "" if SCALE == "paper" else f" --config scale={SCALE}"
    for path, aside, reason in integrity.sweep(RESULTS):
        print(f"{path} is damaged ({reason}): moved to {aside}, never read; it is rebuilt when a job needs it, "
              f"or now with `snakemake {path} --cores 1{scale}`.", file=sys.stderr)


# Command-line words after which Snakemake plans, lists or reports but runs no job.
NOT_RUNNING = {"-n", "--dry-run", "--dryrun", "--just-print", "--lint", "--summary", "-S", "--detailed-summary",
               "-D", "--list-target-rules", "--list-rules", "-l", "--report", "--dag", "--rulegraph", "--filegraph",
               "--unlock", "--cleanup-metadata", "--delete-all-output", "--delete-temp-output", "--touch", "-t"}


def runs_jobs(argv):
    """Whether this command line runs jobs (no -n, --lint, --report, ...; -np counts as -n)."""
    return not any(a in NOT_RUNNING or (a.startswith("-") and not a.startswith("--") and "n" in a[1:]) for a in argv)


def job_instruction():
    """What a job that failed during this run said to do (the newest line that jobs.TODO_PREFIX
    marks in a log written since the run started: a fetch job's missing dataset, any job's damaged
    input and the command that rebuilds it), or None."""
    from reluinit.pipeline.jobs import TODO_PREFIX

    root = Path(log_file("x")).parent
    logs = [p for p in root.rglob("*.log") if p.stat().st_mtime >= _STARTED] if root.is_dir() else []
    for log in sorted(logs, key=lambda p: p.stat().st_mtime, reverse=True):
        todo = [line.split(TODO_PREFIX, 1)[1] for line in log.read_text().splitlines() if TODO_PREFIX in line]
        if not todo:
            continue
        if log.parent.name == "datasets":
            return f"{log.stem} is not available here. {todo[-1].rstrip('.')}, or run `--config scale=quick`, which needs no download."
        return todo[-1]
    return None


if workflow.is_main_process and runs_jobs(sys.argv[1:]):
    sweep_damaged()  # before the DAG is built: what it moves aside, this run rebuilds
