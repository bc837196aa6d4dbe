"""Rules figures_<paper> (`batching: paper`): a paper's figures of random nets, one id after
another, each into the table, figure, record and log its own figure_<id> job would write (named by
id: table_OP_F1, png_OP_F1, ...; reluinit.pipeline.steps.draw)."""

from reluinit.pipeline import jobs, paths, steps

sm = snakemake  # noqa: F821 - injected by Snakemake
for exp_id in sm.params.exps:
    key = paths.id_key(exp_id)
    out = {kind: sm.output[f"{kind}_{key}"] for kind in ("table", "pdf", "png", "built")}
    steps.draw(exp_id, jobs.files(sm.input[key]), sm.params.settings[exp_id], out, sm.log[key], sm.params.scale)
