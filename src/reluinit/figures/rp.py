"""RP (robust pruning): figures and summaries of the untrained-net measurements (``reluinit.experiments.rp`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from ..report import plotting


def f1_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(2, width=3.55, height=4.2)
    for ax, phase in zip(axes, ["eoc", "chaotic"]):
        g = table[table["phase"] == phase]
        grid = g.pivot(index="layer", columns="neuron", values="kept_fraction")
        im = ax.imshow(grid.to_numpy(), aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        values = {stage: g[f"chi_measured_{stage}"].iloc[0] for stage in ("dense", "pruned", "rescaled")}  # the controls: summary
        measured = ", ".join(f"{k} {v:.3f}" if v == v else f"{k} n/a (a layer emptied)" for k, v in values.items())
        ax.set(title=f"{'EOC' if phase == 'eoc' else 'chaotic'}: $\\sigma_w$ = {g['sigma_w'].iloc[0]:.4g}, "
                     f"$\\chi$ = {g['chi'].iloc[0]:.3g}\nmeasured (mean of {g['chi_nets'].iloc[0]} nets): {measured}",
               xlabel="neuron", ylabel="layer")
        ax.grid(False)
    fig.colorbar(im, ax=axes, label="share of incoming weights kept")
    fig.suptitle(f"RP-F1: SBP at {s['sparsity']:.0%} sparsity, {s['activation']} FFNN depth {s['depth']}, "
                 f"width {s['width']}, {table['dataset'].iloc[0]}")
    return fig


def f1_summary(table: pd.DataFrame) -> pd.DataFrame:
    per_layer = table.groupby(["phase", "layer"])["kept_fraction"].mean().reset_index()
    out = per_layer.groupby("phase").agg(layers_emptied=("kept_fraction", lambda k: int((k == 0).sum())),
                                         min_layer_kept=("kept_fraction", "min"),
                                         max_layer_kept=("kept_fraction", "max")).reset_index()
    chis = table.groupby("phase")[["chi", "chi_nets"] + [c for c in table if c.startswith("chi_measured_")]].first()
    return out.merge(chis.reset_index(), on="phase")


def th1_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.4, height=3.8)
    ax = axes[0]
    for (reading, g), colour in zip(table.groupby("reading", sort=False), ("C0", "C1")):
        ax.plot(g["net"], g["s_cr"], "o", color=colour,
                label=f"{reading}: $\\chi$ = {g['chi'].iloc[0]:.3g}, SBP mean {g['s_cr'].mean():.1%}")
        ax.axhline(g["bound"].iloc[0], ls="--", color=colour, label=f"{reading}: Theorem 1 bound {g['bound'].iloc[0]:.1%}")
    ax.set(xlabel="net", ylabel="critical sparsity $s_{cr}$", ylim=(0, 1))
    ax.legend(fontsize=7)
    ax.set_title(f"RP-Th1: ordered phase, $\\kappa$ = {s['kappa']} read with ln and log10, L = {s['depth']}, "
                 f"N = {s['width']}, {s['activation']}", fontsize=9)
    return fig


def th1_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per reading of the logarithm: chi, sigma_w, mean and sd of s_cr, and the bound."""
    return table.groupby("reading", as_index=False, sort=False).agg(
        nets=("net", "count"), chi=("chi", "first"), sigma_w=("sigma_w", "first"), mean_s_cr=("s_cr", "mean"),
        sd_s_cr=("s_cr", "std"), bound=("bound", "first"))


def t7_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.0, height=3.8)
    ax = axes[0]
    with plotting.numpy_seeded():  # the jitter
        sns.stripplot(data=table, x="gamma", y="s_cr", ax=ax, color="C0", label="MBP, one point per net")
    bounds = table.groupby("gamma")["bound"].first()
    ax.plot(range(len(bounds)), bounds.clip(upper=1.0).to_numpy(), "k_", markersize=30, mew=2,
            label="Proposition 4 (clipped at 1)")
    ax.set(xlabel="$\\gamma$ (first layer's variance ratio)", ylabel="critical sparsity $s_{cr}$", ylim=(0, 1.05))
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[-2:], labels[-2:], fontsize=8)
    ax.set_title(f"RP-T7: MBP, L = {s['depth']}, N = {s['width']}, {s['n_nets']} nets per $\\gamma$", fontsize=9)
    return fig


def t7_summary(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby("gamma", as_index=False).agg(mean_s_cr=("s_cr", "mean"), sd_s_cr=("s_cr", "std"),
                                                      bound=("bound", "first"))


def _f2_figure(pruned: bool):
    def figure(table: pd.DataFrame, s: dict):
        fig, axes = plotting.panels(1, width=6.0, height=3.8, integer_x=True)
        col = "pruned_percent" if pruned else "kept_percent"
        data = table.assign(pruned_percent=100 - table["kept_percent"])
        sns.lineplot(data=data, x="layer", y=col, hue="model", marker="o", seed=plotting.BOOTSTRAP_SEED, ax=axes[0])
        axes[0].set(xlabel="layer (conv and linear, in order)",
                    ylabel=f"% of weights {'pruned' if pruned else 'kept'}")
        axes[0].set_title(f"RP-F{4 if pruned else 2}: SBP at {s['sparsity']:.0%} sparsity, Kaiming init, "
                          f"{table['dataset'].iloc[0]}", fontsize=9)
        return fig
    return figure


f2_figure, f4_figure = _f2_figure(False), _f2_figure(True)


def f2_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: spread of the kept share over layers (Stable ResNet: more uniform)."""
    return table.groupby("model", as_index=False).agg(
        min_kept_percent=("kept_percent", "min"), max_kept_percent=("kept_percent", "max"),
        sd_kept_percent=("kept_percent", "std"), layers_emptied=("collapsed", "sum"))
