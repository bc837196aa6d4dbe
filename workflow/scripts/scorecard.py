"""Rule `scorecard`: every paper's judged claims in results/claims.csv (claims.yaml's order) and an
HTML page for the report, with verdict counts per paper in the log."""

import pandas as pd

from reluinit.pipeline import catalogue, jobs
from reluinit.report import claims

sm = snakemake  # noqa: F821 - injected by Snakemake
log = jobs.start(sm.log[0], threads=None)  # reads tables, no torch
jobs.verified(sm.input)  # a damaged table stops the verdicts, naming it
card = pd.concat([claims.read(p) for p in sm.input.papers], ignore_index=True)
listed = claims.load(sm.input.claims)
order = {c.id: i for i, c in enumerate(listed)}
card = card.sort_values("claim", key=lambda ids: ids.map(order), ignore_index=True)
jobs.write_table(card, sm.output.csv)
claims.write_html(card, sm.output.html, sm.params.scale, listed, catalogue.PAPERS)
log.info("claims at the %s scale:\n%s", sm.params.scale, claims.summary(card).to_string())
