"""One seaborn theme for every figure, and saving a figure in the formats the workflow promises."""

from __future__ import annotations

import contextlib
import logging
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are written to files, on machines without a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def theme() -> None:
    """Colour-blind-safe colours: seaborn's "colorblind" palette for unordered categories (inits,
    methods, distributions); ordered hues (sigma_w, width, depth, epoch) use viridis explicitly."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)


# Where a figure is shown: the documentation's gallery column is 938 CSS px wide at a 1400 px window
# (Material theme, its table of contents hidden; measured in Chromium), and a browser shows a PNG
# of ``DPI`` at its natural size at 96 CSS px per inch. So a figure at most ``MAX_WIDTH_IN`` wide is
# shown whole at its natural size, where a ``MIN_TEXT_PT`` text is 9.3 CSS px tall (our floor for
# legible; tests/test_figures_shown.py holds every committed figure to it).
DPI = 150
MAX_WIDTH_IN = 9.6
MIN_TEXT_PT = 7.0
SMALLEST_TEXT_KEY = "Smallest text (pt)"  # the PNG text chunk ``save`` writes it to


def panels(n: int, width: float = 4.2, height: float = 3.4, integer_x: bool = False, rows: int | None = None):
    """``n`` axes under the project theme, in reading order (``integer_x``: x is a layer index or a
    count), as a grid no wider than ``MAX_WIDTH_IN``: as many ``width``-inch panels per row as fit
    (``rows`` fixes the number of rows instead, and the panels narrow to fit)."""
    theme()
    if rows is None:
        cols = max(1, min(n, int((MAX_WIDTH_IN + 1e-9) // width)))
        rows = -(-n // cols)
    cols = -(-n // rows)
    width = min(width, MAX_WIDTH_IN / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    axes = list(axes.flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    if integer_x:
        for ax in axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig, axes[:n]


# Seed for seaborn's bootstrapped confidence bands (``seed=BOOTSTRAP_SEED``), so that a figure
# drawn twice from one table is the same picture, byte for byte.
BOOTSTRAP_SEED = 0


@contextlib.contextmanager
def numpy_seeded(seed: int = 0):
    """Seed numpy's global generator for the block, then put its state back: seaborn's stripplot
    jitter draws from it and takes no seed of its own."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def save(fig, paths: list[str | Path]) -> None:
    """Write ``fig`` to every path (format from the suffix) and close it; log (as a warning) any
    text that the picture cuts or that overlaps its neighbour (``layout_problems``)."""
    wrap_titles(fig)  # leaves the canvas drawn with the final texts
    for problem in layout_problems(fig, draw=False):
        logging.getLogger(__name__).warning("layout problem: %s", problem)
    smallest = smallest_text_pt(fig)
    if smallest < MIN_TEXT_PT or fig.get_figwidth() > MAX_WIDTH_IN + 1e-9:
        logging.getLogger(__name__).warning(
            "layout problem: %.3g in wide with a %.3g pt text, where the gallery shows at most %g in with texts "
            "of %g pt or more", fig.get_figwidth(), smallest, MAX_WIDTH_IN, MIN_TEXT_PT)
    for path in paths:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        png = Path(path).suffix == ".png"  # a PDF takes only its standard metadata keys
        fig.savefig(path, dpi=DPI, metadata={SMALLEST_TEXT_KEY: f"{smallest:g}"} if png else None)
    plt.close(fig)


def smallest_text_pt(fig) -> float:
    """The size (points) of the smallest text the figure draws: titles, labels, tick labels, legends,
    annotations (a heatmap's numbers) and notes, in visible axes (inf where it draws none)."""
    from matplotlib.text import Text

    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and (t.axes is None or t.axes.get_visible())]
    return min(sizes, default=float("inf"))


def footnote(fig, text: str) -> None:
    """A small note under the panels (what the figure could not draw): the figure grows by the
    note's height, so the panels keep theirs."""
    lines = _wrap(text, int(fig.get_figwidth() * 13)).split("\n")
    extra = 0.19 * len(lines) + 0.1  # inches: 8-point lines and a margin
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + extra)
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        bottom = extra / (height + extra)
        engine.set(rect=(0, bottom, 1, 1 - bottom))
    fig.text(0.005, 0.005, "\n".join(lines), ha="left", va="bottom", fontsize=8, color="0.3")


def _wrap(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters, never inside $math$."""
    lines = []
    for para in text.split("\n"):
        line = ""
        for word in re.findall(r"(?:[^\s$]|\$[^$]*\$)+", para):
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "\n".join(lines)


def wrap_titles(fig) -> None:
    """Break every title (the figure's and each axes') that is wider than its room into lines that
    fit, so that no saved picture cuts its title and no axes' title runs into its neighbour's; the
    layout engine makes room for the lines."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = [(fig._suptitle, None)] if fig._suptitle is not None else []
    titles += [(ax.title, ax) for ax in fig.axes if ax.get_visible()]
    for text, ax in titles:
        content = text.get_text()
        if not content.strip():
            continue
        for _ in range(4):  # shrink the line width until it fits (a few draws at most)
            ext = text.get_window_extent(renderer)
            left, right = _room(fig, ax)
            centre = (ext.x0 + ext.x1) / 2  # titles are centred: room on both sides of the centre
            room = 2 * min(centre - left, right - centre)
            if ext.width <= room - 4:
                break
            longest = max(len(line) for line in text.get_text().split("\n"))
            text.set_text(_wrap(content, max(20, int(longest * (room - 4) / ext.width) - 1)))
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()


def _room(fig, ax) -> tuple[float, float]:
    """The horizontal span (display units) a title may take: the figure's, less, for an axes' title,
    the axes beside it in its row and half the gap to them (their titles sit at the same height)."""
    left, right = fig.bbox.x0, fig.bbox.x1
    if ax is None:
        return left, right
    box = ax.bbox
    for other in fig.axes:
        b = other.bbox
        if other is ax or not other.get_visible() or min(box.y1, b.y1) <= max(box.y0, b.y0):
            continue  # not in this row
        if b.x1 <= box.x0 + 1:  # the gap between two axes is shared by their titles
            left = max(left, (b.x1 + box.x0) / 2)
        elif b.x0 >= box.x1 - 1:
            right = min(right, (box.x1 + b.x0) / 2)
    return left, right


def _texts(fig):
    """(what, text artist) of every title, axis label and tick label a reader must be able to read."""
    out = [("suptitle", fig._suptitle)] if fig._suptitle is not None else []
    for i, ax in enumerate(a for a in fig.axes if a.get_visible()):
        out += [(f"axes {i} title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        out += [(f"axes {i} x label", ax.xaxis.label), (f"axes {i} y label", ax.yaxis.label)]
        out += [(f"axes {i} x tick", t) for t in _shown_ticks(ax, "x")]
        out += [(f"axes {i} y tick", t) for t in _shown_ticks(ax, "y")]
    return [(what, t) for what, t in out if t.get_visible() and t.get_text().strip()]


def _shown_ticks(ax, which: str):
    """The tick labels matplotlib draws: those inside the axis' view limits."""
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    labels = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    pos = 0 if which == "x" else 1
    return [t for t in labels if t.get_visible() and t.get_text().strip() and lo <= t.get_position()[pos] <= hi]


def layout_problems(fig, slack: float = 1.0, draw: bool = True) -> list[str]:
    """Texts (tick labels, titles, labels, legends, notes, annotations) that run past the figure's
    edge (the saved picture cuts them), blocks of text that overlap each other, and x tick labels of
    one axes that overlap; measured with the renderer after the layout engine has run
    (``draw=False``: the canvas is already drawn as it stands, e.g. by ``wrap_titles``)."""
    if draw:
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    problems = []
    boxes = _boxes(fig, renderer)
    ticks = [(what, t.get_window_extent(renderer), t.get_text()) for what, t in _texts(fig) if "tick" in what]
    for what, ext, text in ticks + boxes:
        past = {"left": box.x0 - ext.x0, "right": ext.x1 - box.x1, "bottom": box.y0 - ext.y0, "top": ext.y1 - box.y1}
        for edge, by in past.items():
            if by > slack:
                problems.append(f"{what} {text!r} runs {by:.0f} px past the figure's {edge} edge")
    for i, ax in enumerate(a for a in fig.axes if a.get_visible()):
        ticks = sorted((t.get_window_extent(renderer) for t in _shown_ticks(ax, "x")), key=lambda e: e.x0)
        if any(b.x0 < a.x1 - slack for a, b in zip(ticks, ticks[1:])):
            problems.append(f"axes {i} x tick labels overlap")
    for n, (what, a, text) in enumerate(boxes):
        for other, b, other_text in boxes[n + 1:]:
            if min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack:
                problems.append(f"{what} {text!r} overlaps {other} {other_text!r}")
    return problems


def _boxes(fig, renderer) -> list:
    """(what, window extent, its text) of every block of text that must not touch another: titles,
    axis labels, legends, notes and annotations (tick labels are checked along their own axis)."""
    found = [(what, t) for what, t in _texts(fig) if "tick" not in what]
    named = {id(t) for _, t in found}  # the suptitle is one of the figure's texts too
    found += [(f"figure text {i}", t) for i, t in enumerate(fig.texts) if id(t) not in named]
    for i, ax in enumerate(a for a in fig.axes if a.get_visible()):
        found += [(f"axes {i} text", t) for t in ax.texts]
    out = [(what, t.get_window_extent(renderer), t.get_text()[:40]) for what, t in found
           if t.get_visible() and t.get_text().strip()]
    legends = [(f"axes {i} legend", ax.get_legend()) for i, ax in enumerate(a for a in fig.axes if a.get_visible())]
    legends += [(f"figure legend {i}", leg) for i, leg in enumerate(fig.legends)]
    out += [(what, leg.get_window_extent(renderer), "") for what, leg in legends if leg is not None and leg.get_visible()]
    return out


def polygons(ax, vertices, seed: int = 0) -> None:
    """Fill the regions given as vertex rows (columns region, u, v, in order), one random colour
    each, with thin edges: a picture of a partition of the plane."""
    shapes = [g[["u", "v"]].to_numpy() for _, g in vertices.groupby("region", sort=True)]
    colours = np.random.default_rng(seed).uniform(0.25, 0.95, size=(len(shapes), 3))
    ax.add_collection(PolyCollection(shapes, facecolors=colours, edgecolors="k", linewidths=0.3))
    ax.set_xlim(vertices["u"].min(), vertices["u"].max())
    ax.set_ylim(vertices["v"].min(), vertices["v"].max())
    ax.set_aspect("equal")
    ax.grid(False)


def as_labels(table, col: str, name: str):
    """``table`` with column ``name`` holding ``col``'s numbers as short text (``f"{v:g}"``), so
    seaborn colours them as categories, one legend entry per value."""
    return table.assign(**{name: table[col].map(lambda v: f"{v:g}")})
