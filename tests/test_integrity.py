"""Results prove they are whole (reluinit.integrity): a sealed file that changed is found, by its
reader (one line: the file, what is wrong, the command that rebuilds it) or by the sweep before a
run (moved aside, so that the run rebuilds it); a checkpoint that does not load is a fresh start."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from reluinit import integrity
from reluinit.pipeline import jobs
from reluinit.training import Checkpoint, DeviceData, Recipe, fit, save_checkpoint

TABLE = pd.DataFrame({"width": [100, 500, 1000] * 4, "ratio": [0.5 + i / 10 for i in range(12)]})


def _table(tmp_path, name="results/quick/OP/OP-F1.csv"):
    path = tmp_path / name
    jobs.write_table(TABLE.copy(), path, experiment="OP-F1")
    return path


def test_a_written_table_verifies_and_its_seal_says_its_shape(tmp_path):
    path = _table(tmp_path)
    integrity.verify(path)
    seal = json.loads(integrity.seal_path(path).read_text())
    assert seal["rows"] == 12 and seal["columns"] == ["experiment", "width", "ratio"]
    assert seal["bytes"] == path.stat().st_size and seal["sha256"] == integrity.digest(path)
    assert not list(path.parent.glob("*.tmp"))


def test_a_truncated_table_is_named_with_its_rows_and_the_rebuild_command(tmp_path):
    path = _table(tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(integrity.DamagedFile) as err:
        jobs.read_table(path)
    assert str(err.value) == (f"{path} is damaged: {len(text) // 2} bytes where {len(text)} were written, "
                              f"{len(pd.read_csv(path))} rows of 12. Rebuild it with "
                              f"`snakemake {path} --force --cores 1 --config scale=quick "
                              f"results={tmp_path / 'results'}`")  # not the working folder's results/


def test_same_size_bytes_are_caught_and_a_paper_table_needs_no_scale(tmp_path):
    path = _table(tmp_path, "results/paper/OP/OP-F1.csv")
    data = bytearray(path.read_bytes())
    data[40:44] = b"9999"
    path.write_bytes(bytes(data))
    with pytest.raises(integrity.DamagedFile, match="the same size as written but other bytes. Rebuild it with "
                                                    f"`snakemake {path} --force --cores 1 "
                                                    f"--config results={tmp_path / 'results'}`$"):
        integrity.verify(path)


def test_a_reader_racing_a_writer_that_saves_twice_reads_a_whole_file_not_a_damaged_one(tmp_path, monkeypatch):
    """A checkpoint saved every epoch: the reader reads seal n, the writer then writes epochs n+1
    and n+2 (seal and file), and the reader hashes file n+2. Whole, so not damaged; the check
    still fails for a file that matches no seal (CI once read this race as damage)."""
    path = tmp_path / "ckpt.pt"
    for epoch in range(2):
        save_checkpoint({"epoch": epoch}, path)
    digest, saves, writing = integrity.digest, iter([2, 3]), []

    def writer_moves_on(p):
        epoch = None if writing or p != path else next(saves, None)
        if epoch is not None:  # between the reader's seal and its hash, the writer saves again
            writing.append(epoch)
            save_checkpoint({"epoch": epoch, "history": list(range(epoch))}, path)
            writing.clear()
        return digest(p)

    monkeypatch.setattr(integrity, "digest", writer_moves_on)
    integrity.verify(path)
    assert torch.load(path, weights_only=True)["epoch"] == 3
    monkeypatch.setattr(integrity, "digest", digest)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(integrity.DamagedFile, match="bytes where"):
        integrity.verify(path)


def test_a_file_without_a_seal_is_read_as_it_is(tmp_path):
    path = tmp_path / "restored.csv"
    TABLE.to_csv(path, index=False)
    integrity.verify(path)


def test_a_seal_accepts_the_file_it_replaced_so_a_kill_between_the_renames_is_safe(tmp_path):
    path = _table(tmp_path)
    old = path.read_bytes()
    jobs.write_table(TABLE.assign(ratio=1.0), path)  # a rerun writes another table
    path.write_bytes(old)  # as if killed after the seal's rename, before the table's
    integrity.verify(path)


def test_the_sweep_moves_aside_what_changed_and_keeps_what_was_only_touched(tmp_path):
    cut, flipped, touched, whole = (_table(tmp_path, f"results/quick/T{i}.csv") for i in range(4))
    cut.write_text(cut.read_text()[:30])
    data = bytearray(flipped.read_bytes())
    data[-3] = ord("7") if data[-3] != ord("7") else ord("8")
    flipped.write_bytes(bytes(data))
    os.utime(touched, ns=(1, 1))
    moved = integrity.sweep(tmp_path / "results")
    assert sorted((p.name, why) for p, _, why in moved) == sorted([
        ("T0.csv", f"30 bytes where {whole.stat().st_size} were written"),
        ("T1.csv", "the same size as written but other bytes")])
    assert not cut.exists() and (tmp_path / "results/quick/T0.csv.damaged").exists()
    assert integrity.seal_path(tmp_path / "results/quick/T0.csv.damaged").exists()
    assert touched.exists() and whole.exists()
    assert integrity.sweep(tmp_path / "results") == []  # the touched file's time is now recorded


def test_uncaught_errors_reach_the_job_log(tmp_path):
    log = tmp_path / "job.log"
    code = f"from reluinit.pipeline import jobs\njobs.start({str(log)!r}, threads=None)\nraise ValueError('the loss table is empty')"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 1
    text = log.read_text()
    assert "the job failed: ValueError: the loss table is empty" in text and "Traceback" in text


# --- checkpoints --------------------------------------------------------------------------------


def _data(n=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return DeviceData(torch.randn(n, 6, generator=gen), torch.arange(n) % 3, "cpu")


def _run(checkpoint, epochs=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    recipe = Recipe(lr=0.05, batch_size=16, epochs=epochs, schedule="constant")
    return model, fit(model, _data(), _data(32, 1), recipe, seed=1, checkpoint=checkpoint)


@pytest.mark.parametrize("damage", ["truncated", "empty", "flipped", "random"])
def test_a_damaged_checkpoint_is_moved_aside_and_the_run_starts_afresh(tmp_path, caplog, damage):
    path = tmp_path / "run.pt"
    _run(Checkpoint(path), epochs=1)
    data = path.read_bytes()
    damaged = {"truncated": data[: len(data) // 2], "empty": b"",
               "flipped": data[:-200] + bytes(b ^ 0xFF for b in data[-200:-184]) + data[-184:],
               "random": os.urandom(len(data))}[damage]
    path.write_bytes(damaged)
    caplog.set_level("INFO", logger="reluinit.training")
    model, run = _run(Checkpoint(path))
    lines = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"{path} is damaged (") and "the run starts afresh" in lines[0]
    assert (tmp_path / "run.pt.damaged").read_bytes() == damaged
    assert run.final["epoch"] == 3 and not any("resumed" in r.getMessage() for r in caplog.records)
    fresh, _ = _run(None)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))


def test_a_checkpoint_is_sealed_and_resumes_when_whole(tmp_path):
    path = tmp_path / "run.pt"
    save_checkpoint({"x": torch.arange(3)}, path)
    integrity.verify(path)
    assert json.loads(integrity.seal_path(path).read_text())["bytes"] == path.stat().st_size


@pytest.mark.parametrize("seal", ["null", "42", "[]", '{"sha256": "x"}', "{not json"])
def test_an_ill_typed_or_unreadable_seal_is_named_and_its_file_treated_as_damaged(tmp_path, seal):
    """A seal that is JSON but no seal's record (or no JSON) stopped every target with an
    AttributeError naming no file; now the sweep names the file and moves it aside, and a reader
    refuses it naming the seal."""
    path = _table(tmp_path)
    integrity.seal_path(path).write_text(seal)
    with pytest.raises(integrity.DamagedFile, match=r"OP-F1\.csv\.seal, the seal of .*OP-F1\.csv, is unreadable"):
        integrity.verify(path)
    moved = integrity.sweep(tmp_path / "results")
    assert [(p, why.split(" (")[0]) for p, _, why in moved] == [(path, "its seal OP-F1.csv.seal is unreadable")]
    assert not path.exists() and path.with_name("OP-F1.csv.damaged").exists()


def test_the_sweep_writes_nothing_it_cannot_in_a_read_only_tree(tmp_path, monkeypatch):
    """Right after a build Snakemake has touched its outputs: the sweep re-records their times, which
    a read-only tree refuses; it then leaves the seal as it was and the run goes on, and a damaged
    file it cannot move aside is named, left in place (its readers refuse it)."""
    touched, cut = _table(tmp_path, "results/quick/A.csv"), _table(tmp_path, "results/quick/B.csv")
    os.utime(touched, ns=(1, 1))
    cut.write_text(cut.read_text()[:30])
    seals = {p: integrity.seal_path(p).read_text() for p in (touched, cut)}

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(integrity.os, "replace", read_only)
    monkeypatch.setattr(type(touched), "write_text", read_only)
    moved = integrity.sweep(tmp_path / "results")
    assert [(p, aside) for p, aside, _ in moved] == [(cut, cut)]
    assert "could not be moved aside (Read-only file system)" in moved[0][2]
    assert {p: integrity.seal_path(p).read_text() for p in (touched, cut)} == seals  # nothing written
    with pytest.raises(integrity.DamagedFile, match="B.csv is damaged"):
        integrity.verify(cut)


def test_a_file_whose_seal_was_deleted_is_unverified_not_read_as_unsealed(tmp_path):
    """Delete a table's seal, then cut the table: the tree's list of what it sealed still names it,
    so the reader refuses it and the sweep moves it aside (it used to be read, half, as a file
    written before seals)."""
    path = _table(tmp_path)
    assert path in integrity.sealed(tmp_path / "results" / "quick")
    integrity.seal_path(path).unlink()
    path.write_text(path.read_text()[:60])
    with pytest.raises(integrity.DamagedFile, match=r"OP-F1\.csv has lost its seal .*\.sealed lists it.*snakemake "):
        integrity.verify(path)
    moved = integrity.sweep(tmp_path / "results" / "quick")
    assert moved == [(path, path.with_name("OP-F1.csv.damaged"), "its seal is missing, so it cannot be checked")]
    unsealed = tmp_path / "results" / "quick" / "old.csv"  # never sealed by the tree: read as it is
    TABLE.to_csv(unsealed, index=False)
    integrity.verify(unsealed)
    assert integrity.sweep(tmp_path / "results" / "quick") == []


def test_a_suggested_command_keeps_the_runs_results_folder_and_config_files(monkeypatch):
    """A rebuild command that dropped `results=` failed with "No rule to produce" for a run with its
    results elsewhere; it now repeats the folder, the scale and the run's config files (target first:
    `--config` takes every word after it)."""
    monkeypatch.delenv(integrity.CONFIGFILES_ENV, raising=False)
    assert integrity.rebuild_command("results/paper/OP/OP-F1.csv") == "snakemake results/paper/OP/OP-F1.csv --force --cores 1"
    assert integrity.rebuild_command("elsewhere/quick/OP/OP-F1.csv") == (
        "snakemake elsewhere/quick/OP/OP-F1.csv --force --cores 1 --config scale=quick results=elsewhere")
    monkeypatch.setenv(integrity.CONFIGFILES_ENV, "mine.yaml")
    assert integrity.rebuild_command("out/paper/OP/OP-F1/all-parts.csv") == (
        "snakemake out/paper/OP/OP-F1/all-parts.csv --force --cores 1 --configfile mine.yaml --config results=out")


def test_a_results_folder_named_results_elsewhere_is_kept_in_the_command(monkeypatch):
    """`results=/scratch/me/results` was dropped because the folder's last name is `results` (the
    command then failed with "No rule to produce"): only config.yaml's own `results` is left out, and
    only where the run has no config file of its own (which may set another)."""
    monkeypatch.delenv(integrity.CONFIGFILES_ENV, raising=False)
    assert integrity.rebuild_command("/scratch/me/results/quick/OP/OP-F1.csv") == (
        "snakemake /scratch/me/results/quick/OP/OP-F1.csv --force --cores 1 --config scale=quick "
        "results=/scratch/me/results")
    assert integrity.rebuild_command("other/results/paper/OP/OP-F1.csv", force=False) == (
        "snakemake other/results/paper/OP/OP-F1.csv --cores 1 --config results=other/results")
    assert integrity.rebuild_command(Path.cwd() / "results" / "paper" / "OP" / "OP-F1.csv").endswith(" --cores 1")
    monkeypatch.setenv(integrity.CONFIGFILES_ENV, "mine.yaml")  # mine.yaml may set another folder
    assert integrity.rebuild_command("results/paper/OP/OP-F1.csv") == (
        "snakemake results/paper/OP/OP-F1.csv --force --cores 1 --configfile mine.yaml --config results=results")


def test_a_dataset_fetch_command_keeps_the_runs_data_folder_and_config_files(monkeypatch):
    """The fetch commands a damaged or missing dataset suggests dropped `data_dir=` and `--configfile`."""
    monkeypatch.delenv(integrity.CONFIGFILES_ENV, raising=False)
    assert integrity.rebuild_command("data/fetched/mnist.json", data_dir="data") == (
        "snakemake data/fetched/mnist.json --force --cores 1")
    assert integrity.rebuild_command("/big/data/fetched/mnist.json", force=False, data_dir="/big/data") == (
        "snakemake /big/data/fetched/mnist.json --cores 1 --config data_dir=/big/data")
    monkeypatch.setenv(integrity.CONFIGFILES_ENV, "mine.yaml")
    assert integrity.rebuild_command("data/fetched/mnist.json", data_dir="data") == (
        "snakemake data/fetched/mnist.json --force --cores 1 --configfile mine.yaml --config data_dir=data")


def test_the_commands_defaults_are_config_yamls():
    config = yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())
    assert (config["results"], config["data_dir"]) == (integrity.DEFAULT_RESULTS, integrity.DEFAULT_DATA)


@pytest.mark.parametrize("damage", ["latin-1", "folder"])
def test_a_damaged_list_of_seals_is_named_with_its_fix_and_never_blocks_a_run(tmp_path, damage):
    """A `.sealed` that is not UTF-8, or a folder, crashed every Snakemake start with a traceback naming
    no file; now its readers go on, and the sweep names it, moves it aside and lists the seals again."""
    path = _table(tmp_path)
    tree = tmp_path / "results" / "quick"
    listed = tree / integrity.MANIFEST
    listed.unlink()
    if damage == "folder":
        listed.mkdir()
    else:
        listed.write_bytes("OP/Ö.csv\n".encode("latin-1"))
    why = "not UTF-8 text" if damage == "latin-1" else "is a directory"
    with pytest.raises(integrity.DamagedFile, match=rf"\.sealed, the list of what .*quick has sealed, is damaged "
                                                    rf"\({why}\): remove it with `rm -r .*\.sealed`"):
        integrity.sealed(tree)
    integrity.verify(path)  # a reader is not blocked
    unsealed = tree / "old.csv"
    TABLE.to_csv(unsealed, index=False)
    integrity.verify(unsealed)
    moved = integrity.sweep(tree)
    assert moved == [(listed, tree / ".sealed.damaged", why)]
    line = integrity.swept(*moved[0])
    assert line == (f"{listed}, the list of what {tree} has sealed, is damaged ({why}): moved to "
                    f"{tree / '.sealed.damaged'}, never read; listed again from the seals under {tree}; nothing to do.")
    assert integrity.sealed(tree) == {path}  # made again from the seals found
    assert integrity.sweep(tree) == []
    left = integrity.swept(listed, listed, f"{why}; it could not be moved aside (Read-only file system)")
    assert left.endswith(f"left in place, never read; remove it with `rm -r {listed}` (a run lists again the seals "
                         "it finds).")


def test_a_damaged_training_checkpoint_names_the_job_that_trains_it_not_a_rule_that_does_not_exist():
    """A run's resumable checkpoint is no rule's output: the sweep's line used to suggest
    `snakemake <checkpoint>`, which Snakemake refuses (MissingRuleException). It names the output
    of the job that trains the run (the part's record of trained runs, or the trained net of a `train_<spec>` job),
    each the inverse of where that job keeps its checkpoints."""
    from reluinit.pipeline import paths

    results = "results/quick"
    part = Path(paths.checkpoints(results, "TG-F6", "group0")) / "sw2-net0.pt"
    assert paths.trained_by(part) == Path(paths.trained_part(results, "TG-F6", "group0"))  # rule train_part
    net = Path(paths.train_checkpoint(results, "LR-MNIST", "d4w16", 3))
    assert paths.trained_by(net) == Path(paths.trained(results, "LR-MNIST", "d4w16", 3))
    assert paths.trained_by(Path(paths.part(results, "TG-F6", "group0"))) is None
    line = integrity.swept(part, part.with_name("sw2-net0.pt.damaged"), "1,000 bytes where 42,728 were written",
                           paths.trained_by(part))
    assert line == (f"{part} is damaged (1,000 bytes where 42,728 were written): moved to {part}.damaged, never "
                    f"read; nothing to do while results/quick/TG/TG-F6/trained/group0.json is whole. When that job "
                    f"runs again this run trains afresh and the others resume: `snakemake "
                    f"results/quick/TG/TG-F6/trained/group0.json --force --cores 1 --config scale=quick`.")


def test_a_list_of_seals_that_points_outside_its_tree_is_ignored(tmp_path):
    """`.sealed` lines such as `../../victim.txt` made the sweep move a file outside the results tree
    aside (its seal "missing"): a line that leaves the tree, by `..`, an absolute path or a link, is
    no file of the tree."""
    _table(tmp_path)
    tree = tmp_path / "results" / "quick"
    victims = [tmp_path / "victim.txt", tmp_path / "abs.txt", tmp_path / "away" / "linked.txt"]
    for v in victims:
        v.parent.mkdir(exist_ok=True)
        v.write_text("mine\n")
    (tree / "out").symlink_to(tmp_path / "away")
    with open(tree / integrity.MANIFEST, "a") as f:
        f.write(f"../../victim.txt\n{victims[1]}\nout/linked.txt\nOP/../../../victim.txt\n")
    assert integrity.sealed(tree) == {tree / "OP" / "OP-F1.csv"}
    assert integrity.sweep(tree) == []
    assert all(v.read_text() == "mine\n" for v in victims)
    assert not list(tmp_path.glob("**/*.damaged"))


@pytest.mark.parametrize("rows", ['"12"', "12.0", "null", "true", "-1", "[12]"])
def test_a_seal_whose_rows_is_not_a_count_names_the_file(tmp_path, rows):
    """A seal whose `rows` was not an integer ended in a ValueError or TypeError naming no file (when
    its table was cut, the message formatted the rows)."""
    path = _table(tmp_path)
    seal = integrity.seal_path(path)
    seal.write_text(seal.read_text().replace('"rows": 12', f'"rows": {rows}'))
    path.write_text(path.read_text()[:60])
    with pytest.raises(integrity.DamagedFile, match=r"OP-F1\.csv\.seal, the seal of .*OP-F1\.csv, is unreadable "
                                                    r"\(its rows are not a count but .*\): rebuild the file with `snakemake"):
        integrity.verify(path)
    moved = integrity.sweep(tmp_path / "results" / "quick")
    assert [(p, why.split(" (")[0]) for p, _, why in moved] == [(path, "its seal OP-F1.csv.seal is unreadable")]


@pytest.mark.workflow
def test_a_suggested_command_pasted_into_a_shell_works_from_a_folder_with_spaces_and_accents(tmp_path, monkeypatch):
    """The commands a message suggests are pasted into a shell: with results in `x y/résultats ü`
    (and a config file there too) every path is one word again, and Snakemake plans the job."""
    import shlex
    import subprocess

    from conftest import ROOT, SNAKEMAKE

    results = tmp_path / "x y" / "résultats ü"
    mine = tmp_path / "x y" / "my config ü.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("device: cpu\n")
    monkeypatch.setenv(integrity.CONFIGFILES_ENV, "")
    integrity.share_configfiles([mine])
    suggested = integrity.rebuild_command(results / "quick" / "OP" / "OP-F1.csv")
    words = shlex.split(suggested)
    assert str(results / "quick" / "OP" / "OP-F1.csv") in words and f"results={results}" in words
    assert str(mine) in words
    pasted = shlex.join(SNAKEMAKE) + suggested.removeprefix("snakemake").replace(" --force", " --force -n", 1)
    run = subprocess.run(["bash", "-c", pasted], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "OP-F1" in run.stdout + run.stderr


def test_a_file_sealed_again_is_listed_once(tmp_path):
    """A 700-epoch part's checkpoint, saved every epoch or so, grew `.sealed` by 2,801 lines."""
    tree = tmp_path / "results" / "quick"
    path = tree / "OP" / "run.pt"
    for i in range(5):
        integrity.write_atomic(path, lambda tmp, i=i: Path(tmp).write_text(f"epoch {i}"))
    integrity.write_atomic(tree / "OP" / "other.csv", lambda tmp: Path(tmp).write_text("a"))
    assert (tree / integrity.MANIFEST).read_text().splitlines() == ["OP/run.pt", "OP/other.csv"]
    assert integrity.sealed(tree) == {path, tree / "OP" / "other.csv"}


_JOB = """
import sys
from reluinit.pipeline import jobs
log = jobs.start(sys.argv[1], threads=None)
log.info("attempt %s", sys.argv[2])
if sys.argv[2] == "fails":
    raise ValueError("the first attempt fails")
"""


def test_a_failed_attempts_log_is_kept_beside_the_next_ones(tmp_path):
    """Snakemake deletes a job's log before it runs the job again (``--retries``, a rerun after a SLURM
    time limit): the attempt that failed is kept as ``<log>.<start>-<pid>.unfinished``; one that ends
    well leaves its log alone."""
    log = tmp_path / "logs" / "job.log"
    for attempt in ("fails", "works"):
        log.unlink(missing_ok=True)  # as Snakemake does before each attempt
        subprocess.run([sys.executable, "-c", _JOB, str(log), attempt], capture_output=True)
    kept = sorted(p.name for p in log.parent.iterdir())
    assert len(kept) == 2 and kept[0] == "job.log" and kept[1].startswith("job.log.") and kept[1].endswith(".unfinished")
    first = (log.parent / kept[1]).read_text()
    assert "attempt fails" in first and "ValueError: the first attempt fails" in first
    assert "attempt works" in log.read_text() and "fails" not in log.read_text()


def test_a_job_stopped_by_sigterm_says_so_and_what_to_do_then_ends_as_the_signal_would(tmp_path):
    """Two SLURM time limits in a row ended in Snakemake's "At least one job did not complete": the
    job's log now holds the line the run's final words repeat, and the job still dies of SIGTERM."""
    import signal
    import time

    log = tmp_path / "job.log"
    code = f"import time\nfrom reluinit.pipeline import jobs\njobs.start({str(log)!r}, threads=None)\nprint('up', flush=True)\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM and time.monotonic() - start < 10
    from reluinit.pipeline import jobs

    said = log.read_text()
    assert f"{jobs.TODO_PREFIX}this job was stopped by SIGTERM (a SLURM time limit, scancel or preemption)" in said
    assert "raise its experiment's `runtime` under `resources:`" in said
    assert len(list(tmp_path.glob("job.log.*.unfinished"))) == 1


def test_a_second_writer_of_a_part_waits_for_the_first_and_is_told_who_it_is(tmp_path):
    """An orphaned SLURM job still training a part when the documented recovery submits it again:
    both wrote the same temporary seal and the second crashed. The lock (``paths.part_lock``) makes the
    second wait, named the holder, and then take the part; a try (the harvest's) passes it over."""
    import time

    from reluinit.pipeline import paths

    lock = paths.part_lock(tmp_path / "results" / "quick", "RP-F3", "group0")
    code = (f"import sys, time\nfrom reluinit import integrity\nwith integrity.exclusive({str(lock)!r}):\n"
            "    print('held', flush=True)\n    time.sleep(3)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    with integrity.exclusive(lock, wait=False) as mine:
        assert not mine
    told, start = [], time.monotonic()
    with integrity.exclusive(lock, waiting=told.append) as mine:
        assert mine and time.monotonic() - start > 1 and holder.wait(timeout=30) == 0
        assert len(told) == 1 and told[0].startswith(f"pid {holder.pid} on ") and " since " in told[0]
        with integrity.exclusive(lock) as again:  # waiting for one's own lock: granted
            assert again
        with integrity.exclusive(lock, wait=False) as tried:  # trying it: held
            assert not tried
    assert lock.read_text().startswith(f"pid {os.getpid()} on ")


def test_sigterm_while_a_stack_saves_waits_for_its_last_save(tmp_path):
    """A SLURM time limit split a stack's saves (epochs 698 and 697), so its runs resumed in other
    stacks and rounded differently: the job now ends once the block of saves is done."""
    import signal

    log = tmp_path / "job.log"
    code = (f"import time\nfrom reluinit import training\nfrom reluinit.pipeline import jobs\n"
            f"jobs.start({str(log)!r}, threads=None)\ncontrol = jobs.stopped_into(training.Control())\n"
            "with control.uninterrupted():\n"
            "    print('saving', flush=True)\n    time.sleep(2)\n    print('saved', flush=True)\n"
            "print('after', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "saving\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert proc.stdout.read() == "saved\n"  # the block ended, nothing after it ran
    assert "this job was stopped by SIGTERM" in log.read_text()


def test_files_written_together_are_put_in_place_all_or_none(tmp_path):
    """A disk filling up halfway through a stack's saves left some runs a checkpoint at epoch N and
    others at N - 1, resumed then in other stacks (12 of 60 rows off by rounding): inside
    ``together`` a failed save keeps every file as it was."""
    import errno

    tree = tmp_path / "results" / "quick"
    paths = [tree / "ckpt" / f"run{i}.pt" for i in range(3)]

    def save(epoch, fail_at=None):
        with integrity.together():
            for i, p in enumerate(paths):
                def write(tmp, i=i):
                    if i == fail_at:
                        raise OSError(errno.ENOSPC, "No space left on device")
                    Path(tmp).write_text(f"epoch {epoch}")
                integrity.write_atomic(p, write)
                assert not p.exists() or p.read_text() == f"epoch {epoch - 1}"  # in place only at the end

    save(1)
    assert [p.read_text() for p in paths] == ["epoch 1"] * 3
    with pytest.raises(OSError) as err:
        save(2, fail_at=2)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(paths[2])
    assert [p.read_text() for p in paths] == ["epoch 1"] * 3 and not list(tree.rglob("*.tmp"))
    for p in paths:
        integrity.verify(p)
    save(2)
    assert [p.read_text() for p in paths] == ["epoch 2"] * 3
    assert (tree / integrity.MANIFEST).read_text().splitlines() == [f"ckpt/run{i}.pt" for i in range(3)]
