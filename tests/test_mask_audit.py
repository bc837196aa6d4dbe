"""The mask audit's paper values (issue 96): every audit cell whose key is in claims.yaml carries the
paper's mean, a resumed audit joins them anew, and ``--rejoin`` does that alone, prunes nothing and
writes the same bytes wherever it writes."""

from __future__ import annotations

import gzip
import math

import pandas as pd
import yaml

from conftest import ROOT
from reluinit.tools import mask_audit

AUDIT = ROOT / "reference" / "paper" / "RP" / "mask-audit.csv.gz"
CELL = ["table", "dataset", "model", "activation", "method", "sparsity"]


def _claims_means(claims: dict) -> dict[str, tuple[list[str], dict[tuple, float]]]:
    """Per table of claims.yaml's ``cells:`` and ``claims:``: its keys and its rows' paper means,
    read here without the tool's code (sparsities rounded to 6 decimals)."""
    out = {}
    for claim in claims.get("cells", []) + claims.get("claims", []):
        if "keys" in claim and "rows" in claim:
            n = len(claim["keys"])
            out[claim["id"]] = (claim["keys"], {tuple(round(v, 6) if isinstance(v, float) else v for v in row[:n]): row[n]
                                                for row in claim["rows"]})
    return out


def test_every_committed_audit_cell_whose_key_is_in_claims_yaml_has_its_paper_value():
    """Before issue 96, 21 cells (RP-T2's CIFAR-10 MBP and random cells at 90-98% for ResNet32, 50
    and 104, RP-T5's VGG16 SynFlow at 85-95%) were blank: their nets were pruned by an early form of
    the tool that read only claims.yaml's ``claims:`` section (RP-T2 and RP-T5 are under ``cells:``),
    and a resumed audit kept stored rows as they were. Fails when claims.yaml gains or changes a
    cell's value and the audit is not re-joined (``python -m reluinit.tools.mask_audit --rejoin``)."""
    means = _claims_means(yaml.safe_load((ROOT / "claims.yaml").read_text()))
    audit = mask_audit.read(AUDIT)
    cells = audit.drop_duplicates(CELL)
    checked, wrong = 0, []
    for _, cell in cells.iterrows():
        if cell["table"] not in means:
            continue
        keys, rows = means[cell["table"]]
        key = tuple(round(float(cell[k]), 6) if k == "sparsity" else cell[k] for k in keys)
        if key in rows:
            checked += 1
            if not (cell["paper_acc"] == rows[key]):
                wrong.append((*key, cell["paper_acc"], rows[key]))
        else:
            assert math.isnan(cell["paper_acc"]), f"{cell['table']} {key}: a paper value without a claims.yaml cell"
    assert not wrong, f"{len(wrong)} audit cells lack or misstate claims.yaml's paper value: {wrong[:5]}"
    assert checked >= 230
    # every row of a cell (one per layer) carries the same value
    assert (audit.groupby(CELL, dropna=False)["paper_acc"].nunique(dropna=False) == 1).all()


def _claims_file(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [], "cells": [
        {"id": "RP-T2", "keys": ["dataset", "model", "method", "sparsity"],
         "rows": [["cifar10", "resnet32", "mbp", 0.9, 90.21, 0.55], ["cifar10", "resnet32", "mbp", 0.98, 86.83, 0.27]]}]}))
    return path


def test_rejoin_reads_each_cell_from_the_claims_cells_section_whatever_the_floats_spelling(tmp_path):
    """A blank cell gets its value (0.9000000000000001 is claims.yaml's 0.9), a stale one the value
    claims.yaml has now or NaN where it has none, a table without a claim NaN; nothing else moves."""
    audit = pd.DataFrame({
        "table": ["RP-T2", "RP-T2", "RP-T2", "RP-T5"], "dataset": ["cifar10"] * 4,
        "model": ["resnet32", "resnet32", "resnet32", "vgg16"], "activation": ["relu"] * 4,
        "method": ["mbp", "mbp", "mbp", "synflow"], "sparsity": [0.9000000000000001, 0.98, 0.95, 0.9],
        "kept": [1, 2, 3, 4], "paper_acc": [float("nan"), 50.0, 40.0, 93.05]})
    joined = mask_audit.rejoin(audit, _claims_file(tmp_path))
    assert joined["paper_acc"].iloc[0] == 90.21 and joined["paper_acc"].iloc[1] == 86.83
    assert joined["paper_acc"].iloc[2:].isna().all()
    pd.testing.assert_frame_equal(joined.drop(columns="paper_acc"), audit.drop(columns="paper_acc"))
    assert mask_audit.cell_key(["cifar10", 0.90, 100]) == mask_audit.cell_key(["cifar10", 0.9000000000000001, 100.0])


def test_rejoin_on_the_command_line_prunes_nothing_and_writes_the_same_bytes(tmp_path, capsys):
    """``--rejoin`` on a copy of RP-T5's committed rows with paper_acc blanked fills every cell
    that claims.yaml has, leaves every other column as it was, and gzips without time or name:
    the same rows give the same bytes at any path."""
    committed = mask_audit.read(AUDIT)
    t5 = committed[committed["table"] == "RP-T5"].reset_index(drop=True)
    blank = t5.assign(paper_acc=float("nan"))
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name / "mask-audit.csv.gz"
        out.parent.mkdir()
        mask_audit._write(blank, out)
        mask_audit.main(["--rejoin", "--out", str(out), "--claims", str(ROOT / "claims.yaml")])
        outs.append(out.read_bytes())
    assert "18 of 18 cells have a paper value" in capsys.readouterr().out
    assert outs[0] == outs[1]
    head = outs[0][:10]
    assert head[3] & 0x08 == 0 and head[4:8] == b"\0\0\0\0"  # no file name, no timestamp
    again = mask_audit.read(tmp_path / "a" / "mask-audit.csv.gz")
    pd.testing.assert_frame_equal(again, t5)
    with gzip.open(tmp_path / "a" / "mask-audit.csv.gz", "rt") as f:
        assert f.readline().rstrip("\n").split(",") == mask_audit.COLUMNS


def test_a_resumed_audit_joins_its_stored_rows_anew(tmp_path):
    """``run`` over a file that already holds every net of RP-T5 prunes nothing and still gives its
    rows today's paper values (the blank rows of issue 96 were stored rows a resume kept)."""
    from reluinit.pipeline.config import read_yaml

    committed = mask_audit.read(AUDIT)
    t5 = committed[committed["table"] == "RP-T5"].reset_index(drop=True)
    out = tmp_path / "mask-audit.csv"
    mask_audit._write(t5.assign(paper_acc=float("nan")), out)
    audit = mask_audit.run(read_yaml(ROOT / "config.yaml"), ["RP-T5"], "paper", out, ROOT / "claims.yaml")
    pd.testing.assert_frame_equal(audit.reset_index(drop=True), t5, check_dtype=False)
    assert audit["paper_acc"].notna().all()
