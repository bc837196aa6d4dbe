# Shared helpers: config validation, the library on the path, settings and paths by id.
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.20")

# The science lives in the importable package under src/; jobs (local, conda, SLURM) find
# it through PYTHONPATH, so the checkout's version is used whether or not it is installed.
_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, _SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [_SRC, os.environ.get("PYTHONPATH")] if p)
# Shell rules (papermill, jupyter) use the tools installed beside this Snakemake unless a
# conda environment (--sdm conda) puts its own first, as it does.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])

from reluinit import experiments, paths  # noqa: E402
from reluinit.config import explain, settings  # noqa: E402

try:
    validate(config, "../schemas/config.schema.yaml")
except WorkflowError as e:
    cause = next((a for a in e.args if hasattr(a, "absolute_path")), None)
    raise WorkflowError(explain(cause) if cause is not None else str(e)) from None

RESULTS = config["results"]
DATA = config["data_dir"]
SCALE = config["scale"]
EXPERIMENTS = list(config["experiments"])
PAPERS = sorted({experiments.paper_of(e) for e in EXPERIMENTS})


def exp_settings(exp):
    """The experiment's settings at the configured scale."""
    return settings(config, exp)


def part_keys(exp):
    return list(experiments.get(exp).parts(exp_settings(exp)))


def figure_files(exp):
    return paths.figures(RESULTS, exp)


def log_file(name):
    return paths.log(RESULTS, name)


def benchmark_file(name):
    return paths.benchmark(RESULTS, name)
