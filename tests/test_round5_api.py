"""Issue 97, the own-network API: a model is measured as it computes, or refused naming the module.

Every function that reads a model (``regions_on_line``, ``plane_partition``, ``affine_maps``,
``trajectory_stats``, and ``nets.as_mlp`` under them) reads it through its modules' types and
parameters. A module that computes something else (a custom ``forward``, a hook, a weight that
changes between reads) used to be measured as a plain stack, with no error: these tests compare
the answers with an independent dense sampling of the real model's activation patterns, or check
the refusal names the module."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn
from torch.nn.utils import parametrize

from reluinit.nets import as_mlp
from reluinit.regions import affine_maps, plane_partition, regions_on_line
from reluinit.trajectories import trajectory_stats

N_DENSE = 200_001


def _net(widths=(3, 8, 8, 1), seed=0) -> nn.Sequential:
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:]):
        mods += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*mods[:-1]).double()


def _dense_count(model: nn.Module, x0, x1) -> tuple[int, float]:
    """Regions of the real model on the segment x0..x1, sampled: the ReLU modules' own outputs on
    N_DENSE points (distinct consecutive on/off patterns), and the sampling step in t."""
    t = torch.linspace(0, 1, N_DENSE, dtype=torch.float64)[:, None]
    codes = []
    hooks = [m.register_forward_hook(lambda m, i, o: codes.append((o > 0).to(torch.int8)))
             for m in model.modules() if isinstance(m, nn.ReLU)]
    try:
        with torch.no_grad():
            model(x0 + t * (x1 - x0))
    finally:
        for h in hooks:
            h.remove()
    p = torch.cat(codes, dim=1)
    return 1 + int((p[1:] != p[:-1]).any(dim=1).sum()), 1 / (N_DENSE - 1)


def _assert_exact(model, x0, x1):
    """The API's count on the segment equals the dense count of the real model, where no region is
    thinner than two sampling steps (so the sampling cannot miss one)."""
    line = regions_on_line(model, x0, x1, 0.0, 1.0)
    dense, step = _dense_count(model, x0, x1)
    assert np.diff(line.intervals, axis=1).min() > 2 * step, "a region thinner than the sampling: pick another seed"
    assert line.count == dense


def _points():
    g = torch.Generator().manual_seed(1)
    return torch.randn(3, generator=g, dtype=torch.float64) * 2, torch.randn(3, generator=g, dtype=torch.float64) * 2


def _every_reader(model):
    """Each public function that reads a model, called on it."""
    x0, x1 = _points()
    return {
        "as_mlp": lambda: as_mlp(model),
        "regions_on_line": lambda: regions_on_line(model, x0, x1, 0.0, 1.0),
        "plane_partition": lambda: plane_partition(model, x0, x1 - x0, [0.0, 0.0, 1.0], 1.0),
        "affine_maps": lambda: affine_maps(model, np.zeros((1, 8), np.int8)),
        "trajectory_stats": lambda: trajectory_stats(model, x0, x1, n_pieces=100),
    }


class Residual(nn.Sequential):
    def forward(self, x):
        return x + super().forward(x)


class Scaled(nn.Linear):
    def forward(self, x):
        return 2 * super().forward(x) - 0.5


def _residual():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), Residual(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)), nn.ReLU(),
                         nn.Linear(8, 1)).double()


def _subclass():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), Scaled(8, 8), nn.ReLU(), nn.Linear(8, 1)).double()


def _hooked():
    model = _net()
    model[2].register_forward_hook(lambda m, i, o: 3 * o + 1)
    return model


def _pre_hooked():
    model = _net()
    model[2].register_forward_pre_hook(lambda m, i: (i[0] * -1,))
    return model


def _replaced_forward():
    model = _net()
    plain = model[2].forward
    model[2].forward = lambda x: plain(x) + 1.0
    return model


class Jitter(nn.Module):
    """A parametrization whose weight differs at every read: no type or hook says so."""

    def forward(self, w):
        return w + 0.1 * torch.randn_like(w)


def _jittered():
    model = _net()
    parametrize.register_parametrization(model[2], "weight", Jitter())
    return model


REWIRED = {  # how the model differs from its module list, and the module the refusal names
    "residual Sequential subclass": (_residual, "2 (Residual)"),
    "Linear subclass with its own forward": (_subclass, "layer 2 (Scaled)"),
    "forward hook": (_hooked, "layer 2 (Linear) has a forward hook"),
    "forward pre-hook": (_pre_hooked, "layer 2 (Linear) has a forward hook"),
    "forward replaced on the object": (_replaced_forward, "layer 2 (Linear): its forward was replaced"),
    "weight that changes between reads": (_jittered, "layer 2 (ParametrizedLinear) computes something else"),
}


@pytest.mark.parametrize("case", sorted(REWIRED))
def test_a_model_that_computes_other_than_its_modules_is_refused_by_every_reader_naming_the_module(case):
    make, named = REWIRED[case]
    model = make()
    for reader, call in _every_reader(model).items():
        with pytest.raises(TypeError, match="^" + re.escape(named)) as e:
            call()
        assert "plain torch modules" in str(e.value) or "remove it" in str(e.value), (reader, str(e.value))


def test_the_residual_model_differs_from_its_module_list_where_it_was_measured_as_one():
    """What the refusal prevents: the residual model's regions on the segment (dense sampling of the
    model itself) are not those of the plain stack of the same modules, which was measured."""
    model, stack = _residual(), nn.Sequential(*(m for name, m in _flat(_residual())))
    g = torch.Generator().manual_seed(2)
    ends = torch.randn(10, 2, 3, generator=g, dtype=torch.float64) * 3
    assert any(_dense_count(model, x0, x1)[0] != _dense_count(stack, x0, x1)[0] for x0, x1 in ends)


def _flat(model):
    for name, m in model.named_children():
        if isinstance(m, nn.Sequential):
            yield from _flat(m)
        else:
            yield name, m


def test_a_global_forward_hook_is_refused():
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        with pytest.raises(TypeError, match="global forward hook"):
            regions_on_line(_net(), *_points())
    finally:
        handle.remove()
    regions_on_line(_net(), *_points())  # and measured once it is gone


def test_torch_pruning_and_weight_norm_compute_what_their_weights_say_and_are_measured_exactly():
    """Hooks and parametrizations that only recompute a weight from the module's parameters are
    read: the count equals the real model's, sampled."""
    x0, x1 = _points()
    pruned = _net(widths=(3, 10, 10, 1), seed=3)
    torch_prune.random_unstructured(pruned[2], "weight", 0.5)
    _assert_exact(pruned, x0, x1)
    normed = _net(widths=(3, 10, 10, 1), seed=4)
    nn.utils.parametrizations.weight_norm(normed[2])
    with torch.no_grad():
        normed[2].parametrizations.weight.original0.mul_(3.0)  # the norm, changed: the weight follows
    _assert_exact(normed, x0, x1)


@pytest.mark.parametrize("scale", [1e150, 1e200, 1e300])
def test_huge_but_finite_first_layer_weights_give_the_real_models_count(scale):
    """A first layer scaled by 1e200 (finite in float64) gave 1 region where sampling finds 14: the
    squares in a norm overflowed and every neuron read as on its kink."""
    model, (x0, x1) = _net(widths=(3, 8, 8, 1), seed=0), _points()
    with torch.no_grad():
        model[0].weight.mul_(scale)
    _assert_exact(model, x0, x1)


def test_pattern_codes_of_no_piece_are_refused_and_hardtanhs_third_piece_is_read():
    model = _net()
    for bad in (2, -7, 0.5):
        with pytest.raises(ValueError, match=f"from 0 to 1 .*got {bad:g}$"):
            affine_maps(model, np.full((1, 8), bad))
    torch.manual_seed(0)
    hard = nn.Sequential(nn.Linear(3, 8), nn.Hardtanh(), nn.Linear(8, 1)).double()
    W, b = affine_maps(hard, np.full((1, 8), 2))  # every neuron saturated at +1: a constant map
    assert torch.equal(W, torch.zeros(1, 1, 3, dtype=torch.float64))
    assert torch.allclose(b, hard[2].weight.sum() + hard[2].bias)


@pytest.mark.parametrize("rtol", [-1, math.nan, 0.5, "1e-11", True])
def test_rtol_outside_a_rounding_tolerance_is_refused(rtol):
    with pytest.raises(ValueError, match="^rtol must be a number from 0 to 1e-06"):
        regions_on_line(_net(), *_points(), rtol=rtol)
    with pytest.raises(ValueError, match="^rtol must be a number from 0 to 1e-06"):
        plane_partition(_net(), [0, 0, 0], [1, 0, 0], [0, 1, 0], 1.0, rtol=rtol)


def test_bad_models_and_points_are_refused_naming_what_is_wrong():
    slope = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(math.nan), nn.Linear(8, 1)).double()
    for s in (math.nan, math.inf):
        slope[1].negative_slope = s
        with pytest.raises(ValueError, match=f"^layer 1 \\(LeakyReLU\\): negative_slope is {s}"):
            regions_on_line(slope, *_points())
    empty = nn.Sequential(nn.Linear(3, 0), nn.ReLU(), nn.Linear(0, 1)).double()
    with pytest.raises(ValueError, match="^layer 0 \\(Linear\\) has 3 inputs and 0 outputs"):
        regions_on_line(empty, *_points())
    with pytest.raises(ValueError, match="^x0 must have shape .* n >= 1 lines .*got shape \\(0, 3\\)"):
        regions_on_line(_net(), torch.zeros(0, 3), torch.zeros(0, 3))
    z = torch.ones(3, dtype=torch.complex128)
    with pytest.raises(ValueError, match="^x0 must hold real numbers; got complex128"):
        regions_on_line(_net(), z, 2 * z)
    with pytest.raises(ValueError, match="^center must hold real numbers"):
        plane_partition(_net(), z, [1, 0, 0], [0, 1, 0], 1.0)
    with pytest.raises(ValueError, match="^x0 must hold real numbers"):
        trajectory_stats(_net(), z, 2 * z)


def test_an_mlp_subclass_that_computes_otherwise_or_a_hooked_mlp_is_refused():
    from reluinit.nets import MLP, sample_mlp

    class Shifted(MLP):
        def preactivations(self, x):
            pre, out = super().preactivations(x)
            return [z + 1 for z in pre], out

    net = sample_mlp([3, 8, 8, 1], seed=0, readout=True, dtype=torch.float64)
    odd = Shifted(net.weights, net.biases, readout=True)
    with pytest.raises(TypeError, match="^Shifted: Shifted has its own preactivations"):
        regions_on_line(odd, *_points())
    net.register_forward_hook(lambda m, i, o: o + 1)
    with pytest.raises(TypeError, match="^MLP has a forward hook"):
        regions_on_line(net, *_points())


@pytest.mark.parametrize("how", ["prune", "weight_norm"])
def test_a_pruned_or_weight_normed_model_is_measured_right_after_an_optimizer_step(how):
    """torch's pruning and legacy weight norm hold the weight as an attribute recomputed only before
    a forward: right after an optimizer step it was stale, and the first call refused the model
    (the second, after the check's own forward, passed). Now the first call reads the current
    weight and counts what the model's sampling counts."""
    import warnings

    model, (x0, x1) = _net(widths=(3, 10, 10, 1), seed=5), _points()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch_prune.l1_unstructured(model[2], "weight", 0.3) if how == "prune" else nn.utils.weight_norm(model[2])
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(32, 3, dtype=torch.float64)).pow(2).mean().backward()
    opt.step()
    line = regions_on_line(model, x0, x1, 0.0, 1.0)
    dense, step = _dense_count(model, x0, x1)
    assert np.diff(line.intervals, axis=1).min() > 2 * step and line.count == dense
