"""TG-F6's trained nets: figures and summaries (``reluinit.experiments.tg_train`` measures).

Read a tidy table, draw or summarise it; no torch (module doc of ``reluinit.figures``)."""

from __future__ import annotations

import pandas as pd

from ..report import plotting

COLOURS = {"within": "tab:blue", "between": "tab:orange"}


def lines_of(table: pd.DataFrame) -> pd.DataFrame:
    """The measurement rows (one per run, line and trained flag), without the epoch rows."""
    table = table[table["kind"] == "line"]
    return table.assign(trained=table["trained"].astype(bool))


def per_line(table: pd.DataFrame) -> pd.DataFrame:
    """One point per (line, initial sigma_w, trained): sigma_w and growth averaged over the nets,
    with their standard deviations over the nets (TG's Figure 6b points)."""
    table = lines_of(table)
    return table.groupby(["trained", "pair", "line", "sigma_w_init"], as_index=False).agg(
        sigma_w=("sigma_w_post", "mean"), sigma_w_sd=("sigma_w_post", "std"), growth=("growth", "mean"),
        growth_sd=("growth", "std"), nets=("net", "nunique"))


def f6_figure(table: pd.DataFrame, s: dict):
    """TG's Figure 6 on the paper's population: the nets trained to the target (all of the paper's
    were); the others are counted in the title."""
    fig, axes = plotting.panels(2, width=5.0, height=4.0)
    every = lines_of(table)
    table = every[every["reached_target"].astype(bool)]
    pts = per_line(table)
    # (a) per initial sigma_w and kind of pair: mean over lines and nets
    mean = table.groupby(["trained", "pair", "sigma_w_init"], as_index=False).agg(
        sigma_w=("sigma_w_post", "mean"), growth=("growth", "mean"), growth_sd=("growth", "std"))
    for (trained, pair), g in mean.groupby(["trained", "pair"]):
        g = g.sort_values("sigma_w_init")
        style = dict(color=COLOURS[pair], ls="-") if trained else dict(color="k", ls="--" if pair == "within" else ":")
        axes[0].errorbar(g["sigma_w"], g["growth"], yerr=g["growth_sd"], marker="o", ms=4, capsize=2,
                         label=f"{pair} class, {'trained' if trained else 'random (pre-training)'}", **style)
    axes[0].set(title="(a) mean over lines and nets")
    # (b) one curve per line
    for (trained, _line), g in pts.groupby(["trained", "line"]):
        g = g.sort_values("sigma_w_init")
        colour = COLOURS[g["pair"].iloc[0]] if trained else "k"
        axes[1].errorbar(g["sigma_w"], g["growth"], xerr=g["sigma_w_sd"], yerr=g["growth_sd"], color=colour,
                         marker="o", ms=3, lw=0.8, alpha=0.8 if trained else 0.5, capsize=0)
    for pair in COLOURS:
        axes[1].plot([], [], color=COLOURS[pair], marker="o", label=f"{pair} class, trained")
    axes[1].plot([], [], color="k", marker="o", label="random (pre-training)")
    axes[1].set(title="(b) one curve per line (mean ± sd over nets)")
    for ax in axes:
        ax.set(xlabel="$\\sigma_w$ (post-training; random: at initialization)",
               ylabel="growth E[$\\|dz^{(d+1)}\\| / \\|dz^{(d)}\\|$], hidden layers")
        ax.legend(fontsize=7)
    nets = every.drop_duplicates("run")
    dead = int(nets["dead"].astype(bool).sum()) if "dead" in nets else 0
    fig.suptitle(f"TG-F6: {nets['dataset'].iloc[0]}, ReLU FFNN depth {s['depth']} width {s['width']}: the "
                 f"{int(nets['reached_target'].astype(bool).sum())} of {len(nets)} nets trained to test accuracy "
                 f"> {s['target_acc']:.0%}" + (f" ({dead} dead at chance)" if dead else ""), fontsize=10)
    return fig


def f6_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per initial sigma_w and kind of pair: mean growth factor of the trained and of the random
    nets, mean (sd) post-training sigma_w, test accuracy and the share of nets that reached the
    target; and the between/within ratio of the trained nets' growth (TG: above 1)."""
    table = lines_of(table)
    trained, random = table[table["trained"]], table[~table["trained"]]
    keys = ["sigma_w_init", "pair"]
    out = trained.groupby(keys, as_index=False).agg(
        growth_trained=("growth", "mean"), growth_trained_se=("growth", "sem"),
        sigma_w_post=("sigma_w_post", "mean"), sigma_w_post_sd=("sigma_w_post", "std"),
        test_acc=("final_test_acc", "mean"), reached_target=("reached_target", "mean"),
        dead=("dead", "mean"),
        epochs_run=("epochs_run", "mean"), nets=("run", "nunique"), lines=("line", "nunique"))
    rand = random.groupby(keys, as_index=False).agg(growth_random=("growth", "mean"),
                                                     sigma_w_random=("sigma_w_post", "mean"))
    out = out.merge(rand, on=keys)
    within = out[out["pair"] == "within"].set_index("sigma_w_init")["growth_trained"]
    out["between_over_within"] = out["sigma_w_init"].map(
        out[out["pair"] == "between"].set_index("sigma_w_init")["growth_trained"] / within)
    return out
