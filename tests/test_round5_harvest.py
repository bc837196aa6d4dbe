"""Issue 97: a crafted checkpoint is never run and is refused in one sentence of ours (never torch's
advice to load it with ``weights_only=False``); the harvest refuses an ``--out`` it cannot write and
a ``--reference`` that is no reference tree, before any part runs."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import ROOT
from reluinit import checkpoint_file, harvest, pruning, training
from reluinit.experiments import lr_train

# torch's words when weights_only refuses a file: none may reach the user
TORCH_ADVICE = ("weights_only=False", "`weights_only` set to `False`", "Weights only load failed", "will likely succeed")


class _Touch:
    """Unpickled, it would create ``marker``: the proof that a load ran the pickle's code."""

    def __init__(self, marker: Path, how: str):
        self.marker, self.how = marker, how

    def __reduce__(self):
        if self.how == "system":
            return os.system, (f"touch '{self.marker}'",)
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


def _crafted(path: Path, marker: Path, how: str, fmt: str) -> Path:
    payload = {"history": [], "model": _Touch(marker, how)}
    if fmt == "torch":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    return path


def _no_advice(text: str) -> None:
    for words in TORCH_ADVICE:
        assert words not in text, text


@pytest.mark.parametrize("how", ["system", "exec"])
@pytest.mark.parametrize("fmt", ["torch", "pickle"])
def test_a_crafted_checkpoint_never_runs_and_is_refused_by_name_without_torchs_advice(tmp_path, how, fmt):
    marker = tmp_path / "ran"
    path = _crafted(tmp_path / "run0.pt", marker, how, fmt)
    for load in (training.load_checkpoint, lr_train.load, pruning.load_masks, checkpoint_file.load):
        with pytest.raises(checkpoint_file.NotACheckpoint) as e:
            load(path)
        said = str(e.value)
        assert said.startswith(f"{path} is not a checkpoint this pipeline wrote ("), said
        assert f"delete it and rebuild it with `rm {path} && snakemake" in said and len(said.splitlines()) == 1, said
        _no_advice(said)
        assert e.value.__suppress_context__  # a traceback does not show torch's error under ours
    assert not marker.exists() and path.exists()


def test_a_training_run_moves_a_crafted_checkpoint_aside_never_run_and_logs_no_advice(tmp_path, caplog):
    """A run resuming from its checkpoint (a training job, a harvest) finds a crafted one: moved aside,
    the run starts afresh, and the log's one line says so in our words."""
    marker = tmp_path / "ran"
    path = _crafted(tmp_path / "run0.pt", marker, "system", "torch")
    caplog.set_level("INFO", logger="reluinit")
    assert training.Checkpoint(path, {"seed": 1}).load() is None
    said = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{path} is not a checkpoint this pipeline wrote (it would call "), said
    assert f"moved to {path}.damaged, never loaded" in said[0] and "the run starts afresh" in said[0], said
    _no_advice(caplog.text)
    assert not marker.exists() and not path.exists() and (tmp_path / "run0.pt.damaged").exists()


def test_a_jobs_log_names_a_crafted_input_with_its_fix_and_never_torchs_advice(tmp_path):
    """A workflow job (LR's measurement, reading its training job's checkpoints) that meets a crafted
    file: its log's "what to do" line (the one the run's final words repeat) is our sentence."""
    marker, log = tmp_path / "ran", tmp_path / "job.log"
    (tmp_path / "results" / "quick" / "LR" / "LR-F5").mkdir(parents=True)
    path = _crafted(tmp_path / "results" / "quick" / "LR" / "LR-F5" / "train.pt", marker, "system", "torch")
    code = ("import sys; from reluinit.pipeline import jobs; from reluinit.experiments import lr_train; "
            f"jobs.start({str(log)!r}, threads=1); lr_train.load({str(path)!r})")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode != 0
    text = log.read_text()
    todo = [line for line in text.splitlines() if "what to do: " in line]
    assert len(todo) == 1 and todo[0].split("what to do: ", 1)[1].startswith(
        f"{path} is not a checkpoint this pipeline wrote (it would call posix.system when loaded"), todo
    assert "--config scale=quick" in todo[0], todo
    _no_advice(text + run.stderr)
    assert not marker.exists()


def _stubbed(monkeypatch) -> list:
    """``harvest.harvest`` replaced by a recorder: a refusal must come before it is called."""
    ran = []
    monkeypatch.setattr(harvest, "harvest", lambda *a, **k: ran.append(a) or pd.DataFrame(columns=harvest.COLUMNS))
    return ran


def test_the_harvest_refuses_an_out_it_cannot_write_before_any_part(tmp_path, monkeypatch, capsys):
    """A read-only folder (as the system answers for a read-only mount, or for a user without the
    right) was taken, and the harvest failed with a traceback at its first write."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: Path(p) != locked and real(p, mode, *a, **k))
    ran = _stubbed(monkeypatch)
    for out in (locked, locked / "harvest"):
        with pytest.raises(SystemExit):
            harvest.main(["--budget-s", "600", "--out", str(out), "--reference", str(ROOT / "reference" / "paper")])
        said = capsys.readouterr().err.splitlines()[-1]
        assert f"{locked} cannot be made or written to (" in said and f"results tree {out} there" in said, said
        assert said.endswith("give --out a folder you can write to, e.g. --out harvest"), said
    assert not ran and list(locked.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no folder can be made")
def test_the_harvest_refuses_an_out_that_cannot_be_made_before_any_part(tmp_path, monkeypatch, capsys):
    """``/proc/<name>`` cannot be made, even by root: one sentence naming it, not an OSError's traceback."""
    monkeypatch.setattr(harvest, "candidates", lambda *a, **k: (pd.DataFrame(columns=["experiment", "part", "hours"]), {}))
    monkeypatch.setattr(harvest, "run_part", lambda *a, **k: pytest.fail("a part ran"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as e:
        harvest.main(["--budget-s", "600", "--tiny", "--out", "/proc/reluinit-harvest-out", "--reference",
                      str(tmp_path / "empty")])
    # refused once /proc/<name> could not be made (root), or by argparse (no right to write into /proc)
    said = e.value.code if isinstance(e.value.code, str) else capsys.readouterr().err.splitlines()[-1]
    assert "/proc" in said and " cannot be made or written to (" in said, said
    assert "results tree /proc/reluinit-harvest-out there: give --out a folder you can write to" in said, said


def test_the_harvest_refuses_a_reference_that_is_no_reference_tree_before_any_part(tmp_path, monkeypatch, capsys):
    """``--reference`` pointing nowhere was taken, and every part ran again."""
    ran = _stubbed(monkeypatch)
    afile, other = tmp_path / "notes.txt", tmp_path / "other"
    afile.write_text("mine")
    other.mkdir()
    (other / "something.csv").write_text("a\n1\n")
    for bad, why in ((tmp_path / "nowhere", "does not exist"), (afile, "is a file"),
                     (other, "holds neither runs.csv nor a paper's folder")):
        with pytest.raises(SystemExit):
            harvest.main(["--budget-s", "600", "--out", str(tmp_path / "out"), "--reference", str(bad)])
        said = capsys.readouterr().err.splitlines()[-1]
        assert f"{bad} {why}" in said and "so every part would run again" in said and "--reference reference/paper" in said, said
    assert not ran and not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".gitkeep").touch()  # a folder holding dotfiles alone holds no part
    for good in (ROOT / "reference" / "paper", tmp_path / "empty"):
        assert harvest.reference_folder(str(good)) == str(good)
