"""Prune one part's nets of a catalogue experiment and write their masks and what the masks do."""

from reluinit.pipeline import catalogue, jobs
from reluinit.pruning import at_chance, collapse, mask_facts, save_masks

log = jobs.start(snakemake.log[0], snakemake.threads)  # noqa: F821 - injected by Snakemake
jobs.verified(snakemake.input)  # noqa: F821
exp_id, key = snakemake.wildcards.exp, snakemake.wildcards.part  # noqa: F821
log.info("%s part %s: pruning at the %s scale: %s", exp_id, key, snakemake.params.scale, snakemake.params.settings)  # noqa: F821
runs = catalogue.get(exp_id).masks(snakemake.params.settings, key, snakemake.params.device, list(snakemake.input))  # noqa: F821
save_masks(runs, snakemake.output.masks)  # noqa: F821
facts = mask_facts(runs)
for run, t in facts.groupby("run", sort=False):
    log.info("%s: sparsity %.4f, %d of %d layers emptied, s_cr %s", run, t["achieved_sparsity"].iloc[0],
             t["collapsed"].sum(), len(t), t["s_cr"].iloc[0] if "s_cr" in t else "n/a")
    masks, linked = runs[run]["masks"], runs[run].get("connected")
    if at_chance(masks, linked):  # a result (it still trains), said before the GPU-hours are spent
        log.warning("%s: COLLAPSED: %s", run, collapse(masks, linked))
    elif said := collapse(masks, linked):
        log.warning("%s: %s", run, said)
jobs.write_table(facts, snakemake.output.facts, experiment=exp_id, scale=snakemake.params.scale, part=key)  # noqa: F821
