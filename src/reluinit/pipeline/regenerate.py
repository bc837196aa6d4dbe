"""Every generated file, regenerated from what it is generated from, in one command.

    python -m reluinit.pipeline.regenerate [--skip-reference]      (or: make generated)

After a change to the catalogue, ``config.yaml`` or ``claims.yaml`` (a new experiment, a new claim),
the suite checks that these files agree with their sources; this writes them all, in order:

1. ``CATALOGUE.md`` and the README's status table (``reluinit.pipeline.catalogue``);
2. the plan's numbers in README.md and ``docs/`` (``reluinit.pipeline.plan --write-docs``);
3. the claims' audit record ``docs/claims.md`` (``reluinit.report.claims record``);
4. the reference's verdicts in README.md, ``reference/README.md`` and ``reference/*/claims.csv``
   (``reluinit.report.reference render``: about 3 minutes on 2 cores; ``--skip-reference`` leaves
   it out while a claim is still being written).

Each step runs in a new process, so that a catalogue edited since this one started is read afresh.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

README_STATUS = "| id | paper | built by `snakemake all` |"


def _python(root: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "src"), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", *args], cwd=root, env=env, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"`python -m {' '.join(args)}` failed in {root}:\n{run.stderr.strip()[-3000:]}\n"
                         f"fix what it names, then rerun: python -m reluinit.pipeline.regenerate")
    return run.stdout


def catalogue(root: Path) -> list[Path]:
    """CATALOGUE.md and the README's status table, from the catalogue as it now stands."""
    (root / "CATALOGUE.md").write_text(_python(root, "reluinit.pipeline.catalogue", "catalogue"))
    table = _python(root, "reluinit.pipeline.catalogue", "status").rstrip("\n")
    readme = root / "README.md"
    text = readme.read_text()
    start = text.index(README_STATUS)
    stop = text.index("\n\n", start)
    readme.write_text(text[:start] + table + text[stop:])
    return [root / "CATALOGUE.md", readme]


def plan(root: Path) -> list[Path]:
    out = _python(root, "reluinit.pipeline.plan", "--write-docs")
    return [root / line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("updated ")]


def record(root: Path) -> list[Path]:
    (root / "docs/claims.md").write_text(_python(root, "reluinit.report.claims", "record"))
    return [root / "docs/claims.md"]


def reference(root: Path) -> list[Path]:
    _python(root, "reluinit.report.reference", "render")
    return [root / "README.md", root / "reference/README.md"]


STEPS = {"catalogue": catalogue, "plan": plan, "claims record": record, "reference": reference}


def regenerate(root: str | Path = ".", skip_reference: bool = False, log=print) -> list[Path]:
    """Run every step (module doc) in order; returns the files each wrote (README.md more than once)."""
    root = Path(root).resolve()
    written = []
    for name, step in STEPS.items():
        if skip_reference and step is reference:
            log("skipped the reference's verdicts (--skip-reference): the suite's reference tests will say so")
            continue
        start = time.monotonic()
        files = step(root)
        written += files
        log(f"{name}: {', '.join(sorted({str(f.relative_to(root)) for f in files})) or 'nothing to write'} "
            f"({time.monotonic() - start:.0f} s)")
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reluinit.pipeline.regenerate", description=__doc__.splitlines()[0])
    p.add_argument("--root", default=".", help="the checkout (default: here)")
    p.add_argument("--skip-reference", action="store_true", help="leave out the reference's verdicts (~3 min)")
    a = p.parse_args(argv)
    regenerate(a.root, a.skip_reference)
    print("regenerated; check with: make test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
