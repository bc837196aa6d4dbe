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
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from . import planecut
from .nets import MLP, as_mlp, check_finite, in_float64

# Pre-activation values where each activation's slope changes.
KINKS = {"relu": (0.0,), "leaky_relu": (0.0,), "hardtanh": (-1.0, 1.0), "linear": ()}


def _codes(z: torch.Tensor, activation: str) -> torch.Tensor:
    """Which linear piece of the activation each pre-activation is on (an int8 per neuron)."""
    code = torch.zeros_like(z, dtype=torch.int8)
    for theta in KINKS[activation]:
        code += (z > theta).to(torch.int8)
    return code


def _slope(code: torch.Tensor, activation: str, dtype, leak: float = 0.01) -> torch.Tensor:
    """The activation's slope on each neuron's piece (``leak``: a leaky ReLU's slope below 0)."""
    if activation == "relu":
        return code.to(dtype)
    if activation == "leaky_relu":
        return code.to(dtype) + leak * (1 - code.to(dtype))
    if activation == "hardtanh":
        return (code == 1).to(dtype)
    if activation == "linear":
        return torch.ones_like(code, dtype=dtype)
    raise ValueError(f"{activation!r} is not piecewise linear")


def _post(a: torch.Tensor, b: torch.Tensor, code: torch.Tensor, activation: str, leak: float = 0.01):
    """Affine map ``a + b t`` of the activations, given each neuron's piece. ``b`` may carry one
    more trailing dimension than ``a`` (several input directions)."""
    slope = _slope(code, activation, a.dtype, leak)
    shift = (code == 2).to(a.dtype) - (code == 0).to(a.dtype) if activation == "hardtanh" else 0.0
    return a * slope + shift, b * (slope if b.dim() == a.dim() else slope[..., None])


def _affine(c: torch.Tensor | None, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``a @ w.T + c``; a layer without bias (``c`` None) adds nothing."""
    return a @ w.T if c is None else torch.addmm(c, a, w.T)


def piecewise_linear(net: MLP, what: str) -> None:
    """Refuse, naming the activation, a net whose activation has no linear pieces (tanh, ELU):
    it has no linear regions to count, and ``what`` would fail deep inside otherwise."""
    if net.activation not in KINKS:
        raise TypeError(f"{what} needs a piecewise-linear activation (ReLU, LeakyReLU, Hardtanh); this net's is "
                        f"{net.activation!r}, which has no linear regions")


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
    # Per line, how many kink crossings coincided (within ``split_lines``'s ``rtol``) with another
    # crossing or with a cut of an earlier layer, plus intervals on which a neuron lies on its kink
    # throughout: 0 on a line in general position.
    coincident: torch.Tensor | None = None

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


def _tolerance(t: torch.Tensor, rtol: float) -> torch.Tensor:
    """``rtol * max(1, |t|)``, and 0 at an infinite ``t`` (an unbounded end coincides with nothing)."""
    return rtol * torch.where(torch.isfinite(t), t.abs().clamp_min(1.0), torch.zeros_like(t))


def _norms(x: torch.Tensor) -> torch.Tensor:
    """Each row's Euclidean norm, also where its squares overflow or underflow float64 (a row of
    1e200s has norm 1.4e200, not inf): a row whose plain norm is out of range is taken again,
    divided by its largest entry."""
    n = torch.linalg.vector_norm(x, dim=1)
    redo = ~torch.isfinite(n) | (n < 1e-140)
    if x.shape[1] and bool(redo.any()):
        y = x[redo]
        m = y.abs().amax(dim=1)
        n[redo] = m * torch.linalg.vector_norm(y / torch.where(m > 0, m, 1.0)[:, None], dim=1)
    return n


def _finite_layer(l: int, *maps: torch.Tensor) -> None:
    """A ``ValueError`` naming layer ``l + 1`` when its pre-activations' affine maps overflow float64
    (finite weights of 1e80 a layer, a line from -1e308 to 1e308): the counts after it would be of
    NaNs, not of the net's regions."""
    if not all(bool(torch.isfinite(m).all()) for m in maps):
        raise ValueError(f"layer {l + 1}'s pre-activations overflow float64 (NaN or inf) on this line or plane: "
                         "the weights or the inputs are too large; scale them down")


def split_lines(net: MLP, x0: torch.Tensor, x1: torch.Tensor, t_min: float = 0.0, t_max: float = 1.0,
                keep_pattern: bool = True, max_intervals: int | None = None, rtol: float = 1e-11) -> LineSplit:
    """Split the lines from ``x0[i]`` to ``x1[i]`` (``[L, n_0]``) on ``[t_min, t_max]`` exactly.

    ``t_min=-math.inf, t_max=math.inf`` splits the whole (infinite) line: every kink is a root of
    an affine function of ``t``, found without bounding ``t``, and the first and last intervals
    are unbounded (their lengths infinite where the map is not constant).

    Degenerate arrangements: crossings closer than ``rtol * max(1, |t|)`` to each other or to an
    earlier layer's cut are one breakpoint (boundaries through one point, as every first-layer
    boundary of a net without biases passes through the origin, are computed with rounding, and
    would otherwise leave slivers whose patterns are noise), and a neuron whose pre-activation is
    within ``rtol`` (relative to its scale) of its kink at an interval's midpoint lies on the kink
    throughout (a line inside a boundary, a zero weight row). ``coincident`` counts both per line.
    ``rtol=1e-11`` is far above float64 rounding and below float32's, where only exactly equal
    crossings merge: degenerate nets need float64.

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
    coincident = torch.zeros(n_lines, dtype=torch.long, device=device)
    weights = net.weights
    for l, (w, c) in enumerate(zip(weights, net.biases)):
        if max_intervals is not None and len(t0) > max_intervals:
            break
        za, zb = _affine(c, a, w), b @ w.T
        _finite_layer(l, za, zb)
        if net.readout and l == len(weights) - 1:
            a, b = za, zb
            break
        # Every crossing of a kink strictly inside an interval (by more than the tolerance) is a cut.
        roots = torch.cat([(theta - za) / zb for theta in kinks], dim=1) if kinks else za[:, :0]
        if rtol > 0:
            # within rtol * max(1, |end|) of an interval's end is at that end (comparisons only: no
            # float copy of the [intervals, neurons] roots, the largest thing a layer holds)
            tol0, tol1 = _tolerance(t0, rtol)[:, None], _tolerance(t1, rtol)[:, None]
            lo, hi = t0[:, None], t1[:, None]
            inside = (roots > lo + tol0) & (roots < hi - tol1)
            # crossings at an earlier layer's cut (not at the range's own ends) are that cut
            at_end = ((roots >= lo - tol0) & (roots <= lo + tol0) & (lo > t_min)) | \
                ((roots >= hi - tol1) & (roots <= hi + tol1) & (hi < t_max))
            coincident.index_add_(0, line, at_end.sum(dim=1))
        else:
            inside = (roots > t0[:, None]) & (roots < t1[:, None])
        sk, st = _cut_points(t0, t1, roots, inside)
        # Crossings within the tolerance of the one before them are that one.
        same = torch.zeros(len(st), dtype=torch.bool, device=device)
        if rtol > 0:
            same[1:] = (sk[1:] == sk[:-1]) & (st[1:] - st[:-1] <= _tolerance(st[1:], rtol))
        else:
            same[1:] = (sk[1:] == sk[:-1]) & (st[1:] == st[:-1])
        if same.any():
            coincident.index_add_(0, line[sk[same]], torch.ones_like(sk[same]))
            sk, st = sk[~same], st[~same]
        keep = sk[1:] == sk[:-1]
        k_new = sk[:-1][keep]
        t0, t1 = st[:-1][keep], st[1:][keep]
        line, za, zb = line[k_new], za[k_new], zb[k_new]
        patterns = [p[k_new] for p in patterns]
        mid = _interior_point(t0, t1)[:, None]
        z = za + mid * zb
        if rtol > 0:  # a neuron on its kink all along an interval is on it, not on the side rounding says
            reach = _norms(a)[k_new] + mid[:, 0].abs() * _norms(b)[k_new]
            wn, cn = _norms(w), (c.abs() if c is not None else torch.zeros_like(w[:, 0]))
            bound = rtol * (float(reach.max()) * float(wn.max()) + float(cn.max())) if len(reach) else 0.0
            if not math.isfinite(bound):
                raise ValueError(f"layer {l + 1}'s weights (row norm up to {float(wn.max()):.3g}) times its inputs' "
                                 f"reach on this line ({float(reach.max()):.3g}) overflow float64, so which neurons sit "
                                 "on a kink cannot be told; scale the weights or the inputs down")
            for theta in kinks:
                # candidates within a bound of every entry's tolerance, then each checked exactly
                i, j = ((z >= theta - bound) & (z <= theta + bound)).nonzero(as_tuple=True)
                on = (z[i, j] - theta).abs() <= rtol * (reach[i] * wn[j] + cn[j])
                if on.any():
                    i, j = i[on], j[on]
                    coincident.index_add_(0, line[i], torch.ones_like(i))
                    z[i, j] = theta
        code = _codes(z, net.activation)
        if keep_pattern:
            patterns.append(code)
        a, b = _post(za, zb, code, net.activation, net.negative_slope)
        for out, slope in ((lengths_pre, zb), (lengths_post, b)):
            norm = _norms(slope)
            seg = torch.where(norm > 0, (t1 - t0) * norm, torch.zeros_like(norm))  # no inf * 0
            out.append(torch.zeros(n_lines, dtype=dtype, device=device).index_add_(0, line, seg))
    pattern = torch.cat(patterns, dim=1) if patterns else torch.zeros(len(t0), 0, dtype=torch.int8, device=device)
    stack = lambda xs: torch.stack(xs) if xs else torch.zeros(0, n_lines, dtype=dtype, device=device)  # noqa: E731
    return LineSplit(line, t0, t1, pattern, a, b, n_lines, stack(lengths_pre), stack(lengths_post), coincident)


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
        z = _affine(c, h, w)
        gz = torch.einsum("ij,pjk->pik", w, jac)  # ∂z/∂x, [P, n, n0]
        gnorm = gz.norm(dim=2)
        gap = z[:, :, None] - kinks  # signed distance in z to each kink
        nearest = gap.abs().argmin(dim=2, keepdim=True)
        gap = gap.gather(2, nearest).squeeze(2)
        d = torch.where(gnorm > 0, gap.abs() / gnorm, torch.full_like(gnorm, float("inf")))
        dists.append(d)
        normals.append(-torch.sign(gap)[:, :, None] * gz / gnorm.clamp_min(1e-300)[:, :, None])
        h = net.act(z)
        jac = _slope(_codes(z, net.activation), net.activation, x.dtype, net.negative_slope)[:, :, None] * gz
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

    @property
    def centre(self) -> np.ndarray:
        """The mean of the vertices: a point inside (the polygon is convex), in (u, v)."""
        return self.vertices.mean(axis=0)


class Partition(list):
    """The polygons of one layer's partition of a square (a list of ``Polygon``), with the plane
    they lie in (``origin + u e1 + v e2``), the net, and ``coincident``: how many vertices met a
    line they were within rounding of (0 in general position; more where boundaries run through
    one point, as they do at the origin of a net without biases)."""

    def __init__(self, polygons, net: MLP, plane, layer: int, coincident: int = 0):
        super().__init__(polygons)
        self.net, self.plane, self.layer, self.coincident = net, plane, layer, coincident

    def points(self, uv: np.ndarray) -> torch.Tensor:
        """Input points of plane coordinates ``uv [P, 2]``."""
        origin, e1, e2 = (torch.as_tensor(np.asarray(x), dtype=torch.float64) for x in self.plane)
        uv = torch.as_tensor(np.asarray(uv), dtype=torch.float64)
        return origin + uv[:, :1] * e1 + uv[:, 1:] * e2

    def affine_maps(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each polygon's affine map of the net's output, ``W [R, n_out, n_0]`` and ``b [R, n_out]``
        in input coordinates (``affine_maps``; only the layers up to this partition's, and with a
        readout the readout after them, when this is the last layer)."""
        patterns = np.stack([p.pattern for p in self]) if len(self) else np.zeros((0, 0), np.int8)
        return affine_maps(self.net, patterns)

    def plot(self, ax=None, values=None, **style):
        """Draw the polygons (``plot_partition``); ``values`` colour them, one number each."""
        return plot_partition(self, ax=ax, values=values, **style)


@torch.inference_mode()
def plane_regions(net: MLP, origin, e1, e2, half_side: float, rtol: float = 1e-11,
                  max_bytes: float = 4 * 2**30) -> list[Partition]:
    """Partition the square ``|u|, |v| <= half_side`` of the plane ``origin + u e1 + v e2`` into
    the regions of the first 1, 2, ... hidden layers. Returns one ``Partition`` per layer.

    Exact in float64: within a layer every neuron's pre-activation is one affine function of
    (u, v) on each cell of the layers before (its ``parent``), so each neuron's line in turn cuts
    the cells of the parents it crosses (``planecut.cut_layer``, a compiled loop). Cells come in
    the order of a depth-first walk (a cut cell is followed by its part above the line); a part
    with fewer than 3 vertices (a line through a corner) is dropped, a crossing is solved from its
    two lines (so its rounding is that of its own coordinates, whatever the square's size), and a
    vertex whose value on a line is within ``rtol`` of that value's terms is on it (lines through
    one point meet there, not in slivers of rounding). A square whose vertices' values overflow
    float64 raises ``ValueError``.
    The layers' affine maps are computed on the net's device; the cutting, thousands of steps on a
    few small polygons each, runs on the host, where a step costs nanoseconds and not a kernel
    launch. A layer whose cells' maps would take more than ``max_bytes`` raises ``MemoryError``
    before it is allocated.
    """
    dev = net.weights[0].device
    f64 = lambda t: torch.as_tensor(np.asarray(t.detach().cpu() if torch.is_tensor(t) else t),  # noqa: E731
                                    dtype=torch.float64).to(dev)
    s = float(half_side)
    theta = np.array(KINKS[net.activation], dtype=np.float64)
    xy, ln, off = planecut.square(s)
    # The cells' activations as affine maps h = a + bmat @ (u, v), and every hidden neuron's piece.
    a, bmat = f64(origin)[None], torch.stack([f64(e1), f64(e2)], dim=1)[None]
    pattern = torch.zeros(1, 0, dtype=torch.int8, device=dev)
    out, coincident = [], 0
    for l, (w, c) in enumerate(list(zip(net.weights, net.biases))[: net.n_hidden]):
        w = f64(w)
        za = a @ w.T + (f64(c) if c is not None else 0.0)  # z = za + zb @ (u, v) on each parent cell
        zb = torch.einsum("ij,pjk->pik", w, bmat)
        _finite_layer(l, za, zb)
        # The edge test of `bounded` is torch.isclose's (rtol 1e-5, atol 1e-8), written out.
        xy, ln, off, parent, centre, bounded, snapped, overflow = planecut.cut_layer(
            xy, ln, off, za.cpu().numpy(), zb.cpu().numpy(), theta, s, 1e-8 + 1e-5 * abs(s), rtol)
        if overflow:
            raise ValueError(f"layer {l + 1}'s pre-activations overflow float64 (NaN or inf) at a vertex of the "
                             f"square (half_side={s:g}): the weights or the square are too large; use a smaller "
                             "half_side or scale the weights down")
        coincident += int(snapped)
        need = len(parent) * (w.shape[0] * 3 * 8 * 2 + pattern.shape[1] + w.shape[0])
        if need > max_bytes:
            raise MemoryError(f"layer {l + 1} of the plane's partition has {len(parent):,} regions of {w.shape[0]} "
                              f"neurons, whose maps take about {need / 2**30:.1f} GiB, over max_bytes="
                              f"{max_bytes / 2**30:.1f} GiB; use a smaller half_side or raise max_bytes")
        parent = torch.from_numpy(parent).to(dev)
        za, zb = za[parent], zb[parent]
        code = _codes(za + (zb @ torch.from_numpy(centre).to(dev)[:, :, None]).squeeze(2), net.activation)
        a, bmat = _post(za, zb, code, net.activation, net.negative_slope)
        pattern = torch.cat([pattern[parent], code], dim=1)
        ends = off.tolist()  # (slices of lists: np.split is 20x slower)
        verts = [xy[i:j] for i, j in itertools.pairwise(ends)]
        polygons = map(Polygon, verts, pattern.cpu().numpy(), bounded.tolist())
        out.append(Partition(polygons, net, (origin, e1, e2), l + 1, coincident))
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

def real_points(name: str, x) -> torch.Tensor:
    """``x`` as a real tensor (not yet cast), or a ``ValueError`` naming it: a complex input would
    lose its imaginary part without a word."""
    t = x.detach() if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))
    if t.is_complex() or t.dtype == torch.bool or not (t.is_floating_point() or t.dtype in _INTEGERS):
        raise ValueError(f"{name} must hold real numbers; got {str(t.dtype).removeprefix('torch.')}")
    return t


_INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _finite_points(name: str, x, d: int, dtype) -> torch.Tensor:
    """``x`` as a tensor of shape ``(d,)`` or ``(n, d)`` with ``n >= 1``, real and finite, or a
    ``ValueError`` saying so."""
    t = real_points(name, x).to(dtype)
    if t.dim() not in (1, 2) or t.shape[-1] != d or t.shape[0] == 0:
        raise ValueError(f"{name} must have shape ({d},) for one line or (n, {d}) for n >= 1 lines (the model takes "
                         f"{d} inputs); got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite; it holds NaN or inf")
    return t


# The largest ``rtol`` the region functions take: a tolerance for float64 rounding (ours), far above
# it; a larger one would merge real crossings (0.5 makes one region of a line that crosses 12).
MAX_RTOL = 1e-6


def _rtol(rtol) -> float:
    """``rtol`` as a float in [0, MAX_RTOL], or a ``ValueError`` saying what it is for."""
    r = float(rtol) if isinstance(rtol, numbers.Real) and not isinstance(rtol, bool) else math.nan
    if not 0.0 <= r <= MAX_RTOL:
        raise ValueError(f"rtol must be a number from 0 to {MAX_RTOL:g} (a tolerance for float64 rounding: "
                         f"crossings closer than it count once; 1e-11 by default); got {rtol!r}")
    return r


def _t_range(t_min: float, t_max: float) -> None:
    if math.isnan(t_min) or math.isnan(t_max) or not t_min < t_max or t_min == math.inf or t_max == -math.inf:
        raise ValueError(f"t_min must be below t_max (either may be infinite: the whole line by default); "
                         f"got t_min={t_min}, t_max={t_max}")


@dataclass
class LineRegions:
    """The exact regions of a net along one line ``x0 + t (x1 - x0)``: ``breakpoints`` (the ``t``
    where the activation pattern changes, in order), the ``intervals`` between them (``t_min`` and
    ``t_max`` at the ends, infinite for the whole line), each interval's activation ``pattern``
    (one int8 per hidden neuron: which piece of its activation it is on) and ``coincident``: how
    many boundary crossings coincided within rounding (0 for a line in general position; a line
    through the origin of a net without biases meets every first-layer boundary at one point)."""

    breakpoints: np.ndarray
    intervals: np.ndarray
    patterns: np.ndarray
    coincident: int = 0

    @property
    def count(self) -> int:
        """The number of linear regions the line crosses (intervals of distinct consecutive patterns)."""
        return len(self.intervals)


def exact_net(model, what: str) -> MLP:
    """``model`` as an ``MLP`` an exact measurement can trust, or a ``ValueError`` saying why not:
    piecewise linear (``piecewise_linear``), every weight and bias finite (the layer named), and in
    float64: a model in another precision is measured on a float64 copy (exact geometry in half
    precision is not exact: a float16 net counts other regions than the same net in float64)."""
    net = as_mlp(model)
    piecewise_linear(net, what)
    check_finite(net, what)
    return in_float64(net)


def regions_on_line(model, x0, x1, t_min: float = -math.inf, t_max: float = math.inf, rtol: float = 1e-11):
    """The exact linear regions of ``model`` (any ``nn.Sequential`` that ``nets.as_mlp`` reads, or
    an ``MLP``) along the line ``x0 + t (x1 - x0)`` for ``t_min <= t <= t_max`` (the whole line by
    default), in float64 whatever the model's precision (``exact_net``). ``x0``, ``x1`` of
    shape ``(d,)`` give one ``LineRegions``; ``(n, d)`` give a list of ``n``, all split in one
    batched pass (many lines cost little more than one). Crossings within ``rtol * max(1, |t|)`` of
    each other are one breakpoint (``split_lines``), so boundaries through one point count once.

        >>> model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
        >>> regions_on_line(model.double(), torch.zeros(2), torch.ones(2)).count  # doctest: +SKIP
        17
    """
    net = exact_net(model, "regions_on_line")
    rtol = _rtol(rtol)
    d, dtype = net.widths[0], net.weights[0].dtype
    x0, x1 = _finite_points("x0", x0, d, dtype), _finite_points("x1", x1, d, dtype)
    if x0.shape != x1.shape:
        raise ValueError(f"x0 and x1 must have the same shape, one row per line; got {tuple(x0.shape)} and "
                         f"{tuple(x1.shape)}")
    _t_range(t_min, t_max)
    one = x0.dim() == 1
    x0, x1 = x0.reshape(-1, d), x1.reshape(-1, d)
    same = (x0 == x1).all(dim=1)
    if same.any():
        raise ValueError(f"x1 must differ from x0 (a line needs a direction); line {int(same.nonzero()[0, 0])} "
                         f"has x1 == x0")
    with torch.no_grad():
        split = split_lines(net, x0, x1, t_min, t_max, rtol=rtol)
    line, pattern = split.line.cpu().numpy(), split.pattern.cpu().numpy()
    t0, t1 = split.t0.cpu().numpy(), split.t1.cpu().numpy()
    coincident = split.coincident.cpu().numpy()
    # An interval whose pattern equals its neighbour's on the same line is one region with it.
    new = np.ones(len(t0), dtype=bool)
    new[1:] = (line[1:] != line[:-1]) | (pattern[1:] != pattern[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(t0)) - 1
    bounds = np.searchsorted(line[starts], np.arange(len(x0) + 1))  # intervals come line by line
    lo, hi = t0[starts], t1[ends]
    result = [LineRegions(lo[a + 1:b], np.stack([lo[a:b], hi[a:b]], axis=1), pattern[starts[a:b]], int(k))
              for a, b, k in zip(bounds[:-1], bounds[1:], coincident)]
    return result[0] if one else result


def plane_partition(model, center, u, v, half_side: float, per_layer: bool = False, rtol: float = 1e-11,
                    max_bytes: float = 4 * 2**30):
    """The exact partition into linear regions of the square ``|a|, |b| <= half_side`` of the plane
    ``center + a u + b v``, for ``model`` (any ``nn.Sequential`` that ``nets.as_mlp`` reads): a
    ``Partition``, a list of convex polygons in (a, b) coordinates, each with its activation
    pattern, and with the regions' affine maps (``.affine_maps()``) and a plot (``.plot()``).
    ``per_layer=True`` gives one ``Partition`` per hidden layer (the regions of layers 1..l).
    Computed in float64; boundaries through one point meet there (``plane_regions``'s ``rtol``),
    and a partition whose maps would take more than ``max_bytes`` raises ``MemoryError`` first.

        >>> model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
        >>> len(plane_partition(model, [0, 0], [1, 0], [0, 1], 2.0)) > 1
        True
    """
    net = exact_net(model, "plane_partition")
    rtol = _rtol(rtol)
    d = net.widths[0]
    center, u, v = (_finite_points(name, x, d, torch.float64) for name, x in (("center", center), ("u", u), ("v", v)))
    for name, x in (("center", center), ("u", u), ("v", v)):
        if x.dim() != 1:
            raise ValueError(f"{name} must have shape ({d},): one plane per call; got {tuple(x.shape)}")
    if torch.linalg.matrix_rank(torch.stack([u, v])) < 2:
        raise ValueError("u and v must be linearly independent (they span the plane); got parallel or zero vectors")
    s = float(half_side)
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"half_side must be a positive finite number; got {half_side}")
    if net.n_hidden == 0:
        square = Polygon(np.array([[-s, -s], [s, -s], [s, s], [-s, s]]), np.zeros(0, np.int8), False)
        layers = [Partition([square], net, (center, u, v), 0)]
    else:
        with torch.no_grad():
            layers = plane_regions(net, center, u, v, s, rtol=rtol, max_bytes=max_bytes)
    return layers if per_layer else layers[-1]


def affine_maps(model, patterns) -> tuple[torch.Tensor, torch.Tensor]:
    """The net restricted to each region: ``W [R, n_out, n_0]`` and ``b [R, n_out]`` with output
    ``W x + b`` for every input ``x`` of the region of each pattern (``patterns [R, n]``, as
    ``LineRegions.patterns`` or a ``Polygon.pattern`` give them). Patterns of every hidden neuron
    give the net's output (its readout, if any); patterns of the first layers only, the
    activations of the last of them. In float64 whatever the model's precision (``exact_net``), on
    its device."""
    net = exact_net(model, "affine_maps")
    p = _codes_given(patterns, net.activation)
    hidden = [w.shape[0] for w in net.weights[: net.n_hidden]]
    ends = np.cumsum([0] + hidden)
    if p.dim() != 2 or p.shape[1] not in ends[1:].tolist() + ([0] if not hidden else []):
        raise ValueError(f"patterns must have shape (R, n) with n the neurons of the first hidden layers, one of "
                         f"{ends[1:].tolist()}; got {tuple(p.shape)}")
    dtype, dev = net.weights[0].dtype, net.weights[0].device
    p = p.to(dev)
    n_layers = int(np.searchsorted(ends, p.shape[1]))
    W = torch.eye(net.widths[0], dtype=dtype, device=dev).expand(len(p), -1, -1)
    b = torch.zeros(len(p), net.widths[0], dtype=dtype, device=dev)
    last = n_layers + int(net.readout and n_layers == net.n_hidden)  # the readout after every hidden layer
    with torch.no_grad():
        for l, (w, c) in list(enumerate(zip(net.weights, net.biases)))[:last]:
            W, b = torch.einsum("ij,rjk->rik", w, W), b @ w.T + (c if c is not None else 0.0)
            if l < n_layers:
                b, W = _post(b, W, p[:, ends[l]:ends[l + 1]], net.activation, net.negative_slope)
    return W, b


def _codes_given(patterns, activation: str) -> torch.Tensor:
    """``patterns`` as int8 codes, each one of the activation's pieces (0..number of kinks: 0 and 1
    for ReLU, 0, 1 and 2 for hard-tanh), or a ``ValueError`` naming the first other value: a code of
    no piece gives the map of no region."""
    p = real_points("patterns", patterns.cpu() if torch.is_tensor(patterns) else patterns)
    top = len(KINKS[activation])
    bad = (p != p.round()) | (p < 0) | (p > top) if p.numel() else p.bool()
    if bad.any():
        value = p[bad][0].item()
        raise ValueError(f"patterns must hold each neuron's piece of the {activation} activation, a whole number "
                         f"from 0 to {top} (as LineRegions.patterns and Polygon.pattern give them); got {value:g}")
    return p.to(torch.int8)


def plot_partition(polygons, ax=None, values=None, cmap: str = "viridis", edgecolor: str = "black",
                   linewidth: float = 0.3, **style):
    """Draw polygons (a ``Partition``, or any list of ``Polygon``) with matplotlib: each a patch,
    coloured by ``values`` (one number per polygon, e.g. an output at its centre) or in random
    pastel colours. Returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    ax = ax if ax is not None else plt.gca()
    verts = [p.vertices for p in polygons]
    if values is None:
        colours = np.random.default_rng(0).uniform(0.35, 0.95, size=(len(verts), 3))
        patches = PolyCollection(verts, facecolors=colours, edgecolors=edgecolor, linewidths=linewidth, **style)
    else:
        patches = PolyCollection(verts, array=np.asarray(values, dtype=float), cmap=cmap, edgecolors=edgecolor,
                                 linewidths=linewidth, **style)
    ax.add_collection(patches)
    if verts:
        allv = np.concatenate(verts)
        ax.set_xlim(allv[:, 0].min(), allv[:, 0].max())
        ax.set_ylim(allv[:, 1].min(), allv[:, 1].max())
    ax.set_aspect("equal")
    return ax
