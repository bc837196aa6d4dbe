"""EP's dual measure: sweep one layer's weights along a great circle and count the labellings
(dichotomies) a net gives a fixed set of s inputs (EP Appendix B.3, Figures 14-16).

The swept layer's weights are ``W(t) = cos(2 pi t) W0 + sin(2 pi t) W1`` with ``W0, W1`` drawn
independently from the layer's distribution, so ``W(t)`` has that distribution for every t and
the sweep is a great circle of weight space. A net of depth D labels an input by the sign of a
random linear readout of its last hidden layer; one deep net with a readout per depth gives
every depth at once (a net's first D layers are a random depth-D net).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .nets import ACTIVATIONS, MLP
from .regions import KINKS


@dataclass
class Sweep:
    """What a sweep of layer ``layer`` saw, for each depth d = layer+1 .. L (index d - layer - 1)."""

    layer: int
    depths: np.ndarray
    dichotomies: np.ndarray  # distinct labellings of the s inputs along the sweep
    label_flips: np.ndarray  # output transitions: label changes between steps, summed over inputs
    transitions: np.ndarray  # hidden-neuron transitions in layers layer+1..d, summed over inputs
    first_labels: np.ndarray  # [n_depths, s] the labelling at t = 0 (the random walk's start)


def sweep(net: MLP, w1: torch.Tensor, x: torch.Tensor, layer: int, readouts: torch.Tensor, n_steps: int,
          chunk: int = 512) -> Sweep:
    """Sweep hidden layer ``layer`` (0-based) of ``net`` from its weights ``W0`` towards ``w1`` and
    back around the circle in ``n_steps`` steps; label the inputs ``x [s, n_0]`` with
    ``sign(readouts[d] . z(d))`` after every deeper layer."""
    act = ACTIVATIONS[net.activation]
    weights, biases = net.weights, net.biases
    dtype, device = weights[0].dtype, weights[0].device
    x = x.to(device=device, dtype=dtype)
    s, n_layers = len(x), net.n_hidden
    z = x
    for w, b in zip(weights[:layer], biases[:layer]):  # the layers below do not move
        z = act(torch.addmm(b, z, w.T))
    h0, h1 = z @ weights[layer].T, z @ w1.to(device=device, dtype=dtype).T  # [s, k]
    bit = 2 ** torch.arange(s, device=device, dtype=torch.long)
    n_depths = n_layers - layer
    codes, flips, trans = [[] for _ in range(n_depths)], torch.zeros(n_depths), torch.zeros(n_depths)
    last_labels = [None] * n_depths
    last_codes = [None] * n_depths
    first = np.zeros((n_depths, s), dtype=np.int8)
    kinks = KINKS[net.activation]
    t_all = torch.arange(n_steps, dtype=torch.float64) / n_steps
    # Rows are steps, columns (input, neuron) pairs: [T, s * k], one 2-D product per deeper layer
    h0, h1, b0 = h0.reshape(1, -1), h1.reshape(1, -1), biases[layer].repeat(s)
    for start in range(0, n_steps, chunk):
        t = t_all[start: start + chunk].to(device=device, dtype=dtype) * (2 * math.pi)
        h = torch.cos(t)[:, None] * h0
        h += torch.sin(t)[:, None] * h1
        h += b0
        for i, l in enumerate(range(layer, n_layers)):
            if l > layer:
                h = torch.addmm(biases[l], z.reshape(-1, z.shape[-1]), weights[l].T).view(len(t), -1)
            z = act(h).view(len(t), s, -1)
            piece = _piece(h, kinks)  # crossing a kink changes it by 1
            prev = last_codes[i]
            both = piece if prev is None else torch.cat([prev, piece])
            trans[i] += float(torch.diff(both, dim=0).abs_().sum())
            last_codes[i] = piece[-1:]
            labels = (z @ readouts[l] > 0).long()  # [T, s]
            if last_labels[i] is None:
                first[i] = labels[0].cpu().numpy()
            both = labels if last_labels[i] is None else torch.cat([last_labels[i], labels])
            flips[i] += (both[1:] != both[:-1]).sum().item()
            last_labels[i] = labels[-1:]
            codes[i].append((labels * bit).sum(1))  # no integer matmul on CUDA
    trans = trans.cumsum(0)  # a depth-d net's transitions are those of its layers layer+1..d
    dich = np.array([len(torch.unique(torch.cat(c))) for c in codes])
    return Sweep(layer, np.arange(layer + 1, n_layers + 1), dich, flips.numpy().astype(int),
                 trans.numpy().astype(int), first)


def _piece(h: torch.Tensor, kinks: tuple[float, ...]) -> torch.Tensor:
    """Which linear piece each neuron is on (the sum of sign(h - kink) over kinks) as int8: a
    quarter of float64's memory traffic for the differences that count transitions."""
    out = (h > kinks[0]).to(torch.int8)
    for theta in kinks[1:]:
        out += h > theta
    return out


def random_walk(start: np.ndarray, n_flips: int, n_walks: int, seed: int) -> float:
    """EP-F16's baseline: from the labelling ``start`` flip one uniformly chosen label ``n_flips``
    times; the mean number of distinct labellings visited (start included) over ``n_walks``."""
    rng = np.random.default_rng(seed)
    s = len(start)
    code0 = int(np.dot(start.astype(np.int64), 2 ** np.arange(s)))
    visited = []
    for _ in range(n_walks):
        steps = 2 ** rng.integers(0, s, size=n_flips)
        states = np.bitwise_xor.accumulate(np.concatenate([[code0], steps]))
        visited.append(len(np.unique(states)))
    return float(np.mean(visited))
