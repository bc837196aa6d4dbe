"""The compiled inner loop of ``regions.plane_regions``: one layer's cells of a square, cut line by line.

Why compiled: a layer's cut is thousands of tiny steps (one line across a few small polygons).
Written as vectorised torch it took ~2,900 operations for a depth-3 width-16 net, 10x Regioncam's
time on this CPU, nearly all of it per-operation overhead; as a loop here it is 1.6x. The cuts are
the same float64 expressions in the same order as in the vectorised code it replaced, so the
polygons are the same bit for bit (108 nets compared). One step differs: which lines cross a parent
was read from a batched matrix product, whose kernel may round differently; here it is the cut's
own expression, which can differ only where a vertex lies within rounding of a line.

It lives in its own file because numba's on-disk cache (``cache=True``, compiled once per
checkout, a few seconds) is keyed on this file. ``_cut_layer`` is plain Python that numba
compiles; run as it is, it gives the same cells (a test compares them), only slower.
"""

from __future__ import annotations

import functools

import numpy as np


def cut_layer(xy, off, za, zb, theta, half_side: float, tol: float, rtol: float = 0.0):
    """``_cut_layer`` compiled, its arrays made contiguous float64 and int64 so that one compiled
    version serves every call."""
    f64 = functools.partial(np.ascontiguousarray, dtype=np.float64)
    return _compiled()(f64(xy), np.ascontiguousarray(off, dtype=np.int64), f64(za), f64(zb), f64(theta),
                       float(half_side), float(tol), float(rtol))


def _compiled():
    """numba's ``_cut_layer``, made on first use in a process (numba is imported only then: most
    jobs import ``regions`` and never cut a plane). Kept on the function, not in a module global, so
    that code fingerprints (``provenance``) are the same before and after."""
    if not hasattr(_cut_layer, "jit"):
        from numba import njit

        _cut_layer.jit = njit(cache=True)(_cut_layer)
    return _cut_layer.jit


def _cut_layer(xy, off, za, zb, theta, half_side, tol, rtol):
    """Cut every parent cell by the lines ``za[p, j] + zb[p, j] @ (u, v) = theta[k]`` that cross it.

    ``xy [V, 2]`` holds the parents' vertices counter-clockwise, parent ``p``'s in
    ``xy[off[p]:off[p + 1]]``. A line crosses a cell when the cell has vertices strictly on both
    sides of it; each parent's crossing lines cut its cells in the order (neuron j, kink k). A cut
    cell gives its part <= 0 then its part >= 0 (a vertex on the line belongs to both), each in the
    order of the cell's walk (a vertex, then the crossing on the edge leaving it); a part with fewer
    than 3 vertices (a line through a corner) is dropped. The cells thus come in the order of a
    depth-first walk, parent by parent.

    A vertex whose value on a line is within ``rtol`` of the line's scale (``|c0| + half_side
    (|cu| + |cv|)``) lies on it: lines through one point (a degenerate arrangement) meet there,
    not in slivers of rounding. (``rtol=0``: only exact zeros.)

    Returns the cells' vertices and offsets (the same layout), their parents, their vertex means
    (a point inside each), whether each is bounded (no vertex within ``tol`` of the square's edge
    ``|u| = half_side`` or ``|v| = half_side``) and how many vertices were put on a line that
    rounding had put beside it.
    """
    def _room(a, need):  # ``a``, or a copy at least twice as long when ``need`` rows would not fit
        if need <= len(a):
            return a
        b = np.empty((max(2 * len(a), need),) + a.shape[1:], a.dtype)
        b[: len(a)] = a
        return b

    def _span(pts, a, m, c0, cu, cv, vals):  # the line's value at pts[a:a + m] into vals; min, max, snapped
        lo, hi, snapped = np.inf, -np.inf, 0
        near = rtol * (abs(c0) + half_side * (abs(cu) + abs(cv)))
        for i in range(m):
            f = c0 + (pts[a + i, 0] * cu + pts[a + i, 1] * cv)
            if f != 0.0 and abs(f) <= near:
                f, snapped = 0.0, snapped + 1
            vals[i] = f
            lo, hi = min(lo, f), max(hi, f)
        return lo, hi, snapped

    n_par, width, n_kinks = len(off) - 1, za.shape[1], len(theta)
    out_xy = np.empty((4 * len(xy), 2))
    out_off = np.zeros(4 * n_par + 1, np.int64)
    out_par = np.empty(4 * n_par, np.int64)
    n_out, n_snapped = 0, 0
    cur, nxt = np.empty((64, 2)), np.empty((64, 2))  # this step's cells and the next step's
    cur_off, nxt_off = np.zeros(16, np.int64), np.zeros(16, np.int64)
    vals, lines = np.empty(64), np.empty(width * n_kinks, np.int64)
    for p in range(n_par):
        start, stop = off[p], off[p + 1]
        vals = _room(vals, stop - start)
        n_lines = 0
        for j in range(width):
            for k in range(n_kinks):
                lo, hi, _ = _span(xy, start, stop - start, za[p, j] - theta[k], zb[p, j, 0], zb[p, j, 1], vals)
                if lo < 0 and hi > 0:
                    lines[n_lines] = j * n_kinks + k
                    n_lines += 1
        cur = _room(cur, stop - start)
        cur[: stop - start] = xy[start:stop]
        cur_off[1] = stop - start
        n_cells = 1
        for s in range(n_lines):
            j, k = lines[s] // n_kinks, lines[s] % n_kinks
            c0, cu, cv = za[p, j] - theta[k], zb[p, j, 0], zb[p, j, 1]
            # Each part has at most one more vertex than its cell.
            nxt = _room(nxt, 2 * (cur_off[n_cells] + n_cells))
            nxt_off = _room(nxt_off, 2 * n_cells + 1)
            n_next, t = 0, 0
            for c in range(n_cells):
                a, m = cur_off[c], cur_off[c + 1] - cur_off[c]
                vals = _room(vals, m)
                lo, hi, snapped = _span(cur, a, m, c0, cu, cv, vals)
                n_snapped += snapped
                if not (lo < 0 and hi > 0):
                    nxt[t: t + m] = cur[a: a + m]
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
                            t += 1
                        if f * g < 0:
                            r = f / (f - g)
                            nxt[t, 0] = cur[a + i, 0] + r * (cur[a + i1, 0] - cur[a + i, 0])
                            nxt[t, 1] = cur[a + i, 1] + r * (cur[a + i1, 1] - cur[a + i, 1])
                            t += 1
                    if t - first < 3:
                        t = first
                    else:
                        n_next += 1
                        nxt_off[n_next] = t
            cur, nxt, cur_off, nxt_off, n_cells = nxt, cur, nxt_off, cur_off, n_next
        total, base = cur_off[n_cells], out_off[n_out]
        out_xy = _room(out_xy, base + total)
        out_off = _room(out_off, n_out + n_cells + 1)
        out_par = _room(out_par, n_out + n_cells)
        out_xy[base: base + total] = cur[:total]
        for c in range(n_cells):
            out_off[n_out + c + 1] = base + cur_off[c + 1]
            out_par[n_out + c] = p
        n_out += n_cells
    centre, bounded = np.zeros((n_out, 2)), np.ones(n_out, np.bool_)
    for c in range(n_out):
        a, b = out_off[c], out_off[c + 1]
        for i in range(a, b):
            centre[c] += out_xy[i]
            if abs(abs(out_xy[i, 0]) - half_side) <= tol or abs(abs(out_xy[i, 1]) - half_side) <= tol:
                bounded[c] = False
        centre[c] /= b - a
    return out_xy[: out_off[n_out]], out_off[: n_out + 1], out_par[:n_out], centre, bounded, n_snapped
