"""Judge every claim of claims.yaml against the result tables: results/claims.csv (one row per
claim) and an HTML page for the report, verdict counts per paper in the log."""

from reluinit import claims, jobs

log = jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
card = claims.scorecard(claims.load(snakemake.input.claims), snakemake.params.results, snakemake.params.scale)  # noqa: F821
jobs.write_table(card, snakemake.output.csv)  # noqa: F821
claims.write_html(card, snakemake.output.html, snakemake.params.scale)  # noqa: F821
log.info("scorecard at the %s scale:\n%s", snakemake.params.scale, claims.summary(card).to_string())  # noqa: F821
