"""Run one job of a catalogue experiment (one part, or at a scale whose `measure_jobs` is `one`,
every part in order) and write its rows."""

from reluinit import catalogue, jobs, paths, plan

log = jobs.start(snakemake.log[0], snakemake.threads)  # noqa: F821 - injected by Snakemake
config, scale = snakemake.config, snakemake.params.scale  # noqa: F821
exp_id, job = snakemake.wildcards.exp, snakemake.wildcards.part  # noqa: F821
exp = catalogue.get(exp_id)
s = snakemake.params.settings  # noqa: F821
keys = plan.measure_jobs(config, exp_id, scale)[job]
masks = dict(zip(keys, snakemake.params.masks))  # noqa: F821 - the parts' masks, from their `prune` jobs
# A part sees the job's inputs less the other parts' trained nets and masks (its own in its order).
results = paths.scale_root(config["results"], scale)
own = {key: {paths.trained(results, *t) for t in exp.trained(s, key)} | ({masks[key]} if key in masks else set())
       for key in keys}
frames = {}
for key in keys:
    log.info("%s part %s at the %s scale: %s", exp_id, key, scale, s)
    others = set().union(*(own[k] for k in keys if k != key)) - own[key]
    extra = {"checkpoints": snakemake.params.checkpoints} if exp.trains else {}  # noqa: F821
    if key in masks:
        extra["masks"] = masks[key]
    inputs = [f for f in snakemake.input if f not in others]  # noqa: F821
    frames[key] = exp.measure(s, key, snakemake.params.device, inputs, **extra)  # noqa: F821
jobs.write_parts(frames, snakemake.output[0], experiment=exp_id, scale=scale)  # noqa: F821
