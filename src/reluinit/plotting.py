"""One seaborn theme for every figure, and saving a figure in the formats the workflow promises."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are written to files, on machines without a display

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def theme() -> None:
    """Colour-blind-safe colours: seaborn's "colorblind" palette for unordered categories (inits,
    methods, distributions); ordered hues (sigma_w, width, depth, epoch) use viridis explicitly."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)


def panels(n: int, width: float = 4.2, height: float = 3.4, integer_x: bool = False, rows: int = 1):
    """``n`` axes in ``rows`` rows under the project theme, in reading order (``integer_x``: x is a
    layer index or a count)."""
    theme()
    cols = -(-n // rows)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    axes = list(axes.flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    if integer_x:
        for ax in axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig, axes[:n]


def save(fig, paths: list[str | Path]) -> None:
    """Write ``fig`` to every path (format from the suffix) and close it."""
    for path in paths:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
    plt.close(fig)


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
