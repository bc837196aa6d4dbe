"""What a researcher reads: notebook links resolve from the HTML's own folder, a paper table's
cells show as one pivot (no empty claims table before it), and a figure's caption describes the
build that made it, not the config the report is rendered under."""

import json

import pandas as pd
import pytest

from conftest import ROOT
from reluinit.pipeline import catalogue, paths
from reluinit.report import claims, reports

CLAIMS = claims.load(ROOT / "claims.yaml")


def _targets(markdown: str) -> list[str]:
    return [part.split(")")[0] for part in markdown.split("](")[1:]]


def test_contents_links_resolve_from_the_notebook_html_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = "results/quick"
    for p in (paths.scorecard(results, "html"), paths.figures(results, "OP-F1")[1]):
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_text("x")
    md = reports.contents(results, "OP", ["OP-F1", "OP-F2"]).data
    targets = _targets(md)
    assert targets[:2] == ["#OP-F1", "#OP-F2"]
    assert "scorecard.html#paper-OP" in targets and "../figures/" in targets
    here = tmp_path / paths.report(results, "OP", "html")
    local = [t for t in targets[2:] if not t.startswith("https://")]
    for t in local:  # each file or folder exists, seen from the HTML's folder
        assert (here.parent / t.split("#")[0]).exists(), t
    assert catalogue.REFERENCES["OP"]["url"] in targets  # the paper's public page: a clone has no copy


def test_a_paper_table_shows_as_one_pivot_without_an_empty_claims_table(monkeypatch, tmp_path):
    card = claims.scorecard(CLAIMS, "/nonexistent", "quick")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda x: shown.append(x))
    monkeypatch.setattr("IPython.display.Image", lambda path: ("image", path))
    monkeypatch.setattr(reports.catalogue, "get", lambda exp: type("E", (), {"summary": staticmethod(lambda t: t)}))
    monkeypatch.setattr(reports.paths, "table", lambda results, exp: str(tmp_path / "t.csv"))
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "t.csv", index=False)
    reports.show("r", "RP-T4", card, claims.cell_blocks(CLAIMS))
    frames = [s for s in shown if isinstance(s, pd.DataFrame)]
    assert all(len(f) for f in frames)  # RP-T4 has no stated claim: no empty table
    pivots = [s for s in shown if isinstance(s, pd.io.formats.style.Styler)]
    # the quick scale ran a toy RP-T4: its cells are judged at the paper scale only, and say so
    assert len(pivots) == 1 and pivots[0].data.loc[10, "eoc"] == "98.2 ± 0.17 | ours paper scale only"


def test_a_caption_reads_what_the_figure_was_built_with(tmp_path):
    built = tmp_path / "OP-F1.json"
    assert reports.built_with(str(built))["scale"] == "(not built yet)"
    built.write_text(json.dumps({"scale": "quick", "settings": {"widths": [100, 500, 4060]}}))
    assert reports.built_with(str(built)) == {"scale": "quick", "settings": {"widths": [100, 500, 4060]}}
    caption = (ROOT / "workflow" / "report" / "figure.rst").read_text()
    assert "snakemake.params.built.scale" in caption and "snakemake.params.built.settings" in caption
    assert "snakemake.params.scale" not in caption and "snakemake.params.settings" not in caption


@pytest.mark.parametrize("paper", ["TG", "EP", "OP", "LR", "RP", "X"])
def test_every_notebook_section_has_an_anchor_its_contents_link(paper):
    nb = json.loads((ROOT / "notebooks" / f"{paper}.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    sections = [line[3:].split(" (")[0] for line in text.splitlines()
                if line.startswith("## ") and "(paper" in line]
    assert sections
    for s in sections:
        assert f'<a id="{s}"></a>' in text and f'"{s}"' in text, s  # anchor, and listed in contents
    assert "max_colwidth\", 120" not in text  # claims are shown whole
