"""Rule `train_part`: train one part's runs of an experiment that trains, resuming from their
checkpoints, and record their final checkpoints (reluinit.pipeline.steps.train)."""

from reluinit.pipeline import steps

sm = snakemake  # noqa: F821 - injected by Snakemake
steps.train(sm.wildcards.exp, sm.wildcards.part, sm.params.settings, list(sm.input), sm.output[0], sm.params.masks,
            sm.log[0], config=sm.config, scale=sm.params.scale, device=sm.params.device, threads=sm.threads,
            checkpoints=sm.params.checkpoints)
