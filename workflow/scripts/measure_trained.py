"""Rule `measure_trained`: one part of an experiment that trains, its rows made from the final
checkpoints its training job recorded, training nothing (reluinit.pipeline.steps.measure)."""

from reluinit.pipeline import steps

sm = snakemake  # noqa: F821 - injected by Snakemake
steps.measure(sm.wildcards.exp, sm.wildcards.part, sm.params.settings, list(sm.input), sm.output[0], sm.params.masks,
              sm.log[0], config=sm.config, scale=sm.params.scale, device=sm.params.device, threads=sm.threads,
              checkpoints=sm.params.checkpoints, trained=sm.input.trained)
