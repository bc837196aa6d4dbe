"""RP's pruned and trained nets: figures and summaries (``reluinit.experiments.rp_train`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from ..report import plotting

SETUP_LABELS = {"eoc_rescaled": "EOC + rescaling", "eoc": "EOC", "ordered": "ordered"}


def _final(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its last epoch (final and best-epoch accuracy are on every row)."""
    return table.sort_values("epoch").groupby("run", as_index=False).last()


def _population_sd(a) -> float:
    """The population sd (ddof 0) of the seeds' values, as the paper's ± is: Table 1's ResNet50 SNIP
    cell at 99.9%, 19.98 ± 14.12, is two seeds at 10.00 and one at 39.95 under ddof 0 (ddof 1 would
    print 17.29). NaN for a single seed (no spread to measure, as pandas' ddof-1 sd gave)."""
    a = pd.Series(a, dtype=float)
    return float(a.std(ddof=0)) if len(a) > 1 else float("nan")


def _sd_interval(a) -> tuple[float, float]:
    """Mean ± population sd, the error bar of a figure (seaborn's ``errorbar="sd"`` is ddof 1)."""
    m, sd = float(pd.Series(a, dtype=float).mean()), _population_sd(a)
    return m - sd, m + sd


def _accuracy_by(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean and population sd (ddof 0, as the paper's ±: ``_population_sd``) over repetitions of
    the best-epoch and final test accuracy (in %)."""
    return _final(table).groupby(by, as_index=False).agg(
        runs=("run", "count"), best_acc=("best_test_acc", lambda a: 100 * a.mean()),
        best_acc_sd=("best_test_acc", lambda a: 100 * _population_sd(a)),
        final_acc=("final_test_acc", lambda a: 100 * a.mean()),
        final_acc_sd=("final_test_acc", lambda a: 100 * _population_sd(a)),
        diverged=("run_diverged", "sum"), collapsed_layers=("collapsed_layers", "max"))


def _length(s: dict) -> str:
    """How long each run trains, as its recipe says ("10000 iterations", "160 epochs")."""
    r = s["recipe"]
    return f"{r['iterations']} iterations" if r.get("iterations") else f"{r['epochs']} epochs"


def _catalogue_id(table: pd.DataFrame) -> str:
    return str(table["experiment"].iloc[0]) if "experiment" in table else "RP"


def heat_figure(table: pd.DataFrame, s: dict):
    """One heatmap (depth x sparsity, final test accuracy) per set-up (columns) and activation (rows)."""
    final = _final(table)
    activations = [a for a in s["activations"] if a in set(final["activation"])]
    setups = [u for u in s["setups"] if u in set(final["setup"])]
    fig, axes = plotting.panels(len(activations) * len(setups), width=3.6, height=3.2, rows=len(activations))
    for ax, (activation, setup) in zip(axes, [(a, u) for a in activations for u in setups]):
        g = final[(final["activation"] == activation) & (final["setup"] == setup)]
        grid = g.pivot_table(index="depth", columns="sparsity", values="final_test_acc", aggfunc="mean")
        sns.heatmap(100 * grid.sort_index(ascending=False), ax=ax, vmin=0, vmax=100, cmap="viridis", annot=True,
                    fmt=".0f", annot_kws={"fontsize": 6}, cbar=False)
        ax.set(title=f"{activation}, {SETUP_LABELS[setup]}", xlabel="sparsity", ylabel="depth")
    fig.suptitle(f"{_catalogue_id(table)}: test accuracy (%) after {_length(s)}, SBP, FFNN width {s['width']}, "
                 f"{table['dataset'].iloc[0]}")
    return fig


def heat_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _accuracy_by(table, ["activation", "setup", "depth", "sparsity"])


def accuracy_figure(table: pd.DataFrame, s: dict):
    final = _final(table)
    facets = [c for c in ("dataset", "activation") if final[c].nunique() > 1]
    final = final.assign(facet=final[facets].astype(str).agg(" ".join, axis=1) if facets else "",
                         net=final["model"].str.replace("stable_", "", regex=False), best=100 * final["best_test_acc"])
    cells = list(dict.fromkeys(zip(final["facet"], final["net"])))
    fig, axes = plotting.panels(len(cells), width=3.8, height=3.2)
    for ax, (facet, net) in zip(axes, cells):
        g = final[(final["facet"] == facet) & (final["net"] == net)]
        sns.pointplot(data=g, x="sparsity", y="best", hue="method", ax=ax, errorbar=_sd_interval,
                      dodge=0.3 if g["method"].nunique() > 1 else False,  # seaborn divides by levels - 1
                      markersize=4, linewidth=1)
        ax.set(title=f"{facet} {net}".strip(), xlabel="sparsity", ylabel="best-epoch test accuracy (%)")
        ax.legend(fontsize=6)
    fig.suptitle(f"{_catalogue_id(table)}: {', '.join(sorted(final['dataset'].unique()))}, "
                 f"{s.get('reps', 1)} seed(s) per cell, "
                 f"recipe {', '.join(sorted(final['recipe'].unique()))}")
    return fig


def accuracy_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _accuracy_by(table, ["dataset", "activation", "model", "method", "sparsity"])


def t4_figure(table: pd.DataFrame, s: dict):
    final = _final(table)
    final = final.assign(setup=final["setup"].map(SETUP_LABELS), acc=100 * final["final_test_acc"])
    fig, axes = plotting.panels(1, width=5.0, height=3.6)
    sns.barplot(data=final, x="depth", y="acc", hue="setup", ax=axes[0], errorbar=_sd_interval)
    # read after the whole run, as Figure 3 is ("after 10k iterations"), which Table 4 follows
    axes[0].set(ylabel=f"test accuracy (%) after {_length(s)}", xlabel="depth (conv layers)", ylim=(0, 100))
    axes[0].set_title(f"RP-T4: vanilla {s['activation']} CNN, {s['width']} channels, SBP at sparsity "
                      f"{', '.join(map(str, s['sparsities']))}, {final['dataset'].iloc[0]}, "
                      f"{final.groupby(['setup', 'depth']).size().max()} seed(s), mean ± sd", fontsize=9)
    return fig


def t4_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _accuracy_by(table, ["setup", "depth", "sparsity"])
