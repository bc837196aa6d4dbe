"""Rules figure_<id>: one experiment's table from its parts, its figure, the record of what it was
built with and its summary in the log (reluinit.pipeline.steps.draw)."""

from reluinit.pipeline import steps

sm = snakemake  # noqa: F821 - injected by Snakemake
steps.draw(sm.params.exp, list(sm.input), sm.params.settings, sm.output, sm.log[0], sm.params.scale,
           shared=sm.params.shared)
