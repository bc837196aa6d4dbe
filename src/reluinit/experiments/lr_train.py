"""LR's trained nets (LR-F5 to LR-F8): fully connected ReLU nets (``nets.MLP``) trained on MNIST
through ``training.train_runs`` by their recipe (config ``recipes: lr-mnist``: Adam), one file of
checkpoints per run, which ``lr`` measures. The workflow trains one architecture's runs (its seeds)
in one job (``train_runs``: their ``training.RunSpec``s, ``run_specs``), stacked as one model
(``reluinit.ensemble``) unless the recipe says ``ensemble: false``: the same runs up to float64
rounding, each with its own seed and checkpoint.

A checkpoint is plain tensors and numbers (``snapshot``), loadable with
``torch.load(weights_only=True)``, with the run's seed, dataset and settings fingerprint."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import torch

from .. import checkpoint_file, datasets, training
from ..fingerprint import settings_fingerprint
from ..nets import MLP, parse_arch, resolve_device, sample_mlp
from ..training import Checkpoint, DeviceData, Recipe, RunSpec, save_checkpoint
from . import ensembled, part_seed

log = logging.getLogger(__name__)


@torch.no_grad()
def accuracy(net: MLP, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096) -> float:
    correct = 0
    for start in range(0, len(x), batch_size):
        correct += (net(x[start:start + batch_size]).argmax(dim=1) == y[start:start + batch_size]).sum().item()
    return correct / len(x)


def snapshot(net: MLP, **info) -> dict:
    """A checkpoint: plain tensors and numbers, loadable with ``torch.load(weights_only=True)``."""
    return {"weights": [w.detach().cpu().clone() for w in net.weights],
            "biases": [b.detach().cpu().clone() for b in net.biases],
            "activation": net.activation, **info}


def restore(state: dict, device: str | torch.device = "cpu") -> MLP:
    return MLP([w.to(device) for w in state["weights"]], [b.to(device) for b in state["biases"]],
               activation=state["activation"], readout=True)


def adam_spec(net: MLP, train: DeviceData | tuple[torch.Tensor, torch.Tensor],
              test: DeviceData | tuple[torch.Tensor, torch.Tensor], recipe: Recipe, *, seed: int,
              checkpoints: list[int], resume: Checkpoint | None = None) -> RunSpec:
    """The run that trains ``net`` in place (cross-entropy) by ``recipe`` (config ``recipes:
    lr-mnist``: Adam); trained, its result is a snapshot at each epoch in ``checkpoints`` (0 = at
    initialization), each with its test accuracy and mean train loss. A run that diverges ends with
    a snapshot marked ``diverged`` at chance accuracy. ``resume``: the run's resumable state (its
    checkpoint). ``train``, ``test``: ``DeviceData`` (runs given the same objects can stack) or (x, y)."""
    net.requires_grad_(True)
    device, dtype = net.weights[0].device, net.weights[0].dtype
    train_data, test_data = (d if isinstance(d, DeviceData) else DeviceData(*d, device, dtype=dtype)
                             for d in (train, test))
    n_classes = int(max(train_data.y.max(), test_data.y.max())) + 1

    def keep(epoch: int, m: MLP) -> list[dict]:
        return [{"state": snapshot(m)}] if epoch in checkpoints else []

    def states(result) -> list[dict]:
        by_epoch = {r["epoch"]: r for r in result.history}
        out = [dict(m["state"], epoch=m["epoch"], test_acc=by_epoch[m["epoch"]]["test_acc"],
                    train_loss=by_epoch[m["epoch"]]["train_loss"], diverged=False) for m in result.measures]
        if result.diverged:
            last = result.final
            out.append(snapshot(net, epoch=last["epoch"], test_acc=last["test_acc"], train_loss=math.nan,
                                diverged=True))
        return out

    return RunSpec(net, train_data, test_data, recipe, seed, resume, on_epoch=keep, n_classes=n_classes, then=states)


def train_adam(net: MLP, train, test, recipe: Recipe, *, seed: int, checkpoints: list[int],
               resume: Checkpoint | None = None) -> list[dict]:
    """``adam_spec``'s run trained alone: its snapshots."""
    spec = adam_spec(net, train, test, recipe, seed=seed, checkpoints=checkpoints, resume=resume)
    return spec.result(training.train_runs([spec])[0])


def save(states: list[dict], path: str | Path) -> None:
    """Write LR's checkpoints atomically (``save_checkpoint``)."""
    save_checkpoint(states, path)


def load(path: str | Path) -> list[dict]:
    """``save``'s checkpoints (``checkpoint_file.load``: a file that is not one is refused, never run)."""
    return checkpoint_file.load(path)


def flat(split: datasets.Split, device) -> tuple[torch.Tensor, torch.Tensor]:
    return split.x.flatten(1).to(device=device, dtype=torch.float64), split.y.to(device)


def run_seed(s: dict, arch: str, run: int) -> int:
    """The seed of run ``run`` of ``arch`` in training spec ``s`` (recorded in its checkpoints)."""
    return part_seed(s["seed"], s["architectures"].index(arch) * 10_000 + run)


def splits(s: dict, device) -> tuple[DeviceData, DeviceData, str, int]:
    """The train and test splits of ``s["dataset"]`` (the quick scale's stand-in where it has one),
    flattened in float64 on ``device``, the training split's name and its number of classes."""
    train = datasets.load(s["dataset"], s["data_dir"], train=True, scale=s["scale"])
    test = datasets.load(s["dataset"], s["data_dir"], train=False, scale=s["scale"])
    return DeviceData(*flat(train, device), device, dtype=torch.float64), \
        DeviceData(*flat(test, device), device, dtype=torch.float64), train.name, train.n_classes


def classifier_spec(s: dict, arch: str, seed: int, device: str = "auto", resume: str | Path | None = None,
                    run: int | None = None, data: tuple | None = None) -> RunSpec:
    """The run that samples a ReLU net of architecture ``arch`` under training spec ``s`` and trains
    it on ``s["dataset"]``; trained, its result is its checkpoints, each with the run's fingerprint.
    ``resume``: where the run keeps its resumable state; it resumes only a run of the same
    fingerprint (spec settings, architecture, run and seed). ``data``: ``splits`` already loaded."""
    device = resolve_device(device)
    train, test, name, n_classes = data or splits(s, device)
    log.info("training %s on %s (%d images) with seed %d on %s", arch, name, len(train), seed, device)
    net = sample_mlp([train.x.shape[1], *parse_arch(arch), n_classes], s["init"], readout=True,
                     bias_std=s["bias_std"], seed=seed, device=device, dtype=torch.float64)
    # The runs and architectures listed beside this one do not change it (its seed is recorded).
    fingerprint = settings_fingerprint(s, exclude=("architectures", "runs"), arch=arch, run=run, seed=seed)
    spec = adam_spec(net, train, test, Recipe.from_settings(s["recipe"]), seed=seed, checkpoints=s["checkpoints"],
                     resume=Checkpoint(resume, fingerprint) if resume else None)
    snapshots = spec.then

    def states(result) -> list[dict]:
        out = snapshots(result)
        for st in out:
            st.update(arch=arch, seed=seed, dataset=name, fingerprint=fingerprint)
        return out

    spec.then = states
    spec.stack = ensembled(s)
    return spec


def train_classifier(s: dict, arch: str, seed: int, device: str = "auto", resume: str | Path | None = None,
                     run: int | None = None, data: tuple | None = None) -> list[dict]:
    """``classifier_spec``'s run trained alone: its checkpoints."""
    spec = classifier_spec(s, arch, seed, device, resume, run, data)
    return spec.result(training.train_runs([spec])[0])


def train_runs(s: dict, arch: str, runs: list[int], device: str = "auto",
               resume: list[str | Path] | None = None) -> list[list[dict]]:
    """Runs ``runs`` of ``arch`` (``classifier_spec`` with each run's ``run_seed``), the data loaded
    once and the nets trained as one stack unless the recipe says ``ensemble: false``; each run's
    checkpoints, in order. ``resume``: each run's resumable state."""
    specs = run_specs(s, arch, runs, device, resume)
    return [spec.result(run) for spec, run in zip(specs, training.train_runs(specs))]


def run_specs(s: dict, arch: str, runs: list[int], device: str = "auto",
              resume: list[str | Path] | None = None) -> list[RunSpec]:
    """The specs of ``train_runs``: one per run, on data loaded once."""
    device = resolve_device(device)
    data = splits(s, device)
    where = dict(zip(runs, resume or [None] * len(runs)))
    return [classifier_spec(s, arch, run_seed(s, arch, run), device, resume=where[run], run=run, data=data)
            for run in runs]
