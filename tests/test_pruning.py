"""Pruners against their definitions: mask gradients, a known Hessian, SynFlow's conservation law,
exact global sparsity, masks that survive training, and deep ResNets in float64."""

import copy
import math

import pytest
import torch
from torch import nn

from reluinit import inits, models, pruning
from reluinit.inits import initialize
from reluinit.models import ResNet, VanillaCNN, ffnn
from reluinit.pruning import (
    apply_masks,
    critical_sparsity,
    grasp_scores,
    layer_table,
    magnitude_scores,
    masks_from_scores,
    prunable,
    prune,
    snip_scores,
    sparsity,
    synflow_masks,
    synflow_scores_once,
)


def _batch(n=32, shape=(1, 8, 8), classes=10, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=gen), torch.randint(0, classes, (n,), generator=gen)


def test_snip_through_a_mask_gradient_is_theta_times_grad():
    model = initialize(ffnn(64, 32, 3, 10), "he", seed=1)
    x, y = _batch()
    scores = snip_scores(model, x, y)
    loss = nn.functional.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, model.weights)
    for (name, w), g in zip(prunable(model).items(), grads):
        torch.testing.assert_close(scores[name], (w * g).abs().detach(), rtol=1e-5, atol=1e-9)


def test_grasp_on_a_quadratic_keeps_what_the_formula_says():
    """L(theta) = 1/2 theta^T A theta + b^T theta: g = A theta + b, Hg = A g, and GraSP keeps the
    largest theta * Hg (it removes the largest -theta * Hg)."""
    model = nn.Sequential(nn.Linear(2, 1, bias=False))
    theta = torch.tensor([[1.0, -2.0]])
    with torch.no_grad():
        model[0].weight.copy_(theta)
    a = torch.tensor([[3.0, 1.0], [1.0, 2.0]])
    b = torch.tensor([0.5, -1.0])

    def loss(params):
        t = params["0.weight"][0]
        return 0.5 * t @ a @ t + b @ t

    scores = grasp_scores(model, loss_fn=loss)["0.weight"][0]
    g = a @ theta[0] + b
    expected = theta[0] * (a @ g)
    torch.testing.assert_close(scores, expected)
    keep = masks_from_scores({"0.weight": scores[None]}, 0.5)["0.weight"][0]
    assert keep.tolist() == (expected == expected.max()).tolist()


def test_synflow_scores_are_conserved_across_layers():
    """For a bias-free ReLU net, sum over a layer of theta dR/dtheta is R itself, for every layer."""
    model = initialize(ffnn(20, 30, 5, 7, bias=False), "he", seed=2)
    scores = synflow_scores_once(model, (20,))
    sums = torch.stack([s.sum() for s in scores.values()])
    assert torch.allclose(sums, sums[0], rtol=1e-6, atol=0)


@pytest.mark.parametrize("method", ["random", "magnitude", "snip", "grasp", "synflow"])
@pytest.mark.parametrize("density", [0.5, 0.1, 0.013])
def test_every_pruner_hits_the_global_sparsity_exactly(method, density):
    model = initialize(VanillaCNN(1, 8, 3, 10), "he", seed=3)
    x, y = _batch()
    masks = prune(model, method, density, x=x, y=y, in_shape=(1, 8, 8), rounds=10)
    total = sum(m.numel() for m in masks.values())
    assert abs(sum(int(m.sum()) for m in masks.values()) - round(density * total)) <= 1
    assert set(masks) == set(prunable(model))  # only conv and linear weights, never biases


def test_synflow_on_resnet32_with_doubled_filters_keeps_one_percent():
    model = initialize(ResNet(32), "he", seed=4)
    n = sum(w.numel() for w in prunable(model).values())
    assert n == pytest.approx(1.86e6, rel=0.01)
    # The all-ones forward pass of |theta| is far beyond float32's range (~3.4e38): hence float64.
    scores = synflow_scores_once(model, (3, 32, 32))
    total = sum(s.sum() for s in scores.values()) / len(scores)
    assert torch.isfinite(total) and total > 3.4e38
    masks = synflow_masks(model, (3, 32, 32), 0.01, rounds=100)
    assert abs(sum(int(m.sum()) for m in masks.values()) - round(0.01 * n)) <= 1


def test_synflow_searches_only_the_kept_weights_and_prunes_as_the_global_top_k_does():
    """Each SynFlow round keeps the top k of its scores; a pruned weight scores 0 and k only
    shrinks, so the search over the weights kept so far (synflow_masks) gives the masks of the
    plain global top k over all scores (masks_from_scores), round after round."""
    from conftest import synflow_by_hand

    model = initialize(ResNet(8, channels=(4, 8, 16)), "he", seed=6)
    density, rounds = 0.05, 12
    masks = synflow_by_hand(model, (3, 8, 8), [density ** (r / rounds) for r in range(1, rounds + 1)],
                            lambda scores, d, _: masks_from_scores(scores, d))
    got = synflow_masks(model, (3, 8, 8), density, rounds)
    assert list(got) == list(masks)
    assert all(torch.equal(got[n], masks[n]) for n in masks)


def test_pruned_weights_stay_zero_through_training():
    model = initialize(ffnn(64, 32, 2, 10), "he", seed=5)
    x, y = _batch()
    masks = prune(model, "magnitude", 0.2)
    apply_masks(model, masks)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    for name, w in prunable(model).items():
        assert (w[~masks[name]] == 0).all()
    assert sparsity({n: w != 0 for n, w in prunable(model).items()}) == pytest.approx(0.8, abs=1e-3)


def test_layer_collapse_and_critical_sparsity():
    scores = {"a": torch.tensor([1.0, 2.0, 3.0, 4.0]), "b": torch.tensor([0.5, 2.5])}
    # The smallest layer maximum is 2.5: the three scores below it go first, then layer b empties.
    assert critical_sparsity(scores) == pytest.approx(3 / 6)
    table = layer_table(masks_from_scores(scores, 2 / 6))
    assert table["collapsed"].tolist() == [False, True]
    model = initialize(ffnn(16, 8, 2, 4), "he", seed=6)
    s_cr = critical_sparsity(magnitude_scores(model))
    just_below = layer_table(masks_from_scores(magnitude_scores(model), 1 - s_cr + 1e-9))
    beyond = layer_table(masks_from_scores(magnitude_scores(model), 1 - s_cr - 2 / 300))
    assert not just_below["collapsed"].any() and beyond["collapsed"].any()
    assert math.isfinite(s_cr)


def test_rescaling_brings_a_pruned_tanh_net_back_to_the_edge_of_chaos():
    from reluinit.meanfield import eoc_sigma_w
    from reluinit.pruning import chi_empirical, rescale

    sb = 0.2
    sw = eoc_sigma_w(sb, "tanh")
    model = initialize(ffnn(100, 500, 30, 10, "tanh"), "sigma", sigma_w=sw, sigma_b=sb, seed=0).double()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 100, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 10, (64,), generator=gen)
    assert chi_empirical(model, x) == pytest.approx(1.0, abs=0.02)
    masks = prune(model, "snip", 0.3, x=x, y=y)
    apply_masks(model, masks)
    assert chi_empirical(model, x) < 0.9  # pruning leaves the EOC (Proposition 1)
    rescale(model, masks, sigma_w=sw)
    assert chi_empirical(model, x) == pytest.approx(1.0, abs=0.02)
    for name, w in prunable(model).items():  # still the same mask, each unit's kept sum of squares sw^2
        assert (w[~masks[name]] == 0).all()
        rows = (w**2).sum(dim=1)
        assert torch.allclose(rows[rows > 0], torch.full_like(rows[rows > 0], sw**2))


def test_rp_bounds():
    from reluinit.theory import rp_mbp_bound, rp_theorem1_bound

    # kappa = 0.2 in either base, the chi and the bound read with the same logarithm
    assert rp_theorem1_bound(10 ** (-8 * 0.2), 100, 100, log=math.log10) == pytest.approx(0.275, abs=0.002)  # 27%
    assert rp_theorem1_bound(math.exp(-8 * 0.2), 100, 100) == pytest.approx(0.62, abs=0.01)
    bounds = [rp_mbp_bound(g, 10_000, n_grid=20_001, n_eps=100) for g in (2, 5, 10)]
    assert all(0 < b <= 1.0 for b in bounds) and bounds[0] > bounds[1] > bounds[2]  # more uneven, earlier collapse


def test_rescaling_a_pruned_cnn_is_eq7_per_channel_and_kernel_position():
    """Eq. 7 against a loop over its definition: one rho per (out channel, kh, kw), constant over
    input channels, giving every slice's kept weights the dense sum of squares sigma_w^2 / 9 (fan-in
    n_{l-1} * 9 for 3x3); a linear row is one slice (sigma_w^2); empty slices stay zero."""
    from reluinit.pruning import rescale

    model = initialize(VanillaCNN(4, 8, 3, 10), "sigma", sigma_w=1.5, seed=7).double()
    masks = prune(model, "random", 0.3, seed=1)
    apply_masks(model, masks)
    before = {n: w.detach().clone() for n, w in prunable(model).items()}
    rescale(model, masks, sigma_w=1.5)
    for name, w in prunable(model).items():
        w0, m = before[name], masks[name]
        positions = w0[0, 0].numel()
        expected = torch.zeros_like(w0)
        for o in range(w0.shape[0]):
            for pos in range(positions):  # brute force: the definition, slice by slice
                sl = (o, slice(None), *divmod(pos, w0.shape[-1])) if w0.dim() == 4 else (o, slice(None))
                alpha = (w0[sl][m[sl]] ** 2).sum()
                if alpha > 0:
                    expected[sl] = w0[sl] * (1.5**2 / positions / alpha).sqrt()
        torch.testing.assert_close(w.detach(), expected, rtol=1e-12, atol=0)
        slices = (w**2).sum(dim=1)  # [out, kh, kw] or [out]
        kept = m.any(dim=1)
        assert (~kept).any() or w0.dim() == 2  # the test does meet empty slices in the convs
        torch.testing.assert_close(slices[kept], torch.full_like(slices[kept], 1.5**2 / positions))
        assert (slices[~kept] == 0).all() and (w[~m] == 0).all()
    rescale(model, masks)  # sigma_w=None, the authors' normalisation: a unit sum of squares per slice
    for name, w in prunable(model).items():
        slices, kept = (w**2).sum(dim=1), masks[name].any(dim=1)
        torch.testing.assert_close(slices[kept], torch.ones_like(slices[kept]))


def test_rescaling_changes_a_pruned_vgg_with_batch_norm():
    """BN in train mode divides each channel by its batch std, so any one factor per output
    channel cancels: rescaling only acts through Eq. 7's per-position factors. On the pruned VGG16
    the features before the classifier must move by a good fraction of their scale."""
    from reluinit.models import build
    from reluinit.pruning import rescale

    model = initialize(build("vgg16", 10, (3, 32, 32)), "he", seed=8).train()
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    masks = prune(model, "magnitude", 0.05)
    apply_masks(model, masks)
    features = nn.Sequential(*list(model)[:-1])  # all but the readout, whose row factor no BN cancels
    with torch.no_grad():
        before = features(x)
        rescale(model, masks, sigma_w=math.sqrt(2))
        after = features(x)
        # the premise, checked: any positive factor per output channel leaves the features alone
        scaled = copy.deepcopy(model)
        gen = torch.Generator().manual_seed(3)
        for m in scaled.modules():
            if isinstance(m, nn.Conv2d):
                w = m.parametrizations.weight.original
                w.mul_(0.5 + 1.5 * torch.rand(w.shape[0], 1, 1, 1, generator=gen))
        torch.testing.assert_close(nn.Sequential(*list(scaled)[:-1])(x), after, rtol=1e-3, atol=1e-3)
    assert (after - before).abs().max() > 0.2 * before.abs().max()  # per-channel factors: ~1e-4 of it
    assert torch.linalg.vector_norm(after - before) > 0.2 * torch.linalg.vector_norm(before)


def test_rp_tables_initialise_resnets_as_the_authors_do():
    """RP's ResNets: convs N(0, 2 / fan_out) (Kaiming fan-out), the classifier N(0, 0.01^2), no bias;
    an FFNN keeps He by fan-in."""
    from types import SimpleNamespace

    from reluinit.experiments.rp_train import run_model

    split = SimpleNamespace(n_classes=10, x=torch.zeros(1, 3, 32, 32))
    run = {"method": "snip", "model": "resnet32", "activation": "relu", "init": "he", "width": None, "seed": 3}
    model, name, _, _ = run_model({}, run, split)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    big = max(convs, key=lambda m: m.weight.numel())
    fan_out = big.weight.shape[0] * big.weight[0, 0].numel()
    assert big.weight.std().item() == pytest.approx(math.sqrt(2 / fan_out), rel=0.02)
    fc = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert fc.weight.std().item() == pytest.approx(0.01, rel=0.05) and float(fc.bias.abs().max()) == 0.0
    ffnn = {**run, "model": "ffnn", "width": 100, "depth": 3}
    model, _, _, _ = run_model({}, ffnn, SimpleNamespace(n_classes=10, x=torch.zeros(1, 1, 28, 28)))
    lin = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][1]
    assert lin.weight.std().item() == pytest.approx(math.sqrt(2 / 100), rel=0.05)


def test_rp_t8_stable_resnet50_builds_and_trains_a_step_on_224_images():
    """RP-T8's headline method (SBP-SR) needs the Stable ResNet50: torchvision's ImageNet ResNet50
    with every bottleneck's residual branch divided by sqrt(16); one CPU forward/backward step."""
    from types import SimpleNamespace

    from reluinit.experiments.rp_train import run_model
    from reluinit.models import Scale

    run = {"method": "sbp_sr", "model": "resnet50_imagenet", "activation": "relu", "init": "he", "width": None,
           "seed": 0}
    model, name, _, _ = run_model({}, run, SimpleNamespace(n_classes=1000, x=torch.zeros(1, 3, 224, 224)))
    assert name == "stable_resnet50_imagenet"
    scales = [m.factor for m in model.modules() if isinstance(m, Scale)]
    assert len(scales) == 16 and all(f == pytest.approx(0.25) for f in scales)
    x, y = torch.randn(2, 3, 224, 224), torch.tensor([3, 999])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert torch.isfinite(loss) and all(g is not None and torch.isfinite(g).all() for g in grads)


def test_rp_vgg16_is_the_authors_and_is_pruned_without_its_batch_norms():
    """RP-T5's VGG16 (issue 14, item 2): bias-free convolutions with circular padding, 4 max-poolings
    and a 2x2 average pooling; the pruners score it without batch norm (the authors prune a BN-free
    VGG and copy the weights into the BN model), and the masks come back under the model's names."""
    from reluinit.models import VGG16, build, pruning_view

    model = initialize(build("vgg16", 10, (3, 32, 32)), "he", seed=4).train()
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 13 and all(c.bias is None and c.padding_mode == "circular" for c in convs)
    assert [type(m).__name__ for m in model if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d))] == ["MaxPool2d"] * 4 + ["AvgPool2d"]
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert sum(isinstance(m, nn.Conv2d) for m in build("vgg16x3", 10, (3, 32, 32)).modules()) == 39
    view = pruning_view(model)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in view.modules())
    assert [w.data_ptr() for w in prunable(view).values()] == [w.data_ptr() for w in prunable(model).values()]

    x, y = _batch(20, (3, 32, 32))
    masks = prune(model, "snip", 0.1, x=x, y=y)
    assert list(masks) == list(prunable(model))  # the model's names ("1.weight" skips a BN index)
    twin = nn.Sequential(*[copy.deepcopy(m) for m in model if not isinstance(m, nn.BatchNorm2d)])
    expected = masks_from_scores(snip_scores(twin, x, y), 0.1)
    assert all(torch.equal(a, b) for a, b in zip(masks.values(), expected.values()))
    with_bn = masks_from_scores(snip_scores(model, x, y), 0.1)  # what scoring with BN present keeps
    assert any(not torch.equal(a, b) for a, b in zip(masks.values(), with_bn.values()))
    fc = ffnn(4, 4, 1, 2)
    assert isinstance(model, VGG16) and pruning_view(fc) is fc


def test_row_shuffled_keeps_every_units_count_and_moves_the_weights():
    from reluinit.pruning import row_shuffled

    model = initialize(VanillaCNN(1, 8, 2, 10), "he", seed=1)
    masks = prune(model, "magnitude", 0.3)
    shuffled = row_shuffled(masks, seed=5)
    for name, m in masks.items():
        torch.testing.assert_close(shuffled[name].flatten(1).sum(1), m.flatten(1).sum(1))
    assert any(not torch.equal(shuffled[n], m) for n, m in masks.items())


def test_rescaled_net_with_a_mask_independent_of_it_is_back_on_the_edge_of_chaos():
    """Proposition 1 under its own assumption (the mask independent of the weights and the inputs):
    a tanh FFNN at the EOC, 70% of each row pruned at random, rescaled to sigma_w^2 per row,
    measures chi = 1 again; pruned without rescaling it sits near 0.3 (chi scales with the kept
    variance)."""
    from reluinit.meanfield import eoc_sigma_w
    from reluinit.pruning import chi_empirical, rescale

    sigma_w = eoc_sigma_w(0.2, "tanh")
    x = torch.randn(64, 100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    chis, pruned = [], []
    for seed in range(2):
        model = initialize(ffnn(100, 150, 30, 10, "tanh"), "sigma", sigma_w=sigma_w, sigma_b=0.2, seed=seed).double()
        masks = prune(model, "random", 0.3, seed=seed)
        apply_masks(model, masks)
        pruned.append(chi_empirical(model, x))
        chis.append(chi_empirical(rescale(model, masks, sigma_w=sigma_w), x))
    assert sum(chis) / 2 == pytest.approx(1.0, abs=0.03)
    assert sum(pruned) / 2 < 0.5


def test_rp_f1_measures_chi_over_nets_with_the_two_controls():
    """RP-F1 (issue 14, item 8): chi of the dense, pruned and rescaled net is a mean over ``n_nets``
    nets (one net's value moves by a few percent), beside two controls that keep the rescaling and
    break the mask's dependence on the net: its per-row counts at random places, and the SBP mask
    on freshly drawn weights."""
    from reluinit.experiments import rp

    s = {"seed": 3, "dataset": "digits", "data_dir": "unused", "scale": "quick", "activation": "tanh",
         "depth": 12, "width": 40, "sparsity": 0.7, "sigma_b": 0.2, "chaotic_sigma_w": 3.0,
         "batch_per_class": 4, "n_nets": 3}
    t = rp.f1_measure(s, "eoc", device="cpu")
    assert len(t) == 12 * 40 and (t["chi_nets"] == 3).all()
    for stage in rp.CHI_STAGES:
        assert t[f"chi_measured_{stage}"].nunique() == 1 and t[f"chi_measured_{stage}_sd"].iloc[0] > 0
    first = rp.f1_measure({**s, "n_nets": 1}, "eoc", device="cpu")
    assert first["kept_fraction"].equals(t["kept_fraction"])  # the first net is the one shown
    assert abs(t["chi_measured_rescaled"].iloc[0] - 1) < abs(t["chi_measured_pruned"].iloc[0] - 1)


@pytest.mark.parametrize("sigma_w", [3.0, 1.304145840057801, 1.0])
def test_measured_chi_of_a_dense_net_is_the_mean_field_chi_in_every_phase(sigma_w):
    """chi_empirical against meanfield.chi for a deep tanh net (sigma_b = 0.2): chaotic (1.85), EOC
    (1) and ordered (0.78). A finite-difference probe read 1.44 for the chaotic net at depth 100:
    the perturbation grows like chi^l until the activations saturate (issue 14, item 8)."""
    from reluinit.meanfield import chi
    from reluinit.pruning import chi_empirical

    x = torch.randn(64, 100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = initialize(ffnn(100, 200, 100, 10, "tanh"), "sigma", sigma_w=sigma_w, sigma_b=0.2, seed=1).double()
    assert chi_empirical(model, x) == pytest.approx(chi(sigma_w, 0.2, "tanh"), rel=0.03)


def test_a_new_pruner_is_a_class_and_a_name():
    """A method registered under a name prunes through ``prune`` and RP's training runs (by that
    name), with the base's global threshold; every method the schema allows resolves."""
    import yaml

    from conftest import ROOT
    from reluinit.experiments import rp_train

    @pruning.pruner("toy_last_layers")
    class LastLayers(pruning.Pruner):  # scores grow with depth: the deepest weights are kept
        def scores(self, model, **_):
            return {n: torch.full_like(w, float(i)) for i, (n, w) in enumerate(pruning.prunable(model).items())}

    try:
        model = inits.initialize(models.build("ffnn", 10, (1, 8, 8), width=16, depth=3), "he", seed=0)
        masks = pruning.prune(model, "toy_last_layers", 0.2)
        kept = [int(m.sum()) for m in masks.values()]
        assert sum(kept) == round(0.2 * sum(m.numel() for m in masks.values()))
        assert kept[0] == 0 and kept[-1] == masks[list(masks)[-1]].numel()  # the readout first, then layer 3
        assert rp_train.method("toy_last_layers") == ("toy_last_layers", False, False)
    finally:
        del pruning.PRUNERS["toy_last_layers"]
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    for name in schema["$defs"]["rp_train"]["properties"]["methods"]["items"]["enum"]:
        p, *_ = rp_train.method(name)
        assert p is None or p in pruning.PRUNERS
    with pytest.raises(ValueError, match="unknown pruning method 'obd'"):
        pruning.prune(model, "obd", 0.5)


def test_masks_on_disk_are_bits_that_come_back_exactly(tmp_path):
    """``save_masks`` stores each mask at one bit per weight; ``load_masks`` returns the same masks
    and facts; the digest that keys a training checkpoint changes with any one bit."""
    model = inits.initialize(models.build("cnn", 10, (1, 8, 8), width=6, depth=3), "he", seed=1)
    masks, s_cr = pruning.prune_with_s_cr(model, "magnitude", 0.3)
    runs = {"a": {"masks": masks, "net_seed": 7, "s_cr": s_cr}, "dense": {"masks": None}}
    pruning.save_masks(runs, tmp_path / "m.pt")
    back = pruning.load_masks(tmp_path / "m.pt")
    assert list(back["a"]["masks"]) == list(masks) and back["dense"]["masks"] is None
    assert all(torch.equal(back["a"]["masks"][n], m) for n, m in masks.items()) and back["a"]["net_seed"] == 7
    n_weights = sum(m.numel() for m in masks.values())
    assert (tmp_path / "m.pt").stat().st_size < n_weights / 8 + 4000  # bits, not bytes
    facts = pruning.mask_facts(back)
    assert set(facts["run"]) == {"a"} and facts["kept"].sum() == round(0.3 * n_weights)
    assert facts["achieved_sparsity"].iloc[0] == pytest.approx(0.7, abs=1e-3) and 0 < s_cr < 1
    flipped = {n: m.clone() for n, m in masks.items()}
    first = next(iter(flipped))
    flipped[first].view(-1)[0] ^= True
    assert pruning.masks_digest(flipped) != pruning.masks_digest(masks) == pruning.masks_digest(back["a"]["masks"])


def test_the_ordered_point_scan_empties_layers_sooner_the_further_chi_is_from_one(tmp_path):
    """``tools.ordered_point`` (the evidence for RP's ordered point, on the bundled stand-in for
    MNIST): each row's chi is its target, and SBP empties a layer of the same nets at a lower
    sparsity deep in the ordered phase than near the edge (Theorem 1: the bound falls with |log chi|)."""
    from reluinit.meanfield import chi
    from reluinit.tools.ordered_point import scan

    t = scan(str(tmp_path), ["tanh"], [0.05, 0.95], [12], nets=2, width=32, scale="quick")
    assert len(t) == 4 and t.s_cr.between(0, 1).all()
    assert all(chi(sw, 1.0, "tanh") == pytest.approx(c, abs=1e-9) for sw, c in zip(t.sigma_w, t.chi_target))
    means = t.groupby("chi_target").s_cr.mean()
    assert means[0.05] < means[0.95]
