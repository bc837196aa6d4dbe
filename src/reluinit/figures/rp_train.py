"""RP's pruned and trained nets: figures and summaries (``reluinit.experiments.rp_train`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
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
        trained_seeds=("final_test_acc", lambda a: int((a >= TRAINED).sum())),
        diverged=("run_diverged", "sum"), collapsed_layers=("collapsed_layers", "max"))


def _length(s: dict) -> str:
    """How long each run trains, as its recipe says ("10000 iterations", "160 epochs")."""
    r = s["recipe"]
    return f"{r['iterations']} iterations" if r.get("iterations") else f"{r['epochs']} epochs"


def _catalogue_id(table: pd.DataFrame) -> str:
    return str(table["experiment"].iloc[0]) if "experiment" in table else "RP"


# What a cell's seeds say, in our words (the paper shows colours, not thresholds): a seed "trains"
# at a final test accuracy of at least TRAINED (the claims' reading, ours) and is "at chance" at
# most AT_CHANCE (ours: 1.5 times chance on ten classes; MNIST's largest test class is 11.35%).
TRAINED, AT_CHANCE = 0.5, 0.15


def seeds_disagree(accs) -> bool:
    """Whether a cell's seeds disagree: one trains (``TRAINED``), another is at chance (``AT_CHANCE``)."""
    a = pd.Series(accs, dtype=float)
    return bool(len(a) > 1 and a.max() >= TRAINED and a.min() <= AT_CHANCE)


def _heatmap(ax, g: pd.DataFrame, title: str) -> None:
    """Depth x sparsity: the mean final test accuracy (%) over a cell's seeds, annotated; a cell whose
    seeds disagree (``seeds_disagree``) is outlined in red."""
    mean = g.pivot_table(index="depth", columns="sparsity", values="final_test_acc", aggfunc="mean")
    mean = mean.sort_index(ascending=False)
    split = g.groupby(["depth", "sparsity"])["final_test_acc"].agg(seeds_disagree)
    sns.heatmap(100 * mean, ax=ax, vmin=0, vmax=100, cmap="viridis", annot=True, fmt=".0f",
                annot_kws={"fontsize": 7}, cbar=False)
    for (depth, sparsity), disagree in split.items():
        if disagree:
            y, x = list(mean.index).index(depth), list(mean.columns).index(sparsity)
            ax.add_patch(plt.Rectangle((x, y), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
    ax.set(title=title, xlabel="sparsity", ylabel="depth")


def _seeds(final: pd.DataFrame, by: list[str]) -> str:
    """"3 seeds per cell" (or "1-3 seeds per cell" where cells differ)."""
    n = final.groupby(by)["run"].count()
    return f"{n.min()} seed(s) per cell" if n.min() == n.max() else f"{n.min()}-{n.max()} seeds per cell"


def _marks() -> str:
    return (f"mean over seeds; red: seeds disagree (one >= {TRAINED:.0%}, another <= {AT_CHANCE:.0%}: "
            "our thresholds)")


def _main_reading(s: dict) -> tuple[float, float | None]:
    """The (momentum, ordered chi) of an experiment's grid: its recipe's and its ordered block's."""
    return float(s["recipe"].get("momentum", 0.0)), (s.get("ordered") or {}).get("chi")


def _of_reading(final: pd.DataFrame, reading) -> pd.Series:
    """Which rows were trained under ``reading`` = (momentum, ordered chi) (all of a table without
    the columns)."""
    if "momentum" not in final:
        return pd.Series(True, index=final.index)
    return (final["momentum"] == reading[0]) & (final["ordered_chi"] == reading[1])


def heat_figure(table: pd.DataFrame, s: dict):
    """One heatmap (depth x sparsity, mean final test accuracy over seeds) per set-up (columns) and
    activation (rows), at the grid's reading; then, where the table holds others (RP-F3's deciding
    cells at momentum 0.9 or ordered chi 0.9), one heatmap per (set-up, other reading) beside them."""
    final = _final(table)
    main = _main_reading(s)
    grid = final[_of_reading(final, main)]
    activations = [a for a in s["activations"] if a in set(grid["activation"])]
    setups = [u for u in s["setups"] if u in set(grid["setup"])]
    panels = [(a, u, main) for a in activations for u in setups]
    others = list(dict.fromkeys(zip(final["momentum"], final["ordered_chi"]))) if "momentum" in final else []
    panels += [(a, u, r) for r in others if r != main for a in activations for u in setups
               if ((final["activation"] == a) & (final["setup"] == u) & _of_reading(final, r)).any()]
    rows = len(activations) + -(-(len(panels) - len(activations) * len(setups)) // max(len(setups), 1))
    fig, axes = plotting.panels(len(panels), width=3.6, height=3.2, rows=rows)
    for ax, (activation, setup, reading) in zip(axes, panels):
        g = final[(final["activation"] == activation) & (final["setup"] == setup) & _of_reading(final, reading)]
        said = "" if reading == main else (f", momentum {reading[0]:g}" if setup != "ordered" else
                                            f", momentum {reading[0]:g}, chi {reading[1]:g}")
        _heatmap(ax, g, f"{activation}, {SETUP_LABELS[setup]}{said}")
    cell = [c for c in ("momentum", "ordered_chi") if c in final] + ["activation", "setup", "depth", "sparsity"]
    at = f"SGD momentum {main[0]:g}, ordered chi {main[1]:g}" if main[1] is not None else f"SGD momentum {main[0]:g}"
    fig.suptitle(f"{_catalogue_id(table)}: test accuracy (%) after {_length(s)}, SBP, FFNN width {s['width']}, "
                 f"{table['dataset'].iloc[0]}, {_seeds(final, cell)}; {at} unless a panel says otherwise\n"
                 f"{_marks()}", fontsize=9)
    return fig


def heat_summary(table: pd.DataFrame) -> pd.DataFrame:
    by = [c for c in ("momentum", "ordered_chi") if c in table] + ["activation", "setup", "depth", "sparsity"]
    return _accuracy_by(table, by)


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
        ax.legend(fontsize=7)
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
