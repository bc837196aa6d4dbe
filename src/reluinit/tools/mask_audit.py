"""What every GPU table's pruning does to its nets, at the papers' sizes, on the CPU: the mask audit.

    python -m reluinit.tools.mask_audit [--scale paper] [--tables RP-T1 RP-T2 RP-T3 RP-T5 RP-T9]
        [--out reference/paper/RP/mask-audit.csv.gz] [--rejoin]

RP's trained tables cost about a thousand GPU-hours on a cluster; a net whose pruning empties a
layer or its classifier can only guess one class, however long it trains. This prunes each
distinct net of those tables (table, dataset, model, activation, method) at its real size, with
seed 0, at every sparsity of its table, with the code a cluster job runs (``rp_train.run_model``,
``rp_train.pruning_batch``, ``pruning.prune_each``: one scoring per net, each sparsity's masks
equal to its own ``prune`` call's). Magnitude, SynFlow and random pruning read no data: their
masks are exactly a job's at seed 0. SNIP, GraSP and their Stable-ResNet and rescaled forms score
a stand-in batch of the dataset's shape and classes (uniform random pixels, normalised with the
dataset's constants; ``stand_in`` True): no CIFAR or Tiny ImageNet here, so their masks show what
the net's scale does, not what the data does.

One row per (table, model, method, sparsity, layer) with the layer's kept fraction, and per net
``emptied_layers``, ``classifier_kept`` of ``classifier_weights`` and ``collapse`` (in words, ""
when nothing is emptied), beside the paper's accuracy for the cell (``paper_acc``, claims.yaml)
and chance (100 / classes). ``python -m reluinit.pipeline.plan`` lists the collapsed cells from it.
A stopped audit resumes: a rerun skips the nets its file already holds, and joins every row's
``paper_acc`` anew from claims.yaml (``rejoin``), so rows pruned under an older claims.yaml or an
older join get the values it has now. ``--rejoin`` does only that to the file at ``--out``: it
prunes nothing.
"""

from __future__ import annotations

import argparse
import gzip
import io
import logging
import numbers
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import torch

from ..datasets import FIXED_STATS, Split
from ..pipeline.config import read_yaml
from ..pruning import at_chance, collapse, connected, layer_table, prune_each, sparsity

log = logging.getLogger("reluinit.mask_audit")

TABLES = ("RP-T1", "RP-T2", "RP-T3", "RP-T5", "RP-T9")
SHAPES = {"cifar10": ((3, 32, 32), 10), "cifar100": ((3, 32, 32), 100), "tiny_imagenet": ((3, 64, 64), 200),
          "digits": ((1, 8, 8), 10)}
DATA_FREE = ("random", "magnitude", "synflow")
COLUMNS = ["table", "dataset", "in_shape", "classes", "model", "net", "activation", "method", "pruner", "init",
           "sparsity", "layer", "name", "weights", "kept", "kept_fraction", "collapsed", "achieved_sparsity",
           "emptied_layers", "classifier_kept", "classifier_weights", "connected", "at_chance", "collapse", "s_cr",
           "stand_in", "paper_acc", "chance", "seconds"]


def stand_in(dataset: str, per_class: int) -> tuple[Split, SimpleNamespace]:
    """A split of ``per_class`` uniform random images of every class, of ``dataset``'s shape, and
    its normalisation (the authors' constants where the runs use them, else mean 0.5, sd 0.25)."""
    (c, h, w), classes = SHAPES[dataset]
    gen = torch.Generator().manual_seed(0)
    x = torch.rand((classes * per_class, c, h, w), generator=gen)
    y = torch.arange(classes).repeat_interleave(per_class)
    mean, std = FIXED_STATS.get(dataset, ((0.5,) * c, (0.25,) * c))
    norm = SimpleNamespace(mean=torch.tensor(mean).view(1, c, 1, 1), std=torch.tensor(std).view(1, c, 1, 1))
    return Split(x, y, dataset), norm


def paper_values(claims_path: str | Path, table: str) -> dict[tuple, float]:
    """The paper's mean accuracy (%) of each cell of ``table``'s claim, keyed by its key values
    (``cell_key``: a sparsity of 0.9 in claims.yaml is the same cell as 0.90 or 0.9000000000000001
    in a run or a CSV)."""

    claim = _claim(claims_path, table)
    if claim is None:
        return {}
    n = len(claim["keys"])
    return {cell_key(row[:n]): row[n] for row in claim["rows"]}


def cell_key(values) -> tuple:
    """A cell's key values as a lookup key: numbers as floats rounded to 9 decimals (an int depth,
    a float sparsity and numpy's scalars alike), text as it stands."""
    return tuple(round(float(v), 9) if isinstance(v, numbers.Real) and not isinstance(v, bool) else v
                 for v in values)


def rejoin(audit: pd.DataFrame, claims: str | Path = "claims.yaml") -> pd.DataFrame:
    """``audit`` with every row's ``paper_acc`` read anew from ``claims`` (the table's claim's mean
    for the row's cell, NaN where the claim has no such cell); nothing else changes, nothing is
    pruned."""
    acc = pd.Series(float("nan"), index=audit.index, dtype=float)
    for table, rows in audit.groupby("table", sort=False):
        paper, keys = paper_values(claims, table), _keys(claims, table)
        acc.loc[rows.index] = [paper.get(cell_key(cell), float("nan"))
                               for cell in rows[keys].itertuples(index=False, name=None)]
    return audit.assign(paper_acc=acc)


def nets(config: dict, tables: list[str], scale: str):
    """``(table, settings, net fields, sparsities)`` for every distinct net of ``tables``, where
    net fields are a run of rep 0 and seed 0 (``rp_train``'s own runs, so a shared or renamed axis
    is read as the jobs read it)."""
    from ..experiments import rp_train
    from ..pipeline.config import settings

    for table in tables:
        s = settings(config, table, scale)
        runs = rp_train._runs(s, rp_train._table_axes(s))
        by_net: dict[tuple, dict] = {}
        for run in runs.values():
            if run["rep"] != 0:
                continue
            fields = (run["dataset"], run["model"], run["activation"], run["method"])
            by_net.setdefault(fields, {"run": {**run, "seed": 0}, "sparsities": []})["sparsities"].append(run["sparsity"])
        for net in by_net.values():
            yield table, rp_train._run_settings(s, net["run"]), net["run"], net["sparsities"]


def audit_net(table: str, s: dict, run: dict, sparsities: list[float], paper: dict[tuple, float],
              keys: list[str]) -> pd.DataFrame:
    """The rows of one net (module doc): built, initialized and pruned as its cluster job does it."""
    from ..experiments import rp_train

    pruner = rp_train.method(run["method"])[0]
    grasp = s.get("grasp_batch", {}).get(run["dataset"], {})
    per_class = max(s["batch_per_class"], grasp.get("per_class", 0) * grasp.get("draws", 0))
    split, norm = stand_in(run["dataset"], per_class)
    model, name, _, _ = rp_train.run_model(s, run, split)
    batch = rp_train.pruning_batch(s, run, pruner, norm, split, "cpu")
    if pruner in DATA_FREE:
        batch = {"in_shape": batch["in_shape"]}
    start = time.perf_counter()
    results = prune_each(model, pruner, [1 - sp for sp in sparsities], **batch, seed=0,
                         rounds=s.get("synflow_rounds", 100))
    seconds = time.perf_counter() - start
    (c, h, w), classes = SHAPES[run["dataset"]]
    init = rp_train.resnet_scheme(run["init"], name, pruner)
    rows = []
    for sp, (masks, s_cr) in zip(sparsities, results):
        last = list(masks)[-1]
        linked = connected(model, masks, batch["in_shape"]) if any(not m.any() for m in masks.values()) else True
        t = layer_table(masks).rename(columns={"density": "kept_fraction"})
        cell = cell_key({**run, "sparsity": sp}[k] for k in keys)
        t = t.assign(table=table, dataset=run["dataset"], in_shape=f"{c}x{h}x{w}", classes=classes, model=run["model"],
                     net=name, activation=run["activation"], method=run["method"], pruner=pruner, init=init,
                     sparsity=sp, achieved_sparsity=sparsity(masks), emptied_layers=int(t["collapsed"].sum()),
                     classifier_kept=int(masks[last].sum()), classifier_weights=masks[last].numel(),
                     connected=linked, at_chance=at_chance(masks, linked), collapse=collapse(masks, linked), s_cr=s_cr, stand_in=pruner not in DATA_FREE,
                     paper_acc=paper.get(cell, float("nan")), chance=100 / classes, seconds=round(seconds, 1))
        rows.append(t)
        log.info("%s %s %s %s at %.3g: %d layers emptied, classifier keeps %d of %d (paper %s%%)%s", table,
                 run["dataset"], name, run["method"], sp, t["emptied_layers"].iloc[0], t["classifier_kept"].iloc[0],
                 masks[last].numel(), t["paper_acc"].iloc[0], f": {collapse(masks, linked)}" if collapse(masks) else "")
    return pd.concat(rows, ignore_index=True)[COLUMNS]


def run(config: dict, tables: list[str], scale: str, out: str | Path, claims: str | Path = "claims.yaml") -> pd.DataFrame:
    """The audit of ``tables`` at ``scale``, written to ``out`` as each net finishes (a run stopped
    half-way keeps its nets, and a rerun skips them)."""
    out = Path(out)
    done = read(out) if out.exists() else pd.DataFrame(columns=COLUMNS)
    if "connected" not in done:  # written before the path check: a net with no layer emptied is connected
        nets_of = done.groupby(["table", "dataset", "model", "activation", "method"])["emptied_layers"].transform("max")
        done = done[nets_of == 0].assign(connected=True, at_chance=False)[COLUMNS]
    if len(done):  # rows pruned under an older claims.yaml (or join) take today's paper values
        done = rejoin(done, claims)
    have = set(zip(done["table"], done["dataset"], done["model"], done["activation"], done["method"]))
    parts = [done] if len(done) else []
    for table, s, net_run, sparsities in sorted(nets(config, tables, scale), key=_cost):
        if (table, net_run["dataset"], net_run["model"], net_run["activation"], net_run["method"]) in have:
            continue
        parts.append(audit_net(table, s, net_run, sparsities, paper_values(claims, table), _keys(claims, table)))
        out.parent.mkdir(parents=True, exist_ok=True)
        _write(pd.concat(parts, ignore_index=True), out)
    audit = pd.concat(parts, ignore_index=True) if parts else done
    order = {t: i for i, t in enumerate(tables)}
    audit = audit.sort_values(["table", "dataset", "model", "activation", "method", "sparsity", "layer"],
                              key=lambda c: c.map(order) if c.name == "table" else c, kind="stable")
    _write(audit, out)
    return audit


def read(path: str | Path) -> pd.DataFrame:
    """An audit file as ``run`` wrote it (``collapse`` "" where nothing is emptied)."""
    audit = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"collapse": str})
    if "collapse" in audit:
        audit["collapse"] = audit["collapse"].fillna("")
    return audit


def rejoin_file(out: str | Path, claims: str | Path = "claims.yaml") -> pd.DataFrame:
    """The audit at ``out`` with ``paper_acc`` joined anew from ``claims`` (``rejoin``), written
    back in place: the masks are not recomputed."""
    out = Path(out)
    audit = rejoin(read(out), claims)
    _write(audit, out)
    return audit


def _write(audit: pd.DataFrame, out: Path) -> None:
    """The audit as CSV, gzipped where ``out`` ends in .gz (the paper scale's 242 cells hold some
    15,000 layer rows) as the reference gzips its tables (``report.reference._copy_table``: no
    timestamp, no file name, level 9), so the same rows give the same bytes wherever written."""
    text = audit.to_csv(index=False)
    if out.suffix != ".gz":
        out.write_text(text)
        return
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="", compresslevel=9) as gz:
        gz.write(text.encode())
    out.write_bytes(buf.getvalue())


def _cost(net) -> float:
    """A net's audit cost in batched float32 forward passes of one 32x32 image through a 32-layer net,
    roughly: the data-free pruners nothing, SNIP three passes of its batch, GraSP six of its draws,
    SynFlow its rounds at each sparsity (one image, float64). Cheap nets first, so a run stopped
    early has the most cells."""
    from ..experiments import rp_train

    table, s, run, sparsities = net
    pruner = rp_train.method(run["method"])[0]
    (_, h, w), classes = SHAPES[run["dataset"]]
    model = run["model"]
    size = {"vgg16": 32, "vgg16x3": 96}.get(model) or int("".join(ch for ch in model if ch.isdigit()) or 32)
    grasp = s.get("grasp_batch", {}).get(run["dataset"], {"per_class": s["batch_per_class"], "draws": 1})
    # SynFlow runs one image at a time in float64: about seven times a batched float32 image's time here
    passes = {"random": 0, "magnitude": 0, "synflow": 7 * 2 * 3 * s.get("synflow_rounds", 100) * len(sparsities),
              "snip": 3 * s["batch_per_class"] * classes,
              "grasp": 6 * grasp["per_class"] * grasp["draws"] * classes}.get(pruner, 0)
    return passes * size / 32 * h * w / 1024


def _claim(claims: str | Path, table: str) -> dict | None:
    """The claim judging ``table``'s cells (claims.yaml's ``cells:`` section), None without one."""
    loaded = read_yaml(claims)
    return next((c for c in loaded.get("cells", []) + loaded.get("claims", []) if c["id"] == table), None)


def _keys(claims: str | Path, table: str) -> list[str]:
    claim = _claim(claims, table)
    return claim["keys"] if claim else ["model", "method", "sparsity"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m reluinit.tools.mask_audit", description=__doc__.split("\n\n")[1])
    ap.add_argument("--scale", default="paper", choices=["paper", "quick", "smoke"])
    ap.add_argument("--tables", nargs="+", default=list(TABLES))
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--claims", default="claims.yaml")
    ap.add_argument("--out", default=None, help="default: reference/<scale>/RP/mask-audit.csv.gz")
    ap.add_argument("--rejoin", action="store_true",
                    help="only join paper_acc anew from --claims into the audit at --out (prunes nothing)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from ..pipeline.config import read_yaml

    out = args.out or f"reference/{args.scale}/RP/mask-audit.csv.gz"
    if args.rejoin:
        audit = rejoin_file(out, args.claims)
        cells = audit.drop_duplicates(["table", "dataset", "model", "activation", "method", "sparsity"])
        print(f"paper_acc joined anew from {args.claims} into {out}: {int(cells['paper_acc'].notna().sum())} of "
              f"{len(cells)} cells have a paper value")
        return
    config = read_yaml(args.config)
    start = time.process_time()
    audit = run(config, args.tables, args.scale, out, args.claims)
    from ..pipeline.plan import collapsed_cells

    bad = collapsed_cells(audit)
    print(f"{audit.drop_duplicates(['table', 'dataset', 'model', 'activation', 'method', 'sparsity']).shape[0]} "
          f"cells audited into {out} ({time.process_time() - start:.0f} s of CPU in this call)")
    if len(bad):
        print(f"{len(bad)} cells empty a layer or the classifier:")
        print(bad.to_string(index=False))
    else:
        print("no cell empties a layer or the classifier")


if __name__ == "__main__":
    main()
