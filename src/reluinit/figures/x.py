"""X (across the papers): figures and summaries (``reluinit.experiments.x`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from ..report import plotting


def f1_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, width=4.8, integer_x=True)
    data = table.assign(**{"$\\sigma_w^2$": table["sigma_w2"].map(lambda v: f"{v:g}"), "activation": table["activation"]})
    for ax, col, label in [(axes[0], "regions_per_neuron", "regions along a line / #neurons"),
                           (axes[1], "transitions_per_neuron", "transitions (EP) / #neurons")]:
        sns.lineplot(data=data, x="depth", y=col, hue="$\\sigma_w^2$", style="activation", marker="o",
                     errorbar="se", ax=ax, palette="viridis")
        ax.set(yscale="log", ylabel=label)
    axes[0].get_legend().remove()
    sns.move_legend(axes[1], "upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"X-F1: width {s['width']}, lines between {table['dataset'].iloc[0]} test pairs; "
                 "flat = linear in #neurons (LR), rising = exponential in depth (EP)")
    return fig


def f1_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per activation and sigma_w^2: regions per neuron at the shallowest and the deepest depth
    and their ratio (about 1: linear in #neurons; growing with depth: exponential regime)."""
    per = table.groupby(["activation", "sigma_w2", "depth"])["regions_per_neuron"].mean()
    rows = []
    for (act, s2), g in per.groupby(level=[0, 1]):
        rows.append({"activation": act, "sigma_w2": s2, "depths": f"{g.index[0][2]}-{g.index[-1][2]}",
                     "per_neuron_shallow": g.iloc[0], "per_neuron_deep": g.iloc[-1],
                     "deep_over_shallow": g.iloc[-1] / g.iloc[0]})
    return pd.DataFrame(rows)
