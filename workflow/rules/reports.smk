# One parameterised notebook per paper (notebooks/<PAPER>.ipynb), executed by papermill on
# the paper's result tables, figures and the claims scorecard, and exported to HTML. Notebooks
# only read results. In the Snakemake report, each paper's figures and notebook share a category.
# (Not named `notebook`: Snakemake puts workflow/scripts/ on a job's import path, where a script
# notebook.py would stand in for the `notebook` package that nbconvert imports.)

rule execute_notebook:
    """Execute a paper's notebook with papermill on its tables, figures and claims; export HTML."""
    input:
        unpack(lambda w: paper_inputs(w.paper)),
        notebook="notebooks/{paper}.ipynb",
        claims=paths.paper_claims(RESULTS, "{paper}"),
    output:
        ipynb=paths.report(RESULTS, "{paper}", "ipynb"),
        html=report(
            paths.report(RESULTS, "{paper}", "html"),
            caption="../report/notebook.rst",
            category="{paper}",
            subcategory="notebook",
            labels={"report": "{paper} notebook"},
        ),
    params:
        scale=SCALE,
        results=lambda w, output: Path(output.ipynb).parent.parent,
        code=lambda w: notebook_code(),
    log:
        log_file("reports/{paper}"),
    benchmark:
        benchmark_file("reports/{paper}")
    conda:
        "../../envs/reports.yaml"
    script:
        "../scripts/execute_notebook.py"


# Every claim of claims.yaml judged against the tables of this run: per paper (what its notebook
# shows), then results/claims.csv and the scorecard page that opens the Snakemake report.
rule claims:
    """Judge one paper's claims of claims.yaml on its current tables."""
    input:
        claims="claims.yaml",
        tables=lambda w: paper_inputs(w.paper)["tables"],
    output:
        paths.paper_claims(RESULTS, "{paper}"),
    params:
        results=lambda w, output: Path(output[0]).parent.parent,
        scale=SCALE,
        code=lambda w: claims_code(),
    log:
        log_file("reports/claims-{paper}"),
    conda:
        "../../envs/reports.yaml"
    script:
        "../scripts/claims.py"


rule scorecard:
    """Gather every paper's judged claims into claims.csv and the scorecard page."""
    input:
        claims="claims.yaml",
        papers=[paths.paper_claims(RESULTS, p) for p in PAPERS],
    output:
        csv=paths.scorecard(RESULTS, "csv"),
        html=report(
            paths.scorecard(RESULTS, "html"),
            caption="../report/scorecard.rst",
            category="0 Scorecard",
            labels={"report": "claims scorecard"},
        ),
    params:
        scale=SCALE,
        code=lambda w: claims_code(),
    log:
        log_file("reports/scorecard"),
    conda:
        "../../envs/reports.yaml"
    script:
        "../scripts/scorecard.py"
