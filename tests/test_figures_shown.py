"""Every figure legible where the documentation shows it: drawn as a grid no wider than the gallery's
column (``plotting.MAX_WIDTH_IN``), shown at its natural size and linked to its full file, with its
smallest text (which ``plotting.save`` writes into the PNG) at least ``gallery.MIN_TEXT_PX`` CSS px
tall at the width it is shown in a 1400 px window (the columns measured in Chromium)."""

import logging
import re

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from conftest import ROOT
from reluinit.report import gallery, plotting

FIGURES = sorted((ROOT / "reference" / "paper" / "figures").glob("*.png"))
SHOWN = re.compile(r"(\[)?!\[(?:\\.|[^\]])*\]\(([^)]*figures/([\w-]+)\.png)\)(\{[^}]*\})?(\]\(([^)]*)\))?")


def test_a_grid_of_panels_fits_the_column_and_save_records_its_smallest_text(tmp_path, caplog):
    fig, axes = plotting.panels(8, width=3.4, height=3.4)
    assert fig.get_figwidth() <= plotting.MAX_WIDTH_IN and len(axes) == 8
    assert fig.get_figwidth() == pytest.approx(2 * 3.4) and fig.get_figheight() == pytest.approx(4 * 3.4)
    fig, axes = plotting.panels(6, width=4.0, rows=2)  # rows fixed: the panels narrow to fit
    assert fig.get_figwidth() == pytest.approx(plotting.MAX_WIDTH_IN)
    plt.close("all")
    fig, axes = plotting.panels(1, width=5.0)
    axes[0].set_title("a title")
    axes[0].text(0.5, 0.5, "a note too small to read", fontsize=5)
    with caplog.at_level(logging.WARNING):
        plotting.save(fig, [tmp_path / "f.png", tmp_path / "f.pdf"])
    with Image.open(tmp_path / "f.png") as im:
        assert im.info[plotting.SMALLEST_TEXT_KEY] == "5"
    assert "with a 5 pt text" in caplog.text
    assert gallery.shown_text_px(tmp_path / "f.png", gallery.GALLERY_COLUMN_PX) == pytest.approx(5 * 96 / 72, rel=0.01)


@pytest.mark.parametrize("png", FIGURES, ids=[p.stem for p in FIGURES])
def test_every_committed_figure_is_legible_in_the_gallery(png):
    with Image.open(png) as im:
        assert plotting.SMALLEST_TEXT_KEY in im.info, f"{png.name}: drawn before save recorded its text; " \
            "redraw it: python -m reluinit.report.reference render --figures"
        width_in = im.size[0] / float(im.info["dpi"][0])
    assert width_in <= plotting.MAX_WIDTH_IN + 0.01, f"{png.name} is {width_in:.2f} in wide"
    px = gallery.shown_text_px(png, gallery.GALLERY_COLUMN_PX)
    assert px >= gallery.MIN_TEXT_PX, f"{png.name}: its smallest text is {px:.1f} CSS px in the gallery"


def test_the_gallery_shows_each_figure_at_its_natural_size_linked_to_its_file():
    page = gallery.markdown(ROOT / "reference" / "paper")
    shown = SHOWN.findall(page)
    assert {m[2] for m in shown} == {p.stem for p in FIGURES}
    for linked, src, exp, attrs, _, href in shown:
        assert linked and href == src, exp
        assert attrs == f'{{ width="{gallery.natural_width(ROOT / "reference/paper/figures" / f"{exp}.png")}" }}', exp
    assert "hide:\n  - toc" in (ROOT / "docs" / "gallery.md").read_text()  # the column GALLERY_COLUMN_PX measures


def test_every_figure_a_page_shows_is_legible_there():
    """The paper pages' and the README's figures: at their natural size, linked, legible in a column
    with its table of contents (PAGE_COLUMN_PX)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = 0
    for page in pages:
        for linked, src, exp, attrs, _, href in SHOWN.findall(page.read_text()):
            found += 1
            png = ROOT / "reference" / "paper" / "figures" / f"{exp}.png"
            where = f"{page.relative_to(ROOT)}: {exp}"
            assert linked and href == src, f"{where} is not linked to its full file"
            width = re.search(r'width="(\d+)"', attrs or "")
            assert width and int(width.group(1)) == gallery.natural_width(png), \
                f"{where}: not at its natural size: width=\"{gallery.natural_width(png)}\""
            px = gallery.shown_text_px(png, gallery.PAGE_COLUMN_PX)
            assert px >= gallery.MIN_TEXT_PX, f"{where}: its smallest text is {px:.1f} CSS px"
    assert found >= 6  # one per paper page


def test_rp_f3s_heatmaps_at_the_papers_shape_are_legible_in_the_gallery(tmp_path, caplog):
    """RP-F3's heatmaps (and RP-F5's, whose layout is theirs) drawn from a table of the paper's
    shape (its config: 3 set-ups x 6 depths x 9 sparsities x 3 seeds, and the deciding cells at the
    other readings; accuracies drawn at random, a layout check, no result) and held to the committed
    figures' floor, so a change of their layout fails here before a figure is redrawn."""
    import itertools

    import numpy as np
    import pandas as pd
    import yaml

    from reluinit.figures import rp_train
    from reluinit.pipeline.config import settings

    s = settings(yaml.safe_load((ROOT / "config.yaml").read_text()), "RP-F3", "paper")
    rng = np.random.default_rng(0)
    rows = []
    for cell in s["cells"]:
        axes = {"momentum": cell["momentum"], "ordered_chi": cell["ordered_chi"],
                "setup": cell.get("setup", s["setups"]), "depth": cell.get("depth", s["depths"]),
                "sparsity": cell.get("sparsity", s["sparsities"])}
        for m, chi, setup, depth, sparsity, rep in itertools.product(*axes.values(), range(s["reps"])):
            rows.append({"experiment": "RP-F3", "epoch": 1, "run": f"{m}-{chi}-{setup}-{depth}-{sparsity}-{rep}",
                         "activation": "tanh", "setup": setup, "depth": depth, "sparsity": sparsity, "rep": rep,
                         "momentum": m, "ordered_chi": chi, "dataset": "mnist", "final_test_acc": rng.uniform(0.1, 1)})
    fig = rp_train.heat_figure(pd.DataFrame(rows).drop_duplicates("run"), s)
    with caplog.at_level(logging.WARNING):
        plotting.save(fig, [tmp_path / "RP-F3.png"])  # titles wrapped to fit, then checked
    assert "layout problem" not in caplog.text, caplog.text
    with Image.open(tmp_path / "RP-F3.png") as im:
        assert im.size[0] / im.info["dpi"][0] <= plotting.MAX_WIDTH_IN + 0.01
    assert gallery.shown_text_px(tmp_path / "RP-F3.png", gallery.GALLERY_COLUMN_PX) >= gallery.MIN_TEXT_PX
