# Every catalogue experiment goes the same way: its jobs (parts) measure and write rows,
# the rows are combined into one tidy table, and the table is plotted. The science is in
# reluinit.experiments.<paper>; these rules only move files.


wildcard_constraints:
    paper="[A-Z]+",
    exp="[A-Z]+-[A-Za-z0-9]+",
    part="[A-Za-z0-9_=.-]+",


rule measure:
    input:
        measure_inputs,
    output:
        paths.part(RESULTS, "{exp}", "{part}", paper="{paper}"),
    params:
        settings=lambda w: exp_settings(w.exp),
        scale=SCALE,
        device=config["device"],
    message:
        "{wildcards.exp} [{wildcards.part}] at the {params.scale} scale -> {output}; settings: {params.settings}"
    log:
        log_file("{paper}/{exp}/{part}"),
    benchmark:
        benchmark_file("{paper}/{exp}/{part}")
    threads: 2
    resources:
        mem_mb=8000,
        runtime="2h",
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/measure.py"


rule combine:
    input:
        lambda w: [paths.part(RESULTS, w.exp, key) for key in part_keys(w.exp)],
    output:
        paths.table(RESULTS, "{exp}", paper="{paper}"),
    log:
        log_file("{paper}/{exp}"),
    localrule: True
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/combine.py"


rule figure:
    input:
        lambda w: paths.table(RESULTS, w.exp),
    output:
        pdf=paths.figures(RESULTS, "{exp}")[0],
        png=report(
            paths.figures(RESULTS, "{exp}")[1],
            caption="../report/figure.rst",
            category="figures",
            subcategory="{exp}",
            labels={"figure": "{exp}"},
        ),
    params:
        settings=lambda w: exp_settings(w.exp),
        scale=SCALE,
    log:
        log_file("figures/{exp}"),
    benchmark:
        benchmark_file("figures/{exp}")
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/figure.py"


# One short target per catalogue id: `snakemake op_f1` builds results/figures/OP-F1.{pdf,png}.
for _exp in EXPERIMENTS:

    rule:
        name:
            _exp.lower().replace("-", "_")
        input:
            figure_files(_exp),
        localrule: True
