"""A damaged result is named, never used (on a copy of the shared tiny build): a part file, a
table, a mask file and a trained net, cut short or with bytes changed in place, are moved aside
before the run, each named with the command that rebuilds it; a target's own file is rebuilt by
the run, every one to the same content as before; a damaged input that only its reader can see
(its file time kept) stops that job with one line naming the file and the command that rebuilds
it, and that command works."""

import os
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import copy_build, snakemake
from reluinit import integrity

pytestmark = pytest.mark.workflow

Q = Path("results/quick")


def _same_table(a: Path, b: Path) -> None:
    """Equal tables, wall-clock columns aside."""
    x, y = pd.read_csv(a), pd.read_csv(b)
    clock = [c for c in x.columns if "seconds" in c]
    pd.testing.assert_frame_equal(x.drop(columns=clock), y.drop(columns=clock))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path, keep_time: bool = False) -> None:
    """16 bytes inverted in the middle of the file, its size unchanged (and its time, if asked)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid: mid + 16] = bytes(b ^ 0xFF for b in data[mid: mid + 16])
    path.write_bytes(bytes(data))
    if keep_time:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _moved(run, wf: Path, path: Path) -> str:
    """The command the run's line about ``path`` gives to rebuild it."""
    rel = path.relative_to(wf)
    line = next(l for l in run.stderr.splitlines() if l.startswith(f"{rel} is damaged ("))
    assert f"moved to {rel}.damaged, never read" in line, line
    return line.split("or now with `", 1)[1].rstrip("`.")


def test_damaged_tables_are_rebuilt_and_a_damaged_part_file_is_moved_aside_and_rebuilt_the_same(tiny_build, tmp_path):
    wf = copy_build(tiny_build, tmp_path / "wf")
    part, cut_table, flipped_table = (wf / Q / "OP/OP-F1/all-parts.csv", wf / Q / "OP/OP-F2.csv",
                                      wf / Q / "OP/OP-F3.csv")
    originals = {p: tmp_path / p.name for p in (part, cut_table, flipped_table)}
    for p, copy in originals.items():
        copy.write_bytes(p.read_bytes())
    _cut(part)
    _cut(cut_table)
    _flip(flipped_table)
    run = snakemake("op_f1", "op_f2", "op_f3", "--cores", "2", "--config", "scale=quick", cwd=wf)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "the same size as written but other bytes" in run.stderr
    for table in (cut_table, flipped_table):  # the targets' own files: rebuilt by this run
        _moved(run, wf, table)
        _same_table(table, originals[table])
    fix = _moved(run, wf, part)  # read by a job that had nothing to do: rebuilt by its command
    assert fix == "snakemake results/quick/OP/OP-F1/all-parts.csv --cores 1 --config scale=quick"
    rebuilt = snakemake(*fix.split()[1:], cwd=wf)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    _same_table(part, originals[part])


def test_damaged_masks_and_trained_nets_are_moved_aside_and_rebuilt_the_same(tiny_build, tmp_path):
    wf = copy_build(tiny_build, tmp_path / "wf")
    masks, net = wf / Q / "RP/RP-F3/masks/group0.pt", wf / Q / "trained/LR-MNIST/d4w16-run0.pt"
    before = {"masks": torch.load(masks, weights_only=True), "net": torch.load(net, weights_only=True)}
    _flip(masks)
    _cut(net)
    run = snakemake("rp_f3", "lr_f7", "--cores", "2", "--config", "scale=quick", cwd=wf)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{masks.relative_to(wf)} is damaged (the same size as written but other bytes)" in run.stderr
    for path in (masks, net):
        rebuilt = snakemake(*_moved(run, wf, path).split()[1:], cwd=wf)
        assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    after = {"masks": torch.load(masks, weights_only=True), "net": torch.load(net, weights_only=True)}
    assert repr(after["masks"]) == repr(before["masks"])  # the same bits, facts and seeds
    assert all(torch.equal(a["weights"][i], b["weights"][i]) for a, b in zip(after["net"], before["net"])
               for i in range(len(a["weights"])))


def test_a_damaged_input_its_reader_finds_stops_the_job_with_the_fix(tiny_build, tmp_path):
    """Bytes changed with the file's time put back: only the job that reads the masks can tell."""
    wf = copy_build(tiny_build, tmp_path / "wf")
    # Snakemake sets its outputs' times after a job: a run's sweep hashes those once and re-records
    assert integrity.sweep(wf / Q) == []
    masks = Q / "RP/RP-F3/masks/group0.pt"
    _flip(wf / masks, keep_time=True)
    part = Q / "RP/RP-F3/group0.csv"
    run = snakemake(str(part), "--force", "--cores", "1", "--config", "scale=quick", cwd=wf)
    assert run.returncode != 0
    fix = f"snakemake {masks} --force --cores 1 --config scale=quick"
    last = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()][-1]
    assert last == f"{masks} is damaged: the same size as written but other bytes. Rebuild it with `{fix}`", last
    assert f"{masks} is damaged" in (wf / Q / "logs/RP/RP-F3/measured/group0.log").read_text()  # the job's own log says why
    rebuilt = snakemake(*fix.split()[1:], cwd=wf)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    again = snakemake(str(part), "--cores", "1", "--config", "scale=quick", cwd=wf)
    assert again.returncode == 0, again.stderr[-2000:]
