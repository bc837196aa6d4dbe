"""The reference gallery of the documentation site (``docs/gallery.md``), written from the
committed paper-scale tree by code, so that it cannot drift from it: every figure of
``reference/paper/figures/`` with its catalogue id, what the paper shows, the settings it was built
with (its ``figures/<ID>.json``) and its claims' verdicts with their reasons; and every catalogue id
the tree lacks, with why (``reference.absent_why``).

    python -m reluinit.report.gallery [--root reference/paper]    (prints the page's Markdown)

The site's build calls ``markdown`` from ``docs/hooks.py``; ``tests/test_docs.py`` requires the
built page to show every figure and every absent id with its reason.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from ..pipeline import catalogue
from ..pipeline.catalogue import PAPERS, paper_of
from ..pipeline.config import read_yaml
from . import claims, plotting, reference

# Where the site serves the reference's files (docs/hooks.py copies them there), relative to the
# documentation's root: the gallery page links its images and the notebooks from here.
SITE_DIR = "reference/paper"

# The content column's width (CSS px) at a 1400 px window, measured in Chromium: the gallery hides its
# table of contents (its front matter), the other pages keep theirs; and our floor for a legible text
# there (``plotting.MIN_TEXT_PT`` at a figure's natural size).
GALLERY_COLUMN_PX = 938
PAGE_COLUMN_PX = 688
MIN_TEXT_PX = 9.0
CSS_PX_PER_INCH = 96


def _png(png: str | Path) -> tuple[int, float, float]:
    """A figure's width in pixels, its dpi and the smallest text size ``plotting.save`` wrote into it
    (0 where it wrote none)."""
    from PIL import Image

    with Image.open(png) as im:
        return (im.size[0], float(im.info.get("dpi", (plotting.DPI,))[0]),
                float(im.info.get(plotting.SMALLEST_TEXT_KEY, 0)))


def natural_width(png: str | Path) -> int:
    """The CSS width (px) at which a figure is shown at its natural size: its inches at 96 px each."""
    pixels, dpi, _ = _png(png)
    return _natural(pixels, dpi)


def _natural(pixels: int, dpi: float) -> int:
    return round(pixels * CSS_PX_PER_INCH / dpi)


def shown_text_px(png: str | Path, column_px: int, width_px: int | None = None) -> float:
    """How tall (CSS px) the figure's smallest text is where it is shown ``width_px`` wide (its
    natural width by default) in a column ``column_px`` wide, from the size ``plotting.save`` wrote
    into the PNG (0 where it wrote none: a figure drawn before it did is not known to be legible)."""
    pixels, dpi, smallest = _png(png)
    shown = min(width_px or _natural(pixels, dpi), column_px)
    return smallest * dpi / 72 * shown / pixels


def image(png: str | Path, src: str, alt: str) -> str:
    """Markdown for a figure at its natural size (never wider than its column), linked to the full file."""
    alt = alt.replace("[", "\\[").replace("]", "\\]")  # a bracket in the text would end the link's
    return f'[![{alt}]({src}){{ width="{natural_width(png)}" }}]({src})'


def figure_ids(root: str | Path) -> list[str]:
    """The catalogue ids whose figure (``figures/<ID>.png``) the tree holds, in catalogue order."""
    have = {p.stem for p in Path(root, "figures").glob("*.png")}
    return [e for e in catalogue.ENTRIES if e in have] + sorted(have - set(catalogue.ENTRIES))


def absent_ids(root: str | Path) -> list[str]:
    """The catalogue ids without a figure in the tree, in catalogue order."""
    have = set(figure_ids(root))
    return [e for e in catalogue.ENTRIES if e not in have]


def _cell(text) -> str:
    """A value as one line of Markdown."""
    text = "" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text)
    return text.replace("|", "\\|").replace("\n", " ")


def _value(v) -> str:
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def _settings(root: Path, exp: str) -> list[str]:
    path = root / "figures" / f"{exp}.json"
    if not path.exists():
        return ["*No settings record.*"]
    record = json.loads(path.read_text())
    pairs = ", ".join(f"`{k}: {_value(v)}`" for k, v in record.get("settings", {}).items())
    return [f"**Settings** (scale {record.get('scale', '?')}, from `figures/{exp}.json`): {pairs}"]


def _claims(card: pd.DataFrame, exp: str) -> list[str]:
    """One line per claim judged on ``exp``'s table: its verdict, what the paper says and what was
    measured, and why (the claim's ``why`` where the paper and we disagree, else its note)."""
    rows = card[card["table"] == exp]
    if rows.empty:
        return ["**Claims**: none read from this figure's table."]
    out = [f"**Claims** ({claims.counts_line(rows)}):", ""]
    for _, r in rows.iterrows():
        why = r["why"] if isinstance(r["why"], str) and r["why"] else r["note"]
        measured = "not measured" if pd.isna(r["measured"]) else f"measured {r['measured']:.4g}"
        line = (f"- **{r['claim']}** ({_cell(r['place'])}), *{r['verdict']}*: {_cell(r['statement'])}. "
                f"Expected: {_cell(claims.expected(r))}; {measured}.")
        out.append(line + (f" Why: {_cell(why)}" if isinstance(why, str) and why else ""))
    return out


def markdown(root: str | Path = "reference/paper", config: dict | None = None) -> str:
    """The gallery's Markdown: the verdict counts, one section per figure grouped by paper, then
    the ids the tree lacks with why."""
    root = Path(root)
    config = config if config is not None else read_yaml("config.yaml")
    card = claims.read(str(root / "claims.csv"))
    runs = pd.read_csv(root / "runs.csv", dtype=reference.TEXT)
    shown = figure_ids(root)
    lines = ["## Verdicts", "",
             reference.verdicts(card, runs, reasons=False),
             "", "Each figure below, by paper; then [the ids not in the reference, and why](#not-in-the-reference-and-why)."]
    for paper, title in PAPERS.items():
        ids = [e for e in shown if paper_of(e) == paper]
        if not ids:
            continue
        notebook = f"{SITE_DIR}/reports/{paper}.html"
        lines += ["", f"## {paper}: {title}", "",
                  f"Figures: {', '.join(f'[{e}](#{e.lower()})' for e in ids)}. "
                  f"The executed notebook: [{paper}.html]({notebook})."]
        for exp in ids:
            entry = catalogue.ENTRIES.get(exp)
            lines += ["", f"### {exp}", ""]
            if entry:
                lines += [f"**{entry.place}**: {entry.shows}", ""]
            lines += [image(root / "figures" / f"{exp}.png", f"{SITE_DIR}/figures/{exp}.png",
                            f"{exp}: {entry.shows if entry else exp}"), "",
                      *_settings(root, exp), "", *_claims(card, exp)]
    lines += ["", "## Not in the reference, and why", ""]
    lines += [f"- **{e}** ({catalogue.ENTRIES[e].place}): {reference.absent_why(e, config, docs='')}" for e in absent_ids(root)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="reference/paper")
    print(markdown(parser.parse_args().root), end="")


if __name__ == "__main__":
    main()
