"""Exact region geometry checked against brute force: dense sampling, areas, perturbations."""

import itertools
import math

import numpy as np
import pytest
import torch

from reluinit.nets import MLP, sample_mlp
from reluinit.regions import activation_pattern, boundary_distance, plane_regions, sawtooth, split_lines

F64 = torch.float64


def _lines(n_lines, dim, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_lines, dim, generator=g, dtype=F64), torch.randn(n_lines, dim, generator=g, dtype=F64)


@pytest.mark.parametrize("activation", ["relu", "hardtanh"])
def test_line_regions_equal_dense_sampling(activation):
    net = sample_mlp([3, 6, 6, 6], "he", activation=activation, bias_std=0.3, seed=0, dtype=F64)
    x0, x1 = _lines(6, 3, seed=1)
    split = split_lines(net, x0, x1)
    regions = split.regions()
    for i in range(len(x0)):
        cuts = torch.sort(torch.cat([torch.tensor([0.0, 1.0], dtype=F64), split.t0[split.line == i]]))[0]
        gap = torch.diff(torch.unique(cuts)).min().item()
        n = int(4 / gap) + 2  # several samples between any two breakpoints
        t = torch.linspace(0, 1, n, dtype=F64)
        patterns = activation_pattern(net, x0[i] + t[:, None] * (x1[i] - x0[i]))
        assert torch.unique(patterns, dim=0).shape[0] == regions[i].item()


def test_pieces_merge_intervals_with_the_same_affine_map():
    # A dead second layer makes the output constant: many regions, one linear piece.
    net = sample_mlp([2, 8, 3, 1], "he", readout=True, bias_std=0.3, seed=3, dtype=F64)
    net.biases[1].data.fill_(-100.0)
    split = split_lines(net, *_lines(4, 2, seed=2))
    assert (split.regions() > 1).any()
    assert (split.pieces() == 1).all()


@pytest.mark.parametrize("n", [1, 2, 5, 8, 10])
def test_sawtooth_has_exactly_two_to_the_n_pieces(n):
    split = split_lines(sawtooth(n), torch.zeros(1, 1, dtype=F64), torch.ones(1, 1, dtype=F64))
    assert split.pieces().item() == 2 ** n
    # Noise breaks the construction: the count moves off 2^n.
    noisy = split_lines(sawtooth(n, noise=0.1, seed=1), torch.zeros(1, 1, dtype=F64), torch.ones(1, 1, dtype=F64))
    if n >= 5:
        assert noisy.pieces().item() < 2 ** n


def test_plane_polygons_tile_the_square_and_share_one_pattern():
    net = sample_mlp([2, 6, 6, 6, 1], "he", readout=True, bias_std=0.3, seed=2, dtype=F64)
    layers = plane_regions(net, np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0]), half_side=2.0)
    assert [len(layer) for layer in layers] == sorted(len(layer) for layer in layers)
    rng = np.random.default_rng(0)
    for polygons in layers:
        assert sum(p.area for p in polygons) == pytest.approx(16.0, rel=1e-12)
        assert all(p.area > 0 for p in polygons)
        assert len({p.pattern.tobytes() for p in polygons}) == len(polygons)
    # Interior points of every final polygon have the polygon's pattern.
    for poly in layers[-1]:
        centre = poly.vertices.mean(axis=0)
        weights = rng.dirichlet(np.ones(len(poly.vertices)), size=5)
        points = 0.999 * (weights @ poly.vertices) + 0.001 * centre
        patterns = activation_pattern(net, torch.tensor(points))
        assert (patterns.numpy() == poly.pattern).all()


@pytest.mark.parametrize("w, b", [([1.0, -1.0], 0.0), ([1.0, 1.0], -2.0), ([1.0, 0.0], 0.5)])
def test_a_line_through_vertices_of_a_cell_keeps_both_parts(w, b):
    """A neuron whose line runs through corners of the square (u = v, u + v = 2) or along a cut
    of an earlier neuron still tiles the square: a vertex on the line belongs to both parts."""
    net = MLP([torch.tensor([[1.0, 0.0], w], dtype=F64), torch.tensor([[1.0, 1.0]], dtype=F64)],
              [torch.tensor([0.5, b], dtype=F64), None], readout=True)
    (first,) = plane_regions(net, np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0]), half_side=2.0)
    assert sum(p.area for p in first) == pytest.approx(16.0, rel=1e-12) and all(p.area > 0 for p in first)


@pytest.mark.parametrize("activation", ["relu", "hardtanh"])
def test_compiled_cut_equals_its_python_source(activation, monkeypatch):
    """numba compiles planecut._cut_layer; run as plain Python it must give the same cells bit for
    bit (the compiled arithmetic is the source's: no fused or reordered float operations)."""
    from reluinit import planecut

    net = sample_mlp([3, 7, 7, 1], "he", activation=activation, readout=True, bias_std=0.5, seed=5, dtype=F64)
    plane = (np.array([0.3, -0.2, 0.1]), np.array([1.0, 0.5, 0.0]), np.array([-0.2, 1.0, 0.7]), 1.5)
    compiled = plane_regions(net, *plane)
    monkeypatch.setattr(planecut, "_compiled", lambda: planecut._cut_layer)
    python = plane_regions(net, *plane)
    assert [len(layer) for layer in compiled] == [len(layer) for layer in python] and len(compiled[-1]) > 10
    for p, q in zip(itertools.chain(*compiled), itertools.chain(*python)):
        assert np.array_equal(p.vertices, q.vertices) and np.array_equal(p.pattern, q.pattern)
        assert p.bounded == q.bounded


def test_boundary_distance_is_exact():
    net = sample_mlp([4, 8, 8, 8, 1], "he", readout=True, bias_std=0.3, seed=1, dtype=F64)
    x = torch.randn(300, 4, generator=torch.Generator().manual_seed(0), dtype=F64)
    d, _, normal = boundary_distance(net, x)
    before = activation_pattern(net, x)
    assert (activation_pattern(net, x + (1 - 1e-6) * d[:, None] * normal) == before).all()
    assert (activation_pattern(net, x + (1 + 1e-6) * d[:, None] * normal) != before).any(dim=1).all()
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        u = torch.randn(300, 4, generator=g, dtype=F64)
        u /= u.norm(dim=1, keepdim=True)
        assert (activation_pattern(net, x + (1 - 1e-6) * d[:, None] * u) == before).all()


def test_data_plane_is_centred_on_the_circumcentre():
    from reluinit.regions import data_plane

    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 10, generator=g, dtype=F64)
    y = torch.arange(30) % 3
    centre, e1, e2, half, corners = data_plane(x, y, scale=1.25)
    pts = [x[(y == d).nonzero()[0, 0]].numpy() for d in (0, 1, 2)]
    radii = [np.linalg.norm(p - centre) for p in pts]
    assert np.allclose(radii, radii[0]) and half == pytest.approx(1.25 * radii[0])
    assert abs(np.dot(e1, e2)) < 1e-12 and np.isclose(np.linalg.norm(e1), 1) and np.isclose(np.linalg.norm(e2), 1)
    # The three points lie in the plane: their in-plane coordinates reproduce them.
    for p, (u, v) in zip(pts, corners):
        assert np.allclose(centre + u * e1 + v * e2, p)


@pytest.mark.parametrize("activation", ["relu", "hardtanh"])
def test_transitions_equal_dense_sampling(activation):
    """EP's transitions: per-neuron piece changes along the line, counted against sampling."""
    net = sample_mlp([3, 5, 5], "gaussian", sigma_w=3.0, activation=activation, bias_std=0.3, seed=4, dtype=F64)
    x0, x1 = _lines(4, 3, seed=5)
    split = split_lines(net, x0, x1)
    t = torch.linspace(0, 1, 400_001, dtype=F64)
    for i in range(len(x0)):
        patterns = activation_pattern(net, x0[i] + t[:, None] * (x1[i] - x0[i]))
        changes = (patterns[1:] != patterns[:-1]).sum().item()
        assert changes == split.transitions()[i].item()
        assert split.transitions()[i] >= split.regions()[i] - 1


def _trained(widths, seed, steps=100):
    """A net after Adam on a toy 3-class task: its kinks move off the init's, many far out."""
    net = sample_mlp(widths, "he", readout=True, bias_std=1e-3, seed=seed, dtype=F64)
    params = [*net.weights, *net.biases]
    for p in params:
        p.requires_grad_(True)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(128, widths[0], generator=g, dtype=F64)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    opt = torch.optim.Adam(params, lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    for p in params:
        p.requires_grad_(False)
    return net


@pytest.mark.parametrize("trained", [False, True])
def test_infinite_line_counts_every_kink(trained):
    """The whole line t ∈ ℝ: the same count as a segment long enough to hold every kink, and
    beyond the outermost kinks the pattern never changes. The segment from -x to x misses kinks."""
    widths = [5, 12, 12, 12, 3]
    net = _trained(widths, seed=3) if trained else sample_mlp(widths, "he", readout=True, bias_std=1e-3, seed=3,
                                                              dtype=F64)
    x = torch.randn(40, 5, generator=torch.Generator().manual_seed(4), dtype=F64)
    origin = torch.zeros_like(x)
    whole = split_lines(net, origin, x, -math.inf, math.inf)
    assert torch.isinf(whole.t0).sum() == len(x) and torch.isinf(whole.t1).sum() == len(x)
    reach = 2 * whole.t0[torch.isfinite(whole.t0)].abs().max().item() + 1
    long = split_lines(net, origin, x, -reach, reach)
    assert torch.equal(whole.regions(), long.regions())
    assert torch.equal(whole.pattern, long.pattern) and torch.equal(whole.line, long.line)
    # Far out on either side each line stays in its end interval's region.
    first = torch.ones(len(whole.line), dtype=torch.bool)
    first[1:] = whole.line[1:] != whole.line[:-1]
    last = torch.roll(first, -1)
    for t, ends in ((-reach, first), (-1e6 * reach, first), (reach, last), (1e6 * reach, last)):
        assert torch.equal(activation_pattern(net, t * x), whole.pattern[ends])
    segment = split_lines(net, -x, x).regions()  # what LR-F5 used to count
    assert (whole.regions() >= segment).all()
    if trained:
        assert (whole.regions() > segment).sum() >= 5


def test_infinite_line_with_a_neuron_constant_along_it():
    """A neuron whose weights are orthogonal to the line stays on one piece everywhere, also on the
    unbounded end intervals (where evaluating it at t = ±inf would give inf * 0)."""
    w1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=F64)  # kink at t = 1, none, t = -2
    b1 = torch.tensor([-1.0, 1.0, -2.0], dtype=F64)
    w2 = torch.tensor([[0.1, 1.0, 0.0]], dtype=F64)  # 0.5 + 0.1 relu(t - 1) > 0: never a kink
    b2 = torch.tensor([-0.5], dtype=F64)
    from reluinit.nets import MLP

    net = MLP([w1, w2, torch.ones(1, 1, dtype=F64)], [b1, b2, torch.zeros(1, dtype=F64)], readout=True)
    whole = split_lines(net, torch.zeros(1, 2, dtype=F64), torch.tensor([[1.0, 0.0]], dtype=F64), -math.inf, math.inf)
    assert whole.regions().item() == 3
    assert whole.t1[:-1].tolist() == [-2.0, 1.0]
    assert (whole.pattern[:, 1] == 1).all() and (whole.pattern[:, 3] == 1).all()
    assert torch.isinf(whole.length_pre).all() and not torch.isnan(whole.length_post).any()


def test_plane_region_counts_equal_regioncams_where_both_are_exact():
    """Regioncam (Rust, float32) partitions the same square independently; on random He nets whose
    partitions have no near-degenerate cell (every polygon's area above 1e-10 and its vertices at
    least 1e-6 apart, several float32 steps at this scale, so rounding cannot merge or split one),
    the counts after every layer agree."""
    pytest.importorskip("regioncam")
    from reluinit.tools.benchmark import regioncam_faces

    compared = 0
    for seed, (width, depth) in enumerate([(8, 2), (12, 3), (16, 3), (24, 2), (32, 3), (20, 4)] * 2):
        net = sample_mlp([2] + [width] * depth + [1], "he", readout=True, bias_std=1.0, seed=seed, dtype=F64)
        layers = plane_regions(net, np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0]), half_side=2.0)
        polygons = layers[-1]
        gaps = [np.linalg.norm(p.vertices - np.roll(p.vertices, 1, axis=0), axis=1).min() for p in polygons]
        if min(p.area for p in polygons) < 1e-10 or min(gaps) < 1e-6:
            continue
        assert [len(layer) for layer in layers] == regioncam_faces(net, 2.0), (width, depth, seed)
        compared += 1
    assert compared >= 10, f"only {compared} nets without near-degenerate cells"
