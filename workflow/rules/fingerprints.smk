# Code fingerprints: a job reruns when the library code it runs changes (a rule's `code` param).
# Training jobs carry only that of what their runs measure during training (during_code): they
# rerun on their settings (docs/results.md, "What reruns, and what does not").


def fingerprint(*label, of):
    """The code fingerprint of the objects ``of()`` returns, computed once per version of the
    library's source (provenance.memo): following the code means importing it, torch and seaborn
    included, which the next Snakemake process to plan these jobs then skips."""
    return provenance.memo("code", list(label), lambda: provenance.code_fingerprint(*of()))


@functools.cache
def measure_code(exp):
    return fingerprint("measure", exp, of=lambda: [catalogue.get(exp).measure])


@functools.cache
def measures_code(exps):
    """The measuring code of a job of several experiments (a paper's random nets)."""
    return fingerprint("measure", *exps, of=lambda: [catalogue.get(e).measure for e in exps])


@functools.cache
def during_code(exp):
    """What a training part's runs measure while they train (``Experiment.during``): none, for most."""
    return fingerprint("during", exp, of=lambda: list(catalogue.get(exp).during))


@functools.cache
def masks_code(exp):
    return fingerprint("masks", exp, of=lambda: [catalogue.get(exp).masks])


@functools.cache
def figure_code(exp):
    return figures_code((exp,))


@functools.cache
def figures_code(exps):
    """The plotting code of a job drawing ``exps`` (one id's figure and summary, or a paper's)."""

    def code():
        from reluinit.report import plotting

        return [f for e in exps for f in catalogue.figures_of(e)] + [plotting.save]

    return fingerprint("figures", *exps, of=code)


@functools.cache  # two rules (claims, scorecard) ask
def claims_code():
    return fingerprint("claims", of=lambda: [claims.load, claims.scorecard, claims.write_html, claims.summary])


@functools.cache
def notebook_code():
    return fingerprint("notebook", of=lambda: [f for f in vars(reports).values() if callable(f)])
