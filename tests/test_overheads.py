"""The per-step overheads removed from training change no number (issue: the GPU at its own pace).

Each removal is trained for 20 steps beside the code it replaced, written out here as it was, on
the CPU: the weights are bitwise equal (masks kept as float, no cast per step; no product by a
branch scale of 1; batches stored channels-last), or where the order of a sum changes, within the
measured rounding (circular padding as two concatenations). SGD is fused on CUDA only: on the CPU
torch's fused SGD is not bitwise its per-tensor one.
"""

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from reluinit import datasets, pruning, training
from reluinit.inits import initialize
from reluinit.models import BasicBlock, ResNet, VanillaCNN, build
from reluinit.training import DeviceData, Recipe, fit

TRAIN = DeviceData.from_split(datasets.digits(True), "cpu")
TEST = DeviceData.from_split(datasets.digits(False), "cpu", like=TRAIN)


class CastMask(nn.Module):
    """The mask parametrization as it was: the bool mask cast to the weights' type every forward."""

    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, w):
        return w * self.mask.to(w.dtype)


class ScaledBlock(BasicBlock):
    """The ResNet block as it was: the branch always multiplied by its scale, 1 included."""

    def forward(self, x):
        return self.out(self.shortcut(x) + self.branch(x) * self.branch_scale)


def _train(model, recipe, data=(TRAIN, TEST)):
    fit(model, *data, recipe, seed=3)
    return model


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def _masks(model, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.rand(w.shape, generator=gen) < 0.4 for n, w in model.named_parameters()
            if n.endswith("weight") and w.dim() > 1}


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_masks_kept_as_float_train_bitwise_as_cast_masks_and_pruned_weights_stay_zero(optimizer):
    recipe = Recipe(optimizer=optimizer, lr=0.05 if optimizer == "sgd" else 3e-3, momentum=0.9, weight_decay=1e-3,
                    iterations=20, batch_size=32)
    models = []
    for cast in (False, True):
        model = initialize(build("ffnn", 10, (1, 8, 8), "tanh", width=16, depth=3), "he", seed=1)
        masks = _masks(model)
        if cast:
            for name, mask in masks.items():
                layer = dict(model.named_modules())[name.rsplit(".", 1)[0]]
                with torch.no_grad():
                    layer.weight.mul_(mask)
                parametrize.register_parametrization(layer, "weight", CastMask(mask))
        else:
            pruning.apply_masks(model, masks)
        models.append(_train(model, recipe))
        for name, mask in masks.items():
            assert torch.all(dict(model.named_modules())[name.rsplit(".", 1)[0]].weight[~mask] == 0)
    assert _same(*models)
    # a float64 copy and a loaded state keep the float mask in step with the bool one
    twin = models[0].double()
    factor = twin.layers[0].parametrizations.weight[0].factor
    assert factor.dtype == torch.float64 and torch.equal(factor.bool(), twin.layers[0].parametrizations.weight[0].mask)


def test_a_branch_scale_of_one_is_not_multiplied_and_trains_bitwise_the_same():
    recipe = Recipe(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=5e-4, iterations=20, batch_size=16)
    data = datasets.Split(torch.rand(64, 3, 8, 8), torch.randint(0, 10, (64,)), "random")
    train = DeviceData.from_split(data, "cpu")
    models = []
    for old in (False, True):
        model = initialize(ResNet(8, channels=(4, 8, 8)), "he", seed=0)
        if old:
            for block in model.blocks:
                block.__class__ = ScaledBlock
        models.append(_train(model, recipe, (train, train)))
    assert _same(*models)


def test_circular_padding_as_two_concatenations_is_torchs_forward_and_trains_within_rounding():
    """The padded input is the same tensor, so the forward pass is bitwise torch's; the backward
    sums the wrapped rows' gradients in another order, so 20 steps of a cnn differ from torch's
    circular padding in the last bits (1.3e-7 of the largest weight, measured)."""
    recipe = Recipe(optimizer="sgd", lr=0.05, iterations=20, batch_size=32)
    models = []
    for old in (False, True):
        model = initialize(VanillaCNN(1, 8, 3, 10, "tanh"), "he", seed=0)
        if old:
            for m in model.modules():
                if isinstance(m, nn.Conv2d):
                    m.__class__ = nn.Conv2d
        models.append(_train(model, recipe))
    x = torch.randn(2, 1, 8, 8)
    conv = models[0][0]
    torch_conv = nn.Conv2d(1, 8, 3, padding=1, padding_mode="circular")
    torch_conv.load_state_dict(conv.state_dict())
    assert torch.equal(conv(x), torch_conv(x))
    worst = max(float((p - q).abs().max() / p.abs().max())
                for p, q in zip(models[0].state_dict().values(), models[1].state_dict().values()))
    assert 0 < worst <= 1e-6


def test_sgd_is_fused_on_cuda_only_where_the_cpu_s_fused_one_rounds_differently():
    """On the CPU torch's fused SGD is not bitwise the per-tensor SGD a CPU run uses (a conv
    weight's 459 elements, measured): the CPU keeps it, CUDA gets the fused one."""
    recipe = Recipe(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True)
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(3, 17, 3, 3, generator=gen).requires_grad_()]
    opt = recipe.optimizer_for(params)
    assert not opt.defaults["fused"]
    assert training._fusable([torch.empty(1, device="meta")], cpu=False) is False
    fused = [params[0].detach().clone().requires_grad_()]
    fused_opt = torch.optim.SGD(fused, lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True, fused=True)
    for _ in range(30):
        g = torch.randn(3, 17, 3, 3, generator=gen)
        params[0].grad, fused[0].grad = g.clone(), g.clone()
        opt.step()
        fused_opt.step()
    assert torch.allclose(params[0], fused[0], rtol=1e-6, atol=1e-7)
    assert not torch.equal(params[0], fused[0])  # why the CPU does not use it


def test_channels_last_batches_are_slices_of_data_stored_channels_last():
    x = torch.rand(40, 3, 6, 6)
    y = torch.randint(0, 10, (40,))
    cl = DeviceData(x, y, "cpu", channels_last=True)
    plain = DeviceData(x, y, "cpu")
    assert cl.x.is_contiguous(memory_format=torch.channels_last)
    order_a, order_b = cl.order(torch.Generator().manual_seed(0)), plain.order(torch.Generator().manual_seed(0))
    for start in range(0, 40, 16):  # the trainer's batches: slices of an epoch's order, taken, in the model's layout
        (xa, ya), (xb, yb) = cl.take(order_a[start:start + 16]), plain.take(order_b[start:start + 16])
        xa, xb = cl.fmt(xa), plain.fmt(xb)
        assert xa.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
