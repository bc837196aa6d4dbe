"""What the pipeline builds, per paper, read from the experiment registry and the config, so that
the README's status table cannot drift from the code: ``python -m reluinit.catalogue`` prints it
(tests/test_catalogue.py checks the README holds exactly this table)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import experiments
from .config import settings


def _order(exp_id: str):
    """Figures, then tables, then theorems, each by number: TG-F3a after TG-F2, EP-F10 after EP-F9."""
    kind, number, rest = re.fullmatch(r"[A-Z]+-([A-Za-z]+)(\d+)(.*)", exp_id).groups()
    return ["F", "T", "Th"].index(kind) if kind in ("F", "T", "Th") else 9, int(number), rest


def status_table(config: dict) -> str:
    """A markdown table: each paper, the catalogue ids ``all`` builds (both scales) and the optional
    ones it leaves out."""
    by_paper: dict[str, list[str]] = {p: [] for p in experiments.PAPERS}
    for exp in config["experiments"]:
        by_paper[experiments.paper_of(exp)].append(exp)
    lines = ["| id | paper | built by `snakemake all` |", "|---|---|---|"]
    for paper, ids in by_paper.items():
        if not ids:
            continue
        ids = sorted(ids, key=_order)
        built = [e for e in ids if not settings(config, e, "paper").get("optional", False)]
        optional = [e for e in ids if e not in built]
        cell = ", ".join(built) + (f"; configured, optional: {', '.join(optional)}" if optional else "")
        lines.append(f"| {paper} | {experiments.PAPERS[paper]} | {cell} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    import yaml

    path = Path(argv[0]) if argv else Path("config.yaml")
    print(status_table(yaml.safe_load(path.read_text())))


if __name__ == "__main__":
    main(sys.argv[1:])
