"""Issue 97's probes of the pipeline: a key set twice in a YAML file, a corrupt cost table, Snakemake
run from outside the checkout, a target typed in the wrong case or for a part that does not exist,
and `plan` given a broken config or a --csv it cannot write. Each is refused in one sentence that
names the problem and its fix."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT, SNAKEMAKE
from reluinit.pipeline import plan
from reluinit.pipeline.config import DuplicateKeyError, read_yaml, yaml_problem
from reluinit.report import claims

PLAN = [sys.executable, "-m", "reluinit.pipeline.plan"]


def _last(run) -> str:
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _snakemake(cwd, *args):
    run = subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True, timeout=900)
    assert "Traceback" not in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]
    return run, _last(run)


def _twice(text: str) -> tuple[str, int, int]:
    """config.yaml's text with a second `quick:` block under EP-F2 (YAML would keep it, and EP-F2's
    quick build would run the paper's widths and 10,000 pieces), and the two blocks' lines."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("  EP-F2:"))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("    quick:"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("  ") and not lines[i].startswith("   "))
    lines.insert(end, "    quick: {n_nets: 1}\n")
    return "".join(lines), first + 1, end + 1


# --- a key set twice --------------------------------------------------------------------------------


def test_a_key_set_twice_in_the_config_is_refused_naming_it_and_both_lines(tmp_path):
    text, first, second = _twice((ROOT / "config.yaml").read_text())
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(DuplicateKeyError) as caught:
        read_yaml(path)
    said = str(caught.value)
    assert "'experiments.EP-F2.quick'" in said and str(path) in said, said
    assert f"lines {first} and {second}" in said, said
    assert yaml_problem(path) == said
    # a merge key (`<<: *anchor`) and the keys beside it that override it are no duplicates
    assert read_yaml(ROOT / "config.yaml")["experiments"]["EP-F15"]["paper"]["widths"] == [128]
    nested = tmp_path / "seq.yaml"
    nested.write_text("claims:\n  - id: a\n    expect: '> 0'\n  - id: b\n    expect: '> 0'\n    expect: '< 1'\n")
    with pytest.raises(DuplicateKeyError, match=r"lines 5 and 6: key 'claims\[1\]\.expect'"):
        read_yaml(nested)


def test_keys_are_compared_as_the_mapping_holds_them_not_as_written(tmp_path):
    """``1`` and ``"1"`` are two keys (an int and a string); ``1`` and ``1.0``, or ``~`` and ``null``,
    are one, which YAML keeps the second of: the check compares keys by value, not by their text."""
    two = tmp_path / "two.yaml"
    two.write_text('a: {1: x, "1": y}\n')
    assert read_yaml(two) == {"a": {1: "x", "1": "y"}}
    for i, (first, second) in enumerate([("1", "1.0"), ("~", "null")]):
        one = tmp_path / f"one{i}.yaml"
        one.write_text(f"a:\n  {first}: x\n  {second}: y\n")
        with pytest.raises(DuplicateKeyError, match=rf"lines 2 and 3: key 'a\.{second}' is set twice"):
            read_yaml(one)


def test_a_claim_key_set_twice_in_claims_yaml_is_refused_naming_it(tmp_path):
    text = (ROOT / "claims.yaml").read_text()
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("expect:"))
    lines.insert(at + 1, lines[at])
    path = tmp_path / "claims.yaml"
    path.write_text("".join(lines))
    with pytest.raises(claims.ClaimError, match=rf"{path}, lines {at + 1} and {at + 2}: key 'claims\[\d+\]\.expect'"):
        claims.load(path)


@pytest.mark.workflow
def test_a_key_set_twice_in_a_configfile_or_config_yaml_stops_the_run(workdir):
    (workdir / "mine.yaml").write_text("experiments:\n  EP-F2:\n    quick: {widths: [8]}\n    quick: {n_nets: 1}\n")
    run, last = _snakemake(workdir, "ep_f2", "-n", "--cores", "1", "--configfile", "mine.yaml", "--config", "scale=quick")
    assert run.returncode != 0
    assert last.startswith("mine.yaml, lines 3 and 4: key 'experiments.EP-F2.quick'"), last
    text, first, second = _twice((workdir / "config.yaml").read_text())
    (workdir / "config.yaml").write_text(text)
    run, last = _snakemake(workdir, "ep_f2", "-n", "--cores", "1", "--config", "scale=quick")
    assert run.returncode != 0
    assert last.startswith(f"config.yaml, lines {first} and {second}: key 'experiments.EP-F2.quick'"), last


# --- a corrupt cost table ---------------------------------------------------------------------------

GOOD = dict(model="resnet32", dataset="cifar10", recipe="rp-cifar10", seconds_per_step=0.01, eval_seconds_per_image=1e-4)


def _cost(tmp_path, column, value, depth=None):
    first = GOOD | {"model": "resnet50"} | ({} if depth is None else {"depth": depth})
    rows = [first, first | {"model": "resnet32", column: value}]
    path = tmp_path / "gpu-cost.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("column,value", [("seconds_per_step", float("nan")), ("seconds_per_step", -0.01),
                                          ("seconds_per_step", 0), ("seconds_per_step", float("inf")),
                                          ("seconds_per_step", "abc"), ("eval_seconds_per_image", float("nan")),
                                          ("eval_seconds_per_image", -1e-4), ("depth", -3), ("depth", "deep"),
                                          ("depth", 2.5), ("model", None)])
def test_a_cost_table_with_an_impossible_value_is_refused_naming_its_row_and_column(tmp_path, column, value):
    """A NaN seconds_per_step priced its runs at their declared hours and called them priced; a
    negative, zero or infinite one priced them at less than nothing, or without end; text crashed."""
    path = _cost(tmp_path, column, value)
    with pytest.raises(ValueError) as caught:
        plan.read_cost(path)
    said = str(caught.value)
    assert f"{path}, row 2 (line 3" in said and column in said, said
    assert "resnet32, cifar10, rp-cifar10" in said or column == "model", said
    assert "python -m reluinit.gpucheck" in said
    done = subprocess.run(PLAN + ["paper", "--cost", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "row 2 (line 3" in _last(done), done.stderr


def test_a_cost_table_that_records_no_depth_still_prices(tmp_path):
    path = _cost(tmp_path, "depth", float("nan"), depth=float("nan"))  # the depth column empty: not recorded
    assert plan.read_cost(path)["depth"].isna().all()
    assert plan.read_cost(_cost(tmp_path, "depth", 100, depth=3))["depth"].tolist() == [3.0, 100.0]


# --- Snakemake run from outside the checkout ------------------------------------------------------


@pytest.mark.workflow
def test_snakemake_run_from_another_folder_names_the_command_with_the_checkout(workdir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.yaml").write_text("scale: quick\n")
    for extra in ([], ["--configfile", "mine.yaml"]):
        run, last = _snakemake(elsewhere, "-s", str(workdir / "Snakefile"), "op_f1", "-n", "--cores", "1", *extra)
        assert run.returncode != 0
        assert str(elsewhere) in last and f"-d {workdir}" in last, last
        assert "FileNotFoundError" not in run.stdout + run.stderr
    command = last.rsplit("`snakemake ", 1)[1].rstrip("`.").split()
    assert command == ["-d", str(workdir), "-s", str(workdir / "Snakefile"), "op_f1", "-n", "--cores", "1",
                       "--configfile", "mine.yaml"], last
    run, _ = _snakemake(elsewhere, *command)  # the command given works, and reads the file named
    assert run.returncode == 0 and "measure_op" in run.stdout + run.stderr, run.stderr[-2000:]


# --- targets -----------------------------------------------------------------------------------------


@pytest.mark.workflow
@pytest.mark.parametrize("word", ["EP_F1", "epf1"])
def test_a_target_in_the_wrong_case_or_without_its_underscore_names_the_target(workdir, word):
    run, last = _snakemake(workdir, word, "-n", "--cores", "1", "--config", "scale=quick")
    assert run.returncode != 0
    assert last.startswith(f"{word} is not a target") and "`snakemake ep_f1 --config scale=quick`" in last, last
    assert "No rule to produce" not in run.stdout + run.stderr


@pytest.mark.workflow
@pytest.mark.parametrize("target", ["results/quick/RP/RP-F3/group99.csv", "results/quick/RP/RP-F3/masks/group99.pt"])
def test_a_part_that_does_not_exist_names_the_experiments_parts(workdir, target):
    run, last = _snakemake(workdir, target, "-n", "--cores", "1", "--config", "scale=quick")
    assert run.returncode != 0
    assert last.startswith(f"{target} names no part of RP-F3 at the quick scale"), last
    assert "group0" in last and "`snakemake rp_f3 --config scale=quick`" in last, last


# --- plan with a broken config or an unwritable --csv -----------------------------------------------


def _plan(*args):
    done = subprocess.run(PLAN + list(args), cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return _last(done)


def test_plan_with_a_broken_config_names_the_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("scale: quick\nexperiments: [OP-F1\n  bad: : x\n")
    last = _plan("quick", "--config", str(bad))
    assert f"{bad}, line 3, column" in last and "is not valid YAML" in last, last
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text((ROOT / "config.yaml").read_text().replace("widths: [100, 500, 2000, 4060]", "widths: many", 1))
    last = _plan("quick", "--config", str(wrong))
    assert f"{wrong}, line" in last and "invalid config: key 'experiments." in last and "correct it there" in last, last
    text, first, second = _twice((ROOT / "config.yaml").read_text())
    wrong.write_text(text)
    assert f"lines {first} and {second}: key 'experiments.EP-F2.quick'" in _plan("quick", "--config", str(wrong))


def test_plan_with_a_csv_it_cannot_write_says_so_before_it_prints(tmp_path):
    (tmp_path / "file").write_text("")
    for target in (tmp_path / "absent" / "plan.csv", tmp_path / "file" / "plan.csv"):
        last = _plan("quick", "--csv", str(target))
        assert f"--csv {target}" in last and "a folder that exists and you can write" in last, last


def test_plan_with_a_csv_in_a_read_only_folder_says_so(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):  # root writes there all the same: the write refused as a read-only mount would
        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(pd.DataFrame, "to_csv", refuse)
    with pytest.raises(SystemExit) as stopped:
        plan.main(["quick", "--config", str(ROOT / "config.yaml"), "--csv", str(folder / "plan.csv")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stopped.value.code == 2 and f"--csv {folder / 'plan.csv'}: cannot write it (Permission denied)" in last, last
    assert "a folder that exists and you can write" in last
