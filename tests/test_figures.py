"""The figure code (reluinit.figures) reads tables and draws them: it never imports torch, so a
figure job starts without it, and its copies of sampling's names agree with the library's."""

import subprocess
import sys
from pathlib import Path

import pytest

from reluinit.pipeline import catalogue


def _modules_after(code, prefixes):
    """The modules under `prefixes` that a fresh interpreter holds after running `code`."""
    code = (f"import sys\n{code}\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {tuple(prefixes)!r}"
            f" or m.startswith({tuple(p + '.' for p in prefixes)!r})))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_no_figure_or_summary_of_the_catalogue_imports_torch():
    code = ("from reluinit.pipeline import catalogue, jobs\n"
            f"for e in {sorted(catalogue.ENTRIES)!r}:\n    catalogue.figures_of(e)\n"
            "jobs.start(None, threads=None)")
    assert _modules_after(code, ("torch", "torchvision")) == "[]"


def test_no_measurement_of_the_catalogue_imports_the_plotting_stack():
    """The mirror image: a measuring job loads its experiment's functions and never pays for
    seaborn, matplotlib or this project's figure modules (about 0.8 s of every measure job's start-up),
    nor for numba, which only the jobs that cut planes import, when they cut one (about 0.3 s)."""
    code = ("from reluinit.pipeline import catalogue\n"
            f"for e in {sorted(catalogue.ENTRIES)!r}:\n"
            "    x = catalogue.get(e); x.parts, x.measure, x.masks, x.trained")
    assert _modules_after(code, ("seaborn", "matplotlib", "reluinit.figures", "numba", "llvmlite")) == "[]"


def test_figures_of_gives_what_get_does():
    for exp_id in catalogue.ENTRIES:
        full = catalogue.get(exp_id)
        assert (full.figure, full.summary) == catalogue.figures_of(exp_id)
        assert catalogue.code_names(exp_id)["figure"].startswith("reluinit.figures.")


def test_tg_figures_colour_the_distributions_sampling_draws():
    from reluinit import sampling
    from reluinit.figures import tg

    assert tg.DISTRIBUTIONS == sampling.DISTRIBUTIONS


@pytest.mark.parametrize("exp_id", ["LR-F6", "RP-T7", "TG-F4"])
def test_a_figure_drawn_twice_from_one_table_is_the_same_picture(exp_id):
    """The figures with random parts (seaborn's bootstrapped bands, stripplot jitter) are seeded:
    a committed paper-scale table drawn twice gives the same PNG bytes, so a rebuild that changed
    no number changes no picture."""
    import io
    import json

    from reluinit.report import plotting, reference

    tree = Path(__file__).resolve().parents[1] / "reference" / "paper"
    table = reference.read_table(tree, exp_id)
    settings = json.loads((tree / "figures" / f"{exp_id}.json").read_text())["settings"]
    figure, _ = catalogue.figures_of(exp_id)
    pictures = []
    for _ in range(2):
        fig = figure(table, settings)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=60)
        plotting.plt.close(fig)
        pictures.append(buf.getvalue())
    assert pictures[0] == pictures[1]


def test_rp_summaries_give_the_population_sd_over_seeds_as_the_papers_pm():
    """RP's ± is the population sd (ddof 0): Table 1's ResNet50 SNIP at 99.9%, 19.98 ± 14.12, is
    two seeds at chance and one at 39.95 (ddof 1 would give 17.29); a cell of one seed has none."""
    import pandas as pd

    from reluinit.figures import rp_train

    accs = [0.10, 0.10, 0.3994, 0.93]  # three seeds of one cell, one seed of another
    table = pd.DataFrame({"run": range(4), "epoch": 160, "cell": ["a", "a", "a", "b"], "best_test_acc": accs,
                          "final_test_acc": accs, "run_diverged": False, "collapsed_layers": 0})
    out = rp_train._accuracy_by(table, ["cell"]).set_index("cell")
    assert out.loc["a", "best_acc"] == pytest.approx(19.98)
    assert out.loc["a", "best_acc_sd"] == pytest.approx(14.1139, abs=1e-4)  # not ddof 1's 17.286
    assert out.loc["a", "final_acc_sd"] == out.loc["a", "best_acc_sd"]
    assert out.loc["a", "runs"] == 3 and pd.isna(out.loc["b", "best_acc_sd"])
    assert rp_train._sd_interval([10.0, 10.0, 39.94]) == pytest.approx((19.98 - 14.1139, 19.98 + 14.1139), abs=1e-4)
