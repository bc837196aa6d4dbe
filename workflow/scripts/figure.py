"""Plot one catalogue figure from its table, as PDF and PNG, and log the numbers a reader
compares with the paper (the experiment's summary)."""

import pandas as pd

from reluinit import experiments, jobs, plotting

log = jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
exp = experiments.get(snakemake.wildcards.exp)  # noqa: F821
table = pd.read_csv(snakemake.input[0])  # noqa: F821
fig = exp.figure(table, snakemake.params.settings)  # noqa: F821
plotting.save(fig, list(snakemake.output))  # noqa: F821
log.info("%s summary:\n%s", exp.id, exp.summary(table).to_string(index=False))
