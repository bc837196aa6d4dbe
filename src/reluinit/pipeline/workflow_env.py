"""Environment that every Snakemake job of this workflow inherits."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def export(src: str | Path) -> None:
    """Let jobs import this package from the checkout and find this interpreter's tools.

    ``src`` goes first on PYTHONPATH, so local, conda and SLURM jobs run the checkout's code
    whether or not the package is installed. This interpreter's ``bin`` goes first on PATH, so
    shell rules find the papermill and jupyter installed beside Snakemake; a conda env
    (``--sdm conda``) still puts its own first when it activates.
    """
    env = os.environ
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(src), env.get("PYTHONPATH", "")] if p)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
