"""Which "linear region" the counts are (docs/papers/lr.md, "Which linear regions are counted").

An activation region is the set of inputs that share one on/off pattern of every hidden neuron; an
affine piece is a maximal connected set on which the net's function is one affine map. Two
neighbouring activation regions may carry the same map: a neuron whose outgoing weights are zero,
or one whose every path to the output runs through neurons that are off there (all weights
nonzero, as at random init). On the hand-set nets below the two counts differ, and each count of
the project's API is checked against dense sampling of the patterns and of the map's coefficients.
"""

import numpy as np
import pytest
import torch
from scipy import ndimage
from torch import nn

from reluinit.nets import as_mlp
from reluinit.regions import affine_maps, plane_partition, regions_on_line, split_lines

F64 = torch.float64


def _sequential(*layers):
    """An ``nn.Sequential`` of ``(weight, bias)`` linear layers with a ReLU between consecutive
    ones (none after the last), in float64."""
    mods = []
    for i, (w, b) in enumerate(layers):
        w, b = torch.tensor(w, dtype=F64), torch.tensor(b, dtype=F64)
        lin = nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(b)
        mods += [lin] + ([nn.ReLU()] if i < len(layers) - 1 else [])
    return nn.Sequential(*mods).requires_grad_(False)


# f(x) = relu(x): the second neuron, relu(x - 1), has outgoing weight 0.
ZERO_OUTGOING = _sequential(([[1.0], [1.0]], [0.0, -1.0]), ([[1.0, 0.0]], [0.0]))
# f(x) = relu(relu(x) + 0.5 relu(x + 1) - 3), every weight nonzero: the second layer's neuron is off
# for x < 5/3, so the first layer's kinks at -1 and 0 change the pattern and not the function.
DEAD_DOWNSTREAM = _sequential(([[1.0], [1.0]], [0.0, 1.0]), ([[1.0, 0.5]], [-3.0]), ([[1.0]], [0.0]))


def _sampled(model, x):
    """Dense sampling, independent of ``reluinit``: each point's activation pattern (the sign of
    every ReLU's input, read from the model's own modules) and its affine map's coefficients (the
    gradient by autograd and the intercept ``f(x) - grad . x``), rounded."""
    x = x.clone().requires_grad_(True)
    h, signs = x, []
    for m in model:
        if isinstance(m, nn.ReLU):
            signs.append(h > 0)
        h = m(h)
    (grad,) = torch.autograd.grad(h.sum(), x)
    coef = torch.cat([grad, (h.detach() - (grad * x.detach()).sum(1, keepdim=True))], dim=1)
    return torch.cat(signs, dim=1).numpy(), np.round(coef.numpy(), 9)


def _runs(rows: np.ndarray) -> int:
    """Maximal runs of equal consecutive rows."""
    return 1 + int((rows[1:] != rows[:-1]).any(axis=1).sum())


@pytest.mark.parametrize("model, regions, pieces, breakpoints", [
    (ZERO_OUTGOING, 3, 2, [0.0, 1.0]),
    (DEAD_DOWNSTREAM, 4, 2, [-1.0, 0.0, 5 / 3]),
])
def test_on_a_line_activation_regions_and_affine_pieces_differ(model, regions, pieces, breakpoints):
    x0, x1 = torch.zeros(1, dtype=F64), torch.ones(1, dtype=F64)  # the line x = t
    line = regions_on_line(model, x0, x1, t_min=-5.0, t_max=5.0)
    np.testing.assert_allclose(line.breakpoints, breakpoints, rtol=0, atol=1e-12)
    # the public API: activation regions, and the affine maps of their patterns, merged where equal
    W, b = affine_maps(model, line.patterns)
    maps = np.round(torch.cat([W.flatten(1), b], dim=1).numpy(), 9)
    # the functions the experiments count with (LR-F4 records both; LR-F5 and X-F1 regions, LR-F3 pieces)
    split = split_lines(as_mlp(model), x0[None], x1[None], -5.0, 5.0)
    assert (line.count, int(split.regions())) == (regions, regions)
    assert (_runs(maps), int(split.pieces())) == (pieces, pieces)
    assert regions != pieces  # the two definitions differ on this net
    # Dense sampling, offset so that no sample lies on a kink.
    t = -5.0 + (torch.arange(20_000, dtype=F64) + 0.5) * 5e-4
    patterns, coef = _sampled(model, t[:, None])
    # Activation regions are convex: each pattern is one interval of the line, met once.
    assert _runs(patterns) == len(np.unique(patterns, axis=0)) == regions
    assert _runs(coef) == pieces
    # On the whole line the end intervals are unbounded and the counts the same.
    assert regions_on_line(model, x0, x1).count == regions


def test_in_a_plane_polygons_are_activation_regions_not_affine_pieces():
    # Two inputs: relu(relu(x) + 0.5 relu(x + 0.5 y + 1) - 3), on the square |x|, |y| <= 3. The
    # first layer's two lines cross inside it (4 cells); the second layer's neuron is on only in a
    # strip on the right, which it cuts from one of them: 5 activation regions, 2 affine pieces.
    model = _sequential(([[1.0, 0.0], [1.0, 0.5]], [0.0, 1.0]), ([[1.0, 0.5]], [-3.0]), ([[1.0]], [0.0]))
    polygons = plane_partition(model, [0, 0], [1, 0], [0, 1], half_side=3.0)
    W, b = polygons.affine_maps()
    maps = np.round(torch.cat([W.flatten(1), b], dim=1).numpy(), 9)
    # Affine pieces from the polygons: union polygons with the same map that share an edge.
    parent = list(range(len(polygons)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(polygons)):
        for j in range(i):
            if (maps[i] == maps[j]).all() and _share_an_edge(polygons[i].vertices, polygons[j].vertices):
                parent[root(i)] = root(j)
    pieces = len({root(i) for i in range(len(polygons))})
    assert (len(polygons), len(np.unique(maps, axis=0)), pieces) == (5, 2, 2)
    # Dense sampling on a grid, offset so that no sample lies on a boundary: connected components
    # of the points sharing a pattern, and of those sharing an affine map.
    g = -3.0 + (np.arange(300) + 0.5) * 0.02
    u, v = np.meshgrid(g, g, indexing="ij")
    patterns, coef = _sampled(model, torch.tensor(np.stack([u.ravel(), v.ravel()], axis=1)))

    def components(rows):
        keys, label = np.unique(rows, axis=0, return_inverse=True)
        label = label.reshape(u.shape)
        return sum(ndimage.label(label == k)[1] for k in range(len(keys))), len(keys)

    assert components(patterns) == (5, 5)  # each pattern one convex polygon
    assert components(coef) == (2, 2)


def _share_an_edge(p: np.ndarray, q: np.ndarray, tol: float = 1e-9) -> bool:
    """Whether convex polygons ``p`` and ``q`` (vertices in order) share a segment of their
    boundaries of positive length (an edge of one overlapping an edge of the other)."""
    for a, b in zip(p, np.roll(p, -1, axis=0)):
        d = b - a
        for c, e in zip(q, np.roll(q, -1, axis=0)):
            if abs(_cross(d, c - a)) > tol or abs(_cross(d, e - a)) > tol:
                continue  # not on the line through a and b
            s = sorted([np.dot(c - a, d), np.dot(e - a, d)]) / np.dot(d, d)
            if min(1.0, s[1]) - max(0.0, s[0]) > tol:
                return True
    return False


def _cross(d: np.ndarray, w: np.ndarray) -> float:
    return float(d[0] * w[1] - d[1] * w[0])
