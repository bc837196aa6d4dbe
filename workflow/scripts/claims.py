"""Rule `claims`: judge the claims of claims.yaml on one paper's tables (results/claims/<PAPER>.csv),
with its verdict counts in the log."""

from reluinit.pipeline import catalogue, jobs
from reluinit.report import claims

sm = snakemake  # noqa: F821 - injected by Snakemake
log = jobs.start(sm.log[0], threads=None)  # reads tables, no torch
jobs.verified(sm.input)  # a damaged table stops the verdicts, naming it
mine = [c for c in claims.load(sm.input.claims) if catalogue.paper_of(c.table) == sm.wildcards.paper]
card = claims.scorecard(mine, sm.params.results, sm.params.scale)
jobs.write_table(card, sm.output[0])
log.info("claims at the %s scale:\n%s", sm.params.scale, claims.summary(card).to_string())
for _, r in card[card["verdict"] == claims.INVALID].iterrows():  # named where the run is watched, not only in the table
    log.warning("claim %s: %s", r["claim"], r["note"])
