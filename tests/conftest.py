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


@pytest.fixture(scope="session", autouse=True)
def quick_build_started(request, tmp_path_factory, shared_memo):
    """The shared quick build (``quick_build``), started with the session when any test selected
    reads it: it runs beside the tests before those, much of whose time is one core's work or
    waiting on a SLURM cluster, instead of after them (about 4 minutes on 2 cores). Its output goes
    to ``build.log`` beside it, read when it fails."""
    if not any("quick_build" in item.fixturenames for item in request.session.items):
        yield None
        return
    wf = copy_workflow(tmp_path_factory.mktemp("quick") / "wf")
    with (wf / "build.log").open("w") as log:
        proc = subprocess.Popen(SNAKEMAKE + ["all", "--cores", "2", "--config", "scale=quick"], cwd=wf,
                                stdout=log, stderr=subprocess.STDOUT, text=True)
    yield wf, proc
    if proc.poll() is None:  # the session ended (or stopped) before a test waited for it
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def quick_build(quick_build_started):
    """One quick-scale build of every target, shared by the tests that only read it; a test that
    edits the workflow or reruns part of it takes a copy (``copy_build``)."""
    wf, proc = quick_build_started
    proc.wait(timeout=1800)
    assert proc.returncode == 0, (wf / "build.log").read_text()[-3000:]
    return wf


def copy_build(build: Path, dest: Path) -> Path:
    """A copy of a built workflow, file times and Snakemake's records kept (so that it is as up to
    date as the original), without the training checkpoints that nothing here resumes."""
    shutil.copytree(build, dest, symlinks=True, ignore=shutil.ignore_patterns("checkpoints"))
    return dest
