"""Combine one experiment's parts into its tidy table, plot its catalogue figure as PDF and PNG,
write the scale and settings it was built with (what the report caption reads back), and log
the numbers a reader compares with the paper (the experiment's summary)."""

import json

import pandas as pd

from reluinit import catalogue, jobs, plotting

log = jobs.start(snakemake.log[0], threads=None)  # noqa: F821 - injected by Snakemake; no torch here
exp_id = snakemake.params.exp  # noqa: F821
figure, summary = catalogue.figures_of(exp_id)  # reluinit.figures.<module>: tables in, figures out, no torch
table = pd.concat([pd.read_csv(p) for p in snakemake.input], ignore_index=True)  # noqa: F821
if catalogue.ENTRIES[exp_id].source:  # a view of another experiment's runs: its own id on its rows
    table["experiment"] = exp_id
jobs.write_table(table, snakemake.output.table)  # noqa: F821
fig = figure(table, snakemake.params.settings)  # noqa: F821
plotting.save(fig, [snakemake.output.pdf, snakemake.output.png])  # noqa: F821
with open(snakemake.output.built, "w") as f:  # noqa: F821
    json.dump({"scale": snakemake.params.scale, "settings": snakemake.params.settings}, f, default=str)  # noqa: F821
log.info("%s summary:\n%s", exp_id, summary(table).to_string(index=False))
