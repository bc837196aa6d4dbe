"""The torch models RP prunes: FFNN (a ``nets.MLP``), a vanilla CNN, VGG16 (and 3x wide), CIFAR ResNets with doubled
filters and their Stable variants; and the initializations (He, Glorot, any (sigma_w, sigma_b)).

Choices:
* The vanilla CNN has no pooling and uses periodic (circular) padding by default, so every layer
  sees a translation-invariant input, as in the mean-field analysis of convolutions; ``padding=
  "zeros"`` is the other option. Its classifier averages each channel over space.
* VGG16 is the RP authors' CIFAR variant: 13 bias-free 3x3 convolutions with circular padding,
  each followed by batch norm and the activation, 4 max-poolings, a final 2x2 average pooling and
  one linear classifier. The authors prune it without its batch norms and copy the weights into
  the model that trains: ``pruning_view`` is that BN-free net, sharing the weights. RP's 3xVGG16
  has 3 times the convolutions between two poolings (``repeat=3``). Poolings round up
  (``ceil_mode``), which changes nothing on 32x32 images and lets the quick scale's 8x8 digits
  through all five.
* CIFAR ResNets: BasicBlocks, depth 6n + 2, channels [32, 64, 128] ("doubled filters"), 1x1
  convolution shortcuts where the shape changes. The Stable ResNet divides each residual branch
  (after its last batch norm) by sqrt(L), L the number of blocks (15/24/51 for ResNet32/50/104);
  the shortcut is not scaled.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .engine import loss_precision
from .inits import initialize
from .nets import MLP, Activation


def ffnn(n_in: int, width: int, depth: int, n_out: int, activation: str = "relu", bias: bool = True) -> MLP:
    """Fully connected: ``depth`` hidden layers of ``width`` units, then a linear readout; a
    ``nets.MLP``, the one description of such a net, with torch's default layers until
    ``initialize`` draws them."""
    return MLP.fresh([n_in] + [width] * depth + [n_out], activation, readout=True, bias=bias)


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` whose circular padding is two concatenations (rows, then columns) instead of
    torch's general N-d circular pad, a composite of about 33 kernels per convolution on a GPU. The
    padded input is the same tensor, so the forward pass is bitwise torch's; zero padding is
    torch's own. Same parameters, state and masks as ``nn.Conv2d``."""

    def _conv_forward(self, x, weight, bias):
        if self.padding_mode != "circular":
            return super()._conv_forward(x, weight, bias)
        ph, pw = self.padding
        if ph:
            x = torch.cat([x[..., -ph:, :], x, x[..., :ph, :]], dim=-2)
        if pw:
            x = torch.cat([x[..., -pw:], x, x[..., :pw]], dim=-1)
        return F.conv2d(x, weight, bias, self.stride, 0, self.dilation, self.groups)


class VanillaCNN(nn.Sequential):
    """``depth`` 3x3 convolutions of ``channels`` channels, stride 1, no pooling, then a spatial
    average and a linear readout."""

    def __init__(self, in_channels: int, channels: int, depth: int, n_out: int, activation: str = "relu",
                 padding: str = "circular"):
        if padding not in ("circular", "zeros"):
            raise ValueError(f"padding must be 'circular' or 'zeros', not {padding!r}")
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [Conv2d(in_channels if i == 0 else channels, channels, 3, padding=1, padding_mode=padding),
                       Activation(activation)]
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, n_out)]
        super().__init__(*layers)


# The RP authors' VGG16: 4 max-poolings ("M"), then a 2x2 average pooling ("A") before the classifier.
VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "A"]


class VGG16(nn.Sequential):
    """The RP authors' VGG16 (module doc); ``repeat`` convolutions per entry of ``VGG16_CFG``."""

    def __init__(self, in_channels: int = 3, n_out: int = 10, repeat: int = 1, activation: str = "relu"):
        layers: list[nn.Module] = []
        c = in_channels
        for v in VGG16_CFG:
            if v in ("M", "A"):
                layers.append((nn.MaxPool2d if v == "M" else nn.AvgPool2d)(2, ceil_mode=True))
                continue
            for _ in range(repeat):
                layers += [Conv2d(c, v, 3, padding=1, padding_mode="circular", bias=False), nn.BatchNorm2d(v),
                           Activation(activation)]
                c = v
        layers += [nn.Flatten(), nn.Linear(c, n_out)]
        super().__init__(*layers)


def pruning_view(model: nn.Module) -> nn.Module:
    """The net a pruner should score: for a VGG16, the same layers without batch norm, sharing
    the weights (the RP authors prune a BN-free VGG and copy its weights into the BN one); any other
    model is itself. The view's conv and linear layers are the model's, in the same order, so masks
    map back by ``weight_layers`` position (``rename_masks``)."""
    if isinstance(model, VGG16):
        return nn.Sequential(*[m for m in model if not isinstance(m, nn.BatchNorm2d)])
    return model


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, activation: str, branch_scale: float):
        super().__init__()
        self.branch = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out), Activation(activation),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out))
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        self.branch_scale = branch_scale
        self.out = Activation(activation)

    def forward(self, x):
        branch = self.branch(x)
        if self.branch_scale != 1.0:  # the Stable ResNet's 1/sqrt(3n); a product by 1 is a kernel for nothing
            branch = branch * self.branch_scale
        return self.out(self.shortcut(x) + branch)


class ResNet(nn.Module):
    """CIFAR ResNet of depth 6n + 2 with BasicBlocks; ``stable`` scales each branch by 1/sqrt(3n)."""

    def __init__(self, depth: int = 32, n_out: int = 10, in_channels: int = 3, channels=(32, 64, 128),
                 activation: str = "relu", stable: bool = False):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"a CIFAR ResNet has depth 6n + 2, not {depth}")
        n = (depth - 2) // 6
        self.n_blocks = 3 * n
        scale = 1 / math.sqrt(self.n_blocks) if stable else 1.0
        self.stem = nn.Sequential(nn.Conv2d(in_channels, channels[0], 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels[0]), Activation(activation))
        blocks, c = [], channels[0]
        for stage, c_out in enumerate(channels):
            for i in range(n):
                blocks.append(BasicBlock(c, c_out, 2 if stage > 0 and i == 0 else 1, activation, scale))
                c = c_out
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, n_out))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class EPConvNet(nn.Sequential):
    """EP's CIFAR-10 conv net, as far as the paper describes it ("layers 3 and 7 are pooling
    layers", a final fully connected layer that halves the number of neurons): blocks
    1 conv, 2 conv, 3 max-pool, 4 conv, 5 conv, 6 conv, 7 max-pool, 8 fully connected, 9 readout.
    3x3 convolutions of ``width`` channels, then ``2 width`` channels after the first pooling;
    with ``batch_norm`` each conv is followed by batch norm (EP-F10). Each block is one child, so
    a trajectory can be measured after every block (``trajectories.module_lengths``)."""

    def __init__(self, in_shape: tuple[int, ...], n_out: int = 10, width: int = 32, activation: str = "relu",
                 batch_norm: bool = False):
        c0, h, w = in_shape

        def conv(c_in, c_out):
            return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1),
                                 *([nn.BatchNorm2d(c_out)] if batch_norm else []), Activation(activation))

        flat = 2 * width * math.ceil(math.ceil(h / 2) / 2) * math.ceil(math.ceil(w / 2) / 2)
        hidden = max(flat // 2, n_out)  # "the final fc layer halves the number of neurons"
        super().__init__(conv(c0, width), conv(width, width), nn.MaxPool2d(2, ceil_mode=True),
                         conv(width, 2 * width), conv(2 * width, 2 * width), conv(2 * width, 2 * width),
                         nn.MaxPool2d(2, ceil_mode=True),
                         nn.Sequential(nn.Flatten(), nn.Linear(flat, hidden), Activation(activation)),
                         nn.Linear(hidden, n_out))


class Scale(nn.Module):
    """Multiply by a constant (the Stable ResNet's 1/sqrt(L) on a residual branch)."""

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor

    def extra_repr(self) -> str:
        return f"factor={self.factor:.6g}"


def resnet50_imagenet(n_out: int, stable: bool = False) -> nn.Module:
    """torchvision's ImageNet ResNet50 (16 bottleneck blocks); ``stable``: each block's residual
    branch, after its last batch norm, divided by sqrt(16) (the authors' Stable ResNet, as for the
    CIFAR ResNets), the shortcut unscaled."""
    import torchvision

    model = torchvision.models.resnet50(num_classes=n_out)
    if stable:
        blocks = [b for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for b in layer]
        for block in blocks:
            block.bn3 = nn.Sequential(block.bn3, Scale(1 / math.sqrt(len(blocks))))
    return model


def build(name: str, n_out: int, in_shape: tuple[int, ...], activation: str = "relu", **kw) -> nn.Module:
    """A model by name: ``ffnn``, ``cnn``, ``vgg16``, ``vgg16x3``, ``resnet<d>``, ``stable_resnet<d>``,
    ``epconv``, ``epconv_bn`` and (RP-T8) ``resnet50_imagenet``."""
    if name == "ffnn":
        return ffnn(math.prod(in_shape), kw["width"], kw["depth"], n_out, activation)
    if name == "cnn":
        return VanillaCNN(in_shape[0], kw["width"], kw["depth"], n_out, activation, kw.get("padding", "circular"))
    if name in ("vgg16", "vgg16x3"):
        return VGG16(in_shape[0], n_out, 3 if name.endswith("x3") else 1, activation)
    if name in ("epconv", "epconv_bn"):
        return EPConvNet(in_shape, n_out, kw.get("width", 32), activation, batch_norm=name.endswith("_bn"))
    if name in ("resnet50_imagenet", "stable_resnet50_imagenet"):  # RP-T8: torchvision's ImageNet ResNet50
        return resnet50_imagenet(n_out, stable=name.startswith("stable_"))
    for prefix, stable in (("stable_resnet", True), ("resnet", False)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return ResNet(int(name[len(prefix):]), n_out, in_shape[0], activation=activation, stable=stable)
    raise ValueError(f"unknown model {name!r}")


# --- EP's nets: conv net variants, trajectory regularization -------------------------------------

NORMS = (nn.BatchNorm2d, nn.BatchNorm1d)


def chord_length(x: torch.Tensor) -> torch.Tensor:
    """Length of the piecewise-linear trajectory through the rows of ``x`` in order."""
    x = x.flatten(1).float()
    return (x[1:] - x[:-1]).norm(dim=1).sum()


RHO_LR_SCALE = 0.01


class TrajReg(nn.Module):
    """EP's trajectory regularization layer (module doc): output ``lambda * x``; in training mode,
    with ``orig`` (the minibatch's input-space length) set, it keeps ``penalty = coef * lambda *
    chord_length(x) / orig`` for the loss to collect (``take_penalty``).

    lambda = exp(rho) is learnt through rho: an unconstrained lambda can cross zero (and did, nets
    then trained at chance), which flips the sign of everything after it and turns the penalty into
    a reward. rho is exempt from weight decay (``no_weight_decay``), which would pull lambda to 1,
    and learns at ``RHO_LR_SCALE`` times the recipe's rate: one scalar gathers the gradient of a whole
    layer, and at the full rate the five lambdas shrank together in the first steps (to about 0.17
    each, logits x 1e-4) and 2 of 3 quick seeds stayed at chance, with or without the penalty."""

    def __init__(self, coef: float = 0.01):
        super().__init__()
        self.coef = coef
        self.rho = nn.Parameter(torch.zeros(()))
        self.rho.no_weight_decay = True
        self.rho.lr_scale = RHO_LR_SCALE
        self.orig: torch.Tensor | None = None
        self.penalty: torch.Tensor | None = None

    @property
    def lam(self) -> torch.Tensor:
        return self.rho.exp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lam = self.lam
        if self.training and self.orig is not None and len(x) > 1:
            self.penalty = self.coef * lam * chord_length(x) / self.orig
        return lam * x

    def take_penalty(self) -> torch.Tensor | None:
        p, self.penalty = self.penalty, None
        return p


def trajreg_loss(model: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy plus every ``TrajReg`` layer's penalty (training mode only)."""
    regs = [m for m in model.modules() if isinstance(m, TrajReg)]
    orig = chord_length(xb).detach().clamp_min(1e-12)
    for m in regs:
        m.orig = orig
    logits = model(xb)
    loss = nn.functional.cross_entropy(loss_precision(logits), yb)
    for m in regs:
        m.orig = None
        p = m.take_penalty()
        if p is not None:
            loss = loss + p
    return loss, logits


def replace_norms(model: nn.Module, coef: float) -> nn.Module:
    """Replace every batch-norm layer of ``model`` by a ``TrajReg`` layer (in place)."""
    for name, child in model.named_children():
        if isinstance(child, NORMS):
            setattr(model, name, TrajReg(coef))
        else:
            replace_norms(child, coef)
    return model


CONV_VARIANTS = {"plain": "epconv", "bn": "epconv_bn", "trajreg": "epconv_bn"}


def conv_net(variant: str, n_out: int, in_shape, width: int, sigma_w2: float, sigma_b: float, seed: int,
             coef: float = 0.01) -> nn.Module:
    model = build(CONV_VARIANTS[variant], n_out, in_shape, "relu", width=width)
    if variant == "trajreg":
        replace_norms(model, coef)
    return initialize(model, "sigma", sigma_w=math.sqrt(sigma_w2), sigma_b=sigma_b, seed=seed)


def fc_net(n_out: int, in_shape, width: int, depth: int, activation: str, sigma_w2: float, sigma_b: float,
           seed: int) -> nn.Module:
    model = build("ffnn", n_out, in_shape, activation, width=width, depth=depth)
    return initialize(model, "sigma", sigma_w=math.sqrt(sigma_w2), sigma_b=sigma_b, seed=seed)
