"""The GPU check: one command that turns the GPU half of the pipeline from declared to measured.

    python -m reluinit.gpucheck --out DIR [--device auto] [--budget-s 480] [--tiny] [--data-dir DIR]
                                [--stages facts engines ...]

Plain Python (no Snakemake, no papermill: a GPU machine borrowed for minutes may have neither). Stages run in order of
value; each writes its CSV into ``DIR`` as soon as it finishes, and the report is rewritten after
every stage, so a run cut short keeps what it measured. Before a stage starts, its estimated
seconds are held against what is left of ``--budget-s``: a stage that cannot fit is skipped, and
the report says so.

* ``facts.csv``: the device, its memory, torch / CUDA / cuDNN versions, the commit.
* ``engines.csv``: the training step eager, compiled and graphed (``reluinit.engine``) on RP-F3's
  depth-100 ffnn alone and stacked, RP-T4's depth-100 cnn and doubled ResNet32: seconds and kernel
  time per step, their spread, the gain over eager, and each engine's weights against eager's
  (``gpucheck.engines``).
* ``agreement.csv``: the same code gives the same science on the device as on the CPU
  (``gpucheck.agreement``): trajectory lengths, exact regions, SNIP / GraSP / SynFlow masks,
  deterministic and resumed training, a bf16 run whose loss falls.
* ``throughput.csv``: optimizer steps per second of every training family of the paper DAG, the
  engine beside a plain ``DataLoader`` baseline, and each job's projected hours beside those its
  config declares (``gpucheck.throughput``).
* ``ensembles.csv``: many small nets trained one by one and as one stacked model
  (``reluinit.ensemble``): seconds, the ratio, the largest weight difference.
* ``packing.csv``: 1, 2, 4 and 8 training processes sharing the device.
* ``reference-check.csv``: cells of ``reference/paper/`` recomputed on the device with the same
  seeds (``gpucheck.cells``).
* ``gpu-report.md`` and ``gpu-cost.csv`` (seconds per step per family, what
  ``python -m reluinit.pipeline.plan paper --cost`` prices training jobs from).

``--tiny`` runs every stage at toy sizes (the quick scale's models and data; on 2 CPU cores in about
80 seconds, a third of them compiling steps), which is what the test suite runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .common import COLUMNS, REPORT

log = logging.getLogger("reluinit.gpucheck")



@dataclass
class Check:
    """What every stage reads: where to write, on which device, how small, and the clock."""

    out: Path
    device: object  # torch.device
    tiny: bool
    budget_s: float
    data_dir: str | None
    config: dict
    commit: str = "unknown"
    started: float = field(default_factory=time.perf_counter)
    stages: list[dict] = field(default_factory=list)  # name, status, seconds, estimate_s, note
    only: list[str] | None = None  # the stages to run (all when None)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.started)

    def write(self, name: str, table) -> Path:
        """``table`` as ``<out>/<name>.csv`` with the columns ``COLUMNS[name]`` promises, in that order."""
        missing = [c for c in COLUMNS[name] if c not in table.columns]
        if missing:
            raise ValueError(f"{name}: the stage's table lacks columns {missing}")
        path = self.out / f"{name}.csv"
        table[COLUMNS[name] + [c for c in table.columns if c not in COLUMNS[name]]].to_csv(path, index=False)
        return path


def problems(out: str | Path) -> list[str]:
    """What a finished check's folder lacks: a stage's table, a promised column, the report."""
    import pandas as pd

    out = Path(out)
    found = []
    for name, columns in COLUMNS.items():
        path = out / f"{name}.csv"
        if not path.exists():
            found.append(f"{path} is missing")
            continue
        missing = [c for c in columns if c not in pd.read_csv(path, nrows=0).columns]
        if missing:
            found.append(f"{path} lacks the columns {', '.join(missing)}")
    if not (out / REPORT).exists():
        found.append(f"{out / REPORT} is missing")
    return found


def _stages():
    """(name, estimated seconds on a GPU, estimated seconds with --tiny, function) in order of value."""
    from . import agreement, cells, engines, throughput

    return [("facts", 5, 1, facts), ("engines", 300, 60, engines.run), ("agreement", 90, 15, agreement.run),
            ("throughput", 200, 25, throughput.run),
            ("ensembles", 60, 10, ensembles), ("packing", 70, 10, throughput.packing),
            ("reference-check", 90, 10, cells.run)]


def ensembles(check: Check):
    """Many small nets one by one and stacked (``reluinit.ensemble``), as ``python -m
    reluinit.tools.benchmark training`` times them: TG-F6's 20 nets, RP-F3's depth-20 and depth-100
    nets 9 at a time (one job's stack at the paper scale), EP-F7's 3; 50 steps each (``--tiny``: 2
    runs, 3 steps)."""
    import pandas as pd

    from ..tools.benchmark import ensemble_rows

    if check.tiny:
        return pd.DataFrame(list(ensemble_rows(check.device, 3, only=["TG-F6", "EP-F7"], k=2)))
    rows = list(ensemble_rows(check.device, 50, only=["TG-F6", "EP-F7"]))
    rows += list(ensemble_rows(check.device, 50, only=["RP-F3"], k=9))
    return pd.DataFrame(rows)


def facts(check: Check):
    import pandas as pd
    import torch

    from ..pipeline.provenance import source_digest

    dev = check.device
    rows = {"device": str(dev), "torch": torch.__version__, "python": sys.version.split()[0],
            "cuda": torch.version.cuda or "none", "cudnn": torch.backends.cudnn.version() or "none",
            "commit": check.commit, "source_digest": source_digest(), "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(), "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32, "tiny": check.tiny, "budget_s": check.budget_s}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        rows.update(device_name=p.name, memory_gb=round(p.total_memory / 2**30, 1),
                    compute_capability=f"{p.major}.{p.minor}", multiprocessors=p.multi_processor_count)
    else:
        rows.update(device_name=_cpu_name(), memory_gb=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                                             / 2**30, 1))
    for name in ("numba", "torchvision", "numpy", "pandas"):
        try:
            rows[name] = __import__(name).__version__
        except ImportError:
            rows[name] = "not installed"
    return pd.DataFrame({"fact": list(rows), "value": [str(v) for v in rows.values()]})


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "cpu"


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(check: Check) -> int:
    """Every stage that fits the budget, in order; the report after each. Returns 1 if a stage failed."""
    from . import report

    failed = False
    for name, gpu_s, tiny_s, fn in _stages():
        if check.only and name not in check.only:
            continue
        estimate = tiny_s if check.tiny else gpu_s
        if check.left() < estimate:
            check.stages.append(dict(name=name, status="skipped", seconds=0.0, estimate_s=estimate,
                                     note=f"{check.left():.0f} s of the budget left, the stage needs about {estimate} s"))
            log.warning("%s: skipped (%.0f s left, needs about %d s)", name, check.left(), estimate)
        else:
            log.info("%s: starting (%.0f s of the budget left)", name, check.left())
            t0 = time.perf_counter()
            try:
                tables = fn(check)
                for table_name, table in ({name: tables} if not isinstance(tables, dict) else tables).items():
                    check.write(table_name, table)
                status, note = "done", ""
            except Exception as e:  # one stage's failure is a result; the others still run
                failed = True
                status, note = "failed", f"{type(e).__name__}: {e}"
                log.error("%s failed:\n%s", name, traceback.format_exc())
                (check.out / f"{name}.error.txt").write_text(traceback.format_exc())
            check.stages.append(dict(name=name, status=status, seconds=round(time.perf_counter() - t0, 1),
                                     estimate_s=estimate, note=note))
            log.info("%s: %s in %.1f s", name, status, time.perf_counter() - t0)
        report.write(check)
    return int(failed)


def main(argv: list[str] | None = None) -> int:
    # Deterministic cuBLAS (the agreement stage's bitwise-equal training) needs this before CUDA starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    parser = argparse.ArgumentParser(
        prog="python -m reluinit.gpucheck", description=__doc__.split("\n\n")[0],
        epilog="On a GPU lent for minutes: this check first with --budget-s 180 (its first stages catch the GPU-only "
               "faults), then `python -m reluinit.harvest` for the rest of the time, and commit both "
               "(docs: Running on a cluster, 'A GPU for a few minutes').")
    parser.add_argument("--out", required=True, help="folder for the tables and the report (created)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cuda, cuda:1 or cpu")
    parser.add_argument("--budget-s", type=float, default=480.0, help="seconds the whole check may take")
    parser.add_argument("--tiny", action="store_true", help="every stage at toy sizes (the test suite's run)")
    parser.add_argument("--data-dir", help="a folder with MNIST (the 10,000-digit subset will do) for the "
                                           "reference cells that join MNIST test images; without it they use "
                                           "generated points and are not compared")
    parser.add_argument("--stages", nargs="+", metavar="STAGE", choices=[s[0] for s in _stages()],
                        help="only these stages (default: all, in order): " + ", ".join(s[0] for s in _stages()))
    parser.add_argument("--config", default=None, help="the workflow config (default: config.yaml of the checkout)")
    parser.add_argument("--commit", default=None, help="the commit measured (default: git's, where there is one)")
    a = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stdout)
    import torch

    from ..nets import resolve_device
    from ..pipeline.config import read_yaml

    device = resolve_device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {a.device}: torch sees no CUDA device here; run with --device cpu --tiny "
                     f"for the CPU check")
    config_path = Path(a.config) if a.config else Path(__file__).resolve().parents[3] / "config.yaml"
    if not config_path.exists():
        parser.error(f"no config at {config_path}: pass --config <the workflow's config.yaml>")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "gpucheck.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    check = Check(out=out, device=device, tiny=a.tiny, budget_s=a.budget_s, data_dir=a.data_dir,
                  config=read_yaml(config_path), commit=a.commit or _commit(), only=a.stages)
    log.info("GPU check on %s into %s, budget %.0f s%s", device, out, a.budget_s, " (tiny)" if a.tiny else "")
    return run(check)
