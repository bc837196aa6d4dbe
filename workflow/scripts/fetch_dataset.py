"""Fetch one dataset into the data directory and record what is there."""

import json
import sys
from pathlib import Path

from reluinit import datasets, integrity
from reluinit.pipeline import jobs

log = jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
out = Path(snakemake.output[0])  # noqa: F821
name = snakemake.wildcards.get("dataset", out.stem)  # noqa: F821
try:
    record = datasets.fetch(name, out.parent.parent)
except datasets.DatasetUnavailable as e:
    # Into the job's log, not a traceback: the Snakefile's onerror repeats its last line (what to
    # do) as the run's final words.
    log.error("%s", e)
    log.error("%s%s", jobs.TODO_PREFIX, str(e).strip().splitlines()[-1])
    sys.exit(1)
# last, atomically and sealed: the record says the dataset is complete, so it appears only then
integrity.write_atomic(out, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=2) + "\n"))
