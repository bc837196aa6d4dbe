"""Rule `measure`: one job of a catalogue experiment on random (or trained) nets, one part or
(`batching: paper`) all of its parts in order, and its rows (reluinit.pipeline.steps.measure)."""

from reluinit.pipeline import steps

sm = snakemake  # noqa: F821 - injected by Snakemake
steps.measure(sm.wildcards.exp, sm.wildcards.part, sm.params.settings, list(sm.input), sm.output[0], sm.params.masks,
              sm.log[0], config=sm.config, scale=sm.params.scale, device=sm.params.device, threads=sm.threads)
