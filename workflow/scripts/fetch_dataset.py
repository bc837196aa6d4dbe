"""Rule `fetch_dataset`: fetch one dataset into the data directory (ImageNet: check the copy put
there by hand) and record what is there."""

import json
import sys
from pathlib import Path

from reluinit import datasets, integrity
from reluinit.pipeline import jobs

sm = snakemake  # noqa: F821 - injected by Snakemake
log = jobs.start(sm.log[0])
out = Path(sm.output[0])
try:
    record = datasets.fetch(sm.wildcards.dataset, out.parent.parent)
except datasets.DatasetUnavailable as e:
    # Into the job's log, not a traceback: the Snakefile's onerror repeats its last line (what to
    # do) as the run's final words.
    log.error("%s", e)
    log.error("%s%s", jobs.TODO_PREFIX, str(e).strip().splitlines()[-1])
    sys.exit(1)
# last, atomically and sealed: the record says the dataset is complete, so it appears only then
integrity.write_atomic(out, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=2) + "\n"))
