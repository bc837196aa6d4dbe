# One parameterised notebook per paper (notebooks/<PAPER>.ipynb), executed by papermill on
# the paper's result tables and figures and exported to HTML. Notebooks only read results.

rule notebook:
    input:
        unpack(lambda w: paper_inputs(w.paper)),
        notebook="notebooks/{paper}.ipynb",
    output:
        ipynb=paths.report(RESULTS, "{paper}", "ipynb"),
        html=report(
            paths.report(RESULTS, "{paper}", "html"),
            caption="../report/notebook.rst",
            category="reports",
            labels={"report": "{paper}"},
        ),
    params:
        scale=SCALE,
        results=lambda w, output: Path(output.ipynb).parent.parent,
    log:
        log_file("reports/{paper}"),
    benchmark:
        benchmark_file("reports/{paper}")
    conda:
        "../../envs/reports.yaml"
    shell:
        "(papermill {input.notebook} {output.ipynb} -k python3"
        " -p scale {params.scale} -p results {params.results}"
        " && jupyter nbconvert --to html --output-dir $(dirname {output.html}) {output.ipynb}) > {log} 2>&1"
