"""Exact linear-region geometry of piecewise-linear nets: lines, planes, boundary distances.

Everything here is exact up to floating point (float64 recommended): nothing is sampled.

* ``split_lines``: every straight line ``x(t) = x0 + t (x1 - x0)`` is cut at each point where
  some neuron's pre-activation crosses a kink of the activation (0 for ReLU, ±1 for hard-tanh),
  layer by layer, carrying the affine map of ``t`` on each interval. Batched over lines; the
  range of ``t`` may be all of ℝ (the whole line, its end intervals unbounded).
* ``plane_regions``: a square in the plane through three points is cut into convex polygons by
  every neuron's (bent) hyperplane, layer by layer.
* ``boundary_distance``: distance from points to the boundary of their activation region.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from . import planecut
from .nets import ACTIVATIONS, MLP, as_mlp

# Pre-activation values where each activation's slope changes.
KINKS = {"relu": (0.0,), "leaky_relu": (0.0,), "hardtanh": (-1.0, 1.0), "linear": ()}


def _codes(z: torch.Tensor, activation: str) -> torch.Tensor:
    """Which linear piece of the activation each pre-activation is on (an int8 per neuron)."""
    code = torch.zeros_like(z, dtype=torch.int8)
    for theta in KINKS[activation]:
        code += (z > theta).to(torch.int8)
    return code


def _slope(code: torch.Tensor, activation: str, dtype) -> torch.Tensor:
    """The activation's slope on each neuron's piece."""
    if activation == "relu":
        return code.to(dtype)
    if activation == "leaky_relu":
        return code.to(dtype) + 0.01 * (1 - code.to(dtype))
    if activation == "hardtanh":
        return (code == 1).to(dtype)
    if activation == "linear":
        return torch.ones_like(code, dtype=dtype)
    raise ValueError(f"{activation!r} is not piecewise linear")


def _post(a: torch.Tensor, b: torch.Tensor, code: torch.Tensor, activation: str):
    """Affine map ``a + b t`` of the activations, given each neuron's piece. ``b`` may carry one
    more trailing dimension than ``a`` (several input directions)."""
    slope = _slope(code, activation, a.dtype)
    shift = (code == 2).to(a.dtype) - (code == 0).to(a.dtype) if activation == "hardtanh" else 0.0
    return a * slope + shift, b * (slope if b.dim() == a.dim() else slope[..., None])


@dataclass
class LineSplit:
    """Intervals ``[t0, t1]`` of many lines on each of which the net is one affine map of ``t``."""

    line: torch.Tensor  # [K] which line each interval belongs to (intervals sorted by line, t)
    t0: torch.Tensor  # [K]
    t1: torch.Tensor  # [K]
    pattern: torch.Tensor  # [K, n_neurons] int8, every hidden neuron's piece
    out_a: torch.Tensor  # [K, n_out] output = out_a + t * out_b on the interval
    out_b: torch.Tensor
    n_lines: int
    # Exact length of each line's image after each hidden layer, [n_hidden, n_lines]: on an
    # interval the image is a segment, of length (t1 - t0) * ‖slope‖.
    length_pre: torch.Tensor | None = None
    length_post: torch.Tensor | None = None

    def regions(self) -> torch.Tensor:
        """Distinct activation patterns along each line: [n_lines]. (Activation regions are
        convex, so a line meets each at most once, in one interval.)"""
        return 1 + self._count(torch.any(self.pattern[1:] != self.pattern[:-1], dim=1))

    def transitions(self) -> torch.Tensor:
        """EP's transitions along each line: how many times some neuron changes piece (sign or
        saturation), summed over neurons. [n_lines]"""
        return self._count((self.pattern[1:] != self.pattern[:-1]).sum(dim=1))

    def pieces(self, rtol: float = 1e-9) -> torch.Tensor:
        """Linear pieces of the output along each line: adjacent intervals with the same slope
        (the map is continuous, so the same affine map) are merged. [n_lines]"""
        scale = self.out_b.abs().amax(dim=1, keepdim=True).clamp_min(1e-300)
        differs = ((self.out_b[1:] - self.out_b[:-1]).abs() > rtol * torch.maximum(scale[1:], scale[:-1])).any(dim=1)
        return 1 + self._count(differs)

    def _count(self, changes: torch.Tensor) -> torch.Tensor:
        """Per line, the sum of ``changes`` between adjacent intervals of that line."""
        same_line = self.line[1:] == self.line[:-1]
        counts = torch.zeros(self.n_lines, dtype=torch.long, device=self.line.device)
        return counts.index_add_(0, self.line[1:], changes.long() * same_line)


def _interior_point(t0: torch.Tensor, t1: torch.Tensor) -> torch.Tensor:
    """A point strictly inside each interval, also when an end is infinite: the midpoint, else one
    step (at least 1, and at least the end's magnitude) beyond the finite end, else 0."""
    lo, hi = torch.isfinite(t0), torch.isfinite(t1)
    mid = torch.where(lo & hi, 0.5 * (t0 + t1), torch.zeros_like(t0))
    mid = torch.where(lo & ~hi, t0 + 1 + t0.abs(), mid)
    return torch.where(~lo & hi, t1 - 1 - t1.abs(), mid)


def _cut_points(t0: torch.Tensor, t1: torch.Tensor, roots: torch.Tensor, inside: torch.Tensor):
    """Every interval's ends with the roots strictly inside it between them, in order: the
    interval of each point ``[S]`` and its ``t`` ``[S]``, sorted by (interval, t). Only the roots
    inside are sorted (``nonzero`` lists them by interval already; a stable sort by ``t`` then by
    interval orders each interval's few), and the ends are placed around them, not sorted."""
    k, t = inside.nonzero(as_tuple=True)[0], roots[inside]
    order = torch.argsort(t, stable=True)
    order = order[torch.argsort(k[order], stable=True)]
    k, t = k[order], t[order]
    n_in = torch.bincount(k, minlength=len(t0))
    size = n_in + 2
    start = size.cumsum(0) - size
    sk = torch.repeat_interleave(torch.arange(len(t0), device=t0.device), size)
    st = t0.new_empty(len(sk))
    st[start], st[start + size - 1] = t0, t1
    rank = torch.arange(len(k), device=t0.device) - (n_in.cumsum(0) - n_in)[k]
    st[start[k] + 1 + rank] = t
    return sk, st


def split_lines(net: MLP, x0: torch.Tensor, x1: torch.Tensor, t_min: float = 0.0, t_max: float = 1.0,
                keep_pattern: bool = True, max_intervals: int | None = None) -> LineSplit:
    """Split the lines from ``x0[i]`` to ``x1[i]`` (``[L, n_0]``) on ``[t_min, t_max]`` exactly.

    ``t_min=-math.inf, t_max=math.inf`` splits the whole (infinite) line: every kink is a root of
    an affine function of ``t``, found without bounding ``t``, and the first and last intervals
    are unbounded (their lengths infinite where the map is not constant).

    ``keep_pattern=False`` drops the per-interval patterns (``[K, n_neurons]`` int8, the largest
    thing held) when only lengths or the output map are wanted. With ``max_intervals`` the
    splitting stops before the first layer that starts with more intervals than that: the
    lengths then cover the layers done, and the other fields describe the last layer done.
    """
    kinks = KINKS[net.activation]
    dtype, device = net.weights[0].dtype, net.weights[0].device
    x0 = x0.to(device=device, dtype=dtype)
    x1 = x1.to(device=device, dtype=dtype)
    n_lines = len(x0)
    line = torch.arange(n_lines, device=device)
    t0 = torch.full((n_lines,), float(t_min), dtype=dtype, device=device)
    t1 = torch.full((n_lines,), float(t_max), dtype=dtype, device=device)
    a, b = x0, x1 - x0
    patterns = []
    lengths_pre, lengths_post = [], []
    weights = net.weights
    for l, (w, c) in enumerate(zip(weights, net.biases)):
        if max_intervals is not None and len(t0) > max_intervals:
            break
        za, zb = torch.addmm(c, a, w.T), b @ w.T
        if net.readout and l == len(weights) - 1:
            a, b = za, zb
            break
        # Every crossing of a kink strictly inside an interval is a new cut.
        roots = torch.cat([(theta - za) / zb for theta in kinks], dim=1) if kinks else za[:, :0]
        inside = (roots > t0[:, None]) & (roots < t1[:, None])
        sk, st = _cut_points(t0, t1, roots, inside)
        keep = (sk[1:] == sk[:-1]) & (st[1:] > st[:-1])
        k_new = sk[:-1][keep]
        t0, t1 = st[:-1][keep], st[1:][keep]
        line, za, zb = line[k_new], za[k_new], zb[k_new]
        patterns = [p[k_new] for p in patterns]
        code = _codes(za + _interior_point(t0, t1)[:, None] * zb, net.activation)
        if keep_pattern:
            patterns.append(code)
        a, b = _post(za, zb, code, net.activation)
        for out, slope in ((lengths_pre, zb), (lengths_post, b)):
            norm = torch.linalg.vector_norm(slope, dim=1)
            seg = torch.where(norm > 0, (t1 - t0) * norm, torch.zeros_like(norm))  # no inf * 0
            out.append(torch.zeros(n_lines, dtype=dtype, device=device).index_add_(0, line, seg))
    pattern = torch.cat(patterns, dim=1) if patterns else torch.zeros(len(t0), 0, dtype=torch.int8, device=device)
    stack = lambda xs: torch.stack(xs) if xs else torch.zeros(0, n_lines, dtype=dtype, device=device)  # noqa: E731
    return LineSplit(line, t0, t1, pattern, a, b, n_lines, stack(lengths_pre), stack(lengths_post))


def activation_pattern(net: MLP, x: torch.Tensor) -> torch.Tensor:
    """Every hidden neuron's piece at each point ``x [P, n_0]``: ``[P, n_neurons]`` int8."""
    preacts, _ = net.preactivations(x.to(net.weights[0]))
    return torch.cat([_codes(z, net.activation) for z in preacts], dim=1)


# --- boundary distance ---------------------------------------------------------------------

def boundary_distance(net: MLP, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distance from each point to the boundary of its activation region, exactly.

    Inside a region every pre-activation is an affine function ``z_i(x)`` of the input, and the
    region is the convex polytope where each stays on its side of its kinks; the distance to its
    boundary is therefore ``min_i |z_i(x) - kink| / ‖∇z_i‖``. Returns the distance ``[P]``, the
    index of the nearest neuron ``[P]`` and its unit normal pointing towards that boundary
    ``[P, n_0]``.
    """
    x = x.to(net.weights[0])
    n0 = x.shape[1]
    h = x
    jac = torch.eye(n0, dtype=x.dtype, device=x.device).expand(len(x), n0, n0)  # ∂h/∂x
    dists, normals = [], []
    kinks = torch.tensor(KINKS[net.activation], dtype=x.dtype, device=x.device)
    hidden = list(zip(net.weights, net.biases))[: net.n_hidden]
    for w, c in hidden:
        z = torch.addmm(c, h, w.T)
        gz = torch.einsum("ij,pjk->pik", w, jac)  # ∂z/∂x, [P, n, n0]
        gnorm = gz.norm(dim=2)
        gap = z[:, :, None] - kinks  # signed distance in z to each kink
        nearest = gap.abs().argmin(dim=2, keepdim=True)
        gap = gap.gather(2, nearest).squeeze(2)
        d = torch.where(gnorm > 0, gap.abs() / gnorm, torch.full_like(gnorm, float("inf")))
        dists.append(d)
        normals.append(-torch.sign(gap)[:, :, None] * gz / gnorm.clamp_min(1e-300)[:, :, None])
        h = ACTIVATIONS[net.activation](z)
        jac = _slope(_codes(z, net.activation), net.activation, x.dtype)[:, :, None] * gz
    d = torch.cat(dists, dim=1)
    dist, idx = d.min(dim=1)
    normal = torch.cat(normals, dim=1)[torch.arange(len(x)), idx]
    return dist, idx, normal


# --- 2-D planes ------------------------------------------------------------------------------

@dataclass
class Polygon:
    vertices: np.ndarray  # [m, 2] (u, v) coordinates in the plane, counter-clockwise
    pattern: np.ndarray  # int8 per hidden neuron so far
    bounded: bool  # False when it touches the square's edge (may extend beyond it)

    @property
    def area(self) -> float:
        u, v = self.vertices[:, 0], self.vertices[:, 1]
        return 0.5 * float(np.dot(u, np.roll(v, -1)) - np.dot(v, np.roll(u, -1)))


@torch.inference_mode()
def plane_regions(net: MLP, origin, e1, e2, half_side: float) -> list[list[Polygon]]:
    """Partition the square ``|u|, |v| <= half_side`` of the plane ``origin + u e1 + v e2`` into
    the regions of the first 1, 2, ... hidden layers. Returns one list of polygons per layer.

    Exact in float64: within a layer every neuron's pre-activation is one affine function of
    (u, v) on each cell of the layers before (its ``parent``), so each neuron's line in turn cuts
    the cells of the parents it crosses (``planecut.cut_layer``, a compiled loop). Cells come in
    the order of a depth-first walk (a cut cell is followed by its part above the line); a part
    with fewer than 3 vertices (a line through a corner) is dropped. The layers' affine maps are
    computed on the net's device; the cutting, thousands of steps on a few small polygons each, runs
    on the host, where a step costs nanoseconds and not a kernel launch.
    """
    dev = net.weights[0].device
    f64 = lambda t: torch.as_tensor(np.asarray(t.detach().cpu() if torch.is_tensor(t) else t),  # noqa: E731
                                    dtype=torch.float64).to(dev)
    s = float(half_side)
    theta = np.array(KINKS[net.activation], dtype=np.float64)
    xy, off = np.array([[-s, -s], [s, -s], [s, s], [-s, s]], dtype=np.float64), np.array([0, 4])
    # The cells' activations as affine maps h = a + bmat @ (u, v), and every hidden neuron's piece.
    a, bmat = f64(origin)[None], torch.stack([f64(e1), f64(e2)], dim=1)[None]
    pattern = torch.zeros(1, 0, dtype=torch.int8, device=dev)
    out = []
    for w, c in list(zip(net.weights, net.biases))[: net.n_hidden]:
        w = f64(w)
        za = a @ w.T + (f64(c) if c is not None else 0.0)  # z = za + zb @ (u, v) on each parent cell
        zb = torch.einsum("ij,pjk->pik", w, bmat)
        # The edge test of `bounded` is torch.isclose's (rtol 1e-5, atol 1e-8), written out.
        xy, off, parent, centre, bounded = planecut.cut_layer(
            xy, off, za.cpu().numpy(), zb.cpu().numpy(), theta, s, 1e-8 + 1e-5 * abs(s))
        parent = torch.from_numpy(parent).to(dev)
        za, zb = za[parent], zb[parent]
        code = _codes(za + (zb @ torch.from_numpy(centre).to(dev)[:, :, None]).squeeze(2), net.activation)
        a, bmat = _post(za, zb, code, net.activation)
        pattern = torch.cat([pattern[parent], code], dim=1)
        ends = off.tolist()  # (slices of lists: np.split is 20x slower)
        verts = [xy[i:j] for i, j in itertools.pairwise(ends)]
        out.append(list(map(Polygon, verts, pattern.cpu().numpy(), bounded.tolist())))
    return out


# --- Telgarsky's sawtooth ----------------------------------------------------------------------

def sawtooth(n: int, noise: float = 0.0, seed: int = 0, dtype=torch.float64) -> MLP:
    """n tent maps T(x) = 2 ReLU(x) - 4 ReLU(x - 1/2) composed: 2^n linear pieces on [0, 1].

    Each layer has two ReLUs; the combination 2 h_1 - 4 h_2 is folded into the next layer's
    weights and the readout. ``noise`` adds N(0, noise^2) to every weight and bias.
    """
    comb = torch.tensor([[2.0, -4.0]], dtype=dtype)
    weights = [torch.ones(2, 1, dtype=dtype)] + [comb.repeat(2, 1) for _ in range(n - 1)] + [comb.clone()]
    biases = [torch.tensor([0.0, -0.5], dtype=dtype) for _ in range(n)] + [torch.zeros(1, dtype=dtype)]
    if noise:
        gen = torch.Generator().manual_seed(seed)
        weights = [w + noise * torch.randn(w.shape, generator=gen, dtype=dtype) for w in weights]
        biases = [b + noise * torch.randn(b.shape, generator=gen, dtype=dtype) for b in biases]
    return MLP(weights, biases, activation="relu", readout=True)


def data_plane(x: torch.Tensor, y: torch.Tensor, digits=(0, 1, 2), scale: float = 1.25):
    """Hanin & Rolnick's plane: through the first training examples of three digits, a square
    centred at their circumcentre with half-side ``scale`` x the circumradius."""
    pts = torch.stack([x[(y == d).nonzero()[0, 0]] for d in digits]).double().numpy()
    e1 = pts[1] - pts[0]
    e1 /= np.linalg.norm(e1)
    e2 = pts[2] - pts[0] - np.dot(pts[2] - pts[0], e1) * e1
    e2 /= np.linalg.norm(e2)
    p = np.array([[np.dot(q - pts[0], e1), np.dot(q - pts[0], e2)] for q in pts])  # 2-D coordinates
    # Circumcentre of the triangle p0 = (0, 0), p1, p2.
    (bx, by), (cx, cy) = p[1], p[2]
    d = 2 * (bx * cy - by * cx)
    ux = (cy * (bx**2 + by**2) - by * (cx**2 + cy**2)) / d
    uy = (bx * (cx**2 + cy**2) - cx * (bx**2 + by**2)) / d
    centre = pts[0] + ux * e1 + uy * e2
    radius = float(np.hypot(ux, uy))
    return centre, e1, e2, scale * radius, p - np.array([ux, uy])


# --- any torch model: the public entry points ------------------------------------------------------

@dataclass
class LineRegions:
    """The exact regions of a net along one line ``x0 + t (x1 - x0)``: ``breakpoints`` (the ``t``
    where the activation pattern changes, in order), the ``intervals`` between them (``t_min`` and
    ``t_max`` at the ends, infinite for the whole line) and each interval's activation ``pattern``
    (one int8 per hidden neuron: which piece of its activation it is on)."""

    breakpoints: np.ndarray
    intervals: np.ndarray
    patterns: np.ndarray

    @property
    def count(self) -> int:
        """The number of linear regions the line crosses (intervals of distinct consecutive patterns)."""
        return len(self.intervals)


def regions_on_line(model, x0, x1, t_min: float = -math.inf, t_max: float = math.inf):
    """The exact linear regions of ``model`` (any ``nn.Sequential`` that ``nets.as_mlp`` reads, or
    an ``MLP``) along the line ``x0 + t (x1 - x0)`` for ``t_min <= t <= t_max`` (the whole line by
    default), in the model's dtype (float64 recommended: exact up to rounding). ``x0``, ``x1`` of
    shape ``(d,)`` give one ``LineRegions``; ``(n, d)`` give a list of ``n``, all split in one
    batched pass (many lines cost little more than one).

        >>> model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
        >>> regions_on_line(model.double(), torch.zeros(2), torch.ones(2)).count  # doctest: +SKIP
        17
    """
    net = as_mlp(model)
    one = torch.as_tensor(x0).dim() == 1
    x0 = torch.as_tensor(x0).reshape(-1, net.widths[0])
    x1 = torch.as_tensor(x1).reshape(-1, net.widths[0])
    with torch.no_grad():
        split = split_lines(net, x0, x1, t_min, t_max)
    line, pattern = split.line.cpu().numpy(), split.pattern.cpu().numpy()
    t0, t1 = split.t0.cpu().numpy(), split.t1.cpu().numpy()
    # An interval whose pattern equals its neighbour's on the same line is one region with it.
    new = np.ones(len(t0), dtype=bool)
    new[1:] = (line[1:] != line[:-1]) | (pattern[1:] != pattern[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(t0)) - 1
    bounds = np.searchsorted(line[starts], np.arange(len(x0) + 1))  # intervals come line by line
    lo, hi = t0[starts], t1[ends]
    result = [LineRegions(lo[a + 1:b], np.stack([lo[a:b], hi[a:b]], axis=1), pattern[starts[a:b]])
              for a, b in zip(bounds[:-1], bounds[1:])]
    return result[0] if one else result


def plane_partition(model, center, u, v, half_side: float) -> list[Polygon]:
    """The exact partition into linear regions of the square ``|a|, |b| <= half_side`` of the plane
    ``center + a u + b v``, for ``model`` (any ``nn.Sequential`` that ``nets.as_mlp`` reads): convex
    polygons in (a, b) coordinates, each with its activation pattern. Computed in float64.

        >>> model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
        >>> len(plane_partition(model, [0, 0], [1, 0], [0, 1], 2.0)) > 1
        True
    """
    net = as_mlp(model)
    if net.n_hidden == 0:
        s = float(half_side)
        return [Polygon(np.array([[-s, -s], [s, -s], [s, s], [-s, s]]), np.zeros(0, np.int8), False)]
    with torch.no_grad():
        return plane_regions(net, center, u, v, half_side)[-1]
