"""What the paper notebooks show for one catalogue figure: the figure, the experiment's summary
(the numbers a reader compares with the paper) and the scorecard's verdicts on the claims read
from the figure's table. Notebooks call these on result files only; nothing is recomputed."""

from __future__ import annotations

import pandas as pd

from . import claims, experiments, paths

PAPERS = {
    "TG": "Trajectory growth lower bounds in sparse random ReLU nets",
    "EP": "On the expressive power of deep neural networks",
    "OP": "The benefits of over-parameterization at initialization in deep ReLU networks",
    "LR": "Complexity of linear regions in deep networks",
    "RP": "Robust pruning at initialization",
    "X": "Across the papers (ours)",
}


def scorecard(results: str, paper: str | None = None) -> pd.DataFrame:
    """The judged claims: those read from one paper's tables, or all of them."""
    return claims.read(paths.paper_claims(results, paper) if paper else paths.scorecard(results, "csv"))


def verdicts(card: pd.DataFrame, exp_id: str) -> pd.DataFrame:
    """The scorecard rows judged on ``exp_id``'s table."""
    rows = card[card["table"] == exp_id]
    return rows[["claim", "statement", "expected", "measured", "verdict", "note"]].reset_index(drop=True)


def seen(card: pd.DataFrame, exp_id: str) -> str:
    """One line: how many of the figure's claims were reproduced, not reproduced, not run."""
    counts = verdicts(card, exp_id)["verdict"].value_counts()
    if counts.empty:
        return "No scorecard claim reads this table; compare the figure and summary with the paper."
    order = [claims.REPRODUCED, claims.NOT_REPRODUCED, claims.NOT_RUN]
    return "Claims on this table: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in order) + "."


def show(results: str, exp_id: str, card: pd.DataFrame, max_cells: int = 12) -> None:
    """Display ``exp_id``'s figure, summary and claim verdicts in a notebook."""
    from IPython.display import Image, Markdown, display

    display(Image(paths.figures(results, exp_id)[1]))
    table_path = paths.table(results, exp_id)
    table = pd.read_csv(table_path)
    summary = experiments.get(exp_id).summary(table)
    display(Markdown(f"**Summary of `{exp_id}`** ({len(table):,} rows in `{table_path}`):"))
    display(summary.head(40))
    display(Markdown("**We see:** " + seen(card, exp_id)))
    rows = verdicts(card, exp_id)
    if len(rows):
        cell_rows = rows["claim"].str.contains("[", regex=False)  # RP's table cells: "RP-T2[...]"
        display(rows[~cell_rows])
        if cell_rows.any():
            display(Markdown(f"{int(cell_rows.sum())} table cells; the first {min(max_cells, int(cell_rows.sum()))}:"))
            display(rows[cell_rows].head(max_cells))
