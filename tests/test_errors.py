"""The usual mistakes end with one sentence that says what to do, as the run's last words: a
missing dataset offline, a catalogue id typed as a target, the SLURM profile without SLURM."""

import os
import subprocess
import sys

import pandas as pd
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


def test_an_unknown_target_lists_its_papers_targets(workdir):
    """``snakemake op_f9`` got Snakemake's generic "No rule to produce" where a known id gets a hint."""
    run, last = _run(workdir, "op_f9", "--cores", "1")
    assert run.returncode != 0
    assert last == ("op_f9 names no experiment of config.yaml: the targets of OP are op_f1, op_f2, op_f3; "
                    "`snakemake --list-target-rules` lists every target."), last


def test_a_catalogue_id_hint_keeps_the_runs_config_and_config_files(workdir):
    """The hint dropped `--config` (and `--configfile`): `snakemake op_f1` then built the paper scale
    in results/ rather than what the user asked for."""
    (workdir / "mine.yaml").write_text("experiments: {OP-F1: {quick: {widths: [100, 500]}}}\n")
    run, last = _run(workdir, "OP-F1", "--cores", "1", "--configfile", "mine.yaml",
                     "--config", "scale=quick", "results=elsewhere")
    assert run.returncode != 0
    assert "`snakemake op_f1 --configfile mine.yaml --config scale=quick results=elsewhere`" in last, last


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


def test_device_cuda_without_cuda_stops_before_any_job(workdir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run, last = _run(workdir, "op_f1", "--cores", "1", "--config", "scale=quick", "device=cuda")
    assert run.returncode != 0
    assert last.startswith("device=cuda in the config, but torch sees no CUDA device") and "device=auto" in last, last
    assert not (workdir / "results" / "quick" / "OP").exists()  # no job ran


def test_an_unknown_recipe_stops_the_run_naming_its_key(workdir):
    config = workdir / "config.yaml"
    config.write_text(config.read_text().replace("recipe: rp-mnist", "recipe: rp-minst", 1))
    run, last = _run(workdir, "rp_f3", "-n", "--cores", "1")
    assert run.returncode != 0
    assert "key 'experiments.RP-F3.paper.recipe' = 'rp-minst' names no recipe under `recipes:`" in last, last
    assert "KeyError" not in run.stdout + run.stderr


def test_a_config_that_is_not_yaml_or_asks_for_too_much_memory_stops_naming_the_line_or_setting(workdir):
    config = workdir / "config.yaml"
    good = config.read_text()
    config.write_text(good.replace("\nscale: paper", "\nscale: paper: quick", 1))  # mapping values not allowed here
    run, last = _run(workdir, "op_f1", "-n", "--cores", "1")
    line = next(i for i, text in enumerate(config.read_text().splitlines(), 1) if text.startswith("scale: paper: quick"))
    assert run.returncode != 0
    assert last.startswith("config.yaml, line ") and "is not valid YAML" in last, last
    assert last.startswith(f"config.yaml, line {line}, column 13 is not valid YAML: mapping values are not allowed")
    config.write_text(good)
    (workdir / "wide.yaml").write_text("experiments:\n  OP-F1:\n    quick:\n      widths: [100, 70000]\n")
    run, last = _run(workdir, "op_f1", "-n", "--cores", "1", "--configfile", "wide.yaml", "--config", "scale=quick")
    assert run.returncode != 0 and not (workdir / "results" / "quick" / "OP").exists()
    assert last.startswith("OP-F1 at the quick scale needs at least 366.5 GB (width 70,000"), last
    assert last.endswith("lower its widths or depth (or n_samples) under experiments.OP-F1.quick in the config"), last
    (workdir / "wide.yaml").write_text("experiments:\n  LR-F2:\n    quick:\n      n_nets: 1000000000\n")
    run, last = _run(workdir, "lr_f2", "-n", "--cores", "1", "--configfile", "wide.yaml", "--config", "scale=quick")
    assert run.returncode != 0  # planning 10^9 parts never ended
    assert last.startswith("experiments.LR-F2.quick: n_nets = 1,000,000,000 is more than the 10,000,000 any count"), last
    (workdir / "wide.yaml").write_text("experiments:\n  OP-F1:\n    quick:\n      widths: [100, many]\n")
    run, last = _run(workdir, "op_f1", "-n", "--cores", "1", "--configfile", "wide.yaml", "--config", "scale=quick")
    assert last.startswith("wide.yaml, line 4: invalid config: key 'experiments.OP-F1.quick.widths[1]' = 'many'"), last


def test_an_overlay_configfile_changes_one_experiments_settings(workdir):
    """... and a command the run suggests repeats its config file and results folder (one that
    dropped `results=` failed with "No rule to produce")."""
    (workdir / "mine.yaml").write_text("experiments: {OP-F1: {quick: {widths: [100, 500]}}}\n")
    settings = ("--configfile", "mine.yaml", "--config", "scale=quick", "results=elsewhere")
    run, _ = _run(workdir, "op_f1", "--cores", "2", *settings)
    assert run.returncode == 0, run.stderr[-2000:]
    path = workdir / "elsewhere" / "quick" / "OP" / "OP-F1.csv"
    table = pd.read_csv(path)
    assert sorted(table["width"].unique()) == [100, 500]  # config.yaml's quick widths are 100, 500, 4060
    path.write_text(path.read_text()[:200])
    run, _ = _run(workdir, "op_f1", "--cores", "2", *settings)  # moved aside and rebuilt
    fix = ("snakemake elsewhere/quick/OP/OP-F1.csv --cores 1 --configfile mine.yaml --config scale=quick "
           "results=elsewhere")
    assert run.returncode == 0 and f"or now with `{fix}`" in run.stderr, run.stderr[-2000:]
    again, _ = _run(workdir, "-n", "--force", *fix.split()[1:])  # the command plans the job that writes the file
    assert again.returncode == 0 and "figures_op" in again.stdout + again.stderr, again.stderr[-2000:]
    pd.testing.assert_frame_equal(pd.read_csv(path).drop(columns="seconds", errors="ignore"),
                                  table.drop(columns="seconds", errors="ignore"))


def test_a_damaged_dataset_file_is_named_with_the_command_that_fetches_it_again(workdir, tmp_path):
    from test_datasets import make_mnist

    data = tmp_path / "data"
    make_mnist(data)
    raw = data / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    raw.write_bytes(raw.read_bytes()[:500])
    run, last = _run(workdir, "tg_f2", "--cores", "1", "--config", f"data_dir={data}", env=OFFLINE)
    assert run.returncode != 0
    assert f"{raw} is damaged (500 bytes where its header promises 3,936): delete it and fetch mnist again with " \
           f"`snakemake {data}/fetched/mnist.json --force --cores 1 --config data_dir={data}`" in last, last
    assert "Download" not in last and "Traceback" not in (run.stdout + run.stderr)
