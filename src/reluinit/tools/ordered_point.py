"""Where SBP empties a layer of an ordered-phase FFNN, by chi and depth: the evidence behind RP's
ordered point (docs/papers/rp.md, "The ordered point").

    python -m reluinit.tools.ordered_point [--data-dir data] [--activations tanh elu]
        [--chis 0.046 0.4 0.6 0.7 0.8 0.9] [--depths 20 40 60 80 100] [--nets 3] [--out scan.csv]

RP names no ordered point for Figures 3 and 5 or Table 4; it says (Section 4.1) that the ordered
net "is untrainable when we choose sparsity s>40% and depth L>60 as one layer being fully pruned".
The authors' code fixes sigma_b^2 = 1 for the ordered phase and takes sigma_w^2 from its command
line. For each activation and target chi this solves sigma_w at sigma_b = 1
(``meanfield.sigma_w_for_chi``), draws ``--nets`` width-100 nets per depth as RP-F3's runs draw
them, scores them with SNIP on a class-balanced batch of 10 MNIST digits per class (normalised as
the runs are) in float64, and prints the mean critical sparsity s_cr: the largest sparsity at which
no layer is emptied. A tidy table (one row per net) goes to ``--out``.
"""

from __future__ import annotations

import argparse

import pandas as pd

from .. import datasets
from ..inits import initialize
from ..meanfield import chi, sigma_w_for_chi
from ..models import ffnn
from ..pruning import prune_with_s_cr
from ..training import DeviceData


def scan(data_dir: str, activations: list[str], chis: list[float], depths: list[int], nets: int,
         width: int = 100, sigma_b: float = 1.0, per_class: int = 10, scale: str = "paper") -> pd.DataFrame:
    """One row per net: activation, chi (target and solved), sigma_w, depth, net, s_cr (``scale``
    quick: on the bundled stand-in for MNIST)."""
    split = datasets.load("mnist", data_dir, train=True, scale=scale)
    norm = DeviceData(split.x, split.y, "cpu")
    rows = []
    for act in activations:
        for target in chis:
            sw = sigma_w_for_chi(target, sigma_b, act)
            for depth in depths:
                for net in range(nets):
                    x, y = datasets.balanced_batch(split, per_class, 1000 + net)
                    x = ((x.float() - norm.mean) / norm.std).double()
                    model = initialize(ffnn(x[0].numel(), width, depth, 10, act), "sigma", sigma_w=sw,
                                       sigma_b=sigma_b, seed=net).double()
                    s_cr = prune_with_s_cr(model, "snip", 1.0, x=x, y=y)[1]
                    rows.append(dict(activation=act, chi_target=target, chi=chi(sw, sigma_b, act), sigma_w=sw,
                                     sigma_w2=sw * sw, sigma_b=sigma_b, depth=depth, width=width, net=net,
                                     s_cr=s_cr))
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m reluinit.tools.ordered_point", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default="data", help="where MNIST is (bash install.sh DIR)")
    ap.add_argument("--activations", nargs="+", default=["tanh", "elu"])
    ap.add_argument("--chis", nargs="+", type=float, default=[0.046, 0.4, 0.6, 0.7, 0.8, 0.9])
    ap.add_argument("--depths", nargs="+", type=int, default=[20, 40, 60, 80, 100])
    ap.add_argument("--nets", type=int, default=3)
    ap.add_argument("--out", help="CSV of every net's s_cr")
    a = ap.parse_args(argv)
    table = scan(a.data_dir, a.activations, a.chis, a.depths, a.nets)
    if a.out:
        table.to_csv(a.out, index=False)
    wide = table.pivot_table(index=["activation", "chi_target", "sigma_w2"], columns="depth", values="s_cr")
    print("mean s_cr (largest sparsity with no layer emptied) by depth, sigma_b^2 = 1:")
    print(wide.round(2).to_string())


if __name__ == "__main__":
    main()
