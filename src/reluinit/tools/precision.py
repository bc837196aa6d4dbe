"""What float32 changes in TG's sweeps: the same nets (same seeds) measured in float64 and float32
at the paper's sizes, per experiment a sample of nets at the first, middle and last setting of its
sweep. Prints the largest change of a net's value over the spread across nets; ``--out`` keeps
every net's value in both types (``reference/paper/precision.csv``)::

    python -m reluinit.tools.precision [--nets 5] [--data-dir data] [--out precision.csv]
"""

from __future__ import annotations

import argparse
import time

from ..nets import resolve_device


def precision(a) -> None:
    import pandas as pd

    from ..experiments.tg import growth_rows, net_growth
    from ..pipeline.catalogue import get
    from ..pipeline.config import read_yaml, settings

    config = read_yaml(a.config)
    config["data_dir"] = a.data_dir
    dev = resolve_device(a.device)
    rows = []
    for exp in ("TG-F2", "TG-F3a", "TG-F3b", "TG-F5"):
        s = settings(config, exp, "paper")
        for dtype in ("float64", "float32"):
            t0 = time.perf_counter()
            if exp == "TG-F2":  # the first, middle and last density; no exact lengths
                alphas = s["alphas"][:: len(s["alphas"]) // 2][:3]
                sd = {**s, "alphas": alphas, "n_nets": a.nets, "exact_nets": 0, "dtype": dtype}
                table = pd.concat([get(exp).measure(sd, key, a.device) for key in [f"alpha{x:g}" for x in alphas]])
                table = table[table["layer"] == s["depth"]].assign(value=lambda t: t["length"], setting=lambda t: "alpha=" + t["alpha"].astype(str))
            else:  # Gaussian nets at the first, middle and last setting of the sweep (line paths)
                sweep = "alpha" if exp == "TG-F3b" else "sigma_w"
                grid = s["alphas"] if sweep == "alpha" else s["sigma_ws"]
                grid = grid[:: len(grid) // 2][:3]
                sd = {**s, "alphas" if sweep == "alpha" else "sigma_ws": grid, "n_nets": a.nets, "dtype": dtype}
                table = net_growth(growth_rows(sd, "gaussian", sweep, "line", s["seed"], dev))
                table = table.assign(value=table["growth"], setting=sweep + "=" + table[sweep].astype(str))
            rows.append(table[["setting", "net", "value"]].assign(experiment=exp, dtype=dtype,
                                                                  seconds=time.perf_counter() - t0))
    df = pd.concat(rows, ignore_index=True)
    wide = df.pivot_table(index=["experiment", "setting", "net"], columns="dtype", values="value").reset_index()
    wide["change"] = wide["float32"] - wide["float64"]
    out = wide.groupby(["experiment", "setting"], as_index=False).agg(
        nets=("net", "size"), mean_float64=("float64", "mean"), sd_across_nets=("float64", "std"),
        max_abs_change=("change", lambda c: c.abs().max()))
    out["change_over_sd"] = out["max_abs_change"] / out["sd_across_nets"]
    seconds = df.groupby(["experiment", "dtype"])["seconds"].first().unstack()
    if a.out:
        wide.to_csv(a.out, index=False)
    with pd.option_context("display.width", 140, "display.float_format", "{:.4g}".format):
        print(out.to_string(index=False))
        print("\nseconds per experiment's sample:\n" + seconds.to_string())
    worst = out["change_over_sd"].max()
    print(f"largest change / spread across nets: {worst:.2g}" + (" (float32 is safe)" if worst < 0.1 else " (CHECK)"))


def main() -> None:
    r = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    r.add_argument("--nets", type=int, default=5)
    r.add_argument("--config", default="config.yaml")
    r.add_argument("--data-dir", default="data", help="where MNIST is (TG-F2, F3 join two test images)")
    r.add_argument("--out", default="", help="CSV of every net's value in both types")
    r.add_argument("--device", default="auto")
    precision(r.parse_args())


if __name__ == "__main__":
    main()
