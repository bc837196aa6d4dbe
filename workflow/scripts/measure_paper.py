"""Rules measure_<paper> (`batching: paper`): a paper's experiments of random nets, one after
another, each into the file and log its own job would write (inputs, outputs and logs named by
id: OP_F1; reluinit.pipeline.steps.measure)."""

from reluinit.pipeline import jobs, paths, plan, steps

sm = snakemake  # noqa: F821 - injected by Snakemake
for exp_id in sm.params.exps:
    key = paths.id_key(exp_id)
    steps.measure(exp_id, plan.ALL_PARTS, sm.params.settings[exp_id], jobs.files(sm.input.get(key, [])), sm.output[key],
                  [], sm.log[key], config=sm.config, scale=sm.params.scale, device=sm.params.device, threads=sm.threads)
