"""Fetch one dataset into the data directory and record what is there."""

import json
from pathlib import Path

from reluinit import datasets, jobs

jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
out = Path(snakemake.output[0])  # noqa: F821
name = snakemake.wildcards.get("dataset", out.stem)  # noqa: F821
record = datasets.fetch(name, out.parent.parent)
out.write_text(json.dumps(record, indent=2) + "\n")
