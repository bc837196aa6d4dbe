# The smoke test of the paper scale (`snakemake smoke --config scale=smoke`): one job per
# (experiment, model, dataset) of `all`, chosen from the catalogue (reluinit.pipeline.smoke.subset), run at
# the paper's sizes and cut short; then every job's peak memory against what its paper-scale job
# declares, and the seconds per optimizer step of each training family.


rule smoke:
    """Check the smoke subset's coverage and peak memory; tabulate the cost of a training step."""
    input:
        smoke_jobs,
    output:
        memory=f"{RESULTS}/memory.csv",
        cost=f"{RESULTS}/cost.csv",
    params:
        results=lambda w, output: str(Path(output.memory).parent),
    log:
        log_file("smoke"),
    localrule: True
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/smoke.py"
