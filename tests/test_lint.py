"""Tidy by habit: ruff (pyflakes, import order, bugbear, pyupgrade; pyproject.toml's
[tool.ruff]) finds nothing in the code, and would find each kind of mistake it is there for."""

import subprocess
import sys

from conftest import ROOT

CHECKED = ["src", "tests", "workflow/scripts"]


def _ruff(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_ruff_finds_nothing_in_the_code():
    run = _ruff(*CHECKED)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:] + "\nfix with: ruff check --fix " + " ".join(CHECKED)


def test_the_config_catches_each_kind_of_mistake(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sys\n"
        "import os\n"                          # I001: not in order; F401: unused
        "from typing import List\n\n\n"        # UP035: a deprecated alias
        "def f(x=[]) -> List[int]:\n"          # B006: a mutable default
        "    return x\n")
    run = _ruff("--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad), cwd=tmp_path)
    assert run.returncode == 1
    found = {line.split()[1] for line in run.stdout.splitlines() if line.startswith("bad.py:")}
    assert {"F401", "I001", "UP035", "B006"} <= found, run.stdout
