"""``prune`` as a public API (issue 53, items 4 and 5): it leaves a model as it was, composes with
masks already applied and with ``torch.nn.utils.prune``, says what to pass when an argument is
missing, and takes Synaptic-Flow's options (a loss and several batches, a per-layer scope,
excluded layers, schedules over rounds), each checked against brute-force scoring."""

import copy
import inspect
import pydoc

import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils import parametrize
from torch.nn.utils import prune as torch_prune

from conftest import synflow_by_hand
from reluinit import pruning
from reluinit.inits import initialize, weight_layers
from reluinit.models import ResNet, VanillaCNN
from reluinit.pruning import (
    applied_masks,
    apply_masks,
    from_torch_prune,
    grasp_scores,
    magnitude_scores,
    masks_from_scores,
    prunable,
    prune,
    snip_scores,
    synflow_scores_once,
    to_torch_prune,
)

METHODS = ["random", "magnitude", "snip", "grasp", "synflow"]


def _batch(n=16, shape=(1, 8, 8), seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=gen), torch.randint(0, 10, (n,), generator=gen)


def _cnn(seed=3):
    return initialize(VanillaCNN(1, 8, 3, 10), "he", seed=seed)


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(torch.equal(a[n], b[n]) for n in a)


def _kept(masks) -> int:
    return sum(int(m.sum()) for m in masks.values())


def _twin(model, masks):
    """A plain copy of ``model`` with ``masks`` multiplied into its weights: the masked net, brute force."""
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for n, w in prunable(twin).items():
            w.mul_(masks[n])
    return twin


def _top(scores, density, alive=None):
    """The global top ``round(density * N)`` of ``scores`` among the ``alive`` weights."""
    if alive is not None:
        scores = {n: torch.where(alive[n], s, float("-inf")) for n, s in scores.items()}
    return masks_from_scores(scores, density)


# --- pruning that composes ------------------------------------------------------------------------


def _resnet18():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10)


@pytest.mark.parametrize("net, method, options", [
    ("resnet18", "snip", {}), ("resnet8", "grasp", {}), ("resnet8", "synflow", {"rounds": 2}),
    ("resnet8", "snip", {"scope": "layer", "exclude": ["last"]}), ("resnet8", "grasp", {"two_batches": True}),
    ("resnet8", "snip", {"masked": True}), ("resnet8", "magnitude", {"schedule": "linear", "rounds": 3})])
def test_scoring_leaves_a_model_with_batch_norm_as_it_was(net, method, options):
    """Every buffer (batch norm's running statistics and batch counts), every parameter and every
    submodule's train/eval mode bit for bit as before, on torchvision's ResNet18 (SNIP's default, the
    issue's case: 60 buffers moved) and, for the rest, a small ResNet; the premise checked: a forward
    pass in train mode moves the statistics."""
    model = _resnet18() if net == "resnet18" else initialize(ResNet(8, channels=(4, 8, 16)), "he", seed=1)
    model.train()
    list(model.children())[-3].eval()  # modes differ between submodules: each is put back
    shape = (3, 32, 32) if net == "resnet18" else (3, 8, 8)
    x, y = _batch(2, shape)
    options = dict(options)
    if options.pop("masked", False):
        apply_masks(model, prune(model, "magnitude", 0.5))
    kw = {"data": [(x, y), _batch(2, shape, seed=1)]} if options.pop("two_batches", False) else {"x": x, "y": y}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    modes = {n: m.training for n, m in model.named_modules()}
    masks = prune(model, method, 0.1, **kw, **options)
    assert _kept(masks) > 0
    after = model.state_dict()
    assert list(after) == list(state) and all(torch.equal(after[k], v) for k, v in state.items())
    assert {n: m.training for n, m in model.named_modules()} == modes
    with torch.no_grad():
        model(x)
    moved = [k for k, v in model.state_dict().items() if "running_mean" in k and not torch.equal(v, state[k])]
    assert moved


@pytest.mark.parametrize("method", ["snip", "grasp"])
def test_prune_after_apply_masks_scores_the_masked_net_and_only_shrinks(method):
    """Prune, apply, prune again: the second masks are the top scores of the net as masked (brute
    force: a plain copy with the masks multiplied in; GraSP's g and H over the kept weights only) among
    the weights kept; a pruned weight stays pruned; applying them narrows the one mask in place."""
    model = _cnn()
    x, y = _batch()
    first = prune(model, method, 0.3, x=x, y=y)
    apply_masks(model, first)
    keys = list(model.state_dict())
    second = prune(model, method, 0.1, x=x, y=y)
    twin = _twin(_cnn(), first)
    if method == "snip":
        scores = snip_scores(twin, x, y)
    else:
        def loss(params):
            out = functional_call(twin, {n: p * first[n] for n, p in params.items()}, (x,))
            return nn.functional.cross_entropy(out / 200.0, y)
        scores = grasp_scores(twin, loss_fn=loss)
    assert _same(second, _top(scores, 0.1, first))
    assert all(not (second[n] & ~first[n]).any() for n in first)
    total = sum(m.numel() for m in first.values())
    assert _kept(second) == round(0.1 * total)
    apply_masks(model, second)
    assert list(model.state_dict()) == keys and _same(applied_masks(model), second)
    for n, w in prunable(model).items():
        assert (w[~second[n]] == 0).all()


@pytest.mark.parametrize("method", METHODS)
def test_a_model_under_a_mask_that_keeps_everything_prunes_as_the_dense_one(method):
    """The path for masked models (a copy with the masks multiplied in, pruned weights ranked last)
    gives the papers' path's masks, bit for bit, when nothing is pruned yet."""
    model = _cnn()
    x, y = _batch()
    dense = prune(model, method, 0.1, x=x, y=y, in_shape=(1, 8, 8), rounds=10)
    apply_masks(model, {n: torch.ones_like(w, dtype=torch.bool) for n, w in prunable(model).items()})
    assert _same(prune(model, method, 0.1, x=x, y=y, in_shape=(1, 8, 8), rounds=10), dense)


def test_masks_go_to_torch_prune_and_back_with_the_same_forward_pass():
    model = _cnn()
    x, y = _batch()
    masks = prune(model, "snip", 0.2, x=x, y=y)
    ours, theirs = apply_masks(copy.deepcopy(model), masks), to_torch_prune(copy.deepcopy(model), masks)
    with torch.no_grad():
        expected = ours(x)
        assert torch.equal(theirs(x), expected)
    assert _same(from_torch_prune(theirs), masks) and _same(applied_masks(theirs), masks)

    twin = copy.deepcopy(ours)  # shares its parametrized classes with ``ours``
    to_torch_prune(twin)  # the masks it holds, handed over
    assert not parametrize.is_parametrized(twin[0]) and torch_prune.is_pruned(twin)
    with torch.no_grad():
        assert torch.equal(twin(x), expected) and torch.equal(ours(x), expected)  # the original still works
    assert _same(from_torch_prune(twin), masks)

    back = from_torch_prune(theirs, remove=True)
    assert not torch_prune.is_pruned(theirs)
    apply_masks(theirs, back)
    with torch.no_grad():
        assert torch.equal(theirs(x), expected)
    with pytest.raises(TypeError, match="from_torch_prune"):
        apply_masks(to_torch_prune(copy.deepcopy(model), masks), masks)


def test_prune_reads_masks_that_torch_prune_applied():
    model = _cnn()
    x, y = _batch()
    layers = [m for _, m in weight_layers(model)]
    for m in layers:
        torch_prune.l1_unstructured(m, "weight", amount=0.5)
    theirs = from_torch_prune(model)
    assert all(torch.equal(theirs[f"{n}.weight"], m.weight_mask.bool()) for n, m in weight_layers(model))
    masks = prune(model, "snip", 0.2, x=x, y=y)
    assert all(not (masks[n] & ~theirs[n]).any() for n in theirs)
    assert _kept(masks) == round(0.2 * sum(m.numel() for m in theirs.values()))
    to_torch_prune(model, masks)  # torch keeps what both keep
    assert _same(from_torch_prune(model), masks)


@pytest.mark.parametrize("call, error, words", [
    (lambda m, x, y: prune(m, "synflow", 0.1), TypeError, "in_shape=(3, 32, 32)"),
    (lambda m, x, y: prune(m, "snip", 0.1), TypeError, "pass x= and y="),
    (lambda m, x, y: prune(m, "grasp", 0.1, x=x), TypeError, "pass y="),
    (lambda m, x, y: prune(m, "snip", 0.1, x=x, y=y, data=[(x, y)]), TypeError, "not both"),
    (lambda m, x, y: prune(m, "magnitude", 0.1, loss=nn.functional.mse_loss), TypeError, "does not take a loss"),
    (lambda m, x, y: prune(m, "snip", 0.1, data=[]), ValueError, "data= gave no batch"),
    (lambda m, x, y: prune(m, "magnitude", 0.1, scope="unit"), ValueError, "scope must be"),
    (lambda m, x, y: prune(m, "magnitude", 0.1, schedule="cosine"), ValueError, "schedule must be"),
    (lambda m, x, y: prune(m, "magnitude", 1.5), ValueError, "density must be in [0, 1]"),
    (lambda m, x, y: prune(m, "magnitude", 0.1, exclude=["head"]), ValueError, "exclude='head' names no"),
])
def test_a_missing_or_wrong_argument_is_named_with_what_to_pass(call, error, words):
    model = _cnn()
    x, y = _batch()
    with pytest.raises(error) as raised:
        call(model, x, y)
    assert words in str(raised.value)


def test_synflow_reads_its_input_shape_from_a_batch():
    model = _cnn()
    x, y = _batch()
    expected = prune(model, "synflow", 0.1, in_shape=(1, 8, 8), rounds=5)
    assert _same(prune(model, "synflow", 0.1, x=x, rounds=5), expected)
    assert _same(prune(model, "synflow", 0.1, data=iter([(x, y)]), rounds=5), expected)


def test_help_lists_every_option_of_prune():
    signature = inspect.signature(prune)
    assert all(p.kind is not p.VAR_KEYWORD for p in signature.parameters.values())
    text = pydoc.render_doc(prune)
    missing = [name for name in signature.parameters if f":param {name}:" not in text]
    assert not missing
    assert list(inspect.signature(pruning.prune_with_s_cr).parameters) == list(signature.parameters)


# --- Synaptic-Flow's options ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["snip", "grasp"])
def test_a_loss_given_as_cross_entropy_and_one_batch_as_data_are_the_default_exactly(method):
    model = _cnn()
    x, y = _batch()
    masks, s_cr = pruning.prune_with_s_cr(model, method, 0.1, x=x, y=y)
    assert _same(prune(model, method, 0.1, x=x, y=y, loss=nn.functional.cross_entropy), masks)
    again, s_cr_again = pruning.prune_with_s_cr(model, method, 0.1, data=[(x, y)])
    assert _same(again, masks) and s_cr_again == s_cr


def test_snip_with_a_loss_over_batches_sums_the_gradients_as_synaptic_flow():
    """Synaptic-Flow's SNIP adds the batches' gradients, then takes |theta * g|: the scores of two
    batches are |s_1 + s_2| of the signed one-batch scores (not |s_1| + |s_2|); any loss."""
    model = _cnn()
    (x1, y1), (x2, y2) = _batch(seed=1), _batch(seed=2)

    def loss(out, y):
        return nn.functional.mse_loss(out.softmax(1), nn.functional.one_hot(y, 10).float())

    weights = prunable(model)
    signed = []
    for x, y in ((x1, y1), (x2, y2)):
        grads = torch.autograd.grad(loss(model(x), y), list(weights.values()))
        signed.append({n: (w * g).detach() for (n, w), g in zip(weights.items(), grads)})
    expected = {n: (signed[0][n] + signed[1][n]).abs() for n in weights}
    scores = pruning._snip(model, list(weights), [(x1, y1), (x2, y2)], loss)
    for n in weights:
        torch.testing.assert_close(scores[n], expected[n], rtol=1e-5, atol=1e-12)
    assert not all(torch.allclose(scores[n], signed[0][n].abs() + signed[1][n].abs()) for n in weights)
    masks = prune(model, "snip", 0.1, data=[(x1, y1), (x2, y2)], loss=loss)
    assert _same(masks, _top(expected, 0.1))


def test_grasp_over_batches_is_grasp_of_the_summed_loss():
    """Synaptic-Flow's two passes (g of all batches, then Hg batch by batch) are theta * H g of the
    sum of the batches' losses."""
    model = _cnn()
    (x1, y1), (x2, y2) = _batch(seed=1), _batch(seed=2)

    def total(params):
        return sum(nn.functional.cross_entropy(functional_call(model, params, (x,)) / 200.0, y)
                   for x, y in ((x1, y1), (x2, y2)))

    expected = grasp_scores(model, loss_fn=total)
    assert _same(prune(model, "grasp", 0.1, data=[(x1, y1), (x2, y2)]), _top(expected, 0.1))


@pytest.mark.parametrize("method", ["snip", "magnitude", "synflow"])
def test_per_layer_scope_keeps_each_layers_top_fraction(method):
    model = _cnn()
    x, y = _batch()
    density = 0.15
    masks = prune(model, method, density, x=x, y=y, in_shape=(1, 8, 8), scope="layer", rounds=1, schedule="linear")
    scores = {"snip": lambda: snip_scores(model, x, y), "magnitude": lambda: magnitude_scores(model),
              "synflow": lambda: synflow_scores_once(model, (1, 8, 8))}[method]()
    for n, s in scores.items():
        m = masks[n]
        assert int(m.sum()) == round(density * m.numel())
        assert s[m].min() >= s[~m].max()  # its own top scores
    assert not _same(masks, _top(scores, density))  # the premise: global pruning keeps other weights


def test_excluded_layers_stay_dense_and_the_rest_keep_their_top_scores():
    model = _cnn()
    x, y = _batch()
    names = list(prunable(model))
    masks = prune(model, "snip", 0.1, x=x, y=y, exclude=("first", "last", "bias", "batchnorm"))
    assert list(masks) == names[1:-1]
    rest = {n: s for n, s in snip_scores(model, x, y).items() if n in masks}
    assert _same(masks, _top(rest, 0.1))
    assert _same(prune(model, "snip", 0.1, x=x, y=y, exclude=[names[0].rsplit(".", 1)[0], names[-1]]), masks)
    default = prune(model, "snip", 0.1, x=x, y=y)
    assert _same(prune(model, "snip", 0.1, x=x, y=y, exclude=["bias", "batchnorm"]), default)
    apply_masks(model, masks)
    assert not parametrize.is_parametrized(dict(model.named_modules())[names[0].rsplit(".", 1)[0]])


def test_schedules_reach_the_target_in_their_last_round():
    density, rounds = 0.01, 7
    exponential = [pruning._density_at(r, rounds, density, "exponential", 1.0) for r in range(1, rounds + 1)]
    assert exponential == [density ** (r / rounds) for r in range(1, rounds + 1)]
    linear = [pruning._density_at(r, rounds, density, "linear", 1.0) for r in range(1, rounds + 1)]
    assert linear[:-1] == pytest.approx([1 - (1 - density) * r / rounds for r in range(1, rounds)], abs=1e-15)
    assert linear[-1] == density and pruning._density_at(rounds, rounds, density, "exponential", 0.3) == density
    from_masked = [pruning._density_at(r, 2, 0.1, "exponential", 0.4) for r in (1, 2)]
    assert from_masked == [pytest.approx(0.2), 0.1]  # counted from the fraction a masked model keeps


@pytest.mark.parametrize("schedule", ["linear", "exponential"])
def test_synflow_on_a_schedule_is_the_brute_force_loop_over_rounds(schedule):
    """Round k re-scores the net with the weights pruned so far at zero and keeps the global top
    ``density_k``; ``schedule="exponential"`` is SynFlow's own (the papers' path)."""
    model = initialize(ResNet(8, channels=(4, 8, 16)), "he", seed=6)
    density, rounds = 0.05, 4
    densities = [1 - (1 - density) * (r / rounds) if schedule == "linear" else density ** (r / rounds)
                 for r in range(1, rounds + 1)]
    masks = synflow_by_hand(model, (3, 8, 8), densities, _top)
    got = prune(model, "synflow", density, in_shape=(3, 8, 8), rounds=rounds, schedule=schedule)
    assert _same(got, masks)
    total = sum(m.numel() for m in masks.values())
    assert _kept(got) == round(density * total)


def test_iterative_magnitude_pruning_in_rounds_and_after_training():
    """``method="magnitude"`` with a schedule re-scores the masked weights each round: with nothing
    trained between rounds it keeps the one-shot masks; from a masked model it counts from the
    fraction kept, and masks only shrink."""
    model = _cnn()
    x, y = _batch()
    one_shot = prune(model, "magnitude", 0.1)
    assert _same(prune(model, "magnitude", 0.1, schedule="linear", rounds=3), one_shot)
    apply_masks(model, prune(model, "magnitude", 0.5))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):  # training moves the kept weights, so the next round's ranking is new
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    current = applied_masks(model)
    again = prune(model, "magnitude", 0.1, schedule="exponential", rounds=3)
    expected = _top({n: w.detach().abs() for n, w in prunable(model).items()}, 0.1, current)
    assert _same(again, expected) and not _same(again, one_shot)
    with pytest.raises(ValueError, match="masks only shrink: ask for density <= 0.5"):
        prune(model, "magnitude", 0.6)
