"""EP: expressive power of deep nets, the experiments that train fully connected nets: one layer
trained, the others frozen (EP-F7 on MNIST, EP-F17 on CIFAR-10), and trajectory length through the
training of an MNIST net started at small sigma_w (EP-F18). Nets, circles, stages and the table's
columns are as in ``ep_conv`` (its docstring).

* EP-F7/F17 ("train from W^(1) on, so that the number of parameters trained remains fixed"): with
  ``depth`` hidden layers the linear layers are W^(0) (input -> hidden 1), W^(1) ..
  W^(depth-1) (hidden -> hidden) and the readout W^(depth). Each run trains one of W^(1) ..
  W^(depth-1) (weights and bias, everything else frozen at init: ``requires_grad=False``), all
  of the same size; ``include_readout: true`` adds a run training the readout alone. Train
  accuracy is re-measured in eval mode after training (``final_train_acc``).
"""

from __future__ import annotations

import logging

import pandas as pd
from torch import nn

from ..models import fc_net
from ..stages import circle, length_rows, sigma_w_rows
from ..training import Checkpoint, Recipe, RunSpec, evaluate, run_rows
from . import product_runs, training_jobs

log = logging.getLogger(__name__)


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


def one_layer_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> RunSpec:
    """Train one layer of the net; trained, its train accuracy re-measured in eval mode."""
    train, test, split = data
    model = fc_net(split.n_classes, tuple(split.x.shape[1:]), s["width"], s["depth"], s.get("activation", "hardtanh"),
                   s["sigma_w2"], s.get("sigma_b", 0.0), run["seed"]).to(device)
    freeze_all_but(model, run["layer"])
    recipe = Recipe.from_settings(s["recipe"])

    def rows(result) -> pd.DataFrame:
        _, train_acc = evaluate(model, train, recipe.eval_batch_size)
        log.info("run %s: W^(%d) trained, train accuracy %.4f, test %.4f", run["key"], run["layer"], train_acc,
                 result.final["test_acc"])
        return run_rows(result, run=run["key"], trained_layer=run["layer"], rep=run["rep"], net_seed=run["seed"],
                        final_train_acc=train_acc, dataset=split.name, width=s["width"], depth=s["depth"],
                        activation=s.get("activation", "hardtanh"), sigma_w2=s["sigma_w2"],
                        readout=run["layer"] == s["depth"], recipe=s["recipe"].get("name", ""))

    return RunSpec(model, train, test, recipe, run["seed"], checkpoint, then=rows)


one_parts, one_measure = training_jobs(lambda s: product_runs(s, {"layer": trained_layers(s)}), one_layer_run)


# --- EP-F18: lengths through an MNIST FC net during training -------------------------------------------


def fc_length_run(s: dict, run: dict, data, device, checkpoint: Checkpoint | None) -> RunSpec:
    train, test, split = data
    in_shape = tuple(split.x.shape[1:])
    model = fc_net(split.n_classes, in_shape, s["width"], s["depth"], s.get("activation", "relu"), s["sigma_w2"],
                   s.get("sigma_b", 0.0), run["seed"]).to(device)
    path = circle(test, s["points"])
    columns = dict(run=run["key"], rep=run["rep"], net_seed=run["seed"], dataset=split.name, width=s["width"],
                   depth=s["depth"], activation=s.get("activation", "relu"), sigma_w2=s["sigma_w2"],
                   n_pieces=s["n_pieces"], variant="fc", recipe=s["recipe"].get("name", ""))
    return RunSpec(model, train, test, Recipe.from_settings(s["recipe"]), run["seed"], checkpoint,
                   on_epoch=lambda epoch, m: length_rows(m, path, s["n_pieces"], in_shape) + sigma_w_rows(m),
                   then=lambda result: run_rows(result, **columns))


f18_parts, f18_measure = training_jobs(lambda s: product_runs(s, {}), fc_length_run,
                                       during=(length_rows, sigma_w_rows))
