"""The figure code (reluinit.figures) reads tables and draws them: it never imports torch, so a
figure job starts without it, and its copies of sampling's names agree with the library's."""

import subprocess
import sys

from reluinit import catalogue


def test_no_figure_or_summary_of_the_catalogue_imports_torch():
    code = ("import sys\nfrom reluinit import catalogue, jobs\n"
            f"for e in {sorted(catalogue.ENTRIES)!r}:\n    catalogue.figures_of(e)\n"
            "jobs.start(None, threads=None)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_figures_of_gives_what_get_does():
    for exp_id in catalogue.ENTRIES:
        full = catalogue.get(exp_id)
        assert (full.figure, full.summary) == catalogue.figures_of(exp_id)
        assert catalogue.code_names(exp_id)["figure"].startswith("reluinit.figures.")


def test_tg_figures_colour_the_distributions_sampling_draws():
    from reluinit import sampling
    from reluinit.figures import tg

    assert tg.DISTRIBUTIONS == sampling.DISTRIBUTIONS
