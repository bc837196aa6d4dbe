"""Run one job of a catalogue experiment (one part, or at a scale whose `measure_jobs` is `one`,
every part in order) and write its rows. A job of a paper's experiments of random nets (rule
measure_<paper>, `measure_jobs: paper`) does this for each of them in turn, into the file and
log that the experiment's own job would write."""

from reluinit.pipeline import catalogue, jobs, paths, plan

sm = snakemake  # noqa: F821 - injected by Snakemake
config, scale = sm.config, sm.params.scale


def measure(exp_id, job, s, inputs, output, masks_files, log_path):
    """One experiment's job: its parts in order, each seeing the job's inputs less the other
    parts' trained nets and masks (its own in its order)."""
    log = jobs.start(log_path, sm.threads)
    jobs.verified(list(inputs) + list(masks_files))  # trained nets and masks: whole, or the job stops naming one
    exp = catalogue.get(exp_id)
    keys = plan.measure_jobs(config, exp_id, scale)[job]
    masks = dict(zip(keys, masks_files))  # the parts' masks, from their `prune` jobs
    results = paths.scale_root(config["results"], scale)
    own = {key: {paths.trained(results, *t) for t in exp.trained(s, key)} | ({masks[key]} if key in masks else set())
           for key in keys}
    frames = {}
    for key in keys:
        log.info("%s part %s at the %s scale: %s", exp_id, key, scale, s)
        others = set().union(*(own[k] for k in keys if k != key)) - own[key]
        extra = {"checkpoints": sm.params.checkpoints} if exp.trains else {}
        if key in masks:
            extra["masks"] = masks[key]
        frames[key] = exp.measure(s, key, sm.params.device, [f for f in inputs if f not in others], **extra)
    jobs.write_parts(frames, output, experiment=exp_id, scale=scale)


if "exps" in sm.params.keys():  # a paper's experiments of random nets: files named by id (OP_F1)
    for exp_id in sm.params.exps:
        key = paths.id_key(exp_id)
        measure(exp_id, plan.ALL_PARTS, sm.params.settings[exp_id], jobs.files(sm.input.get(key, [])), sm.output[key], [],
                sm.log[key])
else:
    measure(sm.wildcards.exp, sm.wildcards.part, sm.params.settings, list(sm.input), sm.output[0], sm.params.masks,
            sm.log[0])
