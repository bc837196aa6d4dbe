"""EP: expressive power of deep nets, the experiments on its CIFAR-10 conv net: trajectory length
at initialization (EP-F4), noise added to one layer of the trained net (EP-F6), and trajectory
length and weight scale through training without and with batch norm and with trajectory
regularization (EP-F8, F9, F10, F11: one set of runs, four figures). The nets, trajectory
regularization included, are in ``models``; what is measured along the way in ``stages``;
EP's fully connected nets (EP-F7, F17, F18) in ``ep_fc``.

Conventions and our readings of what the paper leaves open:

* Nets: ``models.EPConvNet`` (blocks 1 conv, 2 conv, 3 pool, 4 conv, 5 conv, 6 conv, 7 pool, 8 fc,
  9 readout; ``width`` channels, ``2 width`` after the first pooling) and ``models.ffnn`` (a ``nets.MLP``); every
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

import pandas as pd

from ..datasets import resolve
from ..models import TrajReg, conv_net, trajreg_loss
from ..nets import resolve_device
from ..stages import circle, length_rows, noise_rows, sigma_w_rows
from ..training import Checkpoint, Recipe, RunSpec, load_data, run_rows
from ..trajectories import Arc
from . import part_seed, product_runs, resolve_part, training_jobs

log = logging.getLogger(__name__)


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
                                     dataset=resolve(s["dataset"], s["scale"]), device=str(dev))


# --- EP-F8/F9/F10/F11: training the conv net without / with batch norm / with trajectory regularization --


def conv_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> RunSpec:
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

    def rows(result) -> pd.DataFrame:
        log.info("run %s: %s conv net, final test accuracy %.4f", run["key"], variant, result.final["test_acc"])
        extra = []
        if variant == "trajreg":
            extra = [{"kind": "lambda", "param": n, "value": m.lam.item()} for n, m in model.named_modules()
                     if isinstance(m, TrajReg)]
        return run_rows(result, extra, run=run["key"], variant=variant, rep=run["rep"], net_seed=run["seed"],
                        dataset=split.name, width=s["width"], sigma_w2=s["sigma_w2"], n_pieces=s["n_pieces"],
                        recipe=s["recipe"].get("name", ""))

    kw = {"loss_fn": trajreg_loss} if variant == "trajreg" else {}
    return RunSpec(model, train, test, Recipe.from_settings(s["recipe"]), run["seed"], checkpoint, on_epoch=on_epoch,
                   then=rows, **kw)


train_parts, train_measure = training_jobs(lambda s: product_runs(s, {"variant": s["variants"]}), conv_run,
                                           during=(length_rows, sigma_w_rows))


# --- EP-F6: noise in one layer of the trained conv net ------------------------------------------------


def noise_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> RunSpec:
    """Train the plain conv net; trained, the test accuracy with noise in its first layer."""
    train, test, split = data
    in_shape = tuple(split.x.shape[1:])
    model = conv_net("plain", split.n_classes, in_shape, s["width"], s["sigma_w2"], s.get("sigma_b", 0.0),
                     run["seed"]).to(device)
    recipe = Recipe.from_settings(s["recipe"])

    def noised(result) -> pd.DataFrame:
        model.eval()
        rows = noise_rows(model, test, s["noise_magnitudes"], s.get("noise_draws", 1), part_seed(run["seed"], 1),
                          recipe.eval_batch_size)
        log.info("run %s: trained to %.4f; noise %g on layer 1 -> %.4f", run["key"], result.final["test_acc"],
                 max(s["noise_magnitudes"]), rows[len(s["noise_magnitudes"]) - 1]["test_acc"] if rows else math.nan)
        return run_rows(result, rows, run=run["key"], variant="plain", rep=run["rep"], net_seed=run["seed"],
                        dataset=split.name, width=s["width"], sigma_w2=s["sigma_w2"],
                        recipe=s["recipe"].get("name", ""))

    return RunSpec(model, train, test, recipe, run["seed"], checkpoint, then=noised)


f6_parts, f6_measure = training_jobs(lambda s: product_runs(s, {}), noise_run)
