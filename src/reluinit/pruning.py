"""Pruning at initialization (RP): scores, global masks, masks that stay applied, and what a mask
does to a net (per-layer sparsity, layer collapse, critical sparsity).

Every pruner is global over the weights of conv and linear layers (``models.weight_layers``);
biases and normalisation parameters are never pruned. A pruner returns one boolean mask per
pruned weight (``{"<module>.weight": mask}``) keeping exactly ``round(density * N)`` weights.
Pruners are small classes over one base (``Pruner``), registered by name in ``PRUNERS``:

* ``random``: uniform scores; ``magnitude`` (MBP): |theta|;
* ``snip`` (SBP): |dL/dc| for a multiplicative mask c = 1, which is |theta * dL/dtheta|;
* ``grasp``: keeps the smallest -theta * Hg (removes the largest), g and H of the loss on
  logits / T, T = 200;
* ``synflow``: data-free, iterative: ``rounds`` rounds on the exponential schedule
  density^(r/rounds), each scoring |theta * dR/dtheta| with R the sum of the outputs of the net with
  |theta| on an all-ones input, in eval mode and float64 (in float32 a deep net's R overflows).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import pandas as pd
import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils import parametrize

from .models import pruning_view, weight_layers
from .nets import MLP, tf32

Masks = dict[str, torch.Tensor]


def prunable(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{"<module>.weight": weight}`` for every conv and linear layer, in order."""
    return {f"{name}.weight": m.weight for name, m in weight_layers(model)}


def masks_from_scores(scores: dict[str, torch.Tensor], density: float) -> Masks:
    """Keep the ``round(density * N)`` highest scores over all layers together."""
    if not 0 <= density <= 1:
        raise ValueError(f"density must be in [0, 1], got {density}")
    flat = torch.cat([s.detach().flatten().double() for s in scores.values()])
    keep = torch.zeros(len(flat), dtype=torch.bool, device=flat.device)
    k = round(density * len(flat))
    if k:
        keep[torch.topk(flat, k, sorted=False).indices] = True
    return _split(keep, scores)


def _split(keep: torch.Tensor, like: dict[str, torch.Tensor]) -> Masks:
    """The flat boolean ``keep`` as one mask per tensor of ``like``, in its order."""
    out, start = {}, 0
    for name, s in like.items():
        out[name] = keep[start: start + s.numel()].view_as(s)
        start += s.numel()
    return out


def _loss(model, params, x, y, temperature: float = 1.0):
    return nn.functional.cross_entropy(functional_call(model, params, (x,)) / temperature, y)


def masks_for(model: nn.Module, view: nn.Module, masks: Masks) -> Masks:
    """``masks`` computed on ``view``, a net built from ``model``'s own conv and linear layers
    (``models.pruning_view``), keyed by those layers' names in ``model``."""
    names = {id(m): name for name, m in weight_layers(model)}
    modules = dict(view.named_modules())
    return {f"{names[id(modules[key.rsplit('.', 1)[0]])]}.weight": m for key, m in masks.items()}


def random_scores(model: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.rand(w.shape, generator=gen) for n, w in prunable(model).items()}


def magnitude_scores(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: w.detach().abs() for n, w in prunable(model).items()}


def full_fp32(fn):
    """Run ``fn`` with TF32 off in CUDA matmuls and cuDNN convolutions. PyTorch lets convolutions
    use TF32 by default on Ampere and later GPUs; the papers' GPUs had none, and on an H200 TF32
    changed 0.79% of SNIP's masks of a doubled ResNet32 at density 0.05 against the CPU's, full
    fp32 0.016% (``reference/gpu/nvidia-h200-2026-11-26``). Does nothing on a CPU."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with tf32(False):
            return fn(*args, **kwargs)

    return wrapper


@full_fp32
def snip_scores(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """|dL/dc| at c = 1 for the masked weights c * theta (SNIP's connection sensitivity)."""
    weights = prunable(model)
    cs = {n: torch.ones_like(w, requires_grad=True) for n, w in weights.items()}
    loss = _loss(model, {n: w.detach() * cs[n] for n, w in weights.items()}, x, y)
    grads = torch.autograd.grad(loss, list(cs.values()))
    return {n: g.abs() for n, g in zip(cs, grads)}


@full_fp32
def grasp_scores(model: nn.Module, x: torch.Tensor | None = None, y: torch.Tensor | None = None,
                 temperature: float = 200.0, loss_fn: Callable[[dict], torch.Tensor] | None = None
                 ) -> dict[str, torch.Tensor]:
    """theta * Hg (GraSP keeps the largest of these, i.e. removes the largest -theta * Hg), g and H
    of the cross-entropy on logits / ``temperature``, or of ``loss_fn(weights)`` when given."""
    # In the default (NCHW) layout: batch norm's double backward, most of GraSP's time, is about
    # 1.3x slower on channels-last tensors on a CPU (docs/performance.md). A net already in NCHW (as RP's
    # jobs prune) gets the same scores as before.
    weights = {n: w.detach().contiguous().requires_grad_(True) for n, w in prunable(model).items()}
    x = x.contiguous() if x is not None else None
    loss = loss_fn or (lambda params: _loss(model, params, x, y, temperature))
    # One forward pass serves both: g is the gradient (detached), Hg the gradient of g . grad.
    grad = torch.autograd.grad(loss(weights), list(weights.values()), create_graph=True)
    hg = torch.autograd.grad(sum((a * a.detach()).sum() for a in grad), list(weights.values()))
    return {n: w.detach() * h for (n, w), h in zip(weights.items(), hg)}


def _linearized(model: nn.Module, in_shape: tuple[int, ...]):
    """SynFlow's setting: a float64 copy in eval mode with every parameter and buffer replaced by
    its absolute value, its prunable weights, and the all-ones input."""
    net = copy.deepcopy(model).double().eval()
    with torch.no_grad():
        for p in net.state_dict().values():
            if p.is_floating_point():
                p.abs_()
    ones = torch.ones((1, *in_shape), dtype=torch.float64, device=next(net.parameters()).device)
    return net, {n: w.detach() for n, w in prunable(net).items()}, ones


def _flat_views(like: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """One flat buffer holding a tensor laid out as each of ``like``'s (same shape and strides, so
    a net computes on them as on ``like``), those views, and the buffer position of each element
    in ``flatten()`` order (the order of ``masks_from_scores`` and ``_split``)."""
    first = next(iter(like.values()))
    n = sum(t.numel() for t in like.values())
    buf = torch.zeros(n, dtype=first.dtype, device=first.device)
    index = torch.arange(n, device=first.device)
    views, positions, start = {}, [], 0
    for name, t in like.items():
        stride = torch.empty_like(t).stride()  # t's layout, dense
        views[name] = buf.as_strided(t.shape, stride, start)
        positions.append(index.as_strided(t.shape, stride, start).flatten())
        start += t.numel()
    return buf, views, torch.cat(positions)


def synflow_masks(model: nn.Module, in_shape: tuple[int, ...], density: float, rounds: int = 100) -> Masks:
    """SynFlow's iterative, data-free pruning (module doc). ``model`` is left untouched.

    Each round scores only the weights kept so far: a pruned weight scores 0 and the schedule only
    shrinks, so the top k of all scores are the top k of the kept ones (unless fewer than k kept
    weights score above 0), and the search shrinks round by round with them. The masked weights
    live in one flat buffer, in their own layout: a round zeroes the weights it prunes in place and
    reads the kept weights' gradients by position, so no step but the forward and backward passes
    touches all N weights (a round over a copy, a concatenation and a mask of all of them took
    about a third of the time on ResNet32)."""
    net, weights, ones = _linearized(model, in_shape)
    n_weights = sum(w.numel() for w in weights.values())
    masked, views, at = _flat_views(weights)  # at: buffer positions of the kept weights, in flat order
    grad, grad_views, _ = _flat_views(weights)
    with torch.no_grad():
        for v, w in zip(views.values(), weights.values()):
            v.copy_(w)
    live = {n: v.detach().requires_grad_(True) for n, v in views.items()}  # share masked's memory
    alive = torch.arange(n_weights, device=ones.device)  # flat indices of the weights kept so far
    kept = masked[at]  # |theta| of the kept weights, in alive's order
    for r in range(1, rounds + 1):
        total = functional_call(net, live, (ones,)).sum()
        with torch.no_grad():
            for v, g in zip(grad_views.values(), torch.autograd.grad(total, list(live.values()))):
                v.copy_(g)
            # The scores of masks_from_scores, |theta * g|, at the kept weights (masked is theta there).
            top = torch.topk((kept * grad[at]).abs(), round(density ** (r / rounds) * n_weights), sorted=False).indices
            pruned = torch.ones(len(at), dtype=torch.bool, device=at.device)
            pruned[top] = False
            masked[at[pruned]] = 0
            alive, at, kept = alive[top], at[top], kept[top]
    keep = torch.zeros(n_weights, dtype=torch.bool, device=ones.device)
    keep[alive] = True
    return _split(keep, weights)


def synflow_scores_once(model: nn.Module, in_shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """One round of SynFlow scores on the dense net (float64, |theta|, all-ones input)."""
    net, weights, ones = _linearized(model, in_shape)
    weights = {n: w.requires_grad_(True) for n, w in weights.items()}
    grads = torch.autograd.grad(functional_call(net, weights, (ones,)).sum(), list(weights.values()))
    return {n: (w * g).detach().abs() for (n, w), g in zip(weights.items(), grads)}


# --- the pruners: one class each, registered by the names the config uses ---------------------------


class Pruner:
    """A pruning method. The base owns the global threshold (``masks_from_scores``: keep the
    ``round(density * N)`` highest scores over all layers); a method only scores. Adding one is a
    class with ``scores`` (or ``masks``, for an iterative method) under ``@pruner("<name>")``."""

    def scores(self, model: nn.Module, *, x, y, in_shape, seed: int, temperature: float) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def masks(self, model: nn.Module, density: float, *, rounds: int = 100, **data) -> tuple[Masks, float]:
        """The masks at ``density`` and the critical sparsity of the scores (NaN for an iterative
        method, whose scores change as it prunes)."""
        scores = self.scores(model, **data)
        return masks_from_scores(scores, density), critical_sparsity(scores)


PRUNERS: dict[str, Pruner] = {}


def pruner(*names: str):
    """Register a ``Pruner`` class under ``names`` (``prune(model, name, ...)``)."""
    def register(cls):
        for name in names:
            PRUNERS[name] = cls()
        return cls
    return register


@pruner("random")
class Random(Pruner):
    def scores(self, model, *, seed, **_):
        return random_scores(model, seed)


@pruner("magnitude")
class Magnitude(Pruner):
    def scores(self, model, **_):
        return magnitude_scores(model)


@pruner("snip", "sbp")
class Snip(Pruner):
    def scores(self, model, *, x, y, **_):
        return snip_scores(model, x, y)


@pruner("grasp")
class Grasp(Pruner):
    def scores(self, model, *, x, y, temperature, **_):
        return grasp_scores(model, x, y, temperature)


@pruner("synflow")
class SynFlow(Pruner):
    def masks(self, model, density, *, rounds: int = 100, in_shape=None, **_):
        return synflow_masks(model, in_shape, density, rounds), float("nan")


def prune(model: nn.Module, method: str, density: float, **kw) -> Masks:
    """Masks of ``method`` (a name in ``PRUNERS``: snip, grasp, synflow, magnitude, random, ...) at
    ``density`` (the fraction of weights kept) for any model whose prunable layers are ``Conv2d``
    and ``Linear``: ``prune_with_s_cr`` without the critical sparsity. Batch norms stay as they are.

        >>> model = torchvision.models.resnet18(num_classes=10)  # doctest: +SKIP
        >>> masks = prune(model, "snip", 0.1, x=images, y=labels)  # doctest: +SKIP
        >>> apply_masks(rescale(model, masks), masks)  # doctest: +SKIP
    """
    return prune_with_s_cr(model, method, density, **kw)[0]


def prune_with_s_cr(model: nn.Module, method: str, density: float, *, x=None, y=None, in_shape=None,
                    seed: int = 0, rounds: int = 100, temperature: float = 200.0) -> tuple[Masks, float]:
    """Masks of ``method`` at ``density``, scored on the model's ``pruning_view`` (a VGG16 without its
    batch norms, as the RP authors prune it) and keyed by the model's own layer names; and the
    critical sparsity s_cr of its scores (the largest sparsity with no layer emptied; NaN for
    SynFlow)."""
    if method not in PRUNERS:
        raise ValueError(f"unknown pruning method {method!r}; known: {', '.join(PRUNERS)}")
    view = pruning_view(model)
    if view is not model:
        masks, s_cr = prune_with_s_cr(view, method, density, x=x, y=y, in_shape=in_shape, seed=seed, rounds=rounds,
                                      temperature=temperature)
        return masks_for(model, view, masks), s_cr
    return PRUNERS[method].masks(model, density, rounds=rounds, x=x, y=y, in_shape=in_shape, seed=seed,
                                 temperature=temperature)


def row_shuffled(masks: Masks, seed: int) -> Masks:
    """Each mask with every output unit's kept count placed at uniformly random positions in its
    row (or conv slice of [in, kh, kw]): the per-unit densities of ``masks`` with a placement that
    owes nothing to the net, the independence Proposition 1's proof of the rescaling assumes."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, m in masks.items():
        rows = m.flatten(1)
        ranks = torch.rand(rows.shape, generator=gen).argsort(dim=1).argsort(dim=1).to(m.device)
        out[name] = (ranks < rows.sum(dim=1, keepdim=True)).view_as(m)
    return out


# --- masks in a model ---------------------------------------------------------------------------


class _Mask(nn.Module):
    """A parametrization ``weight = original * mask``: pruned weights are exactly zero in every
    forward pass, whatever an optimizer does to the stored original."""

    def __init__(self, mask: torch.Tensor, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.register_buffer("mask", mask)
        # the mask as the weights' float type, kept (not saved: the bool one is), so that no step
        # casts it again; ``model.to(dtype)`` converts it with the weights
        self.register_buffer("factor", mask.to(dtype), persistent=False)

    def forward(self, w):
        factor = self.factor if self.factor.dtype == w.dtype else self.mask.to(w.dtype)
        return w * factor

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.factor = self.mask.to(self.factor.dtype)  # a loaded mask: its float copy follows


def apply_masks(model: nn.Module, masks: Masks) -> nn.Module:
    """Zero the pruned weights of ``model`` in place and keep them zero through training (a weight
    parametrization, so an optimizer step, momentum and weight decay included, cannot revive them).

        >>> apply_masks(model, prune(model, "synflow", 0.05, in_shape=(3, 32, 32)))  # doctest: +SKIP
    """
    modules = dict(model.named_modules())
    for name, mask in masks.items():
        module = modules[name.rsplit(".", 1)[0]]
        with torch.no_grad():
            module.weight.mul_(mask.to(module.weight.dtype))
        parametrize.register_parametrization(module, "weight", _Mask(mask.to(module.weight.device), module.weight.dtype))
    return model


# --- what a mask does --------------------------------------------------------------------------


def layer_table(masks: Masks) -> pd.DataFrame:
    """One row per pruned layer: size, weights kept, density, kept fraction of its least and
    most kept unit (output neuron or channel), and whether it collapsed (nothing kept)."""
    rows = []
    for i, (name, m) in enumerate(masks.items()):
        per_unit = m.flatten(1).double().mean(dim=1) if m.dim() > 1 else m.double()
        rows.append({"layer": i, "name": name, "weights": m.numel(), "kept": int(m.sum()),
                     "density": m.double().mean().item(), "unit_density_min": per_unit.min().item(),
                     "unit_density_max": per_unit.max().item(), "collapsed": not bool(m.any())})
    return pd.DataFrame(rows)


def critical_sparsity(scores: dict[str, torch.Tensor]) -> float:
    """The largest sparsity a global threshold on fixed ``scores`` reaches with no layer fully
    pruned: the share of weights below the smallest of the layers' largest scores (above it,
    the layer holding that score is emptied)."""
    tau = min(s.max() for s in scores.values())
    below = sum(int((s < tau).sum()) for s in scores.values())
    return below / sum(s.numel() for s in scores.values())


def sparsity(masks: Masks) -> float:
    total = sum(m.numel() for m in masks.values())
    return 1 - sum(int(m.sum()) for m in masks.values()) / total


# --- masks on disk: the `prune` rule's output, read by training jobs and RP-F2/F4 -------------------


def pack(masks: Masks) -> dict:
    """Masks as bits (``numpy.packbits``, 1/8 of a bool tensor) with their shapes, in layer order."""
    import numpy as np

    return {"names": list(masks), "shapes": [list(m.shape) for m in masks.values()],
            "bits": [torch.from_numpy(np.packbits(m.detach().cpu().numpy().ravel())) for m in masks.values()]}


def unpack(packed: dict, device: str | torch.device = "cpu") -> Masks:
    import math

    import numpy as np

    out = {}
    for name, shape, bits in zip(packed["names"], packed["shapes"], packed["bits"]):
        flat = np.unpackbits(bits.numpy(), count=math.prod(shape)).astype(bool)
        out[name] = torch.from_numpy(flat).view(*shape).to(device)
    return out


def masks_digest(masks: Masks | None) -> str | None:
    """A short hash of masks (names, shapes, bits): what a training checkpoint records, so a run
    trained under other masks is never resumed under these."""
    import hashlib

    if not masks:
        return None
    digest = hashlib.sha256()
    packed = pack(masks)
    for name, shape, bits in zip(packed["names"], packed["shapes"], packed["bits"]):
        digest.update(f"{name}{shape}".encode())
        digest.update(bits.numpy().tobytes())
    return digest.hexdigest()[:16]


def save_masks(runs: dict[str, dict], path) -> None:
    """Write one job's masks: ``{run key: {"masks": Masks or None, **facts}}`` (facts: plain numbers
    and words, e.g. the net's seed), bit-packed, loadable with ``torch.load(weights_only=True)``,
    written atomically."""
    from .training import save_checkpoint

    save_checkpoint({key: {**{k: v for k, v in run.items() if k != "masks"},
                           "masks": pack(run["masks"]) if run.get("masks") else None}
                     for key, run in runs.items()}, path)


def load_masks(path, device: str | torch.device = "cpu") -> dict[str, dict]:
    """``save_masks``'s runs, the masks unpacked onto ``device`` (None for a run that is not pruned)."""
    runs = torch.load(path, weights_only=True)
    return {key: {**run, "masks": unpack(run["masks"], device) if run["masks"] else None}
            for key, run in runs.items()}


def mask_facts(runs: dict[str, dict]) -> pd.DataFrame:
    """What a job's masks do, one row per (run, pruned layer): ``layer_table`` with the run's key,
    its facts, its achieved sparsity and the number of layers it emptied (layer collapse)."""
    tables = []
    for key, run in runs.items():
        if not run.get("masks"):
            continue
        t = layer_table(run["masks"])
        facts = {k: v for k, v in run.items() if k != "masks"}
        t = t.assign(**facts, achieved_sparsity=sparsity(run["masks"]), collapsed_layers=int(t["collapsed"].sum()))
        t.insert(0, "run", key)
        tables.append(t)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=["run", "layer", "name"])


# --- back to the edge of chaos (RP Proposition 1, Algorithm 1) ----------------------------------------


@torch.no_grad()
def rescale(model: nn.Module, masks: Masks, sigma_w: float | None = None) -> nn.Module:
    """The rescaling trick, Eq. 7: one factor rho per (output unit, kernel position), constant over
    input channels, so that the kept weights of every such slice again carry the variance of the
    dense init. A linear row is a single slice; a conv [out, in, kh, kw] has kh*kw slices per
    output channel. Per-position factors matter: with batch norm after a conv, a single factor
    per output channel would be cancelled exactly, and the rescaling would do nothing.

    With ``sigma_w`` each slice's kept sum of squares becomes sigma_w^2 / (kh*kw): Eq. 7's
    n_{l-1} E[(rho W delta)^2] = 1 in units of the dense variance sigma_w^2 / (n_{l-1} kh kw),
    i.e. what the dense layer (fan-in n_{l-1} kh kw) has per position, summing to sigma_w^2 per
    output unit (Proposition 1: the pruned net is back on the EOC it was initialized on).

    ``sigma_w=None`` is Algorithm 1 as printed, rho = 1 / sqrt(sum of kept W^2), applied to each
    slice: a unit sum of squares per row or per (channel, position). It matches the paper's
    variance only for a linear layer with sigma_w = 1; for a ReLU FFNN (sigma_w^2 = 2) it halves
    the variance, for a 3x3 conv it is 9 / sigma_w^2 times it. (An audit of the authors' code
    reports a sum of squares of 4 per slice for ReLU VGGs: not checked here, and not what this
    does.) Slices with nothing kept stay at zero.
    """
    modules = dict(model.named_modules())
    for name, mask in masks.items():
        module = modules[name.rsplit(".", 1)[0]]
        w = module.parametrizations.weight.original if parametrize.is_parametrized(module, "weight") else module.weight
        alpha = ((w * mask) ** 2).sum(dim=1, keepdim=True)  # [out, 1, *kernel]: one per slice
        positions = w[0, 0].numel()  # kh * kw for a conv, 1 for a linear layer
        target = 1.0 if sigma_w is None else sigma_w**2 / positions
        rho = torch.where(alpha > 0, (target / alpha.clamp_min(1e-300)).sqrt(), torch.zeros_like(alpha))
        w.mul_(rho)
    return model


def chi_empirical(model: MLP, x: torch.Tensor, skip: int = 5) -> float:
    """chi = f'(1) of a fully connected net, measured: the mean over layers (after ``skip``) of
    ‖J_l u‖^2 / ‖u‖^2, the growth of a tangent u of the inputs ``x`` through each hidden layer's
    Jacobian (forward-mode, exact). A finite difference x + eps u is not infinitesimal deep in a
    chaotic net (it grows like chi^l until the activations saturate: 1.44 for chi = 1.85 at depth
    100); the tangent is rescaled after every layer instead, so it neither overflows nor dies.
    nan when a layer is emptied (no tangent gets through it)."""
    gen = torch.Generator().manual_seed(0)
    u = torch.randn(x.shape, generator=gen, dtype=x.dtype).to(x.device)
    h, u = x, u / u.norm(dim=-1, keepdim=True)
    ratios, last = [], None
    for m in model.sequence():
        h, u = torch.func.jvp(m, (h,), (u,))
        if isinstance(m, nn.Linear):
            gap = (u**2).sum(dim=-1).mean()
            if last is not None:
                ratios.append(gap / last)
            if gap > 0:
                u = u / gap.sqrt()
            last = (u**2).sum(dim=-1).mean()
        h, u = h.detach(), u.detach()
    return torch.stack(ratios)[skip:-1].mean().item()  # the readout (last) is not a hidden layer
