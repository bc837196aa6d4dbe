# Set-up that every rules file reads first (library.smk has put the library on the path): the config validated, the
# scale's results tree, the experiments by kind and their settings. The helpers the rules call live
# beside it, one file per concern (included in this order by the Snakefile): paths.smk (where a
# job's files go), inputs.smk (what a job reads), fingerprints.smk (the code a job runs),
# resources.smk (what a job asks for), batching.smk (how the scale's jobs are cut) and checks.smk
# (the usual mistakes, stopped before any job runs).
import functools
import os
import shutil
import subprocess
import time
import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
import jsonschema
from snakemake.utils import min_version

min_version("9.20")

from reluinit import integrity  # noqa: E402
from reluinit.pipeline import bounds, catalogue, paths, plan, provenance, shared  # noqa: E402
from reluinit.report import claims, reports  # noqa: E402
from reluinit.pipeline.config import rejected, settings, training_settings, unknown_recipes, validate  # noqa: E402

# What planning computes from the library's code (a job's parts, code fingerprints), kept per
# version of its source for the next Snakemake process here: each SLURM job's, the next build's.
provenance.MEMO_DIR = Path(os.environ.get("RELUINIT_MEMO") or ".snakemake/reluinit").absolute()

# Snakemake's `validate` rules (defaults filled in), with the schema parsed by libyaml: about 0.15 s of
# CPU off every Snakemake start, each SLURM job's included. The run's last words on a rejection name the key,
# the file and line that set it, and the fix.
try:
    if not workflow.modifier.skip_validation:  # as Snakemake's own: a `module` may skip it
        validate(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
except jsonschema.ValidationError as e:
    # (`config_settings.config` holds --config's values alone; its overwrite_config merges the --configfile files in)
    print(rejected(e, ["config.yaml", *(workflow.overwrite_configfiles or [])], workflow.config_settings.config),
          file=sys.stderr, flush=True)
    raise SystemExit(1)
if unknown_recipes(config):  # as the run's last words (the settings read below would raise a KeyError)
    print(unknown_recipes(config)[0], file=sys.stderr, flush=True)
    raise SystemExit(1)

SCALE = config["scale"]
# One results tree per scale (results/quick, results/paper, results/smoke): none reads another's files.
RESULTS = paths.scale_root(config["results"], SCALE)
# The run's own config files, which every command a job or this run suggests repeats (jobs inherit it).
if workflow.overwrite_configfiles:
    integrity.share_configfiles(workflow.overwrite_configfiles)
DATA = config["data_dir"]
EXPERIMENTS = list(config["experiments"])
PAPERS = sorted({catalogue.paper_of(e) for e in EXPERIMENTS})
# Experiments that train run as `train_part` jobs (GPU, long), then `measure_trained` ones; views plot another's table;
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
# Papers with a notebook (notebooks/<PAPER>.ipynb): `all` executes each.
REPORT_PAPERS = [p for p in PAPERS if Path(workflow.basedir, "notebooks", f"{p}.ipynb").exists()]


def exp_settings(exp):
    """The experiment's settings at the configured scale."""
    return settings(config, exp)


def train_settings(spec):
    return training_settings(config, spec)


def one_of(ids):
    """A wildcard constraint matching exactly these ids (and nothing when there are none)."""
    return "|".join(re.escape(e) for e in ids) or "(?!)"


def paper_title(paper):
    return f"{paper}: {catalogue.PAPERS[paper]}"
