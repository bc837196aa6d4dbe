"""Trajectories through random nets: paths in input space and what happens to them layer by layer.

A path maps ``t in [0, 1]`` to input points. ``measure`` pushes ``n_pieces + 1`` points of a
path through a net, streaming chunks of points so memory stays bounded whatever the number of
points, and accumulates per layer d (d = 0 is the input):

* ``length`` of the post-activation image z(d) and ``length_pre`` of the pre-activation h(d),
  as sums of chord lengths (the paper's discretisation; exact for straight lines in the limit),
* ``growth``: the mean over pieces of ‖dz(d)‖ / ‖dz(d-1)‖ (TG's growth factor, pieces with
  dz(d-1) = 0 skipped),
* ``transitions``: neurons changing linear piece (ReLU sign, hard-tanh saturation) between
  consecutive points, summed over neurons (EP Section 2.1),
* ``patterns``: distinct activation patterns of layers 1..d along the path (EP's A(F)).

For piecewise-linear nets and straight lines ``regions.split_lines`` gives the same lengths and
transitions exactly; ``measure`` is the discretised version the papers use, valid for any path
and activation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .nets import MLP
from .regions import KINKS, real_points

# --- paths -------------------------------------------------------------------------------------


@dataclass
class Line:
    """``x(t) = x0 + t (x1 - x0)``."""

    x0: torch.Tensor
    x1: torch.Tensor

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return self.x0 + t[:, None] * (self.x1 - self.x0)


@dataclass
class Arc:
    """EP's circular trajectory ``x(t) = cos(pi t / 2) x0 + sin(pi t / 2) x1``."""

    x0: torch.Tensor
    x1: torch.Tensor

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return torch.cos(math.pi / 2 * t)[:, None] * self.x0 + torch.sin(math.pi / 2 * t)[:, None] * self.x1


@dataclass
class Circle:
    """The closed circle of TG-F1 and EP-F3 through the plane of two points: ``x(t) = r (cos(2 pi t)
    u + sin(2 pi t) v)`` with ``u, v`` orthonormal (Gram-Schmidt on ``x0, x1``) and ``r`` the points'
    mean norm, so it starts at ``x0``'s direction, passes ``x1``'s plane and returns: x(0) = x(1)."""

    x0: torch.Tensor
    x1: torch.Tensor

    def __post_init__(self):
        u = self.x0 / self.x0.norm()
        v = self.x1 - (self.x1 @ u) * u
        self._u, self._v = u, v / v.norm()
        self.radius = (self.x0.norm() + self.x1.norm()) / 2

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        angle = (2 * math.pi) * t
        return self.radius * (torch.cos(angle)[:, None] * self._u + torch.sin(angle)[:, None] * self._v)


@dataclass
class Semicircles:
    """TG-F5's curved path, as we read "a straight line made a semicircular arc in 100 random
    planes": the line from x0 to x1 is cut into ``n_arcs`` equal segments and each segment is
    replaced by the half circle over it that lies in the plane spanned by the line and a random
    direction orthogonal to it (one direction per segment)."""

    x0: torch.Tensor
    x1: torch.Tensor
    n_arcs: int
    seed: int

    def __post_init__(self):
        d = self.x1 - self.x0
        self._d = d
        gen = torch.Generator().manual_seed(self.seed)
        u = torch.randn(self.n_arcs, len(d), generator=gen, dtype=torch.float64).to(d)
        unit = d / d.norm()
        u = u - (u @ unit)[:, None] * unit  # orthogonal to the line
        self._u = u / u.norm(dim=1, keepdim=True)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        s = (t * self.n_arcs).clamp(max=self.n_arcs - 1e-12)
        j = s.floor().long()
        phase = math.pi * (s - j)  # 0..pi along segment j's half circle
        radius = self._d.norm() / (2 * self.n_arcs)
        # Along the line: from the segment's start to its end as (1 - cos) / 2; across: sin.
        along = (j + (1 - torch.cos(phase)) / 2) / self.n_arcs
        return self.x0 + along[:, None] * self._d + (radius * torch.sin(phase))[:, None] * self._u[j]


PATHS = {"line": Line, "arc": Arc, "circle": Circle}


def make_path(kind: str, x0: torch.Tensor, x1: torch.Tensor, *, n_arcs: int = 100, seed: int = 0):
    if kind == "semicircles":
        return Semicircles(x0, x1, n_arcs, seed)
    try:
        return PATHS[kind](x0, x1)
    except KeyError:
        raise ValueError(f"unknown path {kind!r}; known: line, arc, circle, semicircles") from None


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class TrajectoryStats:
    """Per-layer sums along one path through one net; index d = 0 is the input."""

    length: np.ndarray  # [L+1] post-activation (d = 0: the input path)
    length_pre: np.ndarray  # [L+1] pre-activation (d = 0: the input path)
    growth: np.ndarray  # [L+1] mean over pieces of ‖dz(d)‖/‖dz(d-1)‖ (NaN at d = 0)
    transitions: np.ndarray  # [L+1] neuron piece changes in layer d (0 at d = 0)
    patterns: np.ndarray  # [L+1] distinct activation patterns of layers 1..d (1 at d = 0)
    n_pieces: int


# In-place activations: the engine reuses its buffers, since allocating (and page-faulting) a
# fresh [chunk, width] tensor for every intermediate costs as much as the products on a CPU.
_ACT_INPLACE = {
    "relu": torch.relu_,
    "tanh": torch.tanh_,
    "hardtanh": torch.nn.functional.hardtanh_,
    "elu": torch.nn.functional.elu_,
    "linear": lambda h: h,
}


def _activate_(net: MLP, h: torch.Tensor) -> torch.Tensor:
    """``net``'s activation applied to ``h`` in place (a leaky ReLU at the net's own slope)."""
    if net.activation == "leaky_relu":
        return torch.nn.functional.leaky_relu_(h, net.negative_slope)
    return _ACT_INPLACE[net.activation](h)


class _Buffers:
    """Reusable scratch tensors, one flat storage per name, viewed at the shape asked for."""

    def __init__(self, device, dtype):
        self.device, self.dtype, self.store = device, dtype, {}

    def __call__(self, name: str, rows: int, cols: int) -> torch.Tensor:
        buf = self.store.get(name)
        if buf is None or buf.numel() < rows * cols:
            buf = self.store[name] = torch.empty(rows * cols, device=self.device, dtype=self.dtype)
        return buf[: rows * cols].view(rows, cols)


def _codes_into(h: torch.Tensor, kinks: tuple[float, ...], out: torch.Tensor, tmp: torch.Tensor) -> torch.Tensor:
    """Which linear piece each neuron is on, as a float: the sum of sign(h - kink) over kinks
    (ReLU: -1 off, +1 on; hard-tanh: -2, 0, +2), so crossing one kink changes it by 2. (One
    vectorised pass per kink; comparisons to bools are several times slower on the CPU.)"""
    torch.sign(torch.sub(h, kinks[0], out=tmp) if kinks[0] else h, out=out)
    for theta in kinks[1:]:
        out += torch.sign(torch.sub(h, theta, out=tmp), out=tmp)
    return out


def _hash_keys(width: int, layer: int, device) -> torch.Tensor:
    """Random integer keys below 2^42 as float64, one per neuron: a pattern's hash is the sum of
    keys times codes, an integer below 2^53, so it is exact whatever the order of summation
    (equal patterns always hash equal; two different ones collide with probability ~2^-42)."""
    gen = np.random.default_rng([width, layer, 0x5EED])
    return torch.as_tensor(gen.integers(1, 2**42, size=width), dtype=torch.float64, device=device)


def measure(net: MLP, path, n_pieces: int, chunk: int = 2047, transitions: bool = True,
            patterns: bool = False, pre: bool = True) -> TrajectoryStats:
    """Push ``n_pieces + 1`` equally spaced points ``t_i = i / n_pieces`` of ``path`` through the
    hidden layers of ``net`` (see the module doc for what is summed).

    Points go through in chunks of ``chunk`` pieces; consecutive chunks share their boundary
    point, so every piece lies inside one chunk and memory is bounded by the chunk size.
    Transitions cost a few per cent on top of the products; ``patterns`` (hashing every
    point's pattern) about ten per cent more. What is not counted is reported as -1, and
    ``length_pre`` as NaN with ``pre=False`` (one pass fewer per layer: a growth sweep's only
    wanted numbers are ``growth`` and ``length``, and then the products are all that is left).
    """
    weights, biases = net.weights[: net.n_hidden], net.biases[: net.n_hidden]
    dtype, device = weights[0].dtype, weights[0].device
    count = transitions or patterns
    kinks = KINKS.get(net.activation) if count else None
    if count and not kinks:
        raise ValueError(f"transitions need a piecewise-linear activation, not {net.activation!r}")
    n_layers = len(weights)
    length = torch.zeros(n_layers + 1, dtype=torch.float64, device=device)
    length_pre = torch.zeros_like(length)
    growth_sum = torch.zeros_like(length)
    growth_n = torch.zeros(n_layers + 1, dtype=torch.long, device=device)
    flips = torch.zeros_like(length)
    keys = [_hash_keys(w.shape[0], l, device) for l, w in enumerate(weights)] if patterns else None
    hashes = []  # per chunk: [points, layers] pattern hash of each layer
    buf = _Buffers(device, dtype)
    t_all = torch.linspace(0.0, 1.0, n_pieces + 1, dtype=torch.float64)
    for start in range(0, n_pieces, chunk):
        t = t_all[start: start + chunk + 1].to(device)
        z = path(t).to(dtype)
        n = len(z)
        norm_prev = torch.linalg.vector_norm(z[1:] - z[:-1], dim=1)
        length[0] += norm_prev.sum()
        length_pre[0] += norm_prev.sum()
        layer_hash = []
        for l, (w, b) in enumerate(zip(weights, biases), start=1):
            k = w.shape[0]
            out = buf(f"h{l % 2}", n, k)
            h = torch.matmul(z, w.T, out=out) if b is None else torch.addmm(b, z, w.T, out=out)
            d = buf("diff", n - 1, k)
            if pre:
                length_pre[l] += torch.linalg.vector_norm(torch.sub(h[1:], h[:-1], out=d), dim=1).sum()
            if kinks:
                code = _codes_into(h, kinks, buf("code", n, k), buf("tmp", n, k))
                flips[l] += torch.sub(code[1:], code[:-1], out=d).abs_().sum()  # exact: an integer < 2^24
                if patterns:
                    layer_hash.append(code.to(torch.float64) @ keys[l - 1])
            z = _activate_(net, h)
            norm = torch.linalg.vector_norm(torch.sub(z[1:], z[:-1], out=d), dim=1)
            length[l] += norm.sum()
            ok = norm_prev > 0
            growth_sum[l] += (norm[ok] / norm_prev[ok]).sum()
            growth_n[l] += ok.sum()
            norm_prev = norm
        if patterns:
            hashes.append(torch.stack(layer_hash, dim=1)[(1 if start else 0):])
    n_trans = np.concatenate([[0], (flips[1:] / 2).round().long().cpu().numpy()]) if kinks else np.full(n_layers + 1, -1)
    n_patterns = _distinct_prefixes(torch.cat(hashes)) if patterns else np.full(n_layers + 1, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        growth = (growth_sum / growth_n).cpu().numpy()
    growth[0] = np.nan
    length_pre = length_pre.cpu().numpy()
    if not pre:
        length_pre[1:] = np.nan
    return TrajectoryStats(length.cpu().numpy(), length_pre, growth, n_trans, n_patterns, n_pieces)


def _distinct_prefixes(layer_hash: torch.Tensor) -> np.ndarray:
    """Distinct rows of ``layer_hash[:, :d]`` for every d (1 for d = 0), by relabelling the
    points with one integer id per distinct prefix, layer after layer."""
    ids = torch.zeros(len(layer_hash), dtype=torch.long, device=layer_hash.device)
    out = [1]
    for d in range(layer_hash.shape[1]):
        _, inv = torch.unique(layer_hash[:, d], return_inverse=True)
        _, ids = torch.unique(ids * (len(ids) + 1) + inv, return_inverse=True)
        out.append(int(ids.max()) + 1)
    return np.array(out)


def project_2d(net: MLP, path, n_points: int, layers: list[int], pre: bool = True) -> dict[int, np.ndarray]:
    """The path's image at each of ``layers`` (0 = input) projected on its own top two principal
    directions: ``{layer: [n_points, 2]}``. Pre-activations by default (TG-F1, EP-F3)."""
    t = torch.linspace(0.0, 1.0, n_points, dtype=torch.float64, device=net.weights[0].device)
    z = path(t).to(net.weights[0].dtype)
    preacts, _ = net.preactivations(z)
    images = {0: z, **{l: h if pre else net.act(h) for l, h in enumerate(preacts, start=1)}}
    out = {}
    for layer in layers:
        x = images[layer].double()
        x = x - x.mean(dim=0)
        _, _, v = torch.linalg.svd(x, full_matrices=False)
        out[layer] = (x @ v[:2].T).cpu().numpy()
    return out


@torch.no_grad()
def module_lengths(blocks, path, n_pieces: int, in_shape: tuple[int, ...], chunk: int = 1024) -> np.ndarray:
    """Length of the image of ``path`` (over flat inputs) after each of ``blocks`` applied in turn,
    index 0 being the input: for any torch modules (conv nets with pooling, batch norm in eval
    mode, trained nets). Chord sums over ``n_pieces`` pieces, streamed in chunks that share their
    boundary point, as in ``measure``."""
    blocks = list(blocks)
    lengths = np.zeros(len(blocks) + 1)
    t = torch.linspace(0, 1, n_pieces + 1, dtype=torch.float64)
    for start in range(0, n_pieces, chunk):
        ts = t[start: min(start + chunk, n_pieces) + 1]
        h = path(ts.to(path.x0.device)).to(path.x0.dtype)
        h = h.view(len(ts), *in_shape)
        outs = [h]
        for block in blocks:
            h = block(h)
            outs.append(h)
        for d, z in enumerate(outs):
            z = z.flatten(1).double()
            lengths[d] += (z[1:] - z[:-1]).norm(dim=1).sum().item()
    return lengths


def path_rows(net, path, n_pieces: int, /, counts: bool = True, pre: bool = True, **labels) -> pd.DataFrame:
    """One row per layer (0 = input) of what ``trajectories.measure`` sums along ``path``; without
    ``counts`` no transitions or patterns (-1), without ``pre`` no pre-activation lengths (NaN)."""
    counts = counts and net.activation in KINKS
    st = measure(net, path, n_pieces, transitions=counts, patterns=counts, pre=pre)
    return pd.DataFrame({"layer": np.arange(len(st.length)), "length": st.length, "length_pre": st.length_pre,
                         "growth": st.growth, "transitions": st.transitions, "patterns": st.patterns}).assign(
        n_pieces=n_pieces, dtype=str(net.weights[0].dtype).removeprefix("torch."), **labels)


def trajectory_stats(model, x0, x1, path: str = "line", n_pieces: int = 10_000) -> pd.DataFrame:
    """Per-layer length, growth factor and transitions of a path between ``x0`` and ``x1`` through
    ``model`` (any ``nn.Sequential`` that ``nets.as_mlp`` reads, or an ``MLP``): one row per layer
    (0 = the input path) with ``length`` (post-activation), ``length_pre``, ``growth`` (mean over the
    path's pieces of ‖dz(d)‖ / ‖dz(d-1)‖) and ``transitions`` (neuron piece changes; -1 for an
    activation without linear pieces, tanh or ELU). ``path``: "line" (x0 to x1), "arc" (EP's
    quarter circle) or "circle" (the closed circle through both, TG-F1's). ``x0``, ``x1``: one
    finite input each (shape ``(d,)``); ``n_pieces >= 1``. Computed in float64 (on a copy of a model in
    another precision) on its device; weights or biases with NaN or inf are refused, the layer named.

        >>> model = nn.Sequential(nn.Linear(10, 50), nn.ReLU(), nn.Linear(50, 50), nn.ReLU())
        >>> stats = trajectory_stats(model.double(), torch.zeros(10), torch.ones(10))  # doctest: +SKIP
        >>> list(stats.columns[:5])  # doctest: +SKIP
        ['layer', 'length', 'length_pre', 'growth', 'transitions']
    """
    from .nets import as_mlp, check_finite, in_float64

    net = as_mlp(model)
    check_finite(net, "trajectory_stats")
    net = in_float64(net)
    dtype, device = net.weights[0].dtype, net.weights[0].device
    d = net.widths[0]
    ends = []
    for name, x in (("x0", x0), ("x1", x1)):
        t = real_points(name, x)
        if t.shape != (d,):
            raise ValueError(f"{name} must be one input of shape ({d},) (the model takes {d} inputs); got shape "
                             f"{tuple(t.shape)}")
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} must be finite; it holds NaN or inf")
        ends.append(t.to(dtype=dtype, device=device))
    if torch.equal(ends[0], ends[1]):
        raise ValueError("x0 and x1 are the same point: the path has length 0 at every layer and its growth, a "
                         "ratio of lengths, is 0/0; give two different points")
    if isinstance(n_pieces, bool) or not isinstance(n_pieces, (int, np.integer)) or n_pieces < 1:
        raise ValueError(f"n_pieces must be a whole number >= 1 (the path is cut into that many pieces); got {n_pieces!r}")
    need = (int(n_pieces) + 1) * max(net.widths) * 8
    if need > MAX_PATH_BYTES:
        raise MemoryError(f"trajectory_stats: n_pieces={n_pieces:,} holds {need / 2**30:,.1f} GiB of the path's points "
                          f"at width {max(net.widths):,}, over {MAX_PATH_BYTES / 2**30:g} GiB; use fewer pieces")
    with torch.no_grad():
        rows = path_rows(net, make_path(path, *ends), int(n_pieces))
    bad = rows.index[~np.isfinite(rows[["length", "length_pre"]].to_numpy()).all(axis=1)]
    if len(bad):  # finite weights whose products overflow float64 (weights of 1e80 a layer, say)
        raise ValueError(f"trajectory_stats: the path's length at layer {int(rows.loc[bad[0], 'layer'])} is NaN or inf: "
                         "the weights or inputs are too large for float64 there; scale them down")
    return rows


# The path's points a call may hold at the widest layer (float64), before it starts.
MAX_PATH_BYTES = 4 * 2**30
