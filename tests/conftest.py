import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd=ROOT, timeout=900):
    """Run Snakemake of this interpreter's environment; return the finished process."""
    return subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def copy_workflow(dest: Path) -> Path:
    """A private copy of the workflow (no results) at ``dest``, to edit its config and run it."""
    dest.mkdir(parents=True)
    for name in ["Snakefile", "config.yaml", "claims.yaml", "workflow", "profiles", "notebooks", "src", "envs"]:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)
    return dest


@pytest.fixture(scope="session", autouse=True)
def shared_memo(tmp_path_factory):
    """One memo of what planning computes (provenance.memo: a job's parts, code fingerprints) for
    every workflow copy of this run, as the copies of one source tree give the same answers (a
    copy whose code a test edits gets its own): a Snakemake process then plans without importing
    torch and seaborn, about 2.5 s each of the suite's hundred or so."""
    os.environ["RELUINIT_MEMO"] = str(tmp_path_factory.mktemp("memo"))


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="session")
def quick_build(tmp_path_factory):
    """One quick-scale build of every target, shared by the tests that only read it; a test that
    edits the workflow or reruns part of it takes a copy (``copy_build``). (Not started in the
    background beside other tests: their torch threads and the build's jobs, sharing 2 cores,
    slowed the suite down, one test 8 s -> 91 s.)"""
    wf = copy_workflow(tmp_path_factory.mktemp("quick") / "wf")
    run = snakemake("all", "--cores", "2", "--config", "scale=quick", cwd=wf, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    return wf


def copy_build(build: Path, dest: Path) -> Path:
    """A copy of a built workflow, file times and Snakemake's records kept (so that it is as up to
    date as the original), without the training checkpoints that nothing here resumes."""
    shutil.copytree(build, dest, symlinks=True, ignore=shutil.ignore_patterns("checkpoints"))
    return dest
