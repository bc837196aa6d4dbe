"""What is measured stage by stage through a torch module (EP's conv net, an FFNN), at
initialization or between training epochs: a path's length after every stage, each layer's
weight scale, and the accuracy lost to noise in one layer.

Stages (``stages``): EP's conv net block by block (a block with a normalisation layer is split
into its convolution at ``b - 0.5``, the normalisation alone at ``b - 0.25`` and the block output
at ``b``), an FFNN hidden layer by hidden layer. Rows are dicts with ``kind`` ("length",
"sigma_w", "noise") so a training run's ``on_epoch`` hook can return them as they are.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .inits import weight_layers
from .models import NORMS, TrajReg
from .nets import MLP
from .training import evaluate
from .trajectories import Arc, module_lengths


def _is_norm(m: nn.Module) -> bool:
    return isinstance(m, NORMS + (TrajReg,))


def stages(model: nn.Module) -> list[tuple[float, int, str, nn.Module]]:
    """(layer position, block, stage, module) of each stage whose output is measured (module doc):
    EP's conv net block by block (a block with a normalisation split before it), an FFNN hidden
    layer by hidden layer."""
    out = []
    if isinstance(model, MLP):  # an FFNN: each layer with its activation, the readout alone
        seq = model.sequence()
        for b, layer in enumerate(model.layers, start=1):
            i = next(k for k, m in enumerate(seq) if m is layer)
            mods = ([nn.Flatten()] if b == 1 else []) + seq[i:i + 2 if b < len(model.layers) else i + 1]
            out.append((float(b), b, "hidden" if b < len(model.layers) else "readout", nn.Sequential(*mods)))
        return out
    children = list(model.children())
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
    if isinstance(model, MLP):
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
