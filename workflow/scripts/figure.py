"""Plot one catalogue figure from its table, as PDF and PNG."""

import pandas as pd

from reluinit import experiments, jobs, plotting

jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
table = pd.read_csv(snakemake.input[0])  # noqa: F821
fig = experiments.get(snakemake.wildcards.exp).figure(table, snakemake.params.settings)  # noqa: F821
plotting.save(fig, list(snakemake.output))  # noqa: F821
