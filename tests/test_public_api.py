"""The science on anyone's PyTorch model (issue 41, in progress): a plain ``nn.Sequential`` is read
as the library's own ``MLP`` (no second engine), and its regions along a line and in a plane are
exact, checked against brute force and Regioncam."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from reluinit.nets import as_mlp
from reluinit.regions import plane_partition, regions_on_line


def _sequential(widths, act=nn.ReLU, seed=0, nested=False):
    torch.manual_seed(seed)
    mods = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        mods.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            mods += [act(), nn.Dropout(0.1)]
    if nested:
        return nn.Sequential(nn.Flatten(), nn.Sequential(*mods[:3]), nn.Sequential(*mods[3:]), nn.Identity()).double().eval()
    return nn.Sequential(*mods).double().eval()


@pytest.mark.parametrize("act", [nn.ReLU, nn.LeakyReLU, nn.Hardtanh])
def test_a_sequential_is_read_as_the_same_function_sharing_its_weights(act):
    model = _sequential([5, 12, 12, 3], act, nested=True)
    net = as_mlp(model)
    x = torch.randn(40, 5, dtype=torch.float64)
    assert torch.allclose(net(x), model(x), rtol=0, atol=1e-12)
    assert net.readout and net.widths == [5, 12, 12, 3]
    assert net.layers[0].weight is model[1][0].weight  # shared, not copied


@pytest.mark.parametrize("layer, words", [(nn.Sigmoid(), "Sigmoid"), (nn.Conv2d(1, 1, 3), "Conv2d"),
                                          (nn.Hardtanh(-2.0, 2.0), "default parameters")])
def test_an_unsupported_layer_is_a_type_error_naming_it(layer, words):
    model = nn.Sequential(nn.Linear(2, 4), layer, nn.Linear(4, 1))
    with pytest.raises(TypeError, match=words) as e:
        as_mlp(model)
    assert "supported" in str(e.value)
    with pytest.raises(TypeError, match="eval"):
        as_mlp(nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4, 1)).train())


def _brute_force_count(model, x0, x1, n=200_001):
    t = torch.linspace(0, 1, n, dtype=torch.float64)[:, None]
    pre, _ = as_mlp(model).preactivations(x0 + t * (x1 - x0))
    pattern = torch.cat([p > 0 for p in pre], dim=1)
    return 1 + int((pattern[1:] != pattern[:-1]).any(dim=1).sum())


@pytest.mark.parametrize("seed", range(4))
def test_regions_on_a_segment_equal_a_fine_sampling_where_no_region_is_thinner_than_the_step(seed):
    model = _sequential([6, 10, 10, 10, 2], seed=seed)
    g = torch.Generator().manual_seed(seed)
    x0, x1 = torch.randn(6, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    found = regions_on_line(model, x0, x1, 0.0, 1.0)
    widths = np.diff(found.intervals, axis=1)
    assert (widths > 0).all() and found.intervals[0, 0] == 0 and found.intervals[-1, 1] == 1
    assert np.all(np.diff(found.breakpoints) > 0)
    if widths.min() > 2 / 200_000:
        assert found.count == _brute_force_count(model, x0, x1)
    whole = regions_on_line(model, x0, x1)  # the whole line: unbounded end intervals
    assert math.isinf(whole.intervals[0, 0]) and math.isinf(whole.intervals[-1, 1]) and whole.count >= found.count


def test_many_lines_at_once_equal_each_line_alone():
    model = _sequential([6, 10, 10, 2], seed=5)
    g = torch.Generator().manual_seed(5)
    x0, x1 = torch.randn(7, 6, generator=g, dtype=torch.float64), torch.randn(7, 6, generator=g, dtype=torch.float64)
    batched = regions_on_line(model, x0, x1, 0.0, 1.0)
    assert len(batched) == 7
    for i, many in enumerate(batched):
        one = regions_on_line(model, x0[i], x1[i], 0.0, 1.0)
        assert many.count == one.count > 1
        assert np.array_equal(many.patterns, one.patterns)
        np.testing.assert_allclose(many.breakpoints, one.breakpoints, rtol=1e-12)  # batched matmul rounds apart


@pytest.mark.parametrize("width, depth, seed", [(8, 2, 0), (12, 3, 1), (16, 2, 2)])
def test_plane_partitions_equal_regioncams_counts_and_a_dense_grids_patterns(width, depth, seed):
    regioncam = pytest.importorskip("regioncam")
    model = _sequential([2] + [width] * depth + [1], seed=seed)
    polygons = plane_partition(model, [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], 2.0)
    assert sum(p.area for p in polygons) == pytest.approx(16.0)
    rc = regioncam.Regioncam(size=2.0)
    for layer in as_mlp(model).layers[:depth]:
        rc.linear(np.ascontiguousarray(layer.weight.detach().numpy().T, dtype=np.float32),
                  layer.bias.detach().numpy().astype(np.float32))
        rc.relu()
    assert len(polygons) == rc.num_faces
    # A dense grid sees no pattern the partition lacks, and misses only the thinnest regions.
    u = torch.linspace(-2, 2, 801, dtype=torch.float64)
    grid = torch.cartesian_prod(u, u)
    pre, _ = as_mlp(model).preactivations(grid)
    seen = {tuple(row) for row in torch.cat([p > 0 for p in pre], dim=1).to(torch.int8).tolist()}
    exact = {tuple(p.pattern.tolist()) for p in polygons}
    assert seen <= exact and len(seen) >= 0.9 * len(exact)


def test_trajectory_stats_of_a_users_net_are_the_librarys_on_its_mlp():
    """The input layer's length is the path's; a ReLU net at He scale keeps lengths of the order of
    the input's, and the table is the one TG's and EP's experiments write."""
    from reluinit.trajectories import Line, path_rows, trajectory_stats

    model = _sequential([20, 64, 64, 64], seed=3)[:-1]  # ends in an activation: no readout
    x0, x1 = torch.zeros(20, dtype=torch.float64), torch.ones(20, dtype=torch.float64)
    stats = trajectory_stats(model, x0, x1, n_pieces=2000)
    assert list(stats["layer"]) == [0, 1, 2] and stats["length"].iloc[0] == pytest.approx(math.sqrt(20))
    with torch.no_grad():
        same = path_rows(as_mlp(model), Line(x0, x1), 2000)
    assert stats.equals(same)
    assert (stats["transitions"].iloc[1:] > 0).all()


def test_snip_on_a_torchvision_resnet18_keeps_the_density_and_pruned_weights_stay_zero():
    """Pruning reads any model's Conv2d and Linear layers (batch norms are never pruned): SNIP at
    density 0.1 keeps round(0.1 N) weights, a step of SGD with momentum leaves the pruned ones at
    zero, and the SBP-style rescaling gives each kept (unit, position) slice a unit sum of squares."""
    torchvision = pytest.importorskip("torchvision")
    from reluinit import pruning
    from reluinit.inits import weight_layers

    model = torchvision.models.resnet18(num_classes=10)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 10, (8,), generator=g)
    masks = pruning.prune(model, "snip", 0.1, x=x, y=y)
    n = sum(m.numel() for m in masks.values())
    assert len(masks) == len(weight_layers(model)) and sum(int(m.sum()) for m in masks.values()) == round(0.1 * n)
    pruning.apply_masks(model, masks)
    pruning.rescale(model, masks)
    conv = model.conv1.weight.detach()
    kept = masks["conv1.weight"].double()
    slices = ((conv.double() * kept) ** 2).sum(dim=1)  # [out, kh, kw]
    assert torch.allclose(slices[kept.sum(dim=1) > 0], torch.ones(()).double(), atol=1e-5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    assert sum(int((m.weight != 0).sum()) for _, m in weight_layers(model)) <= round(0.1 * n)


def test_edge_of_chaos_gives_the_weight_scale_where_chi_is_one():
    from reluinit.meanfield import chi, edge_of_chaos

    assert edge_of_chaos("relu")[0] == pytest.approx(math.sqrt(2))
    for act, sb in [("tanh", 0.2), ("elu", 0.2), ("tanh", 1.0)]:
        sw, c = edge_of_chaos(act, sb)
        assert c == pytest.approx(1, abs=1e-9) and chi(sw * 1.05, sb, act) > 1 > chi(sw * 0.95, sb, act)


def test_every_example_of_your_own_network_runs(tmp_path, monkeypatch):
    """docs/your-own-network.md: each python block runs as written (here, on the CPU, offline)."""
    import re

    from conftest import ROOT

    page = (ROOT / "docs" / "your-own-network.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 6
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        exec(compile(code, f"your-own-network example {i + 1}", "exec"), {})
    assert (tmp_path / "regions.png").stat().st_size > 1000
