"""The usual mistakes end with one sentence that says what to do, as the run's last words: a
missing dataset offline, a catalogue id typed as a target, the SLURM profile without SLURM."""

import os
import subprocess
import sys

import pytest

from conftest import SNAKEMAKE

pytestmark = pytest.mark.workflow

# Any download goes to a closed local port: the fetch fails at once, and no test ever downloads.
OFFLINE = {k: "http://127.0.0.1:9" for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}


def _run(workdir, *args, path=None, env=None):
    full = {**os.environ, **(env or {}), "NO_PROXY": "", "no_proxy": ""}
    if path is not None:
        full["PATH"] = path
    run = subprocess.run(SNAKEMAKE + list(args), cwd=workdir, capture_output=True, text=True, timeout=900, env=full)
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    return run, lines[-1] if lines else ""


def _path_without(tmp_path, *commands):
    """A PATH with every command of this machine but ``commands`` (links in one folder)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for d in [os.path.dirname(sys.executable)] + os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name not in commands and not os.path.lexists(folder / name):
                (folder / name).symlink_to(os.path.join(d, name))
    return str(folder)


def test_missing_dataset_offline_ends_with_where_to_put_it(workdir, tmp_path):
    run, last = _run(workdir, "tg_f2", "--cores", "1", "--config", f"data_dir={tmp_path / 'data'}", env=OFFLINE)
    assert run.returncode != 0
    assert "Download" in last and f"{tmp_path / 'data'}/MNIST/raw/" in last, last
    assert "then rerun" in last and "`--config scale=quick`, which needs no download" in last, last
    output = run.stdout + run.stderr
    assert "Traceback" not in output, output[-3000:]
    assert "Shell command: None" not in output  # script jobs print no empty shell command
    assert output.count(last) == 1  # said once, at the end
    assert not (tmp_path / "data" / "fetched" / "mnist.json").exists()


def test_a_catalogue_id_as_target_names_its_short_name(workdir):
    run, last = _run(workdir, "OP-F1", "--cores", "1")
    assert run.returncode != 0
    assert "`snakemake op_f1`" in last and "--list-target-rules" in last, last
    assert "No rule to produce" not in run.stdout + run.stderr
    run, last = _run(workdir, "op_f1", "-n", "--cores", "1")  # the short name still works
    assert run.returncode == 0, run.stderr[-2000:]


def test_slurm_profile_without_sbatch_stops_in_one_sentence(workdir, tmp_path):
    run, last = _run(workdir, "op_f1", "--profile", "profiles/slurm", path=_path_without(tmp_path, "sbatch"))
    assert run.returncode != 0
    assert "`sbatch` is not on the PATH" in last and "leave out `--profile profiles/slurm`" in last, last
    assert "sacct" not in run.stdout + run.stderr
    assert "Submitted" not in run.stdout + run.stderr


def test_slurm_profile_without_a_controller_stops_in_one_sentence(workdir, tmp_path):
    """SLURM's commands are there but its controller is not: they fail the way they do then."""
    fake = tmp_path / "slurm"
    fake.mkdir()
    calls = tmp_path / "calls"
    for name in ("sbatch", "scontrol", "sinfo", "sacct", "squeue"):
        script = fake / name
        script.write_text("#!/bin/sh\n"
                          f"echo {name} >> {calls}\n"
                          f"echo '{name}: error: Unable to contact slurm controller (connect failure)' >&2\n"
                          "exit 1\n")
        script.chmod(0o755)
    run, last = _run(workdir, "op_f1", "--profile", "profiles/slurm", path=f"{fake}{os.pathsep}{os.environ['PATH']}")
    assert run.returncode != 0
    assert "SLURM controller does not answer" in last and "Unable to contact slurm controller" in last, last
    assert "start slurmctld" in last
    assert "sbatch" not in calls.read_text().split()  # stopped before submitting anything
