"""The public geometry API on the nets a researcher brings: degenerate arrangements counted exactly
(checked against brute-force pattern enumeration, not against another library that shares the
fault), wrong input refused with a ValueError naming the argument, and the layers the docs list."""

import copy
import math

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

from reluinit.meanfield import edge_of_chaos
from reluinit.nets import as_mlp, sample_mlp
from reluinit.regions import activation_pattern, affine_maps, plane_partition, regions_on_line
from reluinit.trajectories import trajectory_stats

matplotlib.use("Agg")
F64 = torch.float64


def _runs(patterns: torch.Tensor) -> int:
    """Runs of equal consecutive rows: the regions a densely sampled path crosses."""
    return 1 + int((patterns[1:] != patterns[:-1]).any(dim=1).sum())


def _dense_count(model, x0, x1, t_min=0.0, t_max=1.0, n=400_001) -> int:
    t = torch.linspace(t_min, t_max, n, dtype=F64)[:, None]
    return _runs(activation_pattern(as_mlp(model), x0 + t * (x1 - x0)))


def _biasless(widths, seed, act=nn.ReLU):
    torch.manual_seed(seed)
    mods = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        mods.append(nn.Linear(a, b, bias=False))
        if i < len(widths) - 2:
            mods.append(act())
    return nn.Sequential(*mods).double()


# --- degenerate arrangements --------------------------------------------------------------------

@pytest.mark.parametrize("widths", [[2, 16, 16, 1], [2, 32, 32, 32, 1], [4, 64, 64, 64, 64, 1]])
def test_a_line_through_the_origin_of_a_net_without_biases_crosses_two_regions(widths):
    """Every boundary of a bias-free ReLU net passes through the origin and the net is positively
    homogeneous: the line x0 (1 - 3t) is in the region of x0 before the origin, of -x0 after it.
    Every boundary crossing lands at t = 1/3 up to rounding; they are one breakpoint."""
    net = sample_mlp(widths, "he", readout=True, seed=1, dtype=F64)  # biases all zero
    x0 = torch.randn(widths[0], generator=torch.Generator().manual_seed(2), dtype=F64)
    for t_min, t_max in ((0.0, 1.0), (-math.inf, math.inf)):
        r = regions_on_line(net, x0, -2 * x0, t_min, t_max)
        assert r.count == 2 and r.coincident > 0
        assert r.breakpoints == pytest.approx([1 / 3], abs=1e-12)
    assert _dense_count(net, x0, -2 * x0) == 2
    # The same net on a line in general position meets no coincidence, and brute force agrees.
    x1 = torch.randn(widths[0], generator=torch.Generator().manual_seed(3), dtype=F64)
    r = regions_on_line(net, x0 + x1, x1 - x0, 0, 1)
    assert r.coincident == 0 and r.count == _dense_count(net, x0 + x1, x1 - x0)


@pytest.mark.parametrize("d, seed", [(2, 0), (10, 1), (50, 2)])
def test_a_plane_through_the_origin_of_a_net_without_biases_has_no_slivers(d, seed):
    """On a plane through the origin of a bias-free net every region is a sector around the origin
    (the net is positively homogeneous): brute force samples 2 million directions around it and
    finds exactly our polygons' patterns, one polygon per pattern, none of zero area."""
    model = _biasless([d, 32, 32, 32, 1], seed)
    g = torch.Generator().manual_seed(seed)
    u, v = torch.randn(d, generator=g, dtype=F64), torch.randn(d, generator=g, dtype=F64)
    centre = 0.3 * u - 0.2 * v  # the origin is (u, v) = (-0.3, 0.2) in the plane
    part = plane_partition(model, centre, u, v, 1.0)
    patterns = {p.pattern.tobytes() for p in part}
    assert len(patterns) == len(part) and part.coincident > 0
    assert min(p.area for p in part) > 1e-9
    angle = torch.linspace(0, 2 * math.pi, 2_000_001, dtype=F64)[:-1]
    ray = (-0.3 + 1e-3 * torch.cos(angle))[:, None] * u + (0.2 + 1e-3 * torch.sin(angle))[:, None] * v + centre
    found = activation_pattern(as_mlp(model), ray).numpy()
    changes = np.flatnonzero((found[1:] != found[:-1]).any(axis=1)) + 1  # sectors are runs of directions
    assert {found[i].tobytes() for i in [0, *changes]} == patterns


def test_duplicated_neurons_and_zero_rows_change_no_count():
    """A layer with a neuron repeated and a dead one (zero weights, zero bias) has exactly the
    regions of the layer without them, on lines and on a plane."""
    base = sample_mlp([3, 12, 12, 1], "he", readout=True, bias_std=0.5, seed=4, dtype=F64)
    w1, b1 = base.weights[0], base.biases[0]
    w1x = torch.cat([w1, w1[:3], torch.zeros(1, 3, dtype=F64)])
    b1x = torch.cat([b1, b1[:3], torch.zeros(1, dtype=F64)])
    w2x = torch.cat([base.weights[1], torch.zeros(12, 4, dtype=F64)], dim=1)
    from reluinit.nets import MLP

    wide = MLP([w1x, w2x, base.weights[2]], [b1x, base.biases[1], base.biases[2]], readout=True)
    g = torch.Generator().manual_seed(5)
    x0, x1 = torch.randn(20, 3, generator=g, dtype=F64), torch.randn(20, 3, generator=g, dtype=F64)
    ours = regions_on_line(wide, x0, x1, -3, 3)
    assert [r.count for r in ours] == [r.count for r in regions_on_line(base, x0, x1, -3, 3)]
    assert all(r.coincident > 0 for r in ours)  # the repeated neurons' crossings coincide
    args = ([0.1, 0.2, 0.3], [1.0, 0, 0], [0, 1.0, 0], 2.0)
    assert len(plane_partition(wide, *args)) == len(plane_partition(base, *args))


def test_a_line_inside_a_boundary_counts_the_regions_of_the_other_neurons():
    """A line lying in neuron 0's boundary (bias-free, direction orthogonal to its weights): that
    neuron is on its kink all along, so the line's regions are those of the net without it."""
    model = _biasless([2, 10, 10, 1], 6)
    w = model[0].weight.detach()
    perp = torch.stack([-w[0, 1], w[0, 0]])
    x0, x1 = -1.5 * perp, 2.5 * perp
    without = nn.Sequential(nn.Linear(2, 9, bias=False), nn.ReLU(), nn.Linear(9, 10, bias=False), nn.ReLU(),
                            nn.Linear(10, 1, bias=False)).double()
    with torch.no_grad():
        without[0].weight.copy_(w[1:])
        without[2].weight.copy_(model[2].weight[:, 1:])
        without[4].weight.copy_(model[4].weight)
    r = regions_on_line(model, x0, x1, 0, 1)
    assert r.count == regions_on_line(without, x0, x1, 0, 1).count and r.coincident > 0


# --- strict input ----------------------------------------------------------------------------

@pytest.fixture
def two_inputs():
    return nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)).double()


@pytest.mark.parametrize("x0, x1, t_min, t_max, words", [
    (torch.ones(4), torch.zeros(4), 0, 1, r"x0 must have shape \(2,\)"),
    (torch.ones(1, 4), torch.zeros(1, 4), 0, 1, r"x0 must have shape \(2,\)"),
    (torch.ones(2), torch.zeros(4), 0, 1, r"x1 must have shape \(2,\)"),
    (torch.ones(2), torch.zeros(1, 2), 0, 1, "same shape"),
    (torch.tensor([math.nan, 1.0]), torch.zeros(2), 0, 1, "x0 must be finite"),
    (torch.tensor([math.inf, 1.0]), torch.zeros(2), 0, 1, "x0 must be finite"),
    (torch.ones(2), torch.ones(2), 0, 1, "x1 must differ from x0"),
    (torch.ones(2), torch.zeros(2), 1, 1, "t_min must be below t_max"),
    (torch.ones(2), torch.zeros(2), 2, 1, "t_min must be below t_max"),
    (torch.ones(2), torch.zeros(2), math.nan, 1, "t_min must be below t_max"),
])
def test_a_wrong_line_is_refused_naming_the_argument(two_inputs, x0, x1, t_min, t_max, words):
    with pytest.raises(ValueError, match=words):
        regions_on_line(two_inputs, x0, x1, t_min, t_max)


@pytest.mark.parametrize("centre, u, v, half, words", [
    ([math.nan, 0], [1, 0], [0, 1], 1.0, "center must be finite"),
    ([0, 0, 0], [1, 0], [0, 1], 1.0, r"center must have shape \(2,\)"),
    ([[0, 0]], [1, 0], [0, 1], 1.0, r"center must have shape \(2,\): one plane"),
    ([0, 0], [1, 0], [2, 0], 1.0, "linearly independent"),
    ([0, 0], [1, 0], [0, 1], 0.0, "half_side must be a positive"),
    ([0, 0], [1, 0], [0, 1], math.inf, "half_side must be a positive"),
])
def test_a_wrong_plane_is_refused_naming_the_argument(two_inputs, centre, u, v, half, words):
    with pytest.raises(ValueError, match=words):
        plane_partition(two_inputs, centre, u, v, half)


@pytest.mark.parametrize("x0, n_pieces, words", [
    (torch.ones(3), 10, r"x0 must be one input of shape \(2,\)"),
    (torch.ones(1, 2), 10, r"x0 must be one input of shape \(2,\)"),
    (torch.tensor([math.nan, 0.0]), 10, "x0 must be finite"),
    (torch.ones(2), 0, "n_pieces must be a whole number >= 1"),
    (torch.ones(2), 2.5, "n_pieces must be a whole number >= 1"),
])
def test_a_wrong_path_is_refused_naming_the_argument(two_inputs, x0, n_pieces, words):
    with pytest.raises(ValueError, match=words):
        trajectory_stats(two_inputs, x0, torch.zeros(2), n_pieces=n_pieces)


def test_a_partition_over_its_memory_limit_says_so_before_allocating():
    model = nn.Sequential(nn.Linear(2, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU()).double()
    with pytest.raises(MemoryError, match="max_bytes"):
        plane_partition(model, [0, 0], [1, 0], [0, 1], 0.5, max_bytes=2**20)


# --- the layers the docs list ------------------------------------------------------------------

def test_linear_layers_without_bias_are_measured_as_zero_bias():
    model = _biasless([5, 16, 16, 2], 7)
    with_zero = nn.Sequential(*(nn.Linear(m.in_features, m.out_features) if isinstance(m, nn.Linear) else m
                                for m in model)).double()
    with torch.no_grad():
        for a, b in zip(with_zero, model):
            if isinstance(a, nn.Linear):
                a.weight.copy_(b.weight)
                a.bias.zero_()
    x0, x1 = torch.randn(5, dtype=F64), torch.randn(5, dtype=F64)
    assert regions_on_line(model, x0, x1).count == regions_on_line(with_zero, x0, x1).count
    pd_ours, pd_zero = trajectory_stats(model, x0, x1, n_pieces=500), trajectory_stats(with_zero, x0, x1, n_pieces=500)
    assert np.allclose(pd_ours["length"], pd_zero["length"], rtol=1e-12)
    assert (pd_ours["transitions"] == pd_zero["transitions"]).all()


@pytest.mark.parametrize("slope", [0.2, 0.01, -0.5])
def test_leaky_relu_of_any_slope_is_exact_everywhere(slope):
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(3, 12), nn.LeakyReLU(slope), nn.Linear(12, 12), nn.LeakyReLU(slope),
                          nn.Linear(12, 1)).double()
    net = as_mlp(model)
    x = torch.randn(30, 3, dtype=F64)
    assert torch.allclose(net(x), model(x), rtol=0, atol=1e-12)
    x0, x1 = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
    r = regions_on_line(model, x0, x1, 0, 1)
    assert r.count == _dense_count(model, x0, x1)
    # Each region's affine map is the model there, at every interval's midpoint.
    W, b = affine_maps(model, r.patterns)
    mid = x0 + torch.as_tensor(r.intervals.mean(axis=1))[:, None] * (x1 - x0)
    assert torch.allclose(torch.einsum("rij,rj->ri", W, mid) + b, model(mid), rtol=1e-10, atol=1e-12)
    stats = trajectory_stats(model, x0, x1, n_pieces=4000)
    assert stats["transitions"].iloc[1:].sum() > 0
    chords = model[:2](x0 + torch.linspace(0, 1, 4001, dtype=F64)[:, None] * (x1 - x0)).detach()
    assert stats["length"].iloc[1] == pytest.approx(float((chords[1:] - chords[:-1]).norm(dim=1).sum()), rel=1e-12)


@pytest.mark.parametrize("act", [nn.Tanh, nn.ELU])
def test_smooth_activations_are_refused_by_region_functions_and_measured_by_trajectories(act):
    model = nn.Sequential(nn.Linear(2, 8), act(), nn.Linear(8, 1)).double()
    name = {nn.Tanh: "'tanh'", nn.ELU: "'elu'"}[act]
    for call in (lambda: regions_on_line(model, torch.zeros(2), torch.ones(2)),
                 lambda: plane_partition(model, [0, 0], [1, 0], [0, 1], 1.0)):
        with pytest.raises(TypeError, match=f"piecewise-linear.*{name}"):
            call()
    stats = trajectory_stats(model, torch.zeros(2), torch.ones(2), n_pieces=100)
    assert (stats["transitions"] == -1).all() and np.isfinite(stats["length"]).all()


def test_eval_batch_norm_is_folded_into_its_linear_layer():
    torch.manual_seed(9)
    model = nn.Sequential(nn.Linear(3, 10), nn.BatchNorm1d(10), nn.ReLU(), nn.Linear(10, 10), nn.BatchNorm1d(10),
                          nn.ReLU(), nn.Linear(10, 1)).double()
    model.train()
    for _ in range(3):
        model(torch.randn(64, 3, dtype=F64))  # running statistics away from their defaults
    with pytest.raises(TypeError, match="eval"):
        as_mlp(model)
    model.eval()
    net = as_mlp(model)
    x = torch.randn(50, 3, dtype=F64)
    assert torch.allclose(net(x), model(x), rtol=1e-12, atol=1e-12)
    x0, x1 = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
    assert regions_on_line(model, x0, x1, 0, 1).count == _dense_count(model, x0, x1)


# --- regions you can use ----------------------------------------------------------------------

def test_every_polygon_has_the_affine_map_of_the_net_on_it():
    torch.manual_seed(10)
    model = nn.Sequential(nn.Linear(2, 12), nn.ReLU(), nn.Linear(12, 12), nn.ReLU(), nn.Linear(12, 3)).double()
    layers = plane_partition(model, [0.1, -0.2], [1, 0], [0, 1], 2.0, per_layer=True)
    assert [p.layer for p in layers] == [1, 2] and len(layers[0]) < len(layers[1])
    part = layers[-1]
    W, b = part.affine_maps()
    x = part.points(np.stack([p.centre for p in part]))
    assert W.shape == (len(part), 3, 2)
    assert torch.allclose(torch.einsum("rij,rj->ri", W, x) + b, model(x), rtol=1e-10, atol=1e-12)
    # The first layer's partition maps to that layer's activations.
    W1, b1 = layers[0].affine_maps()
    x1 = layers[0].points(np.stack([p.centre for p in layers[0]]))
    assert torch.allclose(torch.einsum("rij,rj->ri", W1, x1) + b1, model[:2](x1), rtol=1e-10, atol=1e-12)
    import matplotlib.pyplot as plt

    ax = part.plot(ax=plt.figure().gca(), values=(torch.einsum("rij,rj->ri", W, x) + b)[:, 0].numpy())
    assert len(ax.collections[0].get_paths()) == len(part)
    matplotlib.pyplot.close("all")


# --- numeric edges --------------------------------------------------------------------------

def test_the_edge_of_chaos_is_exact_at_zero_bias_and_refused_where_none_exists():
    assert edge_of_chaos("tanh", 0.0) == (1.0, 1.0)
    assert edge_of_chaos("relu") == (math.sqrt(2.0), 1.0)
    with pytest.raises(ValueError, match="ReLU has no edge of chaos"):
        edge_of_chaos("relu", 0.5)
    with pytest.raises(ValueError, match="sigma_b must be"):
        edge_of_chaos("tanh", -1.0)


# --- pruning reads every conv --------------------------------------------------------------------

@pytest.mark.parametrize("conv, shape", [(nn.Conv1d, (2, 16)), (nn.Conv3d, (2, 6, 6, 6))])
@pytest.mark.parametrize("method", ["snip", "synflow", "magnitude"])
def test_conv1d_and_conv3d_layers_are_pruned_not_skipped(conv, shape, method):
    from reluinit import pruning

    torch.manual_seed(11)
    model = nn.Sequential(conv(2, 4, 3), nn.ReLU(), conv(4, 4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(3))
    x = torch.randn(5, *shape)
    model(x)
    masks = pruning.prune(model, method, 0.3, x=x, y=torch.randint(0, 3, (5,)))
    assert set(masks) == {"0.weight", "2.weight", "5.weight"}
    n = sum(m.numel() for m in masks.values())
    assert sum(int(m.sum()) for m in masks.values()) == round(0.3 * n)


def test_a_transposed_convolution_is_refused_by_name():
    from reluinit import pruning

    model = nn.Sequential(nn.ConvTranspose2d(2, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(50, 1))
    with pytest.raises(TypeError, match="layer 0 .ConvTranspose2d.: transposed convolutions"):
        pruning.prune(model, "magnitude", 0.5)


# --- precision and non-finite weights -------------------------------------------------------------

def _small_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)).double()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_the_geometry_of_a_net_in_low_precision_is_that_of_the_same_net_in_float64(dtype):
    """Exact geometry computes in float64 whatever precision the model is in: a float16 copy of a
    net counts the regions of its float64 twin (the very same weights), not rounding's."""
    rng = torch.Generator().manual_seed(1)
    x0, x1 = torch.randn(6, 4, generator=rng, dtype=F64), torch.randn(6, 4, generator=rng, dtype=F64)
    low = _small_net().to(dtype)
    twin = _small_net().to(dtype).double()  # the rounded weights, in float64
    got = [r.count for r in regions_on_line(low, x0, x1, 0.0, 1.0)]
    assert got == [r.count for r in regions_on_line(twin, x0, x1, 0.0, 1.0)]
    assert got == [_dense_count(twin, a, b) for a, b in zip(x0, x1)]
    assert len(plane_partition(low, [0] * 4, [1, 0, 0, 0], [0, 1, 0, 0], 2.0)) == len(
        plane_partition(twin, [0] * 4, [1, 0, 0, 0], [0, 1, 0, 0], 2.0))
    stats = trajectory_stats(low, x0[0], x1[0], n_pieces=2000)
    assert np.allclose(stats["length"], trajectory_stats(twin, x0[0], x1[0], n_pieces=2000)["length"], rtol=1e-12)
    assert affine_maps(low, np.zeros((1, 64), np.int8))[0].dtype == F64
    assert next(low.parameters()).dtype == dtype  # the model itself is left as it was


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize("what", ["weight", "bias"])
def test_a_net_with_a_non_finite_weight_is_refused_with_its_layer(value, what):
    """A NaN or inf weight in layer 2 used to leave the clean net's count: the net's output along
    the line is NaN there, so every exact measurement refuses it, naming the layer."""
    model = _small_net()
    with torch.no_grad():
        getattr(model[2], what)[3] = value
    kind = "weights" if what == "weight" else "biases"
    for call, name in [(lambda: regions_on_line(model, torch.zeros(4), torch.ones(4)), "regions_on_line"),
                       (lambda: plane_partition(model, [0] * 4, [1, 0, 0, 0], [0, 1, 0, 0], 1.0), "plane_partition"),
                       (lambda: affine_maps(model, np.zeros((1, 64), np.int8)), "affine_maps"),
                       (lambda: trajectory_stats(model, torch.zeros(4), torch.ones(4)), "trajectory_stats")]:
        with pytest.raises(ValueError, match=rf"^{name}: layer 2's {kind} hold NaN or inf"):
            call()


def test_a_net_whose_layers_differ_in_precision_is_measured_in_float64():
    """One layer in half precision among float64 ones ended in torch's "mat1 and mat2 must have the
    same dtype": every layer is read as float64, as a net all in one low precision is."""
    model = _small_net()
    twin = _small_net()
    twin[2].half()
    with torch.no_grad():
        model[2].weight.copy_(twin[2].weight.double())
        model[2].bias.copy_(twin[2].bias.double())
    x0, x1 = torch.zeros(4), torch.ones(4)
    assert regions_on_line(twin, x0, x1).breakpoints.tolist() == regions_on_line(model, x0, x1).breakpoints.tolist()
    assert np.allclose(trajectory_stats(twin, x0, x1)["length"], trajectory_stats(model, x0, x1)["length"], rtol=1e-12)


def test_finite_weights_whose_products_overflow_are_refused_not_counted():
    """Weights of 1e80 a layer are finite, but their products reach inf by layer 4: the plane's
    partition used to count 29 regions and the path's lengths came back inf and NaN."""
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4, 4), nn.ReLU())]).double()
    with torch.no_grad():
        for layer in model[::2]:
            layer.weight.mul_(1e80)
    with pytest.raises(ValueError, match="^layer 4's pre-activations overflow float64"):
        plane_partition(model, [0] * 4, [1, 0, 0, 0], [0, 1, 0, 0], 1.0)
    with pytest.raises(ValueError, match="^trajectory_stats: the path's length at layer 2 is NaN or inf"):  # squared norms
        trajectory_stats(model, torch.zeros(4), torch.ones(4))
    with pytest.raises(MemoryError, match="n_pieces=1,000,000,000,000 holds"):
        trajectory_stats(_small_net(), torch.zeros(4), torch.ones(4), n_pieces=10**12)


def _net_2_16_16_1() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).double()


def test_a_huge_square_has_every_region_of_the_squares_inside_it():
    """The squares are nested, so the count cannot fall as the half-side grows; and every vertex
    of this net's arrangement lies within 1e3 of the centre, so from there on it cannot rise
    either. It used to fall from 572 to 386 at 1e10 and to 62 from 1e15 on: crossings were
    interpolated between the square's far corners, and a vertex near the centre snapped onto any
    line within 1e-11 of the square's size. One count and one set of regions up to 1e300; the
    largest finite half-side overflows and is refused."""
    model = _net_2_16_16_1()
    plane = ([0.0, 0.0], [1.0, 0.0], [0.0, 1.0])
    counts = [len(plane_partition(model, *plane, 10.0**e)) for e in (0, 1, 3, 8, 10, 15, 50, 150, 300)]
    assert counts == sorted(counts) and counts[2:] == [counts[2]] * 7 and counts[0] < counts[2]
    patterns = [{p.pattern.tobytes() for p in plane_partition(model, *plane, s)} for s in (1e3, 1e15, 1e300)]
    assert patterns[0] == patterns[1] == patterns[2] and len(patterns[0]) == counts[2]
    with pytest.raises(ValueError, match="overflow float64 .* use a smaller half_side"):  # exact or refused
        plane_partition(model, *plane, np.finfo(np.float64).max)


def test_huge_weights_and_far_inputs_give_the_partition_of_the_same_function():
    """The same function written with a first layer 1e150 times larger (and a second 1e150 times
    smaller), or moved 1e8 along the plane, has the same regions; where the square's corners times
    the weights overflow float64, the partition is refused, naming the half-side, not miscounted."""
    model = _net_2_16_16_1()
    plane = ([0.0, 0.0], [1.0, 0.0], [0.0, 1.0])
    count = len(plane_partition(model, *plane, 1e3))
    big = copy.deepcopy(model)
    with torch.no_grad():
        big[0].weight.mul_(1e150), big[0].bias.mul_(1e150), big[2].weight.div_(1e150)
    assert len(plane_partition(big, *plane, 1e3)) == len(plane_partition(big, *plane, 1e100)) == count
    moved = copy.deepcopy(model)
    shift = torch.tensor([1e8, 0.0], dtype=F64)
    with torch.no_grad():
        moved[0].bias.sub_(moved[0].weight @ shift)
    assert len(plane_partition(moved, shift, *plane[1:], 1e3)) == count
    with torch.no_grad():
        big[0].weight.mul_(1e100), big[2].weight.div_(1e100)
    with pytest.raises(ValueError, match=r"^layer 1's pre-activations overflow float64 .*half_side=1e\+100.*smaller"):
        plane_partition(big, *plane, 1e100)


def test_pruning_refuses_a_model_or_inputs_with_nan_or_inf_by_name():
    """A NaN weight in layer 2 let SNIP return masks that kept no weight of two layers; an inf input
    gave scores of NaN: the masks of either are not the model's."""
    from reluinit.pruning import prune

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 10))
    x, y = torch.randn(20, 10), torch.randint(0, 10, (20,))
    assert set(prune(model, "snip", 0.1, x=x, y=y)) == {"0.weight", "2.weight"}
    with torch.no_grad():
        model[2].weight[0, 0] = math.nan
    for method in ("snip", "magnitude"):
        with pytest.raises(ValueError, match=r"^prune: the model's 2.weight holds NaN or inf"):
            prune(model, method, 0.1, x=x, y=y)
    x[0, 0] = math.inf
    with pytest.raises(ValueError, match=r"^prune: x holds NaN or inf"):
        prune(nn.Sequential(nn.Linear(10, 10)), "snip", 0.1, x=x, y=y)
    with pytest.raises(ValueError, match=r"^prune: data\[1\]'s inputs holds NaN or inf"):
        prune(nn.Sequential(nn.Linear(10, 10)), "snip", 0.1, data=[(x[1:], y[1:]), (x, y)])


@pytest.mark.parametrize("method", ["snip", "grasp"])
def test_pruning_on_an_empty_batch_is_refused_not_chosen_by_chance(method):
    """An empty batch's loss is NaN (a mean over nothing): SNIP and GraSP ranked its scores and
    returned masks that emptied the first layer, with no error."""
    from reluinit.pruning import prune

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    empty = (torch.randn(0, 4), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^prune: x holds no inputs \(shape \(0, 4\)\)"):
        prune(model, method, 0.5, x=empty[0], y=empty[1])
    with pytest.raises(ValueError, match=r"^prune: a batch of data= holds no inputs"):
        prune(model, method, 0.5, data=[(torch.randn(5, 4), torch.randint(0, 3, (5,))), empty])
    with pytest.raises(ValueError, match=r"^data= gave no batch"):
        prune(model, method, 0.5, data=[])
    masks = prune(model, method, 0.5, x=torch.randn(5, 4), y=torch.randint(0, 3, (5,)))
    assert all(m.any() for m in masks.values())


def test_synflow_on_an_empty_loader_says_so():
    from reluinit.pruning import prune

    with pytest.raises(ValueError, match=r"^data= gave no batch"):
        prune(nn.Sequential(nn.Linear(4, 3)), "synflow", 0.5, data=iter([]))


def test_a_module_used_twice_is_measured_at_each_use():
    """``Sequential(..., block, block, ...)`` calls ``block`` twice; ``named_children`` lists it once,
    and the net read from it was one block shorter (outputs off by 0.28, fewer regions on every
    line). A reused ReLU or Linear is read at each use too. Each is measured as the same net with
    distinct copies."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
    relu, lin = nn.ReLU(), nn.Linear(16, 16)
    reused = {"block": nn.Sequential(nn.Linear(4, 16), nn.ReLU(), block, block, nn.Linear(16, 1)),
              "relu": nn.Sequential(nn.Linear(4, 16), relu, nn.Linear(16, 16), relu, nn.Linear(16, 1)),
              "linear": nn.Sequential(nn.Linear(4, 16), nn.ReLU(), lin, nn.ReLU(), lin, nn.ReLU(), nn.Linear(16, 1))}
    x = torch.randn(64, 4)
    x0, x1 = torch.randn(10, 4, dtype=torch.float64), torch.randn(10, 4, dtype=torch.float64)
    for kind, model in reused.items():
        copies = nn.Sequential(*[copy.deepcopy(m) for m in model])  # the same function, nothing shared
        assert torch.equal(as_mlp(model)(x), model(x)), kind
        assert as_mlp(model).widths == as_mlp(copies).widths, kind
        counts = [r.count for r in regions_on_line(model.double(), x0, x1, -5, 5)]
        assert counts == [r.count for r in regions_on_line(copies.double(), x0, x1, -5, 5)], kind
    assert as_mlp(reused["block"]).widths == [4, 16, 16, 16, 1]


def test_a_net_on_the_meta_device_a_path_of_one_point_and_a_net_without_weights_are_refused_by_name():
    """Each gave torch's raw error, NaN growth without a word, or blamed an ``exclude`` never given."""
    from reluinit.pruning import prune

    meta = nn.Sequential(nn.Linear(4, 8, device="meta"), nn.ReLU(), nn.Linear(8, 1, device="meta"))
    for what, call in (("regions_on_line", lambda: regions_on_line(meta, torch.zeros(4), torch.ones(4))),
                       ("trajectory_stats", lambda: trajectory_stats(meta, torch.zeros(4), torch.ones(4)))):
        with pytest.raises(ValueError, match=rf"^{what}: layer 1's weights are on the meta device"):
            call()
    with pytest.raises(ValueError, match=r"^prune: the model's 0.weight is on the meta device"):
        prune(meta, "magnitude", 0.5)
    with pytest.raises(ValueError, match=r"^x0 and x1 are the same point"):
        trajectory_stats(_small_net(), torch.ones(4), torch.ones(4))
    with pytest.raises(ValueError, match=r"^prune: the model has no conv or linear layer with weights"):
        prune(nn.Sequential(nn.ReLU()), "magnitude", 0.5)
