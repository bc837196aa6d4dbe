"""The compiled inner loop of ``regions.plane_regions``: one layer's cells of a square, cut line by line.

Why compiled: a layer's cut is thousands of tiny steps (one line across a few small polygons).
Written as vectorised torch it took ~2,900 operations for a depth-3 width-16 net, 10x Regioncam's
time on this CPU, nearly all of it per-operation overhead; as a loop here it is 1.6x.

Exact across float64's range: a crossing is solved from its two lines (the cut and the line that
carries the edge it cuts, which each vertex keeps), not interpolated between the edge's ends, and a
vertex is on a line when its value is within rounding of that value's own terms. Interpolating
between the corners of a square of half-side 1e15 put every crossing near the centre about 0.1
away from where it is (eps times the half-side), and a window scaled by the square snapped every
vertex there onto every line: 62 regions where there are 572. A line whose value at a vertex
overflows stops the cut, and ``regions.plane_regions`` refuses the square.

It lives in its own file because numba's on-disk cache (``cache=True``, compiled once per
checkout, a few seconds) is keyed on this file. ``_cut_layer`` is plain Python that numba
compiles; run as it is, it gives the same cells (a test compares them), only slower.
"""

from __future__ import annotations

import functools

import numpy as np


def cut_layer(xy, ln, off, za, zb, theta, half_side: float, tol: float, rtol: float = 0.0):
    """``_cut_layer`` compiled, its arrays made contiguous float64 and int64 so that one compiled
    version serves every call."""
    f64 = functools.partial(np.ascontiguousarray, dtype=np.float64)
    return _compiled()(f64(xy), f64(ln), np.ascontiguousarray(off, dtype=np.int64), f64(za), f64(zb), f64(theta),
                       float(half_side), float(tol), float(rtol))


def square(half_side: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The square ``|u|, |v| <= half_side`` as ``_cut_layer``'s one cell: its corners
    counter-clockwise, the line ``c0 + cu u + cv v = 0`` of the side leaving each, and offsets."""
    s = float(half_side)
    xy = np.array([[-s, -s], [s, -s], [s, s], [-s, s]], dtype=np.float64)
    ln = np.array([[s, 0.0, 1.0], [-s, 1.0, 0.0], [-s, 0.0, 1.0], [s, 1.0, 0.0]], dtype=np.float64)
    return xy, ln, np.array([0, 4])


def _compiled():
    """numba's ``_cut_layer``, made on first use in a process (numba is imported only then: most
    jobs import ``regions`` and never cut a plane). Kept on the function, not in a module global, so
    that code fingerprints (``provenance``) are the same before and after."""
    if not hasattr(_cut_layer, "jit"):
        from numba import njit

        _cut_layer.jit = njit(cache=True)(_cut_layer)
    return _cut_layer.jit


def _cut_layer(xy, ln, off, za, zb, theta, half_side, tol, rtol):
    """Cut every parent cell by the lines ``za[p, j] + zb[p, j] @ (u, v) = theta[k]`` that cross it.

    ``xy [V, 2]`` holds the parents' vertices counter-clockwise, parent ``p``'s in
    ``xy[off[p]:off[p + 1]]``, and ``ln [V, 3]`` the line ``c0 + cu u + cv v = 0`` that carries
    the edge leaving each vertex (a side of the square, or a line of an earlier cut). A line
    crosses a cell when the cell has vertices strictly on both sides of it; each parent's crossing
    lines cut its cells in the order (neuron j, kink k). A cut cell gives its part <= 0 then its
    part >= 0 (a vertex on the line belongs to both), each in the order of the cell's walk (a
    vertex, then the crossing on the edge leaving it); a part with fewer than 3 vertices (a line
    through a corner) is dropped. The cells thus come in the order of a depth-first walk, parent
    by parent.

    A crossing is where the cut line meets the line carrying the edge, solved from the two lines
    (kept on the edge), so that its rounding scales with its own coordinates and not with the
    square's: a region of size 1 near the centre of a square of half-side 1e15 is as exact as in
    a square of half-side 1. A vertex whose value on a line is within ``rtol`` of that value's
    own scale (``|c0| + |u cu| + |v cv|``) lies on it: lines through one point (a degenerate
    arrangement) meet there, not in slivers of rounding. (``rtol=0``: only exact zeros.)

    Returns the cells' vertices, edge lines and offsets (the same layout), their parents, their
    vertex means (a point inside each), whether each is bounded (no vertex within ``tol`` of the
    square's edge ``|u| = half_side`` or ``|v| = half_side``), how many vertices were put on a line
    that rounding had put beside it, and whether a line's value overflowed float64 (then the
    cells are incomplete and the caller refuses them).
    """
    def _room(a, need):  # ``a``, or a copy at least twice as long when ``need`` rows would not fit
        if need <= len(a):
            return a
        b = np.empty((max(2 * len(a), need),) + a.shape[1:], a.dtype)
        b[: len(a)] = a
        return b

    def _span(pts, a, m, c0, cu, cv, vals):  # the line's value at pts[a:a + m] into vals; min, max, snapped
        lo, hi, snapped = np.inf, -np.inf, 0
        for i in range(m):
            pu, pv = pts[a + i, 0] * cu, pts[a + i, 1] * cv
            f = c0 + (pu + pv)
            if not np.isfinite(f):  # overflowed: the caller refuses the square
                return np.nan, np.nan, snapped
            if f != 0.0 and abs(f) <= rtol * (abs(c0) + abs(pu) + abs(pv)):
                f, snapped = 0.0, snapped + 1
            vals[i] = f
            lo, hi = min(lo, f), max(hi, f)
        return lo, hi, snapped

    def _meet(p, q, f, g, e, c0, cu, cv, out, t):  # where the line (c0, cu, cv) crosses the edge p -> q on line e
        det = cu * e[2] - cv * e[1]
        u = (cv * e[0] - c0 * e[2]) / det
        v = (c0 * e[1] - cu * e[0]) / det
        slack = 1e-9 * (abs(p[0]) + abs(p[1]) + abs(q[0]) + abs(q[1]))  # the edge's own rounding, and more
        if not (min(p[0], q[0]) - slack <= u <= max(p[0], q[0]) + slack
                and min(p[1], q[1]) - slack <= v <= max(p[1], q[1]) + slack):
            r = f / (f - g)  # (near parallel, or overflowed): along the edge instead
            u, v = p[0] + r * (q[0] - p[0]), p[1] + r * (q[1] - p[1])
        out[t, 0] = min(max(u, min(p[0], q[0])), max(p[0], q[0]))
        out[t, 1] = min(max(v, min(p[1], q[1])), max(p[1], q[1]))

    def _overflowed(n_snapped):  # no cells, and the flag the caller refuses the square on
        return (np.empty((0, 2)), np.empty((0, 3)), np.zeros(1, np.int64), np.empty(0, np.int64), np.zeros((0, 2)),
                np.ones(0, np.bool_), n_snapped, True)

    n_par, width, n_kinks = len(off) - 1, za.shape[1], len(theta)
    out_xy, out_ln = np.empty((4 * len(xy), 2)), np.empty((4 * len(xy), 3))
    out_off = np.zeros(4 * n_par + 1, np.int64)
    out_par = np.empty(4 * n_par, np.int64)
    n_out, n_snapped = 0, 0
    cur, nxt = np.empty((64, 2)), np.empty((64, 2))  # this step's cells and the next step's
    cur_ln, nxt_ln = np.empty((64, 3)), np.empty((64, 3))  # their edges' lines
    on = np.empty(64, np.bool_)  # whether each vertex of a part lies on the cut line
    cur_off, nxt_off = np.zeros(16, np.int64), np.zeros(16, np.int64)
    vals, lines = np.empty(64), np.empty(width * n_kinks, np.int64)
    for p in range(n_par):
        start, stop = off[p], off[p + 1]
        vals = _room(vals, stop - start)
        n_lines = 0
        for j in range(width):
            for k in range(n_kinks):
                lo, hi, _ = _span(xy, start, stop - start, za[p, j] - theta[k], zb[p, j, 0], zb[p, j, 1], vals)
                if not (np.isfinite(lo) and np.isfinite(hi)):
                    return _overflowed(n_snapped)
                if lo < 0 and hi > 0:
                    lines[n_lines] = j * n_kinks + k
                    n_lines += 1
        cur, cur_ln = _room(cur, stop - start), _room(cur_ln, stop - start)
        cur[: stop - start] = xy[start:stop]
        cur_ln[: stop - start] = ln[start:stop]
        cur_off[1] = stop - start
        n_cells = 1
        for s in range(n_lines):
            j, k = lines[s] // n_kinks, lines[s] % n_kinks
            c0, cu, cv = za[p, j] - theta[k], zb[p, j, 0], zb[p, j, 1]
            # Each part has at most one more vertex than its cell.
            need = 2 * (cur_off[n_cells] + n_cells)
            nxt, nxt_ln, on = _room(nxt, need), _room(nxt_ln, need), _room(on, need)
            nxt_off = _room(nxt_off, 2 * n_cells + 1)
            n_next, t = 0, 0
            for c in range(n_cells):
                a, m = cur_off[c], cur_off[c + 1] - cur_off[c]
                vals = _room(vals, m)
                lo, hi, snapped = _span(cur, a, m, c0, cu, cv, vals)
                n_snapped += snapped
                if not (np.isfinite(lo) and np.isfinite(hi)):
                    return _overflowed(n_snapped)
                if not (lo < 0 and hi > 0):
                    nxt[t: t + m] = cur[a: a + m]
                    nxt_ln[t: t + m] = cur_ln[a: a + m]
                    t += m
                    n_next += 1
                    nxt_off[n_next] = t
                    continue
                for above in (False, True):
                    first = t
                    for i in range(m):
                        f, i1 = vals[i], (i + 1) % m
                        g = vals[i1]
                        if (f >= 0) if above else (f <= 0):
                            nxt[t] = cur[a + i]
                            nxt_ln[t] = cur_ln[a + i]
                            on[t] = f == 0.0
                            t += 1
                        if f * g < 0:
                            _meet(cur[a + i], cur[a + i1], f, g, cur_ln[a + i], c0, cu, cv, nxt, t)
                            nxt_ln[t] = cur_ln[a + i]
                            on[t] = True
                            t += 1
                    if t - first < 3:
                        t = first
                        continue
                    for i in range(first, t):  # an edge between two points of the cut line lies on it
                        if on[i] and on[first + (i + 1 - first) % (t - first)]:
                            nxt_ln[i, 0], nxt_ln[i, 1], nxt_ln[i, 2] = c0, cu, cv
                    n_next += 1
                    nxt_off[n_next] = t
            cur, nxt, cur_ln, nxt_ln, cur_off, nxt_off, n_cells = nxt, cur, nxt_ln, cur_ln, nxt_off, cur_off, n_next
        total, base = cur_off[n_cells], out_off[n_out]
        out_xy, out_ln = _room(out_xy, base + total), _room(out_ln, base + total)
        out_off = _room(out_off, n_out + n_cells + 1)
        out_par = _room(out_par, n_out + n_cells)
        out_xy[base: base + total] = cur[:total]
        out_ln[base: base + total] = cur_ln[:total]
        for c in range(n_cells):
            out_off[n_out + c + 1] = base + cur_off[c + 1]
            out_par[n_out + c] = p
        n_out += n_cells
    centre, bounded = np.zeros((n_out, 2)), np.ones(n_out, np.bool_)
    for c in range(n_out):
        a, b = out_off[c], out_off[c + 1]
        for i in range(a, b):
            centre[c] += out_xy[i] / (b - a)
            if abs(abs(out_xy[i, 0]) - half_side) <= tol or abs(abs(out_xy[i, 1]) - half_side) <= tol:
                bounded[c] = False
    end = out_off[n_out]
    return out_xy[:end], out_ln[:end], out_off[: n_out + 1], out_par[:n_out], centre, bounded, n_snapped, False
