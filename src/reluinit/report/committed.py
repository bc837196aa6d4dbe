"""What a reference tree's files hold, so that one edited by hand is named instead of read: the
digests (SHA-256, bytes and rows of the CSV, uncompressed) of each part (``parts.csv``, written by
``reference export``) and of each experiment's table (``tables.csv``, written by ``export`` and
``record``). ``render`` and ``restore`` check every table against ``tables.csv`` first
(``edited``): a table whose content is not the one recorded is named, with the command that
rebuilds it or, for an edit meant, re-records it, and its claims are not judged.

    python -m reluinit.report.reference record reference/paper/OP/OP-F1.csv.gz   (an edit meant)
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shlex
import zlib
from pathlib import Path

import pandas as pd

from .. import integrity
from ..pipeline import catalogue, paths

DIGESTS = ["sha256", "bytes", "rows"]
TABLES = "tables.csv"  # in the tree's root, beside runs.csv and parts.csv
COLUMNS = ["experiment", "file", *DIGESTS]


class DamagedPart(RuntimeError):
    """A file of the reference that does not read back as what was exported: truncated, altered,
    renamed or unrecorded. The message names the file and the command that rebuilds it."""


class EditedTable(DamagedPart):
    """A committed table whose content is not what ``tables.csv`` records (edited by hand, or
    recorded by no export): its claims are not judged until it is rebuilt or re-recorded."""


def part_bytes(path: Path) -> bytes:
    """A part's or table's CSV as exported, uncompressed; a ``.gz`` that does not decompress whole
    (truncated, altered) raises ``DamagedPart`` naming it."""
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error) as e:
        raise DamagedPart(f"{path} does not decompress ({type(e).__name__}: {e})") from None


def digests(data: bytes, table: pd.DataFrame | None = None) -> dict:
    """``sha256``, ``bytes`` and ``rows`` of a CSV (``part_bytes``); ``table``: the CSV already parsed."""
    if table is None:
        table = pd.read_csv(io.BytesIO(data)) if data.strip() else pd.DataFrame()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "rows": len(table)}


def differences(found: dict, recorded: dict) -> list[str]:
    """Each digest of ``found`` that is not the one ``recorded`` (read back from a CSV: counts may
    carry ``.0``), as ``"rows <found> is not the recorded <recorded>"`` (a SHA-256 cut to 12 digits)."""
    then = {k: str(recorded.get(k)).removesuffix(".0") for k in DIGESTS}
    short = {"sha256": 12}  # enough to tell two files apart in a message
    return [f"{k} {str(found[k])[:short.get(k)]} is not the recorded {then[k][:short.get(k)]}" for k in DIGESTS
            if str(found[k]) != then[k]]


def tables(root: str | Path) -> dict[str, Path]:
    """The experiments' tables a tree holds (``<PAPER>/<ID>.csv`` or ``.csv.gz``), by id."""
    found = {exp: Path(paths.existing_table(str(root), exp)) for exp in catalogue.ENTRIES}
    return {exp: f for exp, f in found.items() if f.exists()}


def _recorded(root: Path) -> pd.DataFrame:
    """``tables.csv`` by experiment (empty where the tree has none); ``DamagedPart`` naming it and
    the fix where it does not read as one (no header, other columns, an experiment twice)."""
    f = root / TABLES
    if not f.exists():
        return pd.DataFrame(columns=COLUMNS).set_index("experiment")
    try:
        rows = pd.read_csv(f, dtype={"sha256": str, "file": str})
        wrong = ([f"it lacks the column(s) {', '.join(sorted(set(COLUMNS) - set(rows.columns)))}"]
                 if not set(COLUMNS) <= set(rows.columns) else
                 [f"it lists {e} twice" for e in rows.loc[rows["experiment"].duplicated(), "experiment"]])
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
        wrong = [f"it does not read as a table ({e})"]
    if wrong:
        raise DamagedPart(f"{f} is damaged: {wrong[0]}; fetch it again (`git checkout -- {shlex.quote(str(f))}`) or, if "
                          f"the tree's tables are as exported, record them anew with `python -m "
                          f"reluinit.report.reference record {shlex.quote(str(root))}`")
    return rows.set_index("experiment")


def record(root: str | Path, experiments=None) -> list[str]:
    """Write the digests of ``experiments``' tables (every table of the tree with None) into
    ``tables.csv``, dropping the rows of those whose table is gone; the others' rows are kept.
    Returns one line per table recorded."""
    root = Path(root)
    held = tables(root)
    # the whole tree anew (a damaged tables.csv too), or these experiments' rows in the recorded ones
    rows = pd.DataFrame(columns=COLUMNS).set_index("experiment") if experiments is None else _recorded(root)
    said = []
    for exp in held if experiments is None else experiments:
        rows = rows.drop(index=exp, errors="ignore")
        if exp in held:
            found = digests(part_bytes(held[exp]))
            rows.loc[exp] = {"file": held[exp].relative_to(root).as_posix(), **found}
            said.append(f"recorded {held[exp]}: sha256 {found['sha256'][:12]}, {found['rows']:,} rows")
    if len(rows):
        papers = list(catalogue.PAPERS)  # by paper, then in the catalogue's order
        order = {e: i for i, e in enumerate(sorted(catalogue.ENTRIES, key=lambda e: papers.index(catalogue.paper_of(e))))}
        rows = rows.sort_index(key=lambda ids: ids.map(order))
        rows.astype({k: "Int64" for k in ("bytes", "rows")}).reset_index().reindex(columns=COLUMNS).to_csv(
            root / TABLES, index=False)
    else:
        (root / TABLES).unlink(missing_ok=True)
    return said


def record_files(files) -> list[str]:
    """``record`` for tables named by their files (``reference record <table> ...``), or for every
    table of a tree named by its folder; a file that is not an experiment's table in a tree is
    refused, naming it, before any is recorded."""
    named = [(f, f.name.removesuffix(".gz").removesuffix(".csv")) for f in map(Path, files)]
    for f, exp in named:
        if (f / "runs.csv").is_file():
            continue
        if exp not in catalogue.ENTRIES or f.parent.name != catalogue.paper_of(exp) or not f.is_file():
            raise FileNotFoundError(f"{f} is not an experiment's table in a reference tree (<tree>/<PAPER>/<ID>.csv or "
                                    f".csv.gz): name one, e.g. `python -m reluinit.report.reference record "
                                    f"reference/paper/OP/OP-F1.csv.gz`")
    return [line for f, exp in named
            for line in (record(f) if (f / "runs.csv").is_file() else record(f.parent.parent, [exp]))]


def edited(root: str | Path) -> list[str]:
    """One sentence per table of the tree whose content is not what ``tables.csv`` records (or
    that it does not record), naming the file, what differs and the fix; [] for a tree as exported."""
    root = Path(root)
    rows, held = _recorded(root), tables(root)
    if held and not (root / TABLES).exists():  # a tree exported before tables carried digests
        return [f"{root / TABLES} is missing, so no table of {root} can be checked and no claim is judged on it; "
                f"export the tree again or, if its tables are as exported, record them with `python -m "
                f"reluinit.report.reference record {shlex.quote(str(root))}`"]
    said = []
    for exp, f in held.items():
        if exp not in rows.index:
            what = f"{root / TABLES} records no digest for it"
        else:
            try:
                wrong = differences(digests(part_bytes(f)), rows.loc[exp].to_dict())
            except (DamagedPart, ValueError, pd.errors.ParserError) as e:
                wrong = [f"it does not read ({e})"]
            if not wrong:
                continue
            what = "edited after export: its " + ", ".join(wrong)
        said.append(f"{f}: {what}, so its claims are not judged; rebuild it with {rebuild(root, exp)}, or, if the "
                    f"edit is meant, re-record it with `python -m reluinit.report.reference record {shlex.quote(str(f))}`")
    for exp in rows.index.difference(list(held)):  # recorded, and gone: its claims would fall back to its parts
        f = root / str(rows.loc[exp, "file"])
        said.append(f"{f}: {root / TABLES} records it but the tree does not hold it, so its claims are not judged; "
                    f"put it back (`git checkout -- {shlex.quote(str(f))}`) or rebuild it with {rebuild(root, exp)}")
    return said


def parts_edited(root: str | Path) -> list[str]:
    """One sentence per part file of the tree (``<PAPER>/<ID>/<part>.csv[.gz]``: the rows of an
    unfinished experiment's finished jobs, which its claims read in its table's stead) that
    ``parts.csv`` does not record, or whose content is not the one it records; [] for a tree as
    exported. (``restore`` checks the same of each part it brings back.)"""
    root = Path(root)
    made = (pd.read_csv(root / "parts.csv", dtype=str).set_index(["experiment", "part"])
            if (root / "parts.csv").exists() else pd.DataFrame(columns=DIGESTS))
    said = []
    for f in sorted(root.glob("*/*/*.csv*")):
        exp, part = f.parent.name, f.name.removesuffix(".gz").removesuffix(".csv")
        if exp not in catalogue.ENTRIES:
            continue
        if (exp, part) not in made.index:
            wrong = ["parts.csv has no record of it"]
        else:
            try:
                wrong = differences(digests(part_bytes(f)), made.loc[(exp, part)].to_dict())
            except (DamagedPart, ValueError, pd.errors.ParserError) as e:
                wrong = [f"it does not read ({e})"]
            wrong = ["edited after export: its " + ", ".join(wrong)] if wrong else []
        if wrong:
            said.append(f"{f}: {wrong[0]}, so the claims that read it are not judged; delete it and rebuild "
                        f"{exp}'s table with {rebuild(root, exp)}")
    return said


def rebuild(root: Path, exp: str) -> str:
    """The commands that make ``exp``'s table of the tree ``root`` again: its job, then its export."""
    scale = root.name if root.name in integrity.SCALES else "paper"
    results = f"{integrity.DEFAULT_RESULTS}/{scale}"
    export = f"python -m reluinit.report.reference export --experiments {exp}" + (
        f" --results {results} --scale {scale}" if scale != "paper" else "") + (
        f" --out {shlex.quote(str(root))}" if root != Path("reference/paper") else "")
    return f"`{integrity.rebuild_command(paths.table(results, exp), force=False)}` and `{export}`"
