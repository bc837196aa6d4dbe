"""The cluster path for real: the workflow through a live one-node SLURM controller.

tests/slurm/cluster.sh starts the cluster (as root, from Debian's packages); without root or
without the packages every test here is skipped with the reason. No accounting runs, so the
plugin queries squeue (the cluster keeps finished jobs visible with a high MinJobAge).
"""

import functools
import re
import shlex
import subprocess
import time

import pandas as pd
import pytest
import torch
import yaml

from conftest import ROOT, SNAKEMAKE, copy_workflow, snakemake

# One worker runs this file's tests (pytest-xdist), so its module fixture is built once.
pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("test_slurm")]

CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
# A small subset of the quick scale, one job per experiment: every rule family (measure,
# figure, notebook) runs, in few jobs, since each SLURM job costs ~15 s of Snakemake start-up
# and status polling.
SUBSET = {"experiments": {
    "OP-F1": {"quick": {"widths": [500], "inits": ["he_fan_out"], "n_samples": 100}},
    "OP-F2": {"quick": {"widths": [500, 1000], "n_samples": 100}},
    "OP-F3": {"quick": {"width_variations": [80], "n_samples": 100}},
}}
TARGETS = ["results/quick/reports/OP.html"]
# One thread per measurement (here and in the local run), so two jobs share the 2-CPU node.
THREADS = ["--set-threads", "measure=1"]
SLURM = THREADS + ["--profile", "profiles/slurm", "--slurm-status-command", "squeue", "--slurm-no-account",
         "--slurm-keep-successful-logs", "--slurm-init-seconds-before-status-checks", "1",
         "--seconds-between-status-checks", "1"]
LOCAL_RULES = {"all", "op_f1", "op_f2", "op_f3"}


def _cluster(command):
    return subprocess.run(["bash", str(CLUSTER), command], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def cluster():
    """A running cluster: the one .ci/run started, or one started (and stopped) here."""
    if _cluster("status").returncode == 0:
        yield
        return
    up = _cluster("start")
    if up.returncode != 0:
        pytest.skip(f"no SLURM cluster here: {up.stderr.strip() or up.stdout.strip()}")
    yield
    _cluster("stop")


def _subset(workdir):
    (workdir / "subset.yaml").write_text(yaml.safe_dump(SUBSET))
    return ["--configfile", "subset.yaml", "--config", "scale=quick"]


def _job_state(jobid):
    out = subprocess.run(["scontrol", "show", "job", str(jobid)], capture_output=True, text=True).stdout
    state = re.search(r"JobState=(\w+)", out)
    comment = re.search(r"Comment=(\S+)", out)
    return (state.group(1) if state else None), (comment.group(1) if comment else "")


def _tables(workdir):
    return {p.name: pd.read_csv(p) for p in sorted((workdir / "results" / "quick" / "OP").glob("*.csv"))}


def _start(cmd, cwd):
    """A local Snakemake run started in the background, its output in ``run.log`` beside it;
    ``_finish`` waits for it. It runs while a test waits on the cluster, whose jobs take one core."""
    with (cwd / "run.log").open("w") as log:
        return subprocess.Popen(SNAKEMAKE + cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, text=True)


def _finish(proc, cwd):
    proc.wait(timeout=900)
    assert proc.returncode == 0, (cwd / "run.log").read_text()[-3000:]
    return cwd


def _stop(proc):
    """A background run still going when its test (or module) ends is not left behind."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The subset's targets run on this machine: what every SLURM run here must equal. Started in
    the background; ``local_run()`` waits for it and gives its folder."""
    local = copy_workflow(tmp_path_factory.mktemp("slurm") / "local")
    proc = _start([*TARGETS, "--cores", "2", *THREADS, *_subset(local)], local)
    yield functools.cache(lambda: _finish(proc, local))
    _stop(proc)


def test_workflow_runs_through_slurm_and_matches_a_local_run(cluster, local_run, tmp_path):
    wf = copy_workflow(tmp_path / "slurm")
    start = time.monotonic()
    run = snakemake(*TARGETS, *SLURM, *_subset(wf), cwd=wf, timeout=900)
    wall = time.monotonic() - start
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]

    # Every job of a rule that is not local went through SLURM, and SLURM ran it to completion.
    submitted = dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", out))
    finished = dict(re.findall(r"Finished jobid: (\d+) \(Rule: (\w+)\)", out))
    remote = {job: rule for job, rule in finished.items() if rule not in LOCAL_RULES}
    assert "execute_notebook" in remote.values() and any(rule.startswith("measure") for rule in remote.values())
    assert any(rule.startswith(("figure_", "figures_")) for rule in remote.values())  # one per figure or paper
    assert set(remote) == set(submitted), (finished, submitted)
    for job, slurm_id in submitted.items():
        state, comment = _job_state(slurm_id)
        assert state == "COMPLETED", (remote[job], slurm_id, state)
        assert f"rule_{remote[job]}" in comment
        assert list(wf.glob(f".snakemake/slurm_logs/rule_{remote[job]}/**/{slurm_id}.log"))
    print(f"\nSLURM run: {len(submitted)} SLURM jobs, {wall:.0f} s wall time")

    # Same numbers as a local run of the same targets.
    local = _tables(local_run())
    remote_tables = _tables(wf)
    assert set(remote_tables) == set(local) == {"OP-F1.csv", "OP-F2.csv", "OP-F3.csv"}
    for name in local:
        pd.testing.assert_frame_equal(remote_tables[name], local[name], check_exact=True)
    assert (wf / "results" / "quick" / "reports" / "OP.html").stat().st_size > 10_000


def test_a_cancelled_job_is_resubmitted_and_finishes(cluster, local_run, tmp_path):
    """Preemption: scancel a running job; the profile's retry resubmits it and the result is
    the same as an uninterrupted run. (Checkpoint resume is tested once training exists.)"""
    wf = copy_workflow(tmp_path / "slurm")
    target = "results/quick/OP/OP-F1/all-parts.csv"  # written by measure_op, OP's random nets in one job
    cmd = SNAKEMAKE + [target, *SLURM, *_subset(wf)]
    proc = subprocess.Popen(cmd, cwd=wf, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cancelled = None
    deadline = time.monotonic() + 120
    while cancelled is None and time.monotonic() < deadline and proc.poll() is None:
        queue = subprocess.run(["squeue", "-h", "-o", "%i %T %k"], capture_output=True, text=True).stdout
        for line in queue.splitlines():
            jobid, state, comment = (line.split() + ["", ""])[:3]
            if state == "RUNNING" and "rule_measure" in comment:
                subprocess.run(["scancel", jobid], check=True)
                cancelled = jobid
                break
        time.sleep(0.2)
    out, _ = proc.communicate(timeout=600)
    assert cancelled, "the job never ran: " + out[-2000:]
    assert proc.returncode == 0, out[-4000:]
    jobids = re.findall(r"submitted with SLURM jobid (\d+)", out)
    assert cancelled in jobids and len(jobids) == 2, jobids
    assert _job_state(cancelled)[0] == "CANCELLED"

    pd.testing.assert_frame_equal(pd.read_csv(wf / target), pd.read_csv(local_run() / target), check_exact=True)


# A training job long enough to be cancelled mid-run: RP-F3's quick runs (two tiny FFNNs) for
# 1,000 SGD steps each, 24 epochs of the digits, one checkpoint per epoch.
# RP-F5 narrowed alike: its tanh cells are RP-F3's runs (config `shared`), so the two grids must agree.
_NARROW = {"setups": ["eoc_rescaled"], "depths": [2, 6], "sparsities": [0.5]}
TRAINING = {"experiments": {"RP-F3": {"quick": _NARROW}, "RP-F5": {"quick": _NARROW}},
            "recipes": {"rp-mnist": {"quick": {"iterations": 1000}}}}
TRAINING_TARGET = "results/quick/RP/RP-F3/group0.csv"


def _training_config(workdir):
    (workdir / "training.yaml").write_text(yaml.safe_dump(TRAINING))
    return ["--configfile", "training.yaml", "--config", "scale=quick"]


def _training_job(wf, proc, epochs: int, timeout: float = 300) -> tuple[str | None, int | None]:
    """(the SLURM job id of the running training job, its first run's epoch) once that run has
    checkpointed ``epochs`` epochs; (None, None) if Snakemake ``proc`` ends or ``timeout`` passes first."""
    checkpoints = wf / "results" / "quick" / "checkpoints" / "RP" / "RP-F3" / "group0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        first = sorted(checkpoints.glob("*.pt"))[:1]
        state = torch.load(first[0], weights_only=True) if first else None
        if state is not None and state["history"][-1]["epoch"] >= epochs:
            queue = subprocess.run(["squeue", "-h", "-o", "%i %T %k"], capture_output=True, text=True).stdout
            for line in queue.splitlines():
                jobid, job_state, comment = (line.split() + ["", ""])[:3]
                if job_state == "RUNNING" and "rule_train_part" in comment:
                    return jobid, state["history"][-1]["epoch"]
        time.sleep(0.2)
    return None, None


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """RP-F3's narrowed training target run on this machine without a stop: what both tests that
    stop a training job must end with. Started in the background when the first of them asks;
    ``uninterrupted()`` waits for it and gives its folder."""
    reference = copy_workflow(tmp_path_factory.mktemp("slurm") / "reference")
    proc = _start([TRAINING_TARGET, "--cores", "2", *_training_config(reference)], reference)
    yield functools.cache(lambda: _finish(proc, reference))
    _stop(proc)


@pytest.fixture
def background():
    """``start(cmd, cwd)``: ``_start`` for one test; a run still going when the test ends is stopped."""
    procs = []
    yield lambda cmd, cwd: procs.append(_start(cmd, cwd)) or procs[-1]
    for proc in procs:
        _stop(proc)


def test_a_cancelled_training_job_resumes_from_its_checkpoint(cluster, uninterrupted, tmp_path):
    """scancel a running training job once its first run has checkpointed a few epochs: the
    profile's retry resubmits it, the new job resumes from the checkpoint instead of starting
    over, and the table equals an uninterrupted local run's (all but the wall-clock column)."""
    wf = copy_workflow(tmp_path / "slurm")
    cmd = SNAKEMAKE + [TRAINING_TARGET, *SLURM, *_training_config(wf)]
    proc = subprocess.Popen(cmd, cwd=wf, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cancelled, epoch_at_cancel = _training_job(wf, proc, epochs=3)
    if cancelled:
        subprocess.run(["scancel", cancelled], check=True)
    out, _ = proc.communicate(timeout=600)
    assert cancelled, "the training job was never seen running with a checkpoint: " + out[-2000:]
    assert proc.returncode == 0, out[-4000:]
    assert _job_state(cancelled)[0] == "CANCELLED"
    log = (wf / "results" / "quick" / "logs" / "RP" / "RP-F3" / "group0.log").read_text()
    resumed = re.search(r"resumed from \S+ at epoch (\d+)", log)  # the retry did not start over
    got, want = (pd.read_csv(d / TRAINING_TARGET).drop(columns=["seconds", "train_seconds"])
                 for d in (wf, uninterrupted()))
    last = int(want["epoch"].max())  # the runs' last epoch: cancelled, and resumed, before it
    assert resumed and 3 <= int(resumed.group(1)) < last and epoch_at_cancel < last and last >= 20, (resumed, last)
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def _documented():
    """The commands of the SLURM section, in the README and on the cluster page (the same two)."""
    def block(text):
        found = re.search(r"## On a SLURM cluster\n\n```bash\n(.*?)```", text, re.S).group(1)
        found = re.sub(r"\\\n\s*", "", found)  # a command broken over lines with \ is one command
        return [line.split(" #", 1)[0].strip() for line in found.splitlines() if line.strip()]

    readme, page = block((ROOT / "README.md").read_text()), block((ROOT / "docs" / "cluster.md").read_text())
    assert readme == page and len(page) == 2, (readme, page)
    return page


ONE_JOB = "results/quick/OP/OP-F1/all-parts.csv"  # one SLURM job of the subset (the first test runs them all)


def _placed(command, partition):
    """A documented command with this cluster's values for its placeholders and one job's file for `all`."""
    words = shlex.split(command.replace("ACCOUNT", "test").replace("CPU_PARTITION", partition)
                        .replace("GPU_PARTITION", "main"))[1:]
    return [ONE_JOB if word == "all" else word for word in words]


def test_the_documented_slurm_commands_run_here_and_a_partition_sinfo_lacks_stops_in_one_sentence(cluster, tmp_path):
    fetch, submit = _documented()
    wf = copy_workflow(tmp_path / "slurm")
    assert "slurm_partition=GPU_PARTITION" in submit and "train_part:" in submit
    run = snakemake(*_placed(fetch, "main"), *_subset(wf), cwd=wf)  # on the login node; the quick scale fetches nothing
    assert run.returncode == 0, run.stderr[-2000:]
    flags = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
             "--seconds-between-status-checks", "1", *THREADS]
    bad = snakemake(*_placed(submit, "cpu"), *flags, *_subset(wf), cwd=wf)
    last = [line for line in (bad.stdout + bad.stderr).splitlines() if line.strip()][-1]
    assert bad.returncode != 0
    assert last == ("slurm_partition=cpu (--default-resources) is not a partition of this cluster: `sinfo` lists main. "
                    "Set one of those (ACCOUNT, CPU_PARTITION and GPU_PARTITION in the documentation's commands are "
                    "placeholders) and run again."), last
    assert "submitted with SLURM jobid" not in bad.stdout + bad.stderr  # nothing reached sbatch
    # A job sbatch refuses (more memory than the node has): the run's last line says so, once.
    huge = snakemake(*_placed(submit, "main"), *flags, "--set-resources", "measure_op:mem_mb=100000000",
                     *_subset(wf), cwd=wf)
    last = [line for line in (huge.stdout + huge.stderr).splitlines() if line.strip()][-1]
    assert huge.returncode != 0
    assert last == ("sbatch refused this run's jobs: Memory specification can not be satisfied. Check what they ask "
                    "for in --default-resources and --set-resources (slurm_account, slurm_partition, qos, mem_mb, "
                    "runtime; ACCOUNT, CPU_PARTITION and GPU_PARTITION in the documentation's commands are "
                    "placeholders); `sinfo` lists partitions main."), last
    run = snakemake(*_placed(submit, "main"), *flags, *_subset(wf), cwd=wf, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert re.search(r"submitted with SLURM jobid \d+", run.stdout + run.stderr)
    assert (wf / ONE_JOB).exists()


def test_a_killed_snakemake_recovers_as_documented_with_one_writer_per_part(cluster, uninterrupted, background, tmp_path):
    """kill -9 the Snakemake of a SLURM run while its training job runs: the job, orphaned, keeps
    training. The documented recovery (docs/cluster.md: `snakemake --unlock`, then the same
    command) submits the part again; the new job waits for the orphan (the part's lock: one writer
    at a time), then resumes from what it left. Nothing is deleted under the orphan, the run ends
    with rc 0, and the table equals an uninterrupted local run's. The orphan is suspended until the
    new job says it waits, so that the two overlap however fast either starts."""
    wf = copy_workflow(tmp_path / "slurm")
    cmd = SNAKEMAKE + [TRAINING_TARGET, *SLURM, *_training_config(wf)]
    proc = subprocess.Popen(cmd, cwd=wf, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    orphan, _ = _training_job(wf, proc, epochs=2)
    proc.kill()  # kill -9: Snakemake leaves its lock and its running job behind
    proc.communicate(timeout=60)
    assert orphan, "the training job was never seen running with a checkpoint"
    subprocess.run(["scontrol", "suspend", orphan], check=True)
    try:
        unlock = subprocess.run(SNAKEMAKE + [TRAINING_TARGET, "--unlock", *_training_config(wf)], cwd=wf,
                                capture_output=True, text=True, timeout=300)
        assert unlock.returncode == 0, unlock.stdout[-2000:] + unlock.stderr[-2000:]
        again = background(cmd[len(SNAKEMAKE):], wf)  # the same command, its output in run.log
        logs = wf / "results" / "quick" / "logs" / "RP" / "RP-F3"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and again.poll() is None and "is being trained by" not in "".join(
                p.read_text() for p in logs.glob("group0.log*")):
            time.sleep(0.5)
    finally:
        subprocess.run(["scontrol", "resume", orphan], check=False)
    _finish(again, wf)  # rc 0
    said = "".join(p.read_text() for p in logs.glob("group0.log*"))
    assert "is being trained by" in said, said[-3000:]  # the second job waited for the orphan: one writer
    assert "FileNotFoundError" not in said and _job_state(orphan)[0] == "COMPLETED"
    got, want = (pd.read_csv(d / TRAINING_TARGET).drop(columns=["seconds", "train_seconds"])
                 for d in (wf, uninterrupted()))
    pd.testing.assert_frame_equal(got, want, check_exact=True)
