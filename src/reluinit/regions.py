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

from dataclasses import dataclass

import numpy as np
import torch

from .nets import ACTIVATIONS, MLP

# Pre-activation values where each activation's slope changes.
KINKS = {"relu": (0.0,), "hardtanh": (-1.0, 1.0), "linear": ()}


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


def _clip(verts: torch.Tensor, count: torch.Tensor, vals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Split convex polygons (``verts [C, W, 2]``: the first ``count`` counter-clockwise, then copies
    of the first) along the zero line of an affine function given at their vertices (``vals [C, W]``):
    the parts where it is <= 0 and >= 0, ``[C, 2, W', 2]`` padded the same way, their vertex counts
    ``[C, 2]`` and the smallest count, in the vertex order of the original walk (a vertex, then the
    crossing on the edge leaving it). The padding closes each walk by itself (the first vertex
    follows the last, and an edge from it to itself crosses nothing), so no edge needs masking."""
    c, w = verts.shape[:2]
    q, fq = verts.roll(-1, 1), vals.roll(-1, 1)
    cross = vals * fq < 0
    points = verts + (vals / (vals - fq))[..., None] * (q - verts)  # read only where it crosses
    points = torch.stack([verts, points], dim=2).flatten(1, 2)
    # A vertex on the line belongs to both parts (else a line through corners would drop a part).
    side = torch.stack([vals <= 0, vals >= 0], dim=1) & (torch.arange(w, device=verts.device) < count[:, None])[:, None]
    keep = torch.stack([side, cross[:, None].expand_as(side)], dim=3).flatten(2)  # [C, 2, 2W]
    # Each part's points to its front, in order (a scatter: a sort of these short rows is slower),
    # the points dropped to a spare last column.
    dest = keep.cumsum(dim=2)
    n = dest[..., -1]
    n_min, n_max = torch.stack(torch.aminmax(n)).tolist()
    width = max(w, n_max)
    parts = points.new_empty(c, 2, 2 * w + 1, 2).scatter_(
        2, torch.where(keep, dest - 1, 2 * w)[..., None].expand(-1, -1, -1, 2), points[:, None].expand(-1, 2, -1, -1))
    parts = parts[:, :, :width]
    pad = (torch.arange(width, device=verts.device) >= n[..., None])[..., None]
    return torch.where(pad, parts[:, :, :1], parts), n, n_min


def _partition(verts, count, za, zb, kinks) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's cells: each parent cell (``verts [P, W, 2]``, padded with copies of its first
    vertex) cut in turn by every line ``za[p, j] + zb[p, j] @ (u, v) = kink`` that crosses it, in
    the order of (neuron, kink). Returns the cells' vertices (padded the same way), counts and
    parents in the order of a depth-first walk (every cut cell followed at once by its part above).

    The parents are cut independently, so step ``s`` cuts the cells of every parent by that parent's
    own ``s``-th crossing line: as many steps as the most lines crossing one parent (6 to 12 at
    widths 16 to 64 after the first layer), not one per neuron, with each cell's arithmetic what a
    loop over neurons would do. A cell's order key has one bit per line that cut its lineage (1 for
    the part above); sorting by (parent, key) gives the depth-first order."""
    dev, n_par = verts.device, len(verts)
    theta = torch.tensor(kinks, dtype=za.dtype, device=dev)
    n_lines = za.shape[1] * len(kinks)
    # The lines crossing each parent (its vertices strictly on both sides), line j * len(kinks) + k,
    # from the values at its vertices [P, W, n] taken a few parents at a time: all at once they are
    # 25 MB at width 64, out of cache (3x slower). (The products don't depend on the chunks: each
    # matrix is multiplied alone.)
    chunk = max(1, 2**18 // (verts.shape[1] * za.shape[1]))

    def extremes(i):
        at = verts[i: i + chunk] @ zb[i: i + chunk].transpose(1, 2)
        at += za[i: i + chunk, None]
        return at.amin(dim=1), at.amax(dim=1)  # (aminmax over a middle dimension is 3x slower)

    lo, hi = (torch.cat(x) for x in zip(*map(extremes, range(0, n_par, chunk))))
    crossed = ((lo[..., None] < theta) & (hi[..., None] > theta)).flatten(1)  # [P, n_lines]
    n_cross = crossed.sum(dim=1)
    steps = int(n_cross.max())
    # Each parent's crossing lines in order, step by step [S, P] (a spare step takes the others), as
    # (value at the origin, gradient) and as the bit in the order key.
    line = torch.zeros(steps + 1, n_par, dtype=torch.long, device=dev)
    line.scatter_(0, torch.where(crossed, crossed.cumsum(dim=1) - 1, steps).T,
                  torch.arange(n_lines, device=dev).expand(n_par, -1).T)
    line = line[:steps]
    coef = torch.cat([(za[..., None] - theta).flatten(1)[..., None], zb.repeat_interleave(len(kinks), dim=1)],
                     dim=2)
    coef = coef.view(-1, 3)[line + n_lines * torch.arange(n_par, device=dev)]  # [S, P, 3]
    words, ids = max(1, -(-n_lines // 62)), torch.arange(n_lines, device=dev)
    bit = torch.zeros(n_lines, words, dtype=torch.long, device=dev)
    bit[ids, ids // 62] = torch.ones_like(ids) << (61 - ids % 62)
    bits = bit[line]  # [S, P, words]

    verts, count, parent = verts.clone(), count.clone(), torch.arange(n_par, device=dev)
    key, n = torch.zeros(n_par, words, dtype=torch.long, device=dev), n_par
    for s in range(steps):
        cand = (n_cross[parent[:n]] > s).nonzero().squeeze(1)
        p, v = parent[cand], verts[cand]
        c = coef[s, p]
        vals = c[:, :1] + (v * c[:, None, 1:]).sum(dim=2)  # x bu + y bv, then the value at the origin
        lo, hi = torch.aminmax(vals, dim=1)
        cut = ((lo < 0) & (hi > 0)).nonzero().squeeze(1)
        if not len(cut):
            continue
        idx, p = cand[cut], p[cut]
        parts, n_parts, n_min = _clip(v[cut], count[idx], vals[cut])
        key_hi = key[idx] | bits[s, p]
        add, m, dead = slice(None), len(idx), None  # which cut cells add their part above
        if n_min < 3:  # a line through a corner: a part with fewer than 3 vertices is dropped
            ok = n_parts >= 3
            lo_ok = ok[:, 0]
            parts[:, 0] = torch.where(lo_ok[:, None, None], parts[:, 0], parts[:, 1])  # else the part above
            n_parts[:, 0] = torch.where(lo_ok, n_parts[:, 0], n_parts[:, 1])
            key[idx] = torch.where(lo_ok[:, None], key[idx], key_hi)
            add, dead = ok.all(dim=1).nonzero().squeeze(1), ~ok.any(dim=1)
            m = len(add)
        if parts.shape[2] > verts.shape[1]:
            verts = torch.cat([verts, verts[:, :1].expand(-1, parts.shape[2] - verts.shape[1], -1)], dim=1)
        verts[idx], count[idx] = parts[:, 0], n_parts[:, 0]
        if n + m > len(verts):
            cap = max(2 * len(verts), n + m)
            verts, count, parent, key = (torch.cat([t, t.new_zeros((cap - len(t),) + t.shape[1:])])
                                         for t in (verts, count, parent, key))
        new = slice(n, n + m)
        verts[new], count[new], parent[new], key[new] = parts[add, 1], n_parts[add, 1], p[add], key_hi[add]
        n += m
        if dead is not None and dead.any():  # both parts degenerate: the cell is gone (never seen; kept exact)
            alive = torch.ones(n, dtype=torch.bool, device=dev)
            alive[idx[dead]] = False
            verts, count, parent, key = (t[:n][alive] for t in (verts, count, parent, key))
            n = len(verts)
    order = torch.arange(n, device=dev)
    for w in reversed(range(words)):  # least significant word first, stable
        order = order[torch.sort(key[order, w], stable=True).indices]
    order = order[torch.sort(parent[order], stable=True).indices]
    return verts[order], count[order], parent[order]


@torch.inference_mode()  # no autograd bookkeeping: a fifth of the time of its small tensor operations
def plane_regions(net: MLP, origin, e1, e2, half_side: float) -> list[list[Polygon]]:
    """Partition the square ``|u|, |v| <= half_side`` of the plane ``origin + u e1 + v e2`` into
    the regions of the first 1, 2, ... hidden layers. Returns one list of polygons per layer.

    Exact in float64 on the net's device, vectorised over cells: within a layer every neuron's
    pre-activation is one affine function of (u, v) on each cell of the layers before (its
    ``parent``), so each neuron's line in turn cuts exactly the cells descended from parents it
    crosses (found for all neurons at once from the parents' vertices; a part of a cell lies in its
    parent), all parents' cells at once (``_partition``). Cells come in the order of a depth-first
    walk (a cut cell is followed by its part above the line); a part with fewer than 3 vertices (a
    line through a corner) is dropped.
    """
    dev = net.weights[0].device
    f64 = lambda t: torch.as_tensor(np.asarray(t.detach().cpu() if torch.is_tensor(t) else t),  # noqa: E731
                                    dtype=torch.float64).to(dev)
    s = float(half_side)
    kinks = KINKS[net.activation]
    verts = torch.tensor([[[-s, -s], [s, -s], [s, s], [-s, s]]], dtype=torch.float64, device=dev)
    count = torch.tensor([4], device=dev)
    # The cells' activations as affine maps h = a + bmat @ (u, v), and every hidden neuron's piece.
    a, bmat = f64(origin)[None], torch.stack([f64(e1), f64(e2)], dim=1)[None]
    pattern = torch.zeros(1, 0, dtype=torch.int8, device=dev)
    out = []
    for w, c in list(zip(net.weights, net.biases))[: net.n_hidden]:
        w = f64(w)
        za = a @ w.T + (f64(c) if c is not None else 0.0)  # z = za + zb @ (u, v) on each parent cell
        zb = torch.einsum("ij,pjk->pik", w, bmat)
        verts, count, parent = _partition(verts, count, za, zb, kinks)
        valid = torch.arange(verts.shape[1], device=dev) < count[:, None]
        centre = torch.where(valid[..., None], verts, 0.0).sum(dim=1) / count[:, None]
        za, zb = za[parent], zb[parent]
        code = _codes(za + (zb @ centre[:, :, None]).squeeze(2), net.activation)
        a, bmat = _post(za, zb, code, net.activation)
        pattern = torch.cat([pattern[parent], code], dim=1)
        # torch.isclose's test (rtol 1e-5, atol 1e-8) written out (isclose is slower); the padding
        # repeats a vertex, so it needs no mask.
        bounded = ~((verts.abs() - s).abs() <= 1e-8 + 1e-5 * abs(s)).flatten(1).any(dim=1)
        v_np, n_np, p_np, b_np = verts.cpu().numpy(), count.tolist(), pattern.cpu().numpy(), bounded.tolist()
        out.append([Polygon(v_np[i, :n], p_np[i], b) for i, (n, b) in enumerate(zip(n_np, b_np))])
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
