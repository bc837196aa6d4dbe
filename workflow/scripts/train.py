"""Train one net of a training spec and save its checkpoints."""

from reluinit.experiments import lr_train
from reluinit.pipeline import jobs

log = jobs.start(snakemake.log[0], snakemake.threads)  # noqa: F821 - injected by Snakemake
s, w = snakemake.params.settings, snakemake.wildcards  # noqa: F821
seed = lr_train.run_seed(s, w.arch, int(w.run))
log.info("%s %s run %s: %s", w.spec, w.arch, w.run, s)
states = lr_train.train_classifier(s, w.arch, seed, snakemake.params.device,  # noqa: F821
                                   resume=snakemake.params.checkpoint, run=int(w.run))  # noqa: F821
lr_train.save(states, snakemake.output[0])  # noqa: F821
