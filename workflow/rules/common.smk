# Shared helpers: config validation, the library on the path, settings and paths by id.
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.20")

# The science lives in the importable package under src/ (reluinit.workflow_env says how
# jobs find it).
_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, _SRC)

from reluinit import workflow_env  # noqa: E402

workflow_env.export(_SRC)

from reluinit import experiments, paths  # noqa: E402
from reluinit.config import explain, settings, training_settings  # noqa: E402

try:
    validate(config, "../schemas/config.schema.yaml")
except WorkflowError as e:
    # Snakemake raises from jsonschema's error; turn it into one line naming the key.
    cause = e.__cause__ or e.__context__
    raise WorkflowError(explain(cause) if hasattr(cause, "absolute_path") else str(e)) from None

RESULTS = config["results"]
DATA = config["data_dir"]
SCALE = config["scale"]
EXPERIMENTS = list(config["experiments"])
PAPERS = sorted({experiments.paper_of(e) for e in EXPERIMENTS})


def exp_settings(exp):
    """The experiment's settings at the configured scale."""
    return settings(config, exp)


def train_settings(spec):
    return training_settings(config, spec)


def measure_inputs(w):
    """Files a measurement job reads: checkpoints of the trained nets it measures, and the
    fetch record of the dataset it draws inputs from (none at the quick scale)."""
    s = exp_settings(w.exp)
    trained = [paths.trained(RESULTS, *t) for t in experiments.get(w.exp).trained(s, w.part)]
    return trained + (dataset_input(s["dataset"]) if "dataset" in s else [])


def part_keys(exp):
    return list(experiments.get(exp).parts(exp_settings(exp)))


def figure_files(exp):
    return paths.figures(RESULTS, exp)


def log_file(name):
    return paths.log(RESULTS, name)


def benchmark_file(name):
    return paths.benchmark(RESULTS, name)


# --- datasets ----------------------------------------------------------------------------

TORCHVISION_DATASETS = ["mnist", "cifar10", "cifar100"]


def dataset_input(name):
    """Rule input for a dataset: its fetch record, or nothing when what is loaded at this scale
    ships with an installed package (the quick stand-ins, reluinit.datasets.QUICK_STAND_INS)."""
    from reluinit.datasets import BUNDLED, resolve

    if resolve(name, SCALE) in BUNDLED:
        return []
    return [f"{DATA}/fetched/{name}.json"]


# --- reports -----------------------------------------------------------------------------

REPORT_PAPERS = [p for p in PAPERS if Path(workflow.basedir, "notebooks", f"{p}.ipynb").exists()]


def report_files(paper):
    return [paths.report(RESULTS, paper, "ipynb"), paths.report(RESULTS, paper, "html")]


def paper_inputs(paper):
    """Tables and figures of every configured experiment of ``paper``: what its notebook reads."""
    exps = [e for e in EXPERIMENTS if experiments.paper_of(e) == paper]
    return {
        "tables": [paths.table(RESULTS, e) for e in exps],
        "figures": [f for e in exps for f in figure_files(e)],
    }
