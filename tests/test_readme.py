"""Every `snakemake` command the README and the documentation's pages (docs/) show works: each is
dry-run (`-n`) on a fresh copy of the workflow, with no results, and must plan without error.
Those of "Adding an experiment" need the files `reluinit.pipeline.new` writes first:
tests/test_catalogue.py runs that command and builds the new id's figure."""

import re
import shlex
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, copy_workflow, snakemake

pytestmark = pytest.mark.workflow


# Pages whose commands another test runs (see above).
RUN_ELSEWHERE = {"adding-an-experiment.md"}


def readme_commands(text: str) -> list[str]:
    """The `snakemake` commands of a page's bash blocks, without their comments; a command broken
    over lines with `\\` (so that it fits the page's width) is read whole."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [line.split(" #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    commands, pending = [], ""
    for line in lines:
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        commands.append(pending + line)
        pending = ""
    return [c for c in commands if c.startswith("snakemake ")]


def shown_commands() -> dict[str, list[str]]:
    """Every page a user reads (the README, docs/**/*.md) and the `snakemake` commands it shows."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {str(p.relative_to(ROOT)): readme_commands(p.read_text()) for p in pages if p.name not in RUN_ELSEWHERE}


def dry(command: str) -> list[str]:
    """The command as a dry run: `-n` before `--config`, which swallows every word after it."""
    args = shlex.split(command)[1:]
    at = args.index("--config") if "--config" in args else len(args)
    return args[:at] + (["-n"] if "-n" not in args else []) + args[at:]


def test_every_readme_command_plans_on_a_fresh_copy(tmp_path):
    shown = shown_commands()
    commands = list(dict.fromkeys(c for page in shown.values() for c in page))  # each once
    assert len(commands) >= 8 and any("--forcerun" in c for c in commands)
    assert len(shown["docs/running.md"]) >= 6 and shown["README.md"], "the commands moved: read them where they are"

    def plan(i_command):
        i, command = i_command
        args = dry(command)  # planned whole, without printing each of its jobs (a paper-scale `all`: 12 s -> 7 s)
        at = args.index("-n")
        return command, snakemake(*args[:at], "--quiet", "rules", *args[at:], cwd=copy_workflow(tmp_path / f"copy{i}"))

    with ThreadPoolExecutor(2) as pool:
        for command, run in pool.map(plan, enumerate(commands)):
            assert run.returncode == 0, f"{command}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
            assert "This was a dry-run" in run.stdout + run.stderr, command


def test_commands_are_read_from_every_bash_block():
    page = "```bash\nsnakemake a --cores 1   # one\nmake quick\n```\ntext `snakemake b`\n```bash\nsnakemake c -n\n```\n"
    assert readme_commands(page) == ["snakemake a --cores 1", "snakemake c -n"]
    broken = "```bash\nsnakemake all --profile p \\\n    --default-resources a=1 \\\n    --set-resources b   # c\n```\n"
    assert readme_commands(broken) == ["snakemake all --profile p --default-resources a=1 --set-resources b"]


def test_dry_keeps_targets_before_config():
    assert dry("snakemake all --cores 2 --config scale=quick") == ["all", "--cores", "2", "-n", "--config",
                                                                    "scale=quick"]
