# Reproduction pipeline for five papers on deep ReLU networks at initialization.
#   snakemake all --cores 2 --config scale=quick     every figure and report, small settings
#   snakemake op_f1 --cores 2                          one catalogue figure (paper scale)
# Targets go before --config, which takes every word after it as a key=value pair.

include: "workflow/rules/library.smk"  # the library on the path; config.yaml read as YAML, or its line named

configfile: "config.yaml"


report: "workflow/report/workflow.rst"


# Helpers, one file per concern (common.smk says which), then the rules, one file per stage; each
# rule's script is workflow/scripts/<rule>.py.
include: "workflow/rules/common.smk"
include: "workflow/rules/paths.smk"
include: "workflow/rules/inputs.smk"
include: "workflow/rules/fingerprints.smk"
include: "workflow/rules/resources.smk"
include: "workflow/rules/batching.smk"
include: "workflow/rules/checks.smk"
include: "workflow/rules/datasets.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/experiments.smk"
include: "workflow/rules/reports.smk"
include: "workflow/rules/smoke.smk"


rule all:
    """Every default catalogue figure, every paper's notebook and the claims scorecard."""
    default_target: True
    input:
        [figure_files(exp) for exp in DEFAULT],
        [report_files(paper) for paper in REPORT_PAPERS],
        paths.scorecard(RESULTS, "csv"),
        paths.scorecard(RESULTS, "html"),


onstart:
    check_slurm()
    check_device()
    provenance.save_memo()  # the DAG is built: what planning it computed, for the jobs' own processes


onerror:
    # A missing dataset offline, a damaged input, jobs sbatch refused: end with what to do, not with
    # Snakemake's "At least one job did not complete successfully".
    if job_instruction():
        stop(job_instruction())
    refused = sbatch_refusal(log)
    if refused:
        stop(refused)
