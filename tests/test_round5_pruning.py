"""Issue 97, pruning: a weight shared by several layers (tied) is scored and masked once, at the
density asked, by every pruner; a ``weight_norm`` model is scored as the weight it computes with;
dropout in train mode no longer changes the masks between identical calls; batches of other common
shapes are read; and a wrong density, batch or mask is refused by name before anything changes."""

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from reluinit import pruning
from reluinit.pruning import applied_masks, apply_masks, layer_table, masks_from_scores, prune

METHODS = list(pruning.PRUNERS)  # every pruner on offer, "sbp" included


def _tied():
    """The issue's net: 64 + 256 distinct weights, the 16 x 16 one shared by two layers."""
    torch.manual_seed(0)
    first, second = nn.Linear(16, 16), nn.Linear(16, 16)
    second.weight = first.weight
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), first, nn.ReLU(), second)


def _batch(n=8, d=4, classes=16, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen), torch.randint(0, classes, (n,), generator=gen)


def _distinct(model):
    """The distinct weight tensors of the conv and linear layers, as the layers compute with them."""
    out = {}
    for m in model.modules():
        if isinstance(m, nn.Linear):
            out.setdefault(id(pruning._stored(m)), m.weight)
    return list(out.values())


def _options(method, x, y):
    return {"x": x, "y": y, **({"rounds": 5} if method == "synflow" else {})}


# --- tied weights -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_a_tied_weight_is_masked_once_and_the_net_keeps_the_density_asked(method):
    model = _tied()
    x, y = _batch()
    masks = prune(model, method, 0.3, **_options(method, x, y))
    assert list(masks) == ["0.weight", "2.weight"]  # one mask for the shared tensor, under its first layer
    n = sum(w.numel() for w in _distinct(model))
    assert n == 320
    table = layer_table(masks)
    assert table["weights"].sum() == n and table["kept"].sum() == round(0.3 * n)
    apply_masks(model, masks)
    weights = _distinct(model)
    assert sum(int((w != 0).sum()) for w in weights) == round(0.3 * n)  # 96, not 37
    assert torch.equal(model[2].weight, model[4].weight)  # both layers compute with the one masked tensor
    assert torch.equal(model[4].weight != 0, masks["2.weight"] & (model[2].parametrizations.weight.original != 0))


def _snip_by_hand(model, x, y):
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()  # autograd sums a shared parameter's gradient over its uses
    return {n: (w * w.grad).abs() for n, w in [("0.weight", model[0].weight), ("2.weight", model[2].weight)]}


def _grasp_by_hand(model, x, y, temperature=200.0):
    weights = [model[0].weight, model[2].weight]
    g = torch.autograd.grad(nn.functional.cross_entropy(model(x) / temperature, y), weights, create_graph=True)
    hg = torch.autograd.grad(sum((a * a.detach()).sum() for a in g), weights)
    return {n: (w * h).detach() for n, w, h in zip(["0.weight", "2.weight"], weights, hg)}


def _synflow_by_hand(model, x, y):
    net = copy.deepcopy(model).double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    net(torch.ones(1, 4, dtype=torch.float64)).sum().backward()
    return {n: (w * w.grad).abs() for n, w in [("0.weight", net[0].weight), ("2.weight", net[2].weight)]}


@pytest.mark.parametrize("method, by_hand", [("snip", _snip_by_hand), ("grasp", _grasp_by_hand),
                                             ("synflow", _synflow_by_hand)])
def test_a_tied_weights_score_is_the_shared_parameters_in_the_net_that_uses_it_twice(method, by_hand):
    x, y = _batch()
    expected = masks_from_scores(by_hand(_tied(), x, y), 0.3)
    got = prune(_tied(), method, 0.3, x=x, y=y, **({"rounds": 1} if method == "synflow" else {}))
    assert list(got) == list(expected) and all(torch.equal(got[n], expected[n]) for n in got)


@pytest.mark.parametrize("options", [{"scope": "layer"}, {"schedule": "linear", "rounds": 3}, {"data": "two"}])
def test_a_tied_weight_keeps_the_density_with_every_option_and_after_training(options):
    x, y = _batch()
    model = _tied()
    options = {**options, "data": [(x, y), (x.flip(0), y.flip(0))]} if options.get("data") else {**options, "x": x, "y": y}
    masks = prune(model, "snip", 0.5, **options)
    apply_masks(model, masks)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    assert not model[2].weight[~masks["2.weight"]].any() and not model[4].weight[~masks["2.weight"]].any()
    again = prune(model, "magnitude", 0.2)  # prune the masked net again: one mask, only shrinks
    assert list(applied_masks(model)) == list(again) == ["0.weight", "2.weight"]
    assert not (again["2.weight"] & ~masks["2.weight"]).any()
    apply_masks(model, again)
    assert sum(int((w != 0).sum()) for w in _distinct(model)) == round(0.2 * 320)


def test_a_tied_weight_goes_to_torch_prune_and_back_as_one_mask():
    model = _tied()
    x, _ = _batch()
    masks = prune(model, "magnitude", 0.3)
    pruning.to_torch_prune(model, masks)
    out = model(x)
    back = pruning.from_torch_prune(model, remove=True)
    assert list(back) == ["0.weight", "2.weight"] and torch.equal(back["2.weight"], masks["2.weight"])
    apply_masks(model, back)
    assert torch.equal(model(x), out)


def test_two_masks_for_one_tied_tensor_are_refused_naming_both():
    model = _tied()
    keep = torch.ones(16, 16, dtype=torch.bool)
    with pytest.raises(ValueError) as raised:
        apply_masks(model, {"2.weight": keep, "4.weight": keep})
    assert "2.weight" in str(raised.value) and "4.weight" in str(raised.value) and "tied" in str(raised.value)
    assert not applied_masks(model)  # nothing applied


# --- weight_norm, dropout -----------------------------------------------------------------------------


def _normed():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 16))
    weight_norm(model[0])
    return model


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 16))


def _plain(model):
    """A plain net with the weights ``model`` computes with."""
    twin = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 16))
    with torch.no_grad():
        for a, b in [(twin[0], model[0]), (twin[2], model[2])]:
            a.weight.copy_(b.weight)
            a.bias.copy_(b.bias)
    return twin


@pytest.mark.parametrize("method", METHODS)
def test_a_weight_norm_model_is_scored_and_masked_as_the_weight_it_computes_with(method):
    model = _normed()
    x, y = _batch()
    twin = _plain(model)
    masks = prune(model, method, 0.3, **_options(method, x, y))
    expected = prune(twin, method, 0.3, **_options(method, x, y))
    assert list(masks) == list(expected) and all(torch.equal(masks[n], expected[n]) for n in masks)
    apply_masks(model, masks)
    apply_masks(twin, expected)
    assert torch.equal(model(x), twin(x))
    assert not model[0].weight[~masks["0.weight"]].any()
    again = prune(model, method, 0.1, **_options(method, x, y))  # prune the masked weight_norm net again
    assert all(not (again[n] & ~masks[n]).any() for n in masks)
    assert sum(int(m.sum()) for m in again.values()) == round(0.1 * (4 * 32 + 32 * 16))


def test_connected_reads_a_weight_norm_or_masked_layer_as_it_computes():
    emptied = {"0.weight": torch.zeros(32, 4, dtype=torch.bool), "2.weight": torch.ones(16, 32, dtype=torch.bool)}
    model = _normed()
    assert not pruning.connected(model, emptied, (4,))  # the emptied first layer cuts every path
    apply_masks(model, {"0.weight": torch.ones(32, 4, dtype=torch.bool)})
    assert not pruning.connected(model, emptied, (4,))
    assert pruning.connected(model, {"2.weight": torch.ones(16, 32, dtype=torch.bool)}, (4,))


class _Noisy(nn.Module):
    """A module of one's own that draws at random in train mode."""

    def forward(self, x):
        return x * (1 + torch.rand_like(x)) if self.training else x


@pytest.mark.parametrize("method", ["snip", "grasp"])
def test_dropout_in_train_mode_gives_the_same_masks_to_identical_calls(method):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 16))
    x, y = _batch()
    state = torch.get_rng_state()
    first, second = prune(model, method, 0.3, x=x, y=y), prune(model, method, 0.3, x=x, y=y)
    assert all(torch.equal(first[n], second[n]) for n in first)
    evaluated = prune(copy.deepcopy(model).eval(), method, 0.3, x=x, y=y)  # dropout is off while scoring
    assert all(torch.equal(first[n], evaluated[n]) for n in first)
    assert model.training and model[2].training and torch.equal(torch.get_rng_state(), state)
    noisy = nn.Sequential(nn.Linear(4, 64), _Noisy(), nn.ReLU(), nn.Linear(64, 16))
    first, second = prune(noisy, method, 0.3, x=x, y=y), prune(noisy, method, 0.3, x=x, y=y)
    assert all(torch.equal(first[n], second[n]) for n in first)


# --- batches of data= ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["snip", "grasp", "synflow", "magnitude"])
def test_batches_of_the_common_shapes_are_read_as_x_and_y(method):
    x, y = _batch()
    model = _mlp()
    options = {"rounds": 5} if method == "synflow" else {}
    expected = prune(model, method, 0.3, data=[(x, y)], **options)
    for batch in [[x, y], (x, y, torch.arange(8)), {"x": x, "y": y}, {"input": x, "target": y},
                  {"image": x, "label": y, "index": 0}]:
        got = prune(model, method, 0.3, data=[batch], **options)
        assert all(torch.equal(got[n], expected[n]) for n in expected)


@pytest.mark.parametrize("batch", [lambda x, y: (x,), lambda x, y: {"x": x}, lambda x, y: {"a": x, "b": y},
                                   lambda x, y: x])
def test_a_batch_of_another_shape_is_refused_naming_the_shape_expected(batch):
    x, y = _batch()
    with pytest.raises(TypeError) as raised:
        prune(_mlp(), "snip", 0.3, data=[batch(x, y)])
    message = str(raised.value)
    assert "data=" in message and "(x, y)" in message and "'x' and 'y'" in message


def test_synflow_reads_the_inputs_of_a_batch_without_labels():
    x, _ = _batch()
    expected = prune(_mlp(), "synflow", 0.3, in_shape=(4,), rounds=5)
    for batch in [(x,), {"x": x}]:
        got = prune(_mlp(), "synflow", 0.3, data=[batch], rounds=5)
        assert all(torch.equal(got[n], expected[n]) for n in expected)


# --- density and masks refused by name --------------------------------------------------------------


@pytest.mark.parametrize("density", [torch.tensor(0.3), {"0.weight": 0.3}, 0.3 + 0j, None, True, "0.3"])
@pytest.mark.parametrize("call", [
    lambda m, d: prune(m, "magnitude", d),
    lambda m, d: pruning.prune_each(m, "magnitude", [0.5, d]),
    lambda m, d: masks_from_scores(pruning.magnitude_scores(m), d),
])
def test_a_density_that_is_not_a_number_is_refused_naming_density(call, density):
    with pytest.raises(TypeError) as raised:
        call(_mlp(), density)
    assert "density must be a number in [0, 1]" in str(raised.value)


def test_a_per_layer_density_is_pointed_to_scope_layer():
    with pytest.raises(TypeError, match="scope='layer'"):
        prune(_mlp(), "magnitude", {"0.weight": 0.3})


@pytest.mark.parametrize("masks, error, words", [
    (lambda: {"2.weight": torch.ones(3, 3, dtype=torch.bool)}, ValueError, ["2.weight", "(3, 3)", "(16, 32)"]),
    (lambda: {"9.weight": torch.ones(3, 3, dtype=torch.bool)}, ValueError, ["'9.weight'", "0.weight", "2.weight"]),
    (lambda: {"1.weight": torch.ones(3, 3, dtype=torch.bool)}, ValueError, ["'1.weight'", "0.weight"]),
    (lambda: {"0": torch.ones(32, 4, dtype=torch.bool)}, ValueError, ["'0'", "0.weight"]),
    (lambda: {"2.weight": torch.ones(16, 32)}, TypeError, ["2.weight", "float32", "boolean"]),
])
def test_a_wrong_mask_is_refused_naming_the_layer_before_any_is_applied(masks, error, words):
    model = _mlp()
    before = copy.deepcopy(model.state_dict())
    given = {"0.weight": torch.rand(32, 4) < 0.5, **masks()}
    with pytest.raises(error) as raised:
        apply_masks(model, given)
    assert all(w in str(raised.value) for w in words)
    assert not applied_masks(model) and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
