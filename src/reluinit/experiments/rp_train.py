"""RP: the experiments that prune at initialization and then train (RP-F3/F5, RP-T1..T5, T8, T9).

Every run is the same pipeline (``train_pruned``): build the model, initialize it (He, the EOC of
its activation, or the ordered phase), prune with one method on one class-balanced batch, rescale
if asked (Algorithm 1), apply the masks (they stay applied) and train (``training.RunSpec``, ``training.train_runs``). Each
run's epochs are rows of the table; a run that diverges, or whose pruning emptied a layer, is a
row like any other (``diverged``, ``collapsed_layers``).

Methods (the papers' names): ``random``, ``mbp`` (magnitude), ``snip``, ``grasp``, ``synflow``;
``sbp_sr`` and ``grasp_sr`` are SNIP and GraSP on the Stable ResNet (RP: "SBP with Stable Resnet";
ResNets need no rescaling, Proposition 3); ``eoc_rescaling`` is SNIP at the EOC followed by the
rescaling trick; ``dense`` trains without pruning. OBD is not implemented (it needs the Hessian
diagonal of the whole net). Choices the paper leaves open are in docs/papers/rp.md.
"""

from __future__ import annotations

import logging

from torch import nn

from .. import datasets
from ..inits import init_point, initialize
from ..models import build
from ..pruning import PRUNERS, apply_masks, collapse, connected, layer_table, prune_with_s_cr, rescale, sparsity
from ..training import Checkpoint, Recipe, RunSpec, history_table, load_data
from . import part_seed, product_runs, training_jobs

log = logging.getLogger(__name__)

# method -> (pruner, on the Stable ResNet, rescaled after pruning)
METHODS = {
    "dense": (None, False, False),
    "random": ("random", False, False),
    "mbp": ("magnitude", False, False),
    "snip": ("snip", False, False),
    "grasp": ("grasp", False, False),
    "synflow": ("synflow", False, False),
    "sbp_sr": ("snip", True, False),
    "grasp_sr": ("grasp", True, False),
    "eoc_rescaling": ("snip", False, True),
}


def method(name: str) -> tuple[str | None, bool, bool]:
    """(pruner, on the Stable ResNet, rescaled) of a method name: the papers' names above, or any
    pruner registered in ``pruning.PRUNERS`` under its own name (a new pruner needs no entry here,
    only its name in the schema's ``methods`` list)."""
    if name in METHODS:
        return METHODS[name]
    if name in PRUNERS:
        return name, False, False
    raise ValueError(f"unknown method {name!r}; known: {', '.join(sorted(set(METHODS) | set(PRUNERS)))}")


def run_model(s: dict, run: dict, split) -> tuple[nn.Module, str, float | None, float]:
    """The run's net, initialized: (model, its name, sigma_w, sigma_b). He-initialized ResNets use
    the authors' ResNet init (``kaiming_fan_out``: convs by fan-out, classifier N(0, 0.01^2)), which
    changes what magnitude pruning and, through the classifier, SNIP see. Magnitude pruning (MBP)
    is not in the authors' code, and under their init its global threshold keeps no classifier
    weight at 85-98% sparsity (the classifier's 0.01 is 4 to 12 times smaller than the convs' std):
    its ResNets take Kaiming normal by fan-in on every conv and linear layer (``he``), the init of
    Synaptic-Flow's and open_lth's CIFAR ResNets, whose magnitude-at-init baselines train
    (docs/papers/rp.md, "Magnitude pruning's init")."""
    pruner, stable, rescaled = method(run["method"])
    name = f"stable_{run['model']}" if stable else run["model"]
    model = build(name, split.n_classes, tuple(split.x.shape[1:]), run["activation"], width=run["width"],
                  depth=run.get("depth"))
    scheme, sigma_w, sigma_b = init_point(run["init"], run["activation"],
                                          s.get("eoc_sigma_b", {}).get(run["activation"], 0.0), s.get("ordered"))
    initialize(model, resnet_scheme(scheme, name, pruner), sigma_w=sigma_w, sigma_b=sigma_b, seed=run["seed"])
    return model, name, sigma_w, sigma_b


def resnet_scheme(scheme: str, name: str, pruner: str | None) -> str:
    """The init a run's net gets for ``scheme``: He on a ResNet is the authors' ``kaiming_fan_out``,
    except under magnitude pruning (``run_model``)."""
    return "kaiming_fan_out" if scheme == "he" and "resnet" in name and pruner != "magnitude" else scheme


def prune_run(s: dict, run: dict, data, device) -> dict:
    """The run's masks (None for ``dense``), pruned with its method on one class-balanced batch of
    its training split, on a freshly initialized net that is then dropped (the authors score a
    copy: the net that trains starts from the same weights, its batch-norm statistics untouched);
    with the facts the ``prune`` rule writes beside them."""
    train, _, split = data
    pruner = method(run["method"])[0]
    if pruner is None:
        return {"masks": None}
    model, name, _, _ = run_model(s, run, split)
    model.to(device)
    batch = pruning_batch(s, run, pruner, train, split, device)
    masks, s_cr = prune_with_s_cr(model, pruner, 1 - run["sparsity"], **batch, seed=run["seed"],
                                  rounds=s.get("synflow_rounds", 100))
    return {"masks": {n: m.cpu() for n, m in masks.items()}, **run_facts(run, name, model, masks, batch["in_shape"]),
            "s_cr": s_cr, "dataset": split.name}


def run_facts(run: dict, name: str, model: nn.Module, masks, in_shape) -> dict:
    """What a pruning job records beside a run's masks: its model, method, sparsity and seed, how
    many weights its classifier (the last pruned layer) keeps, and whether a path from input to
    output survives (``pruning.connected``, asked only when a layer is emptied): an emptied
    classifier or no path left means a net that can only guess one class, and its log says so
    (``pruning.collapse``)."""
    last = list(masks)[-1]
    emptied = any(not bool(m.any()) for m in masks.values())
    return {"model": name, "method": run["method"], "sparsity": run["sparsity"], "net_seed": run["seed"],
            "classifier_kept": int(masks[last].sum()),
            "connected": connected(model, masks, in_shape) if emptied else True}


def pruning_batch(s: dict, run: dict, pruner: str, train, split, device) -> dict:
    """The data a run's pruner scores, as ``prune``'s keyword arguments: one class-balanced batch of
    ``batch_per_class`` images of each class (SNIP as the authors score it), or for GraSP the
    authors' ``grasp_batch`` of its dataset (``per_class`` images of each class, ``draws`` times;
    each draw sorted by class and cut into two halves, and the gradients and Hessian products of the
    halves summed: ``pruner/GraSP.py`` of the authors and of Wang et al.). Draw 0 is SNIP's batch."""
    def normalised(x):
        return (x.to(device) - train.mean) / train.std

    grasp = s.get("grasp_batch", {}).get(s.get("dataset")) if pruner == "grasp" else None
    if grasp is None:
        x, y = datasets.balanced_batch(split, s["batch_per_class"], run["seed"])
        return {"x": normalised(x), "y": y.to(device), "in_shape": tuple(x.shape[1:])}
    halves = []
    for d in range(grasp["draws"]):
        x, y = datasets.balanced_batch(split, grasp["per_class"], run["seed"] if d == 0 else part_seed(run["seed"], d))
        n = len(y) // 2  # balanced_batch is sorted by class: the halves hold the first and last classes
        halves += [(normalised(x[:n]), y[:n].to(device)), (normalised(x[n:]), y[n:].to(device))]
    return {"data": halves, "in_shape": tuple(x.shape[1:])}


def train_pruned(s: dict, run: dict, data, device, checkpoint: Checkpoint | None, masks=None) -> RunSpec:
    """One run (module doc) as its spec, whose rows are its epochs: ``data`` = (train, test, training
    split) of its dataset, ``masks`` the run's own from its ``prune`` job (``prune_run``), None for
    ``dense``."""
    train, test, split = data
    rescaled = method(run["method"])[2]
    model, name, sigma_w, sigma_b = run_model(s, run, split)
    model.to(device)
    masks = masks or {}
    if masks:
        apply_masks(model, masks)
        if rescaled:
            rescale(model, masks, sigma_w=sigma_w, scale=s.get("rescaling", "eq7"))
    collapsed = int(layer_table(masks)["collapsed"].sum()) if masks else 0
    log.info("run %s: %s, %s init (sigma_w %s), %s at sparsity %.4g, %d layers emptied", run["key"], name,
             run["init"], sigma_w, run["method"], run["sparsity"], collapsed)
    if masks and (said := collapse(masks)):
        log.warning("run %s: %s (it trains: a collapsed net is a result)", run["key"], said)
    recipe = Recipe.from_settings(s["recipe"])
    columns = dict(run=run["key"], dataset=split.name, model=name, activation=run["activation"], init=run["init"],
                   method=run["method"], sparsity=run["sparsity"], achieved_sparsity=sparsity(masks) if masks else 0.0,
                   rep=run["rep"], net_seed=run["seed"], sigma_w=sigma_w, sigma_b=sigma_b, collapsed_layers=collapsed,
                   recipe=s["recipe"].get("name", ""), setup=run.get("setup", ""), depth=run.get("depth"),
                   **{field: run[field] for field in READINGS if field in run})
    return RunSpec(model, train, test, recipe, run["seed"], checkpoint, masks,
                   then=lambda result: history_table(result, **columns))


# --- runs and parts --------------------------------------------------------------------------------

# RP-F3/F5 and RP-T4 compare set-ups: an initialization and the pruning that follows it.
SETUPS = {"eoc_rescaled": ("eoc", "eoc_rescaling"), "eoc": ("eoc", "snip"), "ordered": ("ordered", "snip")}


def _runs(s: dict, axes: dict[str, list]) -> dict[str, dict]:
    """``product_runs`` of ``axes``, with what the axes leave out from the settings (activation, init,
    dataset, model, width) and a set-up spelled out as its initialization and method. A set-up run
    also names the readings the paper leaves open (``READINGS``: SGD's momentum, the ordered
    point's chi), from the settings unless an axis varies them (RP-F3), so that the runs of two
    experiments compare field by field (config ``shared``). With ``cells`` (a list of
    ``{field: [values]}``) only the runs matching one of them are kept, after numbering the full
    product: the runs kept keep their keys and seeds."""
    runs = {}
    for key, run in product_runs(s, axes).items():
        run = {"activation": s.get("activation", "relu"), "init": s.get("init", "he"), "dataset": s.get("dataset"),
               "model": s.get("model"), "width": s.get("width"), **run}
        if "setup" in run:
            run["init"], run["method"] = SETUPS[run["setup"]]
            run = {**{field: read(s) for field, (_, read, _) in READINGS.items()}, **run}
        if _in_cells(run, s.get("cells")):
            runs[key] = run
    return runs


def _in_cells(run: dict, cells: list[dict] | None) -> bool:
    """Whether ``run`` is one of ``cells`` (any of them: each a ``{field: [values]}`` it must match
    in every field); every run without ``cells``."""
    if not cells:
        return True
    for cell in cells:
        missing = [f for f in cell if f not in run]
        if missing:  # a misspelt field: said here, not as a grid silently emptied
            raise ValueError(f"cells names {', '.join(map(repr, missing))}, which run {run.get('key')} does not have; "
                             f"its fields: {', '.join(run)}")
    return any(all(run[f] in values for f, values in cell.items()) for cell in cells)


# The settings a set-up run names as its own fields (``_runs``), each: (the axis that varies it,
# its value in the settings, the settings a run of that value trains under). RP leaves them open
# (docs/papers/rp.md, "The readings"): SGD's momentum (the paper: "SGD"; the authors' CIFAR script:
# 0.9) and the ordered point (chi, ours).
READINGS = {
    "momentum": ("momenta", lambda s: float(s["recipe"].get("momentum", 0.0)),
                 lambda s, v: {"recipe": {**s["recipe"], "momentum": v}}),
    "ordered_chi": ("ordered_chis", lambda s: (s.get("ordered") or {}).get("chi"),
                    lambda s, v: {"ordered": {"chi": v, "sigma_b": s["ordered"]["sigma_b"]}}),
}


def _run_settings(s: dict, run: dict) -> dict:
    """A run's settings: its dataset's, and its dataset's recipe where the settings give one (RP-T2:
    160 epochs on CIFAR-10, 250 on CIFAR-100), and the readings its fields name (``READINGS``)."""
    settings = {**s, "dataset": run["dataset"]}
    if run["dataset"] in s.get("recipes_by_dataset", {}):
        settings["recipe"] = s["recipes_by_dataset"][run["dataset"]]
    for field, (_, read, trains_under) in READINGS.items():
        if field in run and run[field] != read(settings):
            settings.update(trains_under(settings, run[field]))
    return settings


# Settings that lay out a table's runs and jobs (which runs, their seeds, where they train), not how
# one of them trains; and settings that only some runs read (the others train alike whatever they say).
GRID = frozenset({"seed", "reps", "models", "methods", "sparsities", "datasets", "activations", "setups", "depths",
                  "recipes_by_dataset", "shared", "cells", *(axis for axis, _, _ in READINGS.values())})
READ_BY = {
    "synflow_rounds": lambda run: method(run["method"])[0] == "synflow",
    "grasp_batch": lambda run: method(run["method"])[0] == "grasp",
    "rescaling": lambda run: method(run["method"])[2],
    "eoc_sigma_b": lambda run: run["init"] == "eoc",
    "ordered": lambda run: run["init"] == "ordered",
}


def trained_with(s: dict, run: dict) -> dict:
    """What decides how ``run`` trains besides its own fields: its settings (``_run_settings``, its
    dataset's recipe) less the grid (``GRID``), bookkeeping and what its method and init do not read
    (``READ_BY``), as plain data. Runs of equal fields and equal ``trained_with`` train alike, up to
    their seeds: a table may take one's rows for the other (config ``shared``, checked when the
    workflow plans it). A setting not named here counts."""
    from ..fingerprint import settings_fingerprint

    unread = {k for k, reads in READ_BY.items() if not reads(run)}
    return settings_fingerprint(_run_settings(s, run), exclude=GRID | set(run) | unread)


def _load(s: dict, device):
    """The splits normalised with the authors' constants (``fixed_stats``: CIFAR, MNIST)."""
    return load_data(s, device, channels_last=s["recipe"].get("channels_last", False), fixed_stats=True)


def run_table(axes_of):
    """``parts``, ``measure`` and ``masks`` of an experiment whose runs are the product of ``axes_of(s)``."""
    return training_jobs(lambda s: _runs(s, axes_of(s)), train_pruned, load=_load, settings_of=_run_settings,
                         prune_one=prune_run)


# --- RP-F3 / RP-F5: accuracy over depth x sparsity, three set-ups -------------------------------------

def _heat_axes(s: dict) -> dict[str, list]:
    """Activation x set-up x depth x sparsity, after the readings an experiment varies (RP-F3)."""
    readings = {field: s[axis] for field, (axis, _, _) in READINGS.items() if axis in s}
    return {**readings, "activation": s["activations"], "setup": s["setups"], "depth": s["depths"],
            "sparsity": s["sparsities"]}


heat_parts, heat_measure, heat_masks = run_table(_heat_axes)


# --- RP-T1/T2/T3/T5/T8/T9: methods x sparsities x models (x datasets, activations) --------------------


def _table_axes(s: dict) -> dict[str, list]:
    axes = {"model": s["models"], "method": s["methods"], "sparsity": s["sparsities"]}
    if "datasets" in s:
        axes = {"dataset": s["datasets"], **axes}
    if "activations" in s:
        axes = {"activation": s["activations"], **axes}
    return axes


accuracy_parts, accuracy_measure, accuracy_masks = run_table(_table_axes)


# --- RP-T4: vanilla CNN on MNIST, three set-ups ---------------------------------------------------------

t4_parts, t4_measure, t4_masks = run_table(lambda s: {"setup": s["setups"], "depth": s["depths"], "sparsity": s["sparsities"]})
