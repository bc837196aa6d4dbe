"""Concatenate the parts of one experiment into its tidy table."""

import pandas as pd

from reluinit import jobs

jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
table = pd.concat([pd.read_csv(p) for p in snakemake.input], ignore_index=True)  # noqa: F821
jobs.write_table(table, snakemake.output[0])  # noqa: F821
