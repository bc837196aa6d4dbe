"""The claims scorecard. Rule `claims`: judge the claims of claims.yaml read from one paper's
tables (results/claims/<PAPER>.csv). Rule `scorecard`: all papers in results/claims.csv and an
HTML page for the report, with verdict counts per paper in the log."""

import pandas as pd

from reluinit.pipeline import catalogue, jobs
from reluinit.report import claims

log = jobs.start(snakemake.log[0], threads=None)  # noqa: F821 - injected by Snakemake; reads tables, no torch
jobs.verified(snakemake.input)  # noqa: F821 - a damaged table stops the verdicts, naming it
scale = snakemake.params.scale  # noqa: F821
if snakemake.rule == "claims":  # noqa: F821
    paper = snakemake.wildcards.paper  # noqa: F821
    mine = [c for c in claims.load(snakemake.input.claims) if catalogue.paper_of(c.table) == paper]  # noqa: F821
    card = claims.scorecard(mine, snakemake.params.results, scale)  # noqa: F821
    jobs.write_table(card, snakemake.output[0])  # noqa: F821
else:
    card = pd.concat([claims.read(p) for p in snakemake.input.papers], ignore_index=True)  # noqa: F821
    listed = claims.load(snakemake.input.claims)  # noqa: F821
    order = {c.id: i for i, c in enumerate(listed)}
    card = card.sort_values("claim", key=lambda ids: ids.map(order), ignore_index=True)  # claims.yaml's order
    jobs.write_table(card, snakemake.output.csv)  # noqa: F821
    claims.write_html(card, snakemake.output.html, scale, listed, catalogue.PAPERS)  # noqa: F821
log.info("claims at the %s scale:\n%s", scale, claims.summary(card).to_string())
