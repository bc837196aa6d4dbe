"""EP: expressive power of deep nets, the experiments on convolutional and trained nets: trajectory
length through EP's CIFAR-10 conv net at initialization (EP-F4), noise added to one layer of a
trained conv net (EP-F6), training a single layer of a hard-tanh FC net (EP-F7, EP-F17), trajectory
length and weight scale through training without and with batch norm and with trajectory
regularization (EP-F8, F9, F10, F11: one set of runs, four figures) and through the training of an
MNIST FC net (EP-F18).

Conventions and our readings of what the paper leaves open:

* Nets: ``models.EPConvNet`` (blocks 1 conv, 2 conv, 3 pool, 4 conv, 5 conv, 6 conv, 7 pool, 8 fc,
  9 readout; ``width`` channels, ``2 width`` after the first pooling) and ``models.FFNN``; every
  conv/linear layer N(0, sigma_w^2 / fan_in), biases N(0, sigma_b^2) (``initialize(.., "sigma")``).
* Circles: ``x(t) = cos(pi t / 2) x0 + sin(pi t / 2) x1`` between the test images ``points``
  (0-based) *as the net sees them*, i.e. normalised per channel with the training set's statistics
  (``training.load_data``), discretised in ``n_pieces`` chords. Lengths are measured after every
  block (``trajectories.module_lengths``), with batch norm in eval mode (running statistics: at
  initialization these are mean 0, variance 1, so BN is then nearly the identity; EP measured
  "Step 0" in a way that divided by a near-zero variance, which we do not reproduce).
* Length rows (``kind == "length"``) have ``layer``: 0 the input, an integer ``b`` the output of
  EP's block ``b``; in a block with a normalisation layer (batch norm or trajectory
  regularization) the output of its convolution is at ``b - 0.5`` (``stage == "conv"``), that of
  the normalisation layer alone at ``b - 0.25`` (``stage == "norm"``: batch norm's own effect on
  the length, which EP's Figure 10 draws dotted) and the block output, after the ReLU, at ``b``
  (``stage == "relu"``); other stages are ``conv``, ``pool``, ``fc``, ``readout`` (FC nets:
  ``hidden``, ``readout``).
* Weight scale (EP-F9, ``kind == "sigma_w"``): ``std(W) * sqrt(fan_in)`` of each conv/linear
  layer, ``layer`` being its EP block number.
* EP-F6 noise (our reading of "noise of magnitude m"): Gaussian noise of standard deviation
  ``m * std(W)`` added to the weights (not the bias) of one layer only, relative to that layer's
  own weight scale (an absolute std 0.25 would be 4x the weights of the 5th layer, which the
  paper's 0.02 drop rules out); ``noise_draws`` draws per (layer, m), the weights restored after
  each.
* EP-F7/F17 ("train from W^(1) on, so that the number of parameters trained remains fixed"): with
  ``depth`` hidden layers the linear layers are W^(0) (input -> hidden 1), W^(1) ..
  W^(depth-1) (hidden -> hidden) and the readout W^(depth). Each run trains one of W^(1) ..
  W^(depth-1) (weights and bias, everything else frozen at init: ``requires_grad=False``), all
  of the same size; ``include_readout: true`` adds a run training the readout alone. Train
  accuracy is re-measured in eval mode after training (``final_train_acc``).
* Trajectory regularization (EP-F11, ``TrajReg``): every batch norm of the BN net is replaced by a
  layer that multiplies its input by a learnt scalar lambda = exp(rho) > 0 (init 1, no weight
  decay, learning rate 1/100 of the recipe's: ``TrajReg``) at train and test time and,
  in training, adds ``coef * lambda * (current length / original length)`` to the loss
  (``coef = trajreg_coef``, EP: 0.01). "Current length": the length of the piecewise-linear
  trajectory through the minibatch's images at that layer, in minibatch order (adjacent points,
  the layer's input, i.e. before scaling by lambda). "Original length" (our reading): the length
  of the same minibatch trajectory in input space (the normalised images), so the ratio is the
  layer's length growth. Gradients flow through lambda and the current length.

Table columns: every training experiment's table holds the run's per-epoch history
(``kind == "epoch"``, columns of ``training.history_table``: ``epoch``, ``train_acc``,
``test_acc`` ...) and the rows its ``on_epoch`` hook adds (``kind == "length"``: ``epoch``,
``layer``, ``block``, ``stage``, ``length``; ``kind == "sigma_w"``: ``epoch``, ``layer``,
``param``, ``fan_in``, ``sigma_w``), with the run's settings (``run``, ``variant``, ``rep``,
``net_seed``, ``dataset``, ``sigma_w2`` ...) on every row. EP-F6 adds ``kind == "noise"`` rows
(``layer``, ``magnitude``, ``draw``, ``test_acc``, ``base_acc``, ``drop``); EP-F7/F17 add
``trained_layer``, ``final_train_acc``.
"""

from __future__ import annotations

import logging
import math

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from torch import nn

from .. import plotting
from ..models import build, initialize, weight_layers
from ..nets import resolve_device
from ..training import Checkpoint, Recipe, evaluate, fit, history_table, load_data
from ..trajectories import Arc, module_lengths
from . import Experiment, group_runs, part_seed, product_runs, register, resolve_part, run_checkpoint

log = logging.getLogger(__name__)

NORMS = (nn.BatchNorm2d, nn.BatchNorm1d)


# --- trajectory regularization -------------------------------------------------------------------


def chord_length(x: torch.Tensor) -> torch.Tensor:
    """Length of the piecewise-linear trajectory through the rows of ``x`` in order."""
    x = x.flatten(1).float()
    return (x[1:] - x[:-1]).norm(dim=1).sum()


RHO_LR_SCALE = 0.01


class TrajReg(nn.Module):
    """EP's trajectory regularization layer (module doc): output ``lambda * x``; in training mode,
    with ``orig`` (the minibatch's input-space length) set, it keeps ``penalty = coef * lambda *
    chord_length(x) / orig`` for the loss to collect (``take_penalty``).

    lambda = exp(rho) is learnt through rho: an unconstrained lambda can cross zero (and did, nets
    then trained at chance), which flips the sign of everything after it and turns the penalty into
    a reward. rho is exempt from weight decay (``no_weight_decay``), which would pull lambda to 1,
    and learns at ``RHO_LR_SCALE`` times the recipe's rate: one scalar gathers the gradient of a whole
    layer, and at the full rate the five lambdas shrank together in the first steps (to about 0.17
    each, logits x 1e-4) and 2 of 3 quick seeds stayed at chance, with or without the penalty."""

    def __init__(self, coef: float = 0.01):
        super().__init__()
        self.coef = coef
        self.rho = nn.Parameter(torch.zeros(()))
        self.rho.no_weight_decay = True
        self.rho.lr_scale = RHO_LR_SCALE
        self.orig: torch.Tensor | None = None
        self.penalty: torch.Tensor | None = None

    @property
    def lam(self) -> torch.Tensor:
        return self.rho.exp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lam = self.lam
        if self.training and self.orig is not None and len(x) > 1:
            self.penalty = self.coef * lam * chord_length(x) / self.orig
        return lam * x

    def take_penalty(self) -> torch.Tensor | None:
        p, self.penalty = self.penalty, None
        return p


def trajreg_loss(model: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy plus every ``TrajReg`` layer's penalty (training mode only)."""
    regs = [m for m in model.modules() if isinstance(m, TrajReg)]
    orig = chord_length(xb).detach().clamp_min(1e-12)
    for m in regs:
        m.orig = orig
    logits = model(xb)
    loss = nn.functional.cross_entropy(logits.float(), yb)
    for m in regs:
        m.orig = None
        p = m.take_penalty()
        if p is not None:
            loss = loss + p
    return loss, logits


def replace_norms(model: nn.Module, coef: float) -> nn.Module:
    """Replace every batch-norm layer of ``model`` by a ``TrajReg`` layer (in place)."""
    for name, child in model.named_children():
        if isinstance(child, NORMS):
            setattr(model, name, TrajReg(coef))
        else:
            replace_norms(child, coef)
    return model


# --- nets, circles and what is measured along them ----------------------------------------------------

CONV_VARIANTS = {"plain": "epconv", "bn": "epconv_bn", "trajreg": "epconv_bn"}


def conv_net(variant: str, n_out: int, in_shape, width: int, sigma_w2: float, sigma_b: float, seed: int,
             coef: float = 0.01) -> nn.Module:
    model = build(CONV_VARIANTS[variant], n_out, in_shape, "relu", width=width)
    if variant == "trajreg":
        replace_norms(model, coef)
    return initialize(model, "sigma", sigma_w=math.sqrt(sigma_w2), sigma_b=sigma_b, seed=seed)


def fc_net(n_out: int, in_shape, width: int, depth: int, activation: str, sigma_w2: float, sigma_b: float,
           seed: int) -> nn.Module:
    model = build("ffnn", n_out, in_shape, activation, width=width, depth=depth)
    return initialize(model, "sigma", sigma_w=math.sqrt(sigma_w2), sigma_b=sigma_b, seed=seed)


def _is_norm(m: nn.Module) -> bool:
    return isinstance(m, NORMS + (TrajReg,))


def stages(model: nn.Module) -> list[tuple[float, int, str, nn.Module]]:
    """(layer position, block, stage, module) of each stage whose output is measured (module doc):
    EP's conv net block by block (a block with a normalisation split before it), an FFNN hidden
    layer by hidden layer."""
    children = list(model.children())
    out = []
    if isinstance(children[0], nn.Flatten):  # FFNN: Flatten, (Linear, act) * depth, Linear
        lins = [i for i, c in enumerate(children) if isinstance(c, nn.Linear)]
        for b, i in enumerate(lins, start=1):
            mods = children[:i + 2] if b == 1 else children[i:i + 2]
            last = b == len(lins)
            out.append((float(b), b, "readout" if last else "hidden", nn.Sequential(*mods)))
        return out
    for b, child in enumerate(children, start=1):
        if isinstance(child, nn.Sequential) and any(_is_norm(m) for m in child):
            mods = list(child)
            k = next(i for i, m in enumerate(mods) if _is_norm(m))
            out.append((b - 0.5, b, "conv", nn.Sequential(*mods[:k])))
            out.append((b - 0.25, b, "norm", mods[k]))  # the normalisation alone: its own effect
            out.append((float(b), b, "relu", nn.Sequential(*mods[k + 1:])))
            continue
        if isinstance(child, nn.MaxPool2d):
            stage = "pool"
        elif isinstance(child, nn.Linear):
            stage = "readout"
        elif any(isinstance(m, nn.Flatten) for m in child.modules()):
            stage = "fc"
        else:
            stage = "conv"
        out.append((float(b), b, stage, child))
    return out


@torch.no_grad()
def length_rows(model: nn.Module, path, n_pieces: int, in_shape, chunk: int = 256) -> list[dict]:
    """The circle's length after every stage (index 0: the input), measured in eval mode."""
    was_training = model.training
    model.eval()
    st = stages(model)
    lengths = module_lengths([m for *_, m in st], path, n_pieces, tuple(in_shape), chunk=chunk)
    model.train(was_training)
    rows = [{"kind": "length", "layer": 0.0, "block": 0, "stage": "input", "length": float(lengths[0])}]
    rows += [{"kind": "length", "layer": pos, "block": b, "stage": stage, "length": float(v)}
             for (pos, b, stage, _), v in zip(st, lengths[1:])]
    return rows


def _layer_blocks(model: nn.Module) -> dict[str, int]:
    """Name of each conv/linear layer -> its layer number (EP block for the conv net, 1.. for FFNN)."""
    names = [n for n, _ in weight_layers(model)]
    if isinstance(next(iter(model.children())), nn.Flatten):
        return {n: i for i, n in enumerate(names, start=1)}
    return {n: int(n.split(".")[0]) + 1 for n in names}


@torch.no_grad()
def sigma_w_rows(model: nn.Module) -> list[dict]:
    """EP-F9's weight scale ``std(W) sqrt(fan_in)`` of every conv/linear layer."""
    blocks = _layer_blocks(model)
    rows = []
    for name, m in weight_layers(model):
        fan_in = m.weight[0].numel()
        rows.append({"kind": "sigma_w", "layer": float(blocks[name]), "param": name, "fan_in": fan_in,
                     "sigma_w": float(m.weight.double().std() * math.sqrt(fan_in))})
    return rows


def circle(test, points) -> Arc:
    """The circle between test images ``points`` as the net sees them (normalised), flattened."""
    return Arc(test.x[points[0]].flatten().clone(), test.x[points[1]].flatten().clone())


def _dataset(s: dict) -> str:
    from ..datasets import resolve

    return resolve(s["dataset"], s["scale"])


def _train_measure(run_fn, runs_of):
    """``parts`` and ``measure`` of an experiment whose runs are ``runs_of(s)``; ``run_fn(s, run,
    data, device, checkpoint)`` returns one run's rows."""
    def parts(s: dict) -> dict[str, dict]:
        return group_runs(runs_of(s), s.get("runs_per_job", 1))

    def measure(s: dict, key: str, device: str = "auto", inputs=(), checkpoints: str | None = None) -> pd.DataFrame:
        dev = resolve_device(device)
        data = load_data(s, dev)
        out = [run_fn(s, run, data, dev, run_checkpoint(checkpoints, run_key, s, run))
               for run_key, run in parts(s)[key]["runs"].items()]
        return pd.concat(out, ignore_index=True)

    return parts, measure


def _run_table(result, measures_extra: list[dict] | None = None, **columns) -> pd.DataFrame:
    hist = history_table(result, **columns).assign(kind="epoch")
    extra = pd.DataFrame(result.measures + (measures_extra or []))
    if len(extra):
        extra = extra.assign(**columns)
    return pd.concat([hist, extra], ignore_index=True)


# --- EP-F4: lengths through the conv net at initialization -------------------------------------------


def f4_parts(s: dict) -> dict[str, dict]:
    return {"nets": {}}


def f4_measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """``n_nets`` ReLU conv nets per sigma_w^2 (float64): the circle's length after every block."""
    _, seed = resolve_part(f4_parts(s), s["seed"], key)
    dev = resolve_device(device)
    _, test, split = load_data(s, dev)
    in_shape = tuple(split.x.shape[1:])
    path = circle(test, s["points"])
    path = Arc(path.x0.double(), path.x1.double())
    rows = []
    for i, s2 in enumerate(s["sigma_w2"]):
        for n in range(s["n_nets"]):
            net_seed = part_seed(seed, 1000 * i + n)
            model = conv_net("plain", split.n_classes, in_shape, s["width"], s2, s.get("sigma_b", 0.0), net_seed)
            model = model.double().to(dev)
            for r in length_rows(model, path, s["n_pieces"], in_shape):
                rows.append({**r, "sigma_w2": s2, "net": n, "net_seed": net_seed})
        log.info("sigma_w^2 = %g: %d nets measured", s2, s["n_nets"])
    return pd.DataFrame(rows).assign(width=s["width"], sigma_b=s.get("sigma_b", 0.0), n_pieces=s["n_pieces"],
                                     dataset=_dataset(s), device=str(dev))


def _hue(table: pd.DataFrame, col: str, name: str) -> pd.DataFrame:
    return table.assign(**{name: table[col].map(lambda v: f"{v:g}")})


def _mark_pools(ax, table: pd.DataFrame) -> None:
    for b in sorted(table.loc[table["stage"] == "pool", "block"].unique()):
        ax.axvspan(b - 0.3, b + 0.3, color="0.85", zorder=0)


def f4_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.4, height=3.8, integer_x=True)
    data = _hue(table, "sigma_w2", "$\\sigma_w^2$")
    sns.lineplot(data=data, x="layer", y="length", hue="$\\sigma_w^2$", palette="viridis", marker="o",
                 errorbar="se", ax=axes[0])
    _mark_pools(axes[0], table)
    axes[0].set(yscale="log", xlabel="layer (grey: pooling)", ylabel="trajectory length")
    axes[0].set_title(f"EP-F4: circle between {table['dataset'].iloc[0]} test images through a ReLU conv net "
                      f"(width {s['width']}) at init, {s['n_nets']} net(s)", fontsize=8)
    return fig


def f4_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per sigma_w^2: mean length after each block, and the mean growth per conv block."""
    mean = table.groupby(["sigma_w2", "layer", "stage"], as_index=False)["length"].mean()
    ratio = mean.groupby("sigma_w2")["length"].transform(lambda v: v / v.shift(1))
    return mean.assign(ratio_to_previous=ratio)


# --- EP-F8/F9/F10/F11: training the conv net without / with batch norm / with trajectory regularization --


def conv_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> pd.DataFrame:
    """Train one conv-net variant, recording lengths along the circle and weight scales every epoch."""
    train, test, split = data
    in_shape = tuple(split.x.shape[1:])
    coef = s.get("trajreg_coef", 0.01)
    variant = run.get("variant", "plain")
    model = conv_net(variant, split.n_classes, in_shape, s["width"], s["sigma_w2"], s.get("sigma_b", 0.0),
                     run["seed"], coef).to(device)
    path = circle(test, s["points"])

    def on_epoch(epoch, m):
        return length_rows(m, path, s["n_pieces"], in_shape) + sigma_w_rows(m)

    recipe = Recipe.from_settings(s["recipe"])
    kw = {"loss_fn": trajreg_loss} if variant == "trajreg" else {}
    result = fit(model, train, test, recipe, seed=run["seed"], checkpoint=checkpoint, on_epoch=on_epoch, **kw)
    log.info("run %s: %s conv net, final test accuracy %.4f", run["key"], variant, result.final["test_acc"])
    extra = []
    if variant == "trajreg":
        extra = [{"kind": "lambda", "param": n, "value": m.lam.item()} for n, m in model.named_modules()
                 if isinstance(m, TrajReg)]
    return _run_table(result, extra, run=run["key"], variant=variant, rep=run["rep"], net_seed=run["seed"],
                      dataset=split.name, width=s["width"], sigma_w2=s["sigma_w2"], n_pieces=s["n_pieces"],
                      recipe=s["recipe"].get("name", ""))


train_parts, train_measure = _train_measure(conv_run, lambda s: product_runs(s, {"variant": s["variants"]}))


def _lengths(table: pd.DataFrame, variant: str) -> pd.DataFrame:
    g = table[(table["kind"] == "length") & (table["variant"] == variant)]
    return g.groupby(["epoch", "layer", "block", "stage"], as_index=False)["length"].mean()


def _length_panel(ax, g: pd.DataFrame, title: str, cmap: str = "viridis") -> None:
    """One curve per epoch; segments into a normalisation stage dotted."""
    epochs = sorted(g["epoch"].unique())
    colours = sns.color_palette(cmap, len(epochs))
    for colour, epoch in zip(colours, epochs):
        e = g[g["epoch"] == epoch].sort_values("layer")
        x, y, st = e["layer"].to_numpy(), e["length"].to_numpy(), e["stage"].to_numpy()
        for i in range(1, len(x)):
            ax.plot(x[i - 1:i + 1], y[i - 1:i + 1], color=colour, lw=1.2, ls=":" if st[i] == "norm" else "-",
                    label=f"epoch {epoch:g}" if i == 1 else None)
        ax.plot(x, y, "o", color=colour, ms=2.5)
    _mark_pools(ax, g)
    ax.set(yscale="log", xlabel="layer (grey: pooling)", ylabel="trajectory length", title=title)
    ax.legend(fontsize=6, ncol=2)


def f8_figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.6, height=4.0, integer_x=True)
    _length_panel(axes[0], _lengths(table, "plain"), "no batch norm")
    fig.suptitle(f"EP-F8: circle between two {table['dataset'].iloc[0]} test images through the conv net during "
                 f"training, $\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def _length_summary(table: pd.DataFrame, variants) -> pd.DataFrame:
    """Length after each stage at the first and last epoch, and its growth through training."""
    rows = []
    for v in variants:
        g = _lengths(table, v)
        if g.empty:
            continue
        first, last = g["epoch"].min(), g["epoch"].max()
        a = g[g["epoch"] == first].set_index("layer")
        b = g[g["epoch"] == last].set_index("layer")
        rows.append(pd.DataFrame({"variant": v, "layer": a.index, "stage": a["stage"].to_numpy(),
                                  "length_init": a["length"].to_numpy(), "last_epoch": last,
                                  "length_final": b["length"].reindex(a.index).to_numpy()}))
    df = pd.concat(rows, ignore_index=True)
    return df.assign(growth_through_training=df["length_final"] / df["length_init"])


def f8_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _length_summary(table, ["plain"])


def f9_figure(table: pd.DataFrame, s: dict):
    g = table[(table["kind"] == "sigma_w") & (table["variant"] == "plain")]
    fig, axes = plotting.panels(1, width=5.4, height=3.8)
    sns.lineplot(data=_hue(g, "layer", "layer"), x="epoch", y="sigma_w", hue="layer", palette="viridis", marker="o",
                 errorbar="se", ax=axes[0])
    axes[0].axhline(math.sqrt(s["sigma_w2"]), color="k", ls="--", lw=1, label="init")
    axes[0].set(ylabel="$\\sigma_w$ = std(W) $\\sqrt{\\mathrm{fan\\ in}}$")
    axes[0].set_title(f"EP-F9: weight scale per layer through training, conv net without batch norm, "
                      f"init $\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=8)
    return fig


def f9_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table[(table["kind"] == "sigma_w") & (table["variant"] == "plain")]
    mean = g.groupby(["layer", "epoch"], as_index=False)["sigma_w"].mean().sort_values("epoch")
    out = mean.groupby("layer", as_index=False).agg(sigma_w_init=("sigma_w", "first"), sigma_w_final=("sigma_w", "last"),
                                                    last_epoch=("epoch", "last"))
    return out.assign(ratio=out["sigma_w_final"] / out["sigma_w_init"])


def f10_figure(table: pd.DataFrame, s: dict):
    variants = [v for v in ("plain", "bn", "trajreg") if v in set(table["variant"])]
    titles = {"plain": "no batch norm", "bn": "batch norm (dotted: the BN layer alone)",
              "trajreg": "trajectory regularization (dotted: its layer alone)"}
    fig, axes = plotting.panels(len(variants), width=5.0, height=4.0, integer_x=True)
    for ax, v in zip(axes, variants):
        _length_panel(ax, _lengths(table, v), titles[v])
    lo = min(ax.get_ylim()[0] for ax in axes)
    hi = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(lo, hi)
    fig.suptitle(f"EP-F10: circle between two {table['dataset'].iloc[0]} test images through the conv net during "
                 f"training, $\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def f10_summary(table: pd.DataFrame) -> pd.DataFrame:
    """As EP-F8's, for every variant, with the length ratio (after / before) of each normalisation
    layer alone and of the ReLU after it, at the first and the last epoch."""
    df = _length_summary(table, ["plain", "bn", "trajreg"])
    out = {}
    for when in ("init", "final"):
        prev = df.groupby("variant")[f"length_{when}"].shift(1)
        for stage in ("norm", "relu"):
            mask = df["stage"] == stage
            out[f"{stage}_ratio_{when}"] = np.where(mask, df[f"length_{when}"] / prev, np.nan)
    return df.assign(**out)


def f11_figure(table: pd.DataFrame, s: dict):
    g = table[table["kind"] == "epoch"]
    fig, axes = plotting.panels(2, width=4.6, height=3.6)
    for ax, col in zip(axes, ("test_acc", "train_acc")):
        sns.lineplot(data=g, x="epoch", y=col, hue="variant", errorbar="se", marker="o", ax=ax,
                     hue_order=[v for v in ("plain", "bn", "trajreg") if v in set(g["variant"])])
        ax.set(ylabel=col.replace("_", " "))
    fig.suptitle(f"EP-F11: conv net on {g['dataset'].iloc[0]}: no BN vs BN vs trajectory regularization "
                 f"(coefficient {s.get('trajreg_coef', 0.01):g})", fontsize=9)
    return fig


def f11_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table[table["kind"] == "epoch"].sort_values("epoch").groupby("run", as_index=False).last()
    g = g.assign(run_diverged=g["run_diverged"].astype(bool))
    return g.groupby("variant", as_index=False).agg(runs=("run", "count"), final_test_acc=("final_test_acc", "mean"),
                                                    best_test_acc=("best_test_acc", "mean"),
                                                    epochs=("epoch", "max"), diverged=("run_diverged", "sum"))


# --- EP-F6: noise in one layer of the trained conv net ------------------------------------------------


@torch.no_grad()
def noise_rows(model: nn.Module, test, magnitudes, draws: int, seed: int, batch_size: int = 1000) -> list[dict]:
    """Test accuracy with N(0, (m std(W))^2) noise added to one layer's weights, for every layer and
    magnitude ``m`` (``draws`` draws each), the weights restored after each measurement."""
    _, base = evaluate(model, test, batch_size)
    blocks = _layer_blocks(model)
    gen = torch.Generator(device=test.device).manual_seed(seed)
    rows = []
    for name, m in weight_layers(model):
        saved = m.weight.detach().clone()
        std = float(saved.std())
        for mag in magnitudes:
            for d in range(draws if mag > 0 else 1):
                m.weight.add_(torch.randn(saved.shape, generator=gen, device=saved.device, dtype=saved.dtype),
                              alpha=mag * std)
                _, acc = evaluate(model, test, batch_size)
                m.weight.copy_(saved)
                rows.append({"kind": "noise", "layer": float(blocks[name]), "param": name, "magnitude": mag,
                             "draw": d, "weight_std": std, "test_acc": acc, "base_acc": base, "drop": base - acc})
    return rows


def noise_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> pd.DataFrame:
    train, test, split = data
    in_shape = tuple(split.x.shape[1:])
    model = conv_net("plain", split.n_classes, in_shape, s["width"], s["sigma_w2"], s.get("sigma_b", 0.0),
                     run["seed"]).to(device)
    recipe = Recipe.from_settings(s["recipe"])
    result = fit(model, train, test, recipe, seed=run["seed"], checkpoint=checkpoint)
    model.eval()
    rows = noise_rows(model, test, s["noise_magnitudes"], s.get("noise_draws", 1), part_seed(run["seed"], 1),
                      recipe.eval_batch_size)
    log.info("run %s: trained to %.4f; noise %g on layer 1 -> %.4f", run["key"], result.final["test_acc"],
             max(s["noise_magnitudes"]), rows[len(s["noise_magnitudes"]) - 1]["test_acc"] if rows else math.nan)
    return _run_table(result, rows, run=run["key"], variant="plain", rep=run["rep"], net_seed=run["seed"],
                      dataset=split.name, width=s["width"], sigma_w2=s["sigma_w2"],
                      recipe=s["recipe"].get("name", ""))


f6_parts, f6_measure = _train_measure(noise_run, lambda s: product_runs(s, {}))


def f6_figure(table: pd.DataFrame, s: dict):
    g = _hue(table[table["kind"] == "noise"], "layer", "layer")
    fig, axes = plotting.panels(1, width=5.4, height=3.8)
    sns.lineplot(data=g, x="magnitude", y="test_acc", hue="layer", palette="viridis", marker="o", errorbar="se",
                 ax=axes[0])
    axes[0].set(xlabel="noise magnitude (std relative to the layer's weight std)", ylabel="test accuracy")
    axes[0].set_title(f"EP-F6: noise in one layer of a trained conv net ({g['dataset'].iloc[0]}, "
                      f"$\\sigma_w^2$ = {s['sigma_w2']:g})", fontsize=9)
    return fig


def f6_summary(table: pd.DataFrame) -> pd.DataFrame:
    g = table[table["kind"] == "noise"]
    return g.groupby(["layer", "magnitude"], as_index=False).agg(base_acc=("base_acc", "mean"),
                                                                 test_acc=("test_acc", "mean"), drop=("drop", "mean"))


# --- EP-F7 / EP-F17: training one layer of a hard-tanh FC net ------------------------------------------


def trained_layers(s: dict) -> list[int]:
    """Indices of the linear layers trained one at a time: W^(1) .. W^(depth-1), and the readout
    W^(depth) with ``include_readout``."""
    return list(range(1, s["depth"] + (1 if s.get("include_readout", False) else 0)))


def freeze_all_but(model: nn.Module, index: int) -> nn.Linear:
    """Freeze every parameter but those of the ``index``-th linear layer (0-based); return it."""
    lins = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in lins[index].parameters():
        p.requires_grad_(True)
    return lins[index]


def one_layer_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> pd.DataFrame:
    train, test, split = data
    model = fc_net(split.n_classes, tuple(split.x.shape[1:]), s["width"], s["depth"], s.get("activation", "hardtanh"),
                   s["sigma_w2"], s.get("sigma_b", 0.0), run["seed"]).to(device)
    freeze_all_but(model, run["layer"])
    recipe = Recipe.from_settings(s["recipe"])
    result = fit(model, train, test, recipe, seed=run["seed"], checkpoint=checkpoint)
    _, train_acc = evaluate(model, train, recipe.eval_batch_size)
    log.info("run %s: W^(%d) trained, train accuracy %.4f, test %.4f", run["key"], run["layer"], train_acc,
             result.final["test_acc"])
    return _run_table(result, run=run["key"], trained_layer=run["layer"], rep=run["rep"], net_seed=run["seed"],
                      final_train_acc=train_acc, dataset=split.name, width=s["width"], depth=s["depth"],
                      activation=s.get("activation", "hardtanh"), sigma_w2=s["sigma_w2"],
                      readout=run["layer"] == s["depth"], recipe=s["recipe"].get("name", ""))


one_parts, one_measure = _train_measure(one_layer_run, lambda s: product_runs(s, {"layer": trained_layers(s)}))


def one_figure(table: pd.DataFrame, s: dict, fig_id: str):
    """EP's Figures 7 and 17: train and test accuracy through training, one curve per trained layer
    (train accuracy as recorded over each epoch's batches)."""
    epochs = table[(table["kind"] == "epoch") & (table["epoch"] > 0)]
    epochs = epochs.assign(layer=epochs["trained_layer"].map(lambda l: f"$W^{{({l:g})}}$"))
    order = [f"$W^{{({l:g})}}$" for l in sorted(epochs["trained_layer"].unique())]
    fig, axes = plotting.panels(2, width=4.4, height=3.6)
    for ax, col, split in zip(axes, ("train_acc", "test_acc"), ("train", "test")):
        sns.lineplot(data=epochs, x="epoch", y=col, hue="layer", hue_order=order, palette="viridis", marker="o",
                     ms=3, errorbar="se", ax=ax, legend=split == "test")
        ax.set(xlabel="epoch", ylabel=f"{split} accuracy", title=f"{split}")
    axes[1].legend(title="trained layer", fontsize=7)
    fig.suptitle(f"{fig_id}: one layer trained (others frozen at init), {epochs['dataset'].iloc[0]}, width "
                 f"{s['width']}, depth {s['depth']}, {s.get('activation', 'hardtanh')}, "
                 f"$\\sigma_w^2$ = {s['sigma_w2']:g}", fontsize=9)
    return fig


def one_summary(table: pd.DataFrame) -> pd.DataFrame:
    final = table[table["kind"] == "epoch"].sort_values("epoch").groupby("run", as_index=False).last()
    return final.groupby("trained_layer", as_index=False).agg(
        runs=("run", "count"), train_acc=("final_train_acc", "mean"), test_acc=("final_test_acc", "mean"),
        best_test_acc=("best_test_acc", "mean"))


# --- EP-F18: lengths through an MNIST FC net during training -------------------------------------------


def fc_length_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> pd.DataFrame:
    train, test, split = data
    in_shape = tuple(split.x.shape[1:])
    model = fc_net(split.n_classes, in_shape, s["width"], s["depth"], s.get("activation", "relu"), s["sigma_w2"],
                   s.get("sigma_b", 0.0), run["seed"]).to(device)
    path = circle(test, s["points"])
    result = fit(model, train, test, Recipe.from_settings(s["recipe"]), seed=run["seed"], checkpoint=checkpoint,
                 on_epoch=lambda epoch, m: length_rows(m, path, s["n_pieces"], in_shape) + sigma_w_rows(m))
    return _run_table(result, run=run["key"], rep=run["rep"], net_seed=run["seed"], dataset=split.name,
                      width=s["width"], depth=s["depth"], activation=s.get("activation", "relu"),
                      sigma_w2=s["sigma_w2"], n_pieces=s["n_pieces"], variant="fc", recipe=s["recipe"].get("name", ""))


f18_parts, f18_measure = _train_measure(fc_length_run, lambda s: product_runs(s, {}))


def f18_figure(table: pd.DataFrame, s: dict):
    g = _lengths(table, "fc")
    fig, axes = plotting.panels(1, width=5.4, height=3.8, integer_x=True)
    epochs = sorted(g["epoch"].unique())
    colours = matplotlib.colormaps["rainbow_r"](np.linspace(0, 1, len(epochs)))  # red (start) .. purple (end)
    for colour, epoch in zip(colours, epochs):
        e = g[g["epoch"] == epoch].sort_values("layer")
        axes[0].plot(e["layer"], e["length"], "-o", color=colour, ms=2.5, lw=1.2,
                     label=f"epoch {epoch:g}" if epoch in (epochs[0], epochs[-1]) else None)
    axes[0].set(yscale="log", xlabel="layer", ylabel="trajectory length")
    axes[0].legend(fontsize=7)
    axes[0].set_title(f"EP-F18: circle between two {table['dataset'].iloc[0]} test images through a "
                      f"{s.get('activation', 'relu')} FC net (width {s['width']}, $\\sigma_w^2$ = {s['sigma_w2']:g}) "
                      f"during training\n(red = start, purple = end)", fontsize=8)
    return fig


def f18_summary(table: pd.DataFrame) -> pd.DataFrame:
    return _length_summary(table, ["fc"])


register(Experiment("EP-F4", f4_parts, f4_measure, f4_figure, f4_summary))
register(Experiment("EP-F6", f6_parts, f6_measure, f6_figure, f6_summary, trains=True))
register(Experiment("EP-F7", one_parts, one_measure, lambda t, s: one_figure(t, s, "EP-F7"), one_summary,
                    trains=True))
register(Experiment("EP-F17", one_parts, one_measure, lambda t, s: one_figure(t, s, "EP-F17"), one_summary,
                    trains=True))
register(Experiment("EP-F8", train_parts, train_measure, f8_figure, f8_summary, trains=True))
register(Experiment("EP-F9", train_parts, train_measure, f9_figure, f9_summary, trains=True, source="EP-F8"))
register(Experiment("EP-F10", train_parts, train_measure, f10_figure, f10_summary, trains=True, source="EP-F8"))
register(Experiment("EP-F11", train_parts, train_measure, f11_figure, f11_summary, trains=True, source="EP-F8"))
register(Experiment("EP-F18", f18_parts, f18_measure, f18_figure, f18_summary, trains=True))
