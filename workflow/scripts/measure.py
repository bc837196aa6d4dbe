"""Run one job (part) of a catalogue experiment and write its rows."""

from reluinit import catalogue, jobs

log = jobs.start(snakemake.log[0], snakemake.threads)  # noqa: F821 - injected by Snakemake
exp_id, key = snakemake.wildcards.exp, snakemake.wildcards.part  # noqa: F821
log.info("%s part %s at the %s scale: %s", exp_id, key, snakemake.params.scale, snakemake.params.settings)  # noqa: F821
exp = catalogue.get(exp_id)
extra = {"checkpoints": snakemake.params.checkpoints} if exp.trains else {}  # noqa: F821
if exp.masks:  # the part's masks, from its `prune` job
    extra["masks"] = snakemake.params.masks[0]  # noqa: F821
rows = exp.measure(snakemake.params.settings, key, snakemake.params.device, list(snakemake.input), **extra)  # noqa: F821
jobs.write_table(rows, snakemake.output[0], experiment=exp_id, scale=snakemake.params.scale, part=key)  # noqa: F821
