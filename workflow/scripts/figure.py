"""Combine one experiment's parts into its tidy table, plot its catalogue figure as PDF and PNG,
write the scale and settings it was built with (what the report caption reads back), and log
the numbers a reader compares with the paper (the experiment's summary). A job of a paper's
figures (rule figures_<paper>) does this for each of its ids in turn, into the files and log
that id's own job would write."""

import pandas as pd

from reluinit.pipeline import catalogue, jobs, paths
from reluinit.report import plotting

sm = snakemake  # noqa: F821 - injected by Snakemake


if "exps" in sm.params.keys():  # a paper's figures: inputs, outputs and logs named by id (OP_F1)
    todo = [(e, jobs.files(sm.input[paths.id_key(e)]), sm.params.settings[e],
             {kind: sm.output[f"{kind}_{paths.id_key(e)}"] for kind in ("table", "pdf", "png", "built")},
             sm.log[paths.id_key(e)]) for e in sm.params.exps]
else:
    todo = [(sm.params.exp, list(sm.input), sm.params.settings, sm.output, sm.log[0])]

for exp_id, parts, settings, out, log_path in todo:
    log = jobs.start(log_path, threads=None)  # no torch here; each id's log is its own
    figure, summary = catalogue.figures_of(exp_id)  # reluinit.figures.<module>: tables in, figures out
    table = pd.concat([jobs.read_table(p) for p in parts], ignore_index=True)  # each checked against its seal
    if catalogue.ENTRIES[exp_id].source:  # a view of another experiment's runs: its own id on its rows
        table["experiment"] = exp_id
    jobs.write_table(table, out["table"])
    fig = figure(table, settings)
    plotting.save(fig, [out["pdf"], out["png"]])
    jobs.write_json({"scale": sm.params.scale, "settings": settings}, out["built"])
    log.info("%s summary:\n%s", exp_id, summary(table).to_string(index=False))
