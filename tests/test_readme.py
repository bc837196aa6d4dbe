"""Every `snakemake` command the README's "Running it yourself" section shows works: each is
dry-run (`-n`) on a fresh copy of the workflow, with no results, and must plan without error."""

import re
import shlex
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, copy_workflow, snakemake

pytestmark = pytest.mark.workflow


def readme_commands(text: str) -> list[str]:
    """The `snakemake` lines of the bash blocks of section "Running it yourself" (to the next
    level-2 heading), without their comments."""
    section = text.split("\n## Running it yourself", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = [line.split(" #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("snakemake ")]


def dry(command: str) -> list[str]:
    """The command as a dry run: `-n` before `--config`, which swallows every word after it."""
    args = shlex.split(command)[1:]
    at = args.index("--config") if "--config" in args else len(args)
    return args[:at] + (["-n"] if "-n" not in args else []) + args[at:]


def test_every_readme_command_plans_on_a_fresh_copy(tmp_path):
    commands = readme_commands((ROOT / "README.md").read_text())
    assert len(commands) >= 8 and any("--forcerun" in c for c in commands)

    def plan(i_command):
        i, command = i_command
        return command, snakemake(*dry(command), cwd=copy_workflow(tmp_path / f"copy{i}"))

    with ThreadPoolExecutor(2) as pool:
        for command, run in pool.map(plan, enumerate(commands)):
            assert run.returncode == 0, f"{command}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
            assert "This was a dry-run" in run.stdout + run.stderr, command


def test_dry_keeps_targets_before_config():
    assert dry("snakemake all --cores 2 --config scale=quick") == ["all", "--cores", "2", "-n", "--config",
                                                                    "scale=quick"]
