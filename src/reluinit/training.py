"""Training fully connected nets, keeping the checkpoints later measurements read.

A small engine for now (Adam, minibatches, cross-entropy, checkpoints at chosen epochs); the
training issue grows it (SGD, schedules, resume, GPU data pipeline). A diverged run (loss NaN
or inf) stops and is recorded as such: a result, not a crash.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from . import datasets
from .nets import MLP, parse_arch, resolve_device, sample_mlp

log = logging.getLogger(__name__)


@torch.no_grad()
def accuracy(net: MLP, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096) -> float:
    correct = 0
    for start in range(0, len(x), batch_size):
        _, logits = net.forward(x[start:start + batch_size])
        correct += (logits.argmax(dim=1) == y[start:start + batch_size]).sum().item()
    return correct / len(x)


def snapshot(net: MLP, **info) -> dict:
    """A checkpoint: plain tensors and numbers, loadable with ``torch.load(weights_only=True)``."""
    return {"weights": [w.detach().cpu().clone() for w in net.weights],
            "biases": [b.detach().cpu().clone() for b in net.biases],
            "activation": net.activation, **info}


def restore(state: dict, device: str | torch.device = "cpu") -> MLP:
    return MLP([w.to(device) for w in state["weights"]], [b.to(device) for b in state["biases"]],
               activation=state["activation"], readout=True)


def train_adam(net: MLP, train: tuple[torch.Tensor, torch.Tensor], test: tuple[torch.Tensor, torch.Tensor], *,
               epochs: int, lr: float, batch_size: int, seed: int, checkpoints: list[int]) -> list[dict]:
    """Train ``net`` in place with Adam on cross-entropy; return a snapshot at each epoch in
    ``checkpoints`` (0 = at initialization), each with its test accuracy and mean train loss."""
    params = [p.requires_grad_(True) for p in net.weights + net.biases]
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    x, y = train
    states = []
    loss_mean = math.nan
    for epoch in range(epochs + 1):
        if epoch > 0:
            total, count = 0.0, 0
            for idx in torch.randperm(len(x), generator=gen).split(batch_size):
                _, logits = net.forward(x[idx])
                loss = F.cross_entropy(logits, y[idx])
                if not torch.isfinite(loss):
                    log.warning("epoch %d: loss is %s, training stops (diverged)", epoch, loss.item())
                    return states + [snapshot(net, epoch=epoch, test_acc=1.0 / (int(y.max()) + 1),
                                              train_loss=math.nan, diverged=True)]
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total, count = total + loss.item() * len(idx), count + len(idx)
            loss_mean = total / count
        if epoch in checkpoints:
            acc = accuracy(net, *test)
            log.info("epoch %d: train loss %.4f, test accuracy %.4f", epoch, loss_mean, acc)
            states.append(snapshot(net, epoch=epoch, test_acc=acc, train_loss=loss_mean, diverged=False))
    for p in params:
        p.requires_grad_(False)
    return states


def save(states: list[dict], path: str | Path) -> None:
    """Write atomically: a killed job never leaves a half-written file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(states, tmp)
    tmp.replace(path)


def load(path: str | Path) -> list[dict]:
    return torch.load(path, weights_only=True)


def flat(split: datasets.Split, device) -> tuple[torch.Tensor, torch.Tensor]:
    return split.x.flatten(1).to(device=device, dtype=torch.float64), split.y.to(device)


def run_seed(s: dict, arch: str, run: int) -> int:
    """The seed of run ``run`` of ``arch`` in training spec ``s`` (recorded in its checkpoints)."""
    from .experiments import part_seed

    return part_seed(s["seed"], s["architectures"].index(arch) * 10_000 + run)


def train_classifier(s: dict, arch: str, seed: int, device: str = "auto") -> list[dict]:
    """Sample a ReLU net of architecture ``arch`` under training spec ``s`` and train it on
    ``s["dataset"]`` (the quick scale's stand-in where it has one); return its checkpoints."""
    device = resolve_device(device)
    train = datasets.load(s["dataset"], s["data_dir"], train=True, scale=s["scale"])
    test = datasets.load(s["dataset"], s["data_dir"], train=False, scale=s["scale"])
    x, y = flat(train, device)
    log.info("training %s on %s (%d images) with seed %d on %s", arch, train.name, len(x), seed, device)
    net = sample_mlp([x.shape[1], *parse_arch(arch), train.n_classes], s["init"], readout=True,
                     bias_std=s["bias_std"], seed=seed, device=device, dtype=torch.float64)
    states = train_adam(net, (x, y), flat(test, device), epochs=s["epochs"], lr=s["lr"],
                        batch_size=s["batch_size"], seed=seed, checkpoints=s["checkpoints"])
    for st in states:
        st.update(arch=arch, seed=seed, dataset=train.name)
    return states
