"""Rule `smoke`: judge the smoke subset: coverage of the paper DAG and peak memory against the
declared mem_mb (tables results/smoke/memory.csv and cost.csv); fail with the offending jobs named."""

from reluinit.pipeline import jobs, smoke

log = jobs.start(snakemake.log[0])  # noqa: F821 - injected by Snakemake
config, results = snakemake.config, snakemake.params.results  # noqa: F821
chosen = smoke.subset(config)
memory = smoke.memory_table(config, chosen, results)
jobs.write_table(memory, snakemake.output.memory)  # noqa: F821
cost = smoke.cost_table(config, chosen, results)
jobs.write_table(cost, snakemake.output.cost)  # noqa: F821
log.info("peak memory, projected to the paper's data:\n%s", memory.drop(columns="benchmark").to_string(index=False))
log.info("seconds per optimizer step on this CPU:\n%s", cost.to_string(index=False))
problems = [f"{r.job}: {r.projected_mb:.0f} MB projected (max_rss {r.max_rss_mb:.0f} + data {r.data_extra_mb:.0f}) "
            f"> mem_mb {r.declared_mem_mb}" for r in memory.itertuples() if not r.fits]
problems += [f"no smoke job covers {c}" for c in sorted(smoke.uncovered(config, chosen))]
if problems:
    raise SystemExit("smoke test of the paper scale failed:\n  " + "\n  ".join(problems))
