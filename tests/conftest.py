import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd=ROOT, timeout=900):
    """Run Snakemake of this interpreter's environment; return the finished process."""
    return subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def copy_workflow(dest: Path) -> Path:
    """A private copy of the workflow (no results) at ``dest``, to edit its config and run it."""
    dest.mkdir(parents=True)
    for name in ["Snakefile", "config.yaml", "claims.yaml", "workflow", "profiles", "notebooks", "src", "envs"]:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)
    return dest


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path / "wf")
