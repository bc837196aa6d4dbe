"""Train the runs of one architecture of a training spec together and save each run's checkpoints."""

from reluinit.experiments import lr_train
from reluinit.pipeline import jobs

sm = snakemake  # noqa: F821 - injected by Snakemake
log = jobs.start(sm.log[0], sm.threads)
s, arch, runs = sm.params.settings, sm.wildcards.arch, sm.params.runs
log.info("%s %s runs %s: %s", sm.params.spec, arch, runs, s)
for states, path in zip(lr_train.train_runs(s, arch, runs, sm.params.device, resume=sm.params.checkpoints),
                        sm.output):
    lr_train.save(states, path)
