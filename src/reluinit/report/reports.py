"""What the paper notebooks show for one catalogue figure: the figure, the experiment's summary
(the numbers a reader compares with the paper) and the scorecard's verdicts on the claims read
from the figure's table. Notebooks call these on result files only; nothing is recomputed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from .. import integrity
from ..pipeline import catalogue, paths
from . import claims, committed


def built_with(path: str) -> dict:
    """The scale and settings a figure was built with (``paths.built``), for its report caption:
    a report is rendered later, possibly under another config, and must not describe the figure
    by that config. Before the figure is built there is nothing to read."""
    if not Path(path).exists():
        return {"scale": "(not built yet)", "settings": "(not built yet)"}
    return json.loads(Path(path).read_text())


def scorecard(results: str, paper: str | None = None) -> pd.DataFrame:
    """The judged claims: those read from one paper's tables, or all of them."""
    return claims.read(paths.paper_claims(results, paper) if paper else paths.scorecard(results, "csv"))


def verdicts(card: pd.DataFrame, exp_id: str) -> pd.DataFrame:
    """The scorecard rows judged on ``exp_id``'s table."""
    rows = card[card["table"] == exp_id]
    rows = rows.assign(expected=[claims.expected(r) for _, r in rows.iterrows()])
    return rows[["claim", "kind", "statement", "expected", "measured", "verdict", "note", "why"]].reset_index(drop=True)


def seen(card: pd.DataFrame, exp_id: str) -> str:
    """One line: how many of the figure's claims were reproduced, not reproduced, inconclusive or
    not run, and its checks and calibrations apart."""
    rows = card[card["table"] == exp_id]
    if rows.empty:
        return "No scorecard claim reads this table; compare the figure and summary with the paper."
    return f"Claims on this table: {claims.counts_line(rows)}."


def _link(target: str | Path, results: str, paper: str) -> str:
    """``target`` relative to the folder of the paper's notebook HTML, where the link is read."""
    here = Path(paths.report(results, paper, "html")).parent
    return Path(os.path.relpath(Path(target).absolute(), here.absolute())).as_posix()


def contents(results: str, paper: str, sections: list[str]):
    """The notebook's short table of contents: its sections, the paper's claims on the scorecard
    page, the figures folder (links that work from the HTML's own folder) and the paper's public
    page (``catalogue.REFERENCES``)."""
    from IPython.display import Markdown

    toc = " · ".join(f"[{s}](#{s})" for s in sections)
    more = [f"[scorecard of {paper}'s claims]({_link(paths.scorecard(results, 'html'), results, paper)}#paper-{paper})",
            f"[figures]({_link(Path(paths.figures(results, sections[0])[1]).parent, results, paper)}/)"]
    if paper in catalogue.REFERENCES:
        more.append(f"[the paper]({catalogue.REFERENCES[paper]['url']})")
    return Markdown(f"**Contents:** {toc}\n\n**See also:** " + " · ".join(more))


def show(results: str, exp_id: str, card: pd.DataFrame, cells: dict[str, list] | None = None) -> None:
    """Display ``exp_id``'s figure, summary and claim verdicts in a notebook: its stated claims
    as a table (with why, when a claim says), and a paper table's cells (``cells``, from
    ``claims.cell_blocks``) as one pivot coloured by verdict."""
    from IPython.display import HTML, Image, Markdown, display

    table_path = paths.existing_table(results, exp_id)
    if not Path(table_path).exists():  # a tree that holds part of the catalogue (the reference)
        display(Markdown(f"**`{exp_id}` is not in this results tree** (`{results}`): its claims say "
                         f"'{claims.NOT_RUN}'. Build it with {_build(results, exp_id)}."))
        return
    png = paths.figures(results, exp_id)[1]
    if os.environ.get("RELUINIT_FIGURES") == "link":  # the committed reference: figures stay files, linked
        display(HTML(f"<img src='{_link(png, results, catalogue.paper_of(exp_id))}' alt='{exp_id}' width='100%'>"))
    else:
        display(Image(png))
    table = pd.read_csv(table_path)
    summary = catalogue.get(exp_id).summary(table)
    display(Markdown(f"**Summary of `{exp_id}`** ({len(table):,} rows in `{table_path}`):"))
    display(summary.head(40))
    display(Markdown("**We see:** " + seen(card, exp_id)))
    rows = verdicts(card, exp_id)
    cell_rows = rows["claim"].str.contains("[", regex=False)  # RP's table cells: "RP-T2[...]"
    stated = rows[~cell_rows]
    if len(stated):
        display(stated if (stated["why"] != "").any() else stated.drop(columns="why"))
    if cell_rows.any():
        block = rows.loc[cell_rows, "claim"].iloc[0].split("[")[0]
        if cells and block in cells:
            mine = cells[block]
            display(Markdown(f"**{block}**, {len(mine)} cells, each: the paper's mean ± sd | ours. "
                             + mine[0].why))
            display(claims.styled_pivot(card, mine))
        else:
            display(rows[cell_rows])


def _build(results: str | Path, exp_id: str) -> str:
    """The command that builds ``exp_id``'s table into the tree ``results`` at its scale and results
    folder; into a reference tree (``runs.csv``), the job's command then the export's."""
    if (Path(results) / "runs.csv").is_file():
        return committed.rebuild(Path(results), exp_id)
    return f"`{integrity.rebuild_command(paths.table(str(results), exp_id), force=False)}`"


def execute(notebook: str | Path, ipynb: str | Path, html: str | Path, **parameters) -> None:
    """Execute a paper's ``notebook`` with papermill (kernel python3) into ``ipynb`` and export it as
    HTML without code cells (what ``papermill -k python3 -p ...`` then ``jupyter nbconvert --to html
    --no-input`` write), in this process: the rule pays one Python start-up instead of two.
    Papermill gives the cell it injects a random id; a fixed one keeps an unchanged report an
    unchanged file."""
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    nb = papermill.execute_notebook(str(notebook), str(ipynb), parameters=parameters, kernel_name="python3",
                                    progress_bar=False)
    for cell in nb.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["id"] = "injected-parameters"
    nbformat.write(nb, str(ipynb))
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": Path(ipynb).stem}})
    Path(html).write_text(body, encoding="utf-8")
