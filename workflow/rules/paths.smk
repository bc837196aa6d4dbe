# Where a job's files go, from its experiment id, paper or name (reluinit.pipeline.paths builds
# every path; nothing here writes "results/" + ...).


def log_file(name):
    return paths.log(RESULTS, name)


def benchmark_file(name):
    return paths.benchmark(RESULTS, name)


def figure_files(exp):
    """The figure (PDF, PNG) and what it was built with (its caption reads that), so that a
    target asking for a figure brings its caption's record up to date too."""
    return paths.figures(RESULTS, exp) + [paths.built(RESULTS, exp)]


def figure_png(exp, caption="../report/figure.rst"):
    """A figure's PNG as the Snakemake report shows it: under its paper, labelled by its id."""
    return report(
        figure_files(exp)[1],
        caption=caption,
        category=catalogue.paper_of(exp),
        subcategory=exp,
        labels={"figure": exp},
    )


def report_files(paper):
    return [paths.report(RESULTS, paper, "ipynb"), paths.report(RESULTS, paper, "html")]


def checkpoint_dir(w):
    return paths.checkpoints(RESULTS, w.exp, w.part)
