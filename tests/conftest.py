import fcntl
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Under pytest-xdist the workers share the cores with each other and with the Snakemake jobs the
# tests start: one torch thread per worker, and waiting threads that sleep. Two torch processes
# of two threads each on two cores spun so hard that a 6 s loop took over 100 s; set before any
# test module imports torch, and inherited by every process a test starts (a job that asks for
# more threads still sets its own).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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


def shared_dir(tmp_path_factory, config) -> Path:
    """This run's temporary folder, one for all of its pytest-xdist workers (each worker's own
    temporary folders sit inside it). Asked of the run's config, not of the environment, which a
    pytest that a test starts inherits."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@contextmanager
def exclusive(lock: Path):
    """Held by one process of the run at a time: the first worker to need a shared build makes
    it, the others wait for it and read it."""
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session", autouse=True)
def shared_memo(tmp_path_factory, pytestconfig):
    """One memo of what planning computes (provenance.memo: a job's parts, code fingerprints) for
    every workflow copy of this run and every worker, as the copies of one source tree give the
    same answers (a copy whose code a test edits gets its own): a Snakemake process then plans
    without importing torch and seaborn, about 2.5 s each of the suite's hundred or so."""
    memo = shared_dir(tmp_path_factory, pytestconfig) / "memo"
    memo.mkdir(exist_ok=True)
    os.environ["RELUINIT_MEMO"] = str(memo)


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path / "wf")


# The tiny build: the quick scale's settings, built for eight targets whose 19 computing jobs
# (beside the targets' own) run every kind the workflow has: a paper's random nets measured
# in one job and drawn in another (OP); pruning, training and measuring trained nets as three jobs
# (RP-F3, TG-F6); masks measured without training (RP-F2); an LR training spec and the measurement
# that reads its nets (LR-F7); a measurement taken during training (EP-F18). About a minute and a
# half on 2 cores. The tests of mechanics (what reruns, what damage does, whether batching changes
# results) read it; the tests of what the whole quick scale shows read ``quick_build`` (marker
# ``build``: `make test-build`).
TINY = ["op_f1", "op_f2", "op_f3", "rp_f2", "rp_f3", "lr_f7", "tg_f6", "ep_f18"]


def _shared_build(tmp_path_factory, pytestconfig, name: str, targets: list[str], timeout: int) -> Path:
    """A quick-scale build of ``targets``, made once per run by the first worker that asks for it and
    read by every worker; a test that edits the workflow or reruns part of it takes a copy
    (``copy_build``). A failed build fails every test that reads it, with Snakemake's last words."""
    shared = shared_dir(tmp_path_factory, pytestconfig) / name
    wf, built, failed = shared / "wf", shared / "built", shared / "failed.txt"
    shared.mkdir(exist_ok=True)
    with exclusive(shared / "lock"):
        if not (built.exists() or failed.exists()):
            try:
                run = snakemake(*targets, "--cores", "2", "--config", "scale=quick",
                                cwd=copy_workflow(wf), timeout=timeout)
                if run.returncode == 0:
                    built.touch()
                else:
                    failed.write_text(run.stderr[-3000:])
            except Exception as e:  # a timeout: every worker's tests say so, none builds again
                failed.write_text(repr(e))
    assert not failed.exists(), f"the shared {name} build failed:\n" + failed.read_text()
    return wf


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory, pytestconfig):
    """The quick scale's ``TINY`` targets, built once per run."""
    return _shared_build(tmp_path_factory, pytestconfig, "tiny", TINY, timeout=900)


@pytest.fixture(scope="session")
def quick_build(tmp_path_factory, pytestconfig):
    """Every target of the quick scale, built once per run (what `make quick` builds): read by the
    tests of what the whole scale shows (every figure drawn, every claim judged, the report). Under
    xdist it runs beside the other worker's tests, which is why those use one torch thread (the top
    of this file); not as a background process beside both workers."""
    return _shared_build(tmp_path_factory, pytestconfig, "quick", ["all"], timeout=1800)


def copy_build(build: Path, dest: Path) -> Path:
    """A copy of a built workflow, file times and Snakemake's records kept (so that it is as up to
    date as the original), its training checkpoints included: a part's measuring job reads them
    (rule ``measure_trained``)."""
    shutil.copytree(build, dest, symlinks=True)
    return dest


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the `build` marker is set here
def pytest_collection_modifyitems(config, items):
    """A test that reads the whole quick build is marked ``build`` (`make test-build` runs those;
    `make test` the rest). The order pytest-xdist hands tests out in (``--dist loadgroup
    --no-loadscope-reorder``, as `make test` runs it): the first test of a shared build starts it at
    once on one worker, the SLURM tests (mostly waiting on the cluster) run on the other meanwhile,
    then the tests that need no build, and the build's readers last, first those that work in a
    scratch folder (a copy of the build rerun, a report written: the long ones). Without xdist the
    same order runs one test after another."""
    def uses(item, fixture):
        return fixture in getattr(item, "fixturenames", ())

    def reads_a_build(item):
        return uses(item, "tiny_build") or uses(item, "quick_build")

    for item in items:
        if uses(item, "quick_build"):
            item.add_marker(pytest.mark.build)
    readers = [i for i in items if reads_a_build(i)]
    first = readers[:1]
    slurm = [i for i in items if i.get_closest_marker("slurm") and i not in first]
    rest = [i for i in items if i not in first and i not in slurm and not reads_a_build(i)]
    readers = sorted(readers[1:], key=lambda i: not uses(i, "tmp_path"))  # stable: file order kept
    items[:] = first + slurm + rest + readers


def synflow_by_hand(model, in_shape, densities, keep):
    """SynFlow written out, for tests to hold the library's against: round after round, the scores
    |w * dR/dw| of the net ``pruning._linearized`` makes, with the weights pruned so far at zero, and
    ``keep(scores, density, masks)`` choosing the next masks; one round per entry of ``densities``."""
    import torch
    from torch.func import functional_call

    from reluinit import pruning

    net, weights, ones = pruning._linearized(model, in_shape)
    masks = {n: torch.ones_like(w, dtype=torch.bool) for n, w in weights.items()}
    for density in densities:
        live = {n: (w * masks[n]).requires_grad_(True) for n, w in weights.items()}
        grads = torch.autograd.grad(functional_call(net, live, (ones,)).sum(), list(live.values()))
        masks = keep({n: (w * g).abs() for (n, w), g in zip(live.items(), grads)}, density, masks)
    return masks
