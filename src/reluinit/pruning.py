"""Pruning at initialization (RP): scores, global masks, masks that stay applied, and what a mask
does to a net (per-layer sparsity, layer collapse, critical sparsity).

Every pruner is global over the weights of conv and linear layers (``inits.weight_layers``) unless
``prune`` is asked for a per-layer scope; biases and normalisation parameters are never pruned. A
pruner returns one boolean mask per pruned weight (``{"<module>.weight": mask}``) keeping exactly
``round(density * N)`` weights.
Pruners are small classes over one base (``Pruner``), registered by name in ``PRUNERS``:

* ``random``: uniform scores; ``magnitude`` (MBP): |theta|;
* ``snip`` (SBP): |dL/dc| for a multiplicative mask c = 1, which is |theta * dL/dtheta|;
* ``grasp``: keeps the smallest -theta * Hg (removes the largest), g and H of the loss on
  logits / T, T = 200;
* ``synflow``: data-free, iterative: ``rounds`` rounds on the exponential schedule
  density^(r/rounds), each scoring |theta * dR/dtheta| with R the sum of the outputs of the net with
  |theta| on an all-ones input, in eval mode and float64 (in float32 a deep net's R overflows).

``prune`` is the entry for any model. It leaves the model as it found it (train/eval modes,
weights, buffers: a forward pass in train mode moves batch norm's running statistics), and it
composes: masks already on the model (``apply_masks``, or ``torch.nn.utils.prune``) are scored as
they act and only shrink, so prune, apply, train and prune again is iterative pruning;
``to_torch_prune`` and ``from_torch_prune`` hand masks to ``torch.nn.utils.prune`` and back. It
takes Synaptic-Flow's options (Tanaka et al. 2020, github.com/ganguli-lab/Synaptic-Flow): any loss
and several batches for SNIP and GraSP, a per-layer scope, layers left dense, and an exponential or
linear schedule over rounds. With its defaults it takes the papers' path unchanged
(``_pruned_as_ever``): the committed results rest on those masks, bit for bit.

A weight shared by several layers (tied: ``l2.weight = l1.weight``) is one tensor: scored once,
counted once in N, given one mask under the first holder's name, which ``apply_masks`` puts on every
layer that holds it. Its score is the one tensor's in the net that uses it everywhere: the gradients
of SNIP's |theta * dL/dtheta| and SynFlow's |theta * dR/dtheta| are summed over its uses (what
autograd gives a shared parameter), GraSP's g and H are the shared parameter's. A weight computed by
another parametrization (``weight_norm``, ``spectral_norm``) is scored as the weight the layer
computes with, and its mask multiplies that weight. Two identical calls give the same masks:
scoring runs with dropout and RReLU in eval mode (every other module in the mode it is in), and any
other random draw (a module's own, a shuffling loader) from torch's generators seeded with 0 (put
back as they were after the call).
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterable, Iterator

import pandas as pd
import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils import parametrize

from .inits import weight_layers
from .models import pruning_view
from .nets import MLP, tf32
from .pruning_inputs import batch_xy, checked_density, checked_masks

Masks = dict[str, torch.Tensor]


def prunable(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{"<module>.weight": weight}`` for every conv and linear layer, in order; a weight that
    several layers share (tied) once, under the first that holds it (``_tied``)."""
    tied = _tied(model)
    return {f"{name}.weight": m.weight for name, m in weight_layers(model) if tied[f"{name}.weight"] == f"{name}.weight"}


def _stored(module: nn.Module):
    """What a layer's weight is computed from: the weight itself, the original under ``apply_masks``
    or ``torch.nn.utils.prune`` (two layers holding one are tied), or the parametrization list of
    a weight computed from several tensors (``weight_norm``)."""
    if parametrize.is_parametrized(module, "weight"):
        weights = module.parametrizations.weight
        return getattr(weights, "original", weights)
    return module._parameters.get("weight_orig", module.weight)


def _tied(model: nn.Module) -> dict[str, str]:
    """``{"<layer>.weight": the name it is scored and masked under}`` for every conv and linear
    layer, in order: its own, or for a weight shared by several layers (tied), the first's."""
    first: dict[int, str] = {}
    return {f"{n}.weight": first.setdefault(id(_stored(m)), f"{n}.weight") for n, m in weight_layers(model)}


def masks_from_scores(scores: dict[str, torch.Tensor], density: float) -> Masks:
    """Keep the ``round(density * N)`` highest scores over all layers together."""
    checked_density(density)
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


SCOPES = ("global", "layer")
SCHEDULES = ("exponential", "linear")
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Batches = Iterable[tuple[torch.Tensor, torch.Tensor]]


def prune(model: nn.Module, method: str, density: float, *, x: torch.Tensor | None = None,
          y: torch.Tensor | None = None, data: Batches | None = None, loss: Loss | None = None,
          in_shape: tuple[int, ...] | None = None, seed: int = 0, rounds: int = 100, temperature: float = 200.0,
          scope: str = "global", exclude: Iterable[str] = (), schedule: str | None = None) -> Masks:
    """Boolean masks ``{"<module>.weight": mask}`` (True: kept) of ``method`` that keep the fraction
    ``density`` of the weights of ``model``'s conv and linear layers (biases and normalisation
    layers are never pruned). The model is left as it was: modes, weights and buffers (batch norm's
    running statistics) are put back after scoring. Masks already on it (``apply_masks``, or
    ``torch.nn.utils.prune``) are scored as they act and only shrink: a pruned weight stays pruned.

        >>> model = torchvision.models.resnet18(num_classes=10)  # doctest: +SKIP
        >>> masks = prune(model, "snip", 0.1, x=images, y=labels)  # doctest: +SKIP
        >>> apply_masks(rescale(model, masks), masks)  # doctest: +SKIP
        >>> apply_masks(model, prune(model, "magnitude", 0.05))  # prune again  # doctest: +SKIP

    :param model: any model whose prunable layers are conv and linear layers.
    :param method: a name in ``PRUNERS``: "snip" (or "sbp"), "grasp", "synflow", "magnitude",
        "random", or one registered with ``@pruner``.
    :param density: the fraction kept, a number in [0, 1]: ``round(density * N)`` of the N weights
        pruned (of each layer's own with ``scope="layer"``; a tied weight counts once).
    :param x: one batch of inputs for SNIP and GraSP (or ``data``); SynFlow reads ``in_shape`` from it.
    :param y: the integer class labels of ``x`` (the targets of ``loss``).
    :param data: an iterable of ``(x, y)`` batches (a ``DataLoader``, a list) for SNIP and GraSP,
        each moved to the weights' device: the batches' gradients are summed, as Synaptic-Flow sums
        them (SNIP: |theta * sum of the dL_b/dtheta|). A batch is a tuple or list (items after y
        ignored) or a dict with the keys "x" and "y" (or "input" and "target", "image" and "label").
    :param loss: ``loss(output, target)``, a scalar, for SNIP and GraSP (GraSP passes it
        ``output / temperature``); None: cross-entropy.
    :param in_shape: SynFlow's input shape without the batch dimension, e.g. ``(3, 32, 32)``; read
        from ``x`` or ``data`` when not given.
    :param seed: the seed of the random pruner's scores.
    :param rounds: the rounds of a schedule (SynFlow always has one).
    :param temperature: GraSP's T: the loss is taken on ``output / T``.
    :param scope: "global", one threshold over all pruned weights (the papers'), or "layer", every
        pruned layer keeping its own fraction ``density``.
    :param exclude: what stays dense: "first" or "last" (conv or linear layer, in module order),
        module names (a name covers the modules inside it: "layer4") or weight names
        ("fc.weight"); "bias" and "batchnorm" are accepted and always hold here. Excluded layers
        get no mask and do not count in N.
    :param schedule: "exponential" (round k of ``rounds`` keeps ``density ** (k / rounds)``) or
        "linear" (``1 - (1 - density) * k / rounds``), counted from the fraction the model already
        keeps instead of 1 when it is masked; every round scores the net with the weights pruned so
        far at zero (``method="magnitude"``: iterative magnitude pruning; nothing trains between
        rounds, so it keeps what one shot keeps unless the caller trains between ``prune`` calls).
        None: SynFlow's own exponential schedule, one shot for the rest.
    """
    _refuse_nonfinite(model, x, data)
    return prune_with_s_cr(model, method, density, x=x, y=y, data=data, loss=loss, in_shape=in_shape, seed=seed,
                           rounds=rounds, temperature=temperature, scope=scope, exclude=exclude, schedule=schedule)[0]


def _refuse_nonfinite(model: nn.Module, x: torch.Tensor | None, data: Batches | None) -> None:
    """A ``ValueError`` naming the parameter or input that holds NaN or inf: scores of such a model
    are NaN or inf too, and the masks ranked from them keep or drop weights by chance, not by score
    (a NaN weight in one layer left SNIP keeping no weight of two others). ``data`` is checked
    where it is a list or tuple of batches; a loader is read once, by the pruner."""
    for name, p in model.named_parameters():
        if p.is_meta:
            raise ValueError(f"prune: the model's {name} is on the meta device (a shape without values); give the "
                             "model its values first, e.g. model.to_empty(device='cpu') then an init")
        if not bool(torch.isfinite(p).all()):
            raise ValueError(f"prune: the model's {name} holds NaN or inf; give it finite parameters")
    batches = [("x", x)] if x is not None else []
    if isinstance(data, (list, tuple)):
        batches += [(f"data[{i}]'s inputs", batch_xy(b, labels=False)[0]) for i, b in enumerate(data)]
    for what, inputs in batches:
        if torch.is_tensor(inputs) and inputs.is_floating_point() and not bool(torch.isfinite(inputs).all()):
            raise ValueError(f"prune: {what} holds NaN or inf; give it finite inputs")


def prune_with_s_cr(model: nn.Module, method: str, density: float, *, x: torch.Tensor | None = None,
                    y: torch.Tensor | None = None, data: Batches | None = None, loss: Loss | None = None,
                    in_shape: tuple[int, ...] | None = None, seed: int = 0, rounds: int = 100,
                    temperature: float = 200.0, scope: str = "global", exclude: Iterable[str] = (),
                    schedule: str | None = None) -> tuple[Masks, float]:
    """``prune``'s masks (same arguments) and the critical sparsity s_cr of the scores (the largest
    sparsity with no layer emptied; NaN for SynFlow, a schedule, ``scope="layer"`` or a masked
    model). A VGG16 is scored on its ``pruning_view`` (without its batch norms, as the RP authors
    prune it), the masks keyed by the model's own layer names."""
    in_shape = _checked(method, density, x, y, data, loss, in_shape, rounds, scope, schedule)
    tied = _tied(model)
    chosen = _chosen(tied, exclude)
    with _state_kept(model):
        own = schedule is None or (schedule == "exponential" and isinstance(PRUNERS[method], SynFlow))
        if own and data is None and loss is None and scope == "global" and len(chosen) == len(set(tied.values())) \
                and not applied_masks(model):
            return _pruned_as_ever(_unmasked_copy(model) if _computed(model) else model, method, density, x=x, y=y,
                                   in_shape=in_shape, seed=seed, rounds=rounds, temperature=temperature)
        batches = data if data is not None else [(x, y)] if x is not None else []
        return _pruned(model, method, density, chosen, batches=batches, loss=loss, in_shape=in_shape, seed=seed,
                       rounds=rounds, temperature=temperature, scope=scope, schedule=schedule)


def prune_each(model: nn.Module, method: str, densities: Iterable[float], *, x: torch.Tensor | None = None,
               y: torch.Tensor | None = None, data: Batches | None = None, in_shape: tuple[int, ...] | None = None,
               seed: int = 0, rounds: int = 100, temperature: float = 200.0) -> list[tuple[Masks, float]]:
    """``prune_with_s_cr`` at each of ``densities`` (prune's defaults otherwise: global, one shot,
    cross-entropy), each result equal to its own call's: a one-shot pruner that scores (random,
    magnitude, SNIP, GraSP, a registered scorer) scores the net once and thresholds those scores at
    every density; SynFlow, whose scores change as it prunes, prunes once per density. What a
    table's masks at several sparsities cost once instead of once per sparsity (the mask audit)."""
    densities = list(densities)
    pruner = PRUNERS.get(method)
    if pruner is None or type(pruner).masks is not Pruner.masks or len(densities) < 2 or applied_masks(model) \
            or _computed(model):
        return [prune_with_s_cr(model, method, d, x=x, y=y, data=data, in_shape=in_shape, seed=seed, rounds=rounds,
                                temperature=temperature) for d in densities]
    _refuse_nonfinite(model, x, data)
    for d in densities:
        in_shape = _checked(method, d, x, y, data, None, in_shape, rounds, "global", None)
    with _state_kept(model):
        view = pruning_view(model)
        if data is None:  # prune's own path (_pruned_as_ever): the pruner's scores of the view
            scores = pruner.scores(view, x=x, y=y, in_shape=in_shape, seed=seed, temperature=temperature)
        else:  # several batches (_pruned): the same scorer, nothing pruned yet
            alive = {n: torch.ones_like(w, dtype=torch.bool) for n, w in prunable(view).items()}
            scores = _scorer(method, view, batches=data, loss=None, in_shape=in_shape, seed=seed,
                             temperature=temperature)(alive)
    s_cr = critical_sparsity(scores)
    out = []
    for d in densities:
        masks = masks_from_scores(scores, d)
        out.append((masks_for(model, view, masks) if view is not model else masks, s_cr))
    return out


def _pruned_as_ever(model: nn.Module, method: str, density: float, *, x, y, in_shape, seed: int, rounds: int,
                    temperature: float) -> tuple[Masks, float]:
    """The papers' path, ``prune``'s defaults: the pruner's own masks of the whole net, scored on
    its ``pruning_view``. Unchanged, for the committed masks rest on it."""
    view = pruning_view(model)
    if view is not model:
        masks, s_cr = _pruned_as_ever(view, method, density, x=x, y=y, in_shape=in_shape, seed=seed, rounds=rounds,
                                      temperature=temperature)
        return masks_for(model, view, masks), s_cr
    return PRUNERS[method].masks(model, density, rounds=rounds, x=x, y=y, in_shape=in_shape, seed=seed,
                                 temperature=temperature)


def _checked(method: str, density: float, x, y, data, loss, in_shape, rounds: int, scope: str,
             schedule: str | None) -> tuple[int, ...] | None:
    """Stop on what ``prune`` cannot do with an error that says what to pass; SynFlow's
    ``in_shape``, read from ``x`` or ``data`` when not given."""
    if method not in PRUNERS:
        raise ValueError(f"unknown pruning method {method!r}; known: {', '.join(PRUNERS)}")
    checked_density(density)
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if schedule is not None and schedule not in SCHEDULES:
        raise ValueError(f"schedule must be None or one of {SCHEDULES}, got {schedule!r}")
    if not (rounds >= 1 and int(rounds) == rounds):
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    _refuse_empty(x, "x")
    if data is not None and (x is not None or y is not None):
        raise TypeError("pass the data as x= and y= (one batch) or as data= (an iterable of (x, y) batches), not both")
    pruner = PRUNERS[method]
    if isinstance(pruner, (Snip, Grasp)) and data is None and (x is None or y is None):
        missing = "y= (the integer class labels of x)" if x is not None else "x= and y= (inputs and integer labels)"
        raise TypeError(f"{method} scores weights on data: pass {missing} for one batch, or data= (an iterable of "
                        "(x, y) batches, e.g. a DataLoader)")
    if loss is not None and not isinstance(pruner, (Snip, Grasp)):
        raise TypeError(f"loss= is for the data-driven pruners snip and grasp; {method} does not take a loss")
    if isinstance(pruner, SynFlow) and in_shape is None:
        if x is None and data is not None:
            first = next(iter(data), None)
            if first is None:
                raise _no_batch()
            x = batch_xy(first, labels=False)[0]
        if x is None:
            raise TypeError("synflow needs in_shape=, the shape of one input without the batch dimension, e.g. "
                            "in_shape=(3, 32, 32) for CIFAR-10 (or x= or data= to read it from a batch)")
        in_shape = tuple(x.shape[1:])
    return in_shape


def _chosen(tied: dict[str, str], exclude: Iterable[str]) -> list[str]:
    """The weights pruned (``_tied``'s names they are masked under): all but those ``exclude`` names
    (``prune``); a weight shared by several layers stays dense when one of them is excluded."""
    names, out = list(tied), set()
    for item in [exclude] if isinstance(exclude, str) else exclude:
        if item in ("bias", "batchnorm"):  # never pruned here
            continue
        hit = {"first": names[:1], "last": names[-1:]}.get(item) or [
            n for n in names if n == item or n.startswith(f"{item}.")]
        if not hit:
            raise ValueError(f"exclude={item!r} names no conv or linear layer of the model: give 'first', 'last', "
                             f"'bias', 'batchnorm', a module name or a weight name such as {names[-1]!r}")
        out.update(hit)
    if not names:
        raise ValueError("prune: the model has no conv or linear layer with weights, so nothing to prune "
                         "(pruned: nn.Linear and nn.Conv1d/2d/3d)")
    dense = {tied[n] for n in out}
    if not (chosen := [n for n in dict.fromkeys(tied.values()) if n not in dense]):
        raise ValueError("exclude leaves no weight to prune")
    return chosen


@contextlib.contextmanager
def _state_kept(model: nn.Module):
    """Put back every submodule's train/eval mode and every buffer (the same tensors, their values
    bit for bit): a forward pass in train mode moves batch norm's running statistics. Masks are
    buffers scoring never writes, and their copies would double the weights' memory: not saved.
    Inside, so that two identical calls give the same masks, dropout and RReLU are in eval mode, and
    any other draw (a module's own, a shuffling loader) comes from torch's generators of the CPU and
    the model's GPUs seeded with 0, put back as they were after."""
    modes = [(m, m.training) for m in model.modules()]
    for m in model.modules():
        if isinstance(m, (nn.modules.dropout._DropoutNd, nn.RReLU)):
            m.training = False
    saved = [(m, k, b, b.clone()) for m in model.modules() if not isinstance(m, _Mask)
             for k, b in m._buffers.items() if b is not None and f"{k.removesuffix('_mask')}_orig" not in m._parameters]
    devices = sorted({p.device.index for p in model.parameters() if p.is_cuda})
    try:
        with torch.random.fork_rng(devices=devices):
            torch.default_generator.manual_seed(0)
            for d in devices:
                torch.cuda.default_generators[d].manual_seed(0)
            yield
    finally:
        with torch.no_grad():
            for m, k, b, value in saved:
                m._buffers[k] = b
                b.copy_(value)
        for m, mode in modes:
            m.training = mode


def _density_at(r: int, rounds: int, density: float, schedule: str | None, start: float) -> float:
    """The fraction kept after round ``r`` of ``rounds`` on ``schedule``, from ``start`` (the
    fraction kept before the first round); the last round is ``density`` itself."""
    if r == rounds or start == 0:
        return density
    if schedule == "linear":
        return start - (start - density) * (r / rounds)
    return start * (density / start) ** (r / rounds)


def _pruned(model: nn.Module, method: str, density: float, chosen: list[str], *, batches: Batches, loss: Loss | None,
            in_shape, seed: int, rounds: int, temperature: float, scope: str,
            schedule: str | None) -> tuple[Masks, float]:
    """``prune`` with Synaptic-Flow's options, on a masked model, or both. A masked model is scored
    on a copy with its masks multiplied into its weights; a schedule prunes a copy round by round
    (SynFlow its own float64 copy). Each round keeps the top scores of the weights kept so far (the
    others score -inf): masks only shrink."""
    current = applied_masks(model)
    if isinstance(PRUNERS[method], SynFlow):
        schedule = schedule or "exponential"
    n_rounds = rounds if schedule else 1
    copied = current or _computed(model) or (n_rounds > 1 and not isinstance(PRUNERS[method], SynFlow))
    net = _unmasked_copy(model) if copied else model
    view = pruning_view(net)
    key = dict(zip(dict.fromkeys(_tied(model).values()), dict.fromkeys(_tied(view).values())))
    weights = prunable(view)
    alive = {key[n]: current[n] if n in current else torch.ones_like(weights[key[n]], dtype=torch.bool)
             for n in chosen}
    score = _scorer(method, view, batches=batches, loss=loss, in_shape=in_shape, seed=seed, temperature=temperature)
    pools = [list(alive)] if scope == "global" else [[n] for n in alive]
    starts = [sum(int(alive[n].sum()) for n in pool) / sum(alive[n].numel() for n in pool) for pool in pools]
    for r in range(1, n_rounds + 1):
        scores = score(alive)
        ranked = {n: torch.where(alive[n], s, float("-inf")) for n, s in scores.items()}  # a pruned weight stays so
        kept = {}
        for pool, start in zip(pools, starts):
            d = _density_at(r, n_rounds, density, schedule, start)
            size, n_alive = sum(alive[n].numel() for n in pool), sum(int(alive[n].sum()) for n in pool)
            if round(d * size) > n_alive:
                where = "" if scope == "global" else f" in {pool[0]}"
                raise ValueError(f"the model keeps {n_alive} of {size} weights{where} (density {n_alive / size:.4g}) "
                                 f"and masks only shrink: ask for density <= {n_alive / size:.4g}")
            kept |= masks_from_scores({n: ranked[n] for n in pool}, d)
        alive = kept
    one_shot = n_rounds == 1 and scope == "global" and not current
    s_cr = critical_sparsity(scores) if one_shot else float("nan")
    return {n: alive[key[n]] for n in chosen}, s_cr


def _computed(model: nn.Module) -> bool:
    """Whether a conv or linear layer of ``model`` has a parametrization other than ``apply_masks``'s
    mask alone (``weight_norm``, ``spectral_norm``, ...): its weight is computed from others."""
    return any(_others(m) for _, m in weight_layers(model))


def _others(module: nn.Module) -> bool:
    """Whether ``module`` has a parametrization besides ``apply_masks``'s mask."""
    if not parametrize.is_parametrized(module):
        return False
    return set(module.parametrizations) != {"weight"} or len(module.parametrizations.weight) != 1 \
        or _own_mask(module) is None


def _unmasked_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with its masks (``apply_masks``'s, ``torch.nn.utils.prune``'s) taken off
    and multiplied into its weights: the masked net as plain weights, to score and to prune further.
    A layer under another parametrization (``weight_norm``) gets the tensors it computes as plain
    parameters: the net is scored, and masked, as the weights it computes with. Tied weights stay tied."""
    from torch.nn.utils import prune as torch_prune

    # torch's masked weight is a computed tensor, which deepcopy refuses: the copy gets it as a plain
    # one (torch_prune.remove recomputes it there from the copied weight_orig and weight_mask)
    memo = {id(m.weight): m.weight.detach().clone() for _, m in weight_layers(model) if "weight_orig" in m._parameters}
    net = copy.deepcopy(model, memo)
    for name, m in weight_layers(net):
        if _others(m):
            values = {k: getattr(m, k).detach().clone() for k in m.parametrizations}
            m.__class__ = type(m).__bases__[0]  # the copy's alone (as in _take_off)
            del m._modules["parametrizations"]
            for k, value in values.items():
                m.register_parameter(k, nn.Parameter(value))
        elif _own_mask(m) is not None:
            _take_off(m, f"{name}.weight")
        elif "weight_orig" in m._parameters:
            torch_prune.remove(m, "weight")
    return net


def _scorer(method: str, net: nn.Module, *, batches: Batches, loss: Loss | None, in_shape, seed: int,
            temperature: float) -> Callable[[Masks], dict[str, torch.Tensor]]:
    """``method``'s scores of the weights of ``alive`` (the masks kept so far, keyed as
    ``prunable(net)``) as a function of ``alive``, with the weights it prunes set to zero in
    ``net`` (a copy whenever any is pruned) or, for SynFlow, in its float64 copy. ``batches`` is
    read once a round: an iterator is kept as a list."""
    pruner = PRUNERS[method]
    if isinstance(pruner, SynFlow):
        lin, weights, ones = _linearized(net, in_shape)

        def synflow(alive: Masks) -> dict[str, torch.Tensor]:
            _zero(weights, alive)
            live = {n: w.detach().requires_grad_(True) for n, w in weights.items()}
            grads = torch.autograd.grad(functional_call(lin, live, (ones,)).sum(), [live[n] for n in alive])
            return {n: (live[n] * g).detach().abs() for n, g in zip(alive, grads)}

        return synflow
    weights = prunable(net)
    loss = loss or nn.functional.cross_entropy
    batches = list(batches) if isinstance(batches, Iterator) else batches
    if isinstance(pruner, Snip):
        def scores(alive):
            return _snip(net, list(alive), batches, loss)
    elif isinstance(pruner, Grasp):
        batches = list(batches)  # two passes over the same data (a loader could shuffle or augment)

        def scores(alive):
            return _grasp(net, alive, batches, loss, temperature)
    elif type(pruner).masks is Pruner.masks:  # random, magnitude, or a new scoring pruner
        bx, by = (None, None)
        if not isinstance(pruner, (Random, Magnitude)):
            batches = list(batches)
            if len(batches) > 1:
                raise TypeError(f"{method} scores one batch: pass x= and y=, not data= of several batches")
            bx, by = _on(batches[0], net) if batches else (None, None)

        def scores(alive):
            s = pruner.scores(net, x=bx, y=by, in_shape=in_shape, seed=seed, temperature=temperature)
            return {n: s[n] for n in alive}
    else:
        raise TypeError(f"{method} chooses its own masks: data=, loss=, scope=, exclude= and schedule= need a "
                        "pruner that scores (a Pruner with scores())")

    def zeroed_then_scored(alive: Masks) -> dict[str, torch.Tensor]:
        _zero(weights, alive)
        return scores(alive)

    return zeroed_then_scored


def _zero(weights: dict[str, torch.Tensor], alive: Masks) -> None:
    """Zero the pruned weights in place (only where something is pruned: a net with none pruned may
    be the caller's own)."""
    with torch.no_grad():
        for n, a in alive.items():
            if not a.all():
                weights[n].mul_(a)


def _on(batch: tuple[torch.Tensor, torch.Tensor], model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """An ``(x, y)`` batch on ``model``'s device."""
    device = next(model.parameters()).device
    x, y = batch_xy(batch)
    _refuse_empty(x, "a batch of data=")
    return x.to(device), y.to(device) if isinstance(y, torch.Tensor) else y


def _refuse_empty(x, what: str) -> None:
    """A ``ValueError`` for a batch of no inputs: its loss is NaN (a mean over nothing) or zero, so
    the scores ranked from it would choose the masks by chance."""
    if torch.is_tensor(x) and x.dim() > 0 and len(x) == 0:
        raise ValueError(f"prune: {what} holds no inputs (shape {tuple(x.shape)}): scores of an empty batch "
                         "choose masks by chance; give at least one input and its label")


def _no_batch() -> ValueError:
    return ValueError("data= gave no batch: pass an iterable of (x, y) batches, e.g. a DataLoader")


@full_fp32
def _snip(model: nn.Module, keys: list[str], batches: Batches, loss: Loss) -> dict[str, torch.Tensor]:
    """SNIP's scores of the weights ``keys``: |theta * g| with g the gradient of the loss summed over
    ``batches`` (Synaptic-Flow accumulates the batches' gradients, then takes the absolute value);
    with one batch and cross-entropy, ``snip_scores``'s to the bit."""
    weights = {n: w for n, w in prunable(model).items() if n in keys}
    cs = {n: torch.ones_like(w, requires_grad=True) for n, w in weights.items()}
    total = None
    for batch in batches:
        x, y = _on(batch, model)
        out = functional_call(model, {n: w.detach() * cs[n] for n, w in weights.items()}, (x,))
        grads = torch.autograd.grad(loss(out, y), list(cs.values()))
        total = grads if total is None else [t + g for t, g in zip(total, grads)]
    if total is None:
        raise _no_batch()
    return {n: g.abs() for n, g in zip(weights, total)}


@full_fp32
def _grasp(model: nn.Module, alive: Masks, batches: list[tuple[torch.Tensor, torch.Tensor]], loss: Loss,
           temperature: float) -> dict[str, torch.Tensor]:
    """GraSP's theta * Hg for the weights of ``alive``, g and H of the loss summed over ``batches``
    (Synaptic-Flow's two passes: g of all batches, then Hg batch by batch). A pruned weight is no
    parameter: its part of g is dropped, so Hg is the masked net's. One batch, nothing pruned and
    cross-entropy: ``grasp_scores``'s one pass, to the bit."""
    weights = {n: w.detach().contiguous().requires_grad_(True) for n, w in prunable(model).items() if n in alive}
    if not batches:
        raise _no_batch()

    def grad(batch, create_graph: bool):
        x, y = _on(batch, model)
        out = functional_call(model, weights, (x.contiguous(),))
        return torch.autograd.grad(loss(out / temperature, y), list(weights.values()), create_graph=create_graph)

    def kept(gs):
        return [g if a.all() else g * a for g, a in zip(gs, alive.values())]

    if len(batches) == 1:
        g = grad(batches[0], True)
        stopped, pairs = kept([a.detach() for a in g]), [g]
    else:
        stopped = kept([sum(gs) for gs in zip(*(grad(b, False) for b in batches))])
        pairs = (grad(b, True) for b in batches)
    hg = None
    for g in pairs:
        h = torch.autograd.grad(sum((a * s).sum() for a, s in zip(g, stopped)), list(weights.values()))
        hg = h if hg is None else [t + u for t, u in zip(hg, h)]
    return {n: w.detach() * h for (n, w), h in zip(weights.items(), hg)}


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

    def narrow(self, mask: torch.Tensor) -> None:
        """Keep only what both masks keep (new tensors: masks handed out before stay as they were)."""
        self.mask = self.mask & mask.to(self.mask.device)
        self.factor = self.mask.to(self.factor.dtype)


def _own_mask(module: nn.Module) -> _Mask | None:
    """The ``_Mask`` that ``apply_masks`` put on ``module.weight``, if any."""
    if not parametrize.is_parametrized(module, "weight"):
        return None
    return next((p for p in module.parametrizations.weight if isinstance(p, _Mask)), None)


def apply_masks(model: nn.Module, masks: Masks) -> nn.Module:
    """Zero the pruned weights of ``model`` in place and keep them zero through training (a weight
    parametrization, so an optimizer step, momentum and weight decay included, cannot revive them).
    A weight masked already keeps what both masks keep, its one mask narrowed (the state dict keeps
    its keys): prune, apply and prune again is iterative pruning. A weight shared by several layers
    (tied) takes one mask, under the first layer's name (``prune``'s), and every layer computes with
    the masked weight; a weight under another parametrization (``weight_norm``) is masked as it is
    computed, the mask last. Masks are checked before any is applied: an unknown name, a mask that
    is not boolean or not of its weight's shape, or two masks for one tensor is an error naming it.

        >>> apply_masks(model, prune(model, "synflow", 0.05, in_shape=(3, 32, 32)))  # doctest: +SKIP
    """
    targets = _layers_of(model, masks, "apply_masks")
    for name, layers in targets.items():
        if any("weight_orig" in m._parameters for m in layers):
            raise TypeError(f"{name} is pruned by torch.nn.utils.prune: take its mask over with "
                            "from_torch_prune(model, remove=True) before apply_masks, or use to_torch_prune")
    for name, layers in targets.items():
        mask, stored = masks[name], _stored(layers[0])
        if torch.is_tensor(stored):  # a weight computed from several tensors is masked in the forward pass alone
            with torch.no_grad():
                stored.mul_(mask.to(stored.device, stored.dtype))
        for module in layers:
            if (own := _own_mask(module)) is not None:
                own.narrow(mask)
            else:
                parametrize.register_parametrization(module, "weight",
                                                     _Mask(mask.to(module.weight.device), module.weight.dtype))
    return model


def _layers_of(model: nn.Module, masks: Masks, where: str) -> dict[str, list[nn.Module]]:
    """The layers that compute with each weight of ``masks`` (several for a tied weight), the masks
    checked first (``pruning_inputs.checked_masks``)."""
    tied, layers = _tied(model), dict(weight_layers(model))
    checked_masks(masks, tied, {n: layers[n.removesuffix(".weight")].weight.shape for n in tied}, where)
    return {name: [layers[n.removesuffix(".weight")] for n, key in tied.items() if key == tied[name]] for name in masks}


def _take_off(module: nn.Module, name: str) -> None:
    """Take ``apply_masks``'s parametrization off ``module.weight``, its pruned weights left at zero
    and its stored weights kept as the same ``Parameter`` (an optimizer holding it still works).
    Not ``parametrize.remove_parametrizations``: it deletes the property from the module's class,
    which a deep copy of the model shares, and so breaks the original."""
    if set(module.parametrizations) != {"weight"} or len(module.parametrizations.weight) != 1:
        raise TypeError(f"{name} has parametrizations besides its mask: taking the mask off would drop them")
    weights = module.parametrizations.weight
    original, mask = weights.original, weights[0].mask
    with torch.no_grad():
        original.mul_(mask.to(original.dtype))
    module.__class__ = type(module).__bases__[0]  # this module's class before the parametrization, for it alone
    del module._modules["parametrizations"]
    module.register_parameter("weight", original)


def applied_masks(model: nn.Module) -> Masks:
    """The masks in force on ``model``'s conv and linear weights: ``apply_masks``'s and
    ``torch.nn.utils.prune``'s (``{}`` for a model with none)."""
    out, tied = {}, _tied(model)
    for name, m in weight_layers(model):
        if (own := _own_mask(m)) is not None:
            out.setdefault(tied[f"{name}.weight"], own.mask)
        elif "weight_orig" in m._parameters:
            out.setdefault(tied[f"{name}.weight"], m.weight_mask != 0)
    return out


def to_torch_prune(model: nn.Module, masks: Masks | None = None) -> nn.Module:
    """Hand masks to ``torch.nn.utils.prune`` (``custom_from_mask``): ``masks``, or the model's own
    from ``apply_masks`` when None. A weight under ``apply_masks`` has that mask taken off (its
    pruned weights stay zero) and multiplied into the new one; one torch prunes already keeps what
    both keep (torch's rule). The forward pass is the same, bit for bit. Returns ``model``."""
    from torch.nn.utils import prune as torch_prune

    masks = applied_masks(model) if masks is None else masks
    for name, layers in _layers_of(model, masks, "to_torch_prune").items():
        mask = masks[name]
        for module in layers:
            if (own := _own_mask(module)) is not None:
                mask = own.mask & mask.to(own.mask.device)
                _take_off(module, name)
            torch_prune.custom_from_mask(module, "weight", mask.to(module.weight.device))
    return model


def from_torch_prune(model: nn.Module, remove: bool = False) -> Masks:
    """The masks ``torch.nn.utils.prune`` keeps on ``model``'s conv and linear weights, as boolean
    ``Masks`` for ``apply_masks``, ``prune`` or ``layer_table``. With ``remove``, torch's pruning is
    made permanent and taken off (``prune.remove``: the pruned weights stay zero, no hook left), so
    that ``apply_masks(model, masks)`` takes over."""
    from torch.nn.utils import prune as torch_prune

    layers = {id(m) for _, m in weight_layers(model)}
    for name, m in model.named_modules():
        others = [k for k in m._parameters if k.endswith("_orig") and (k != "weight_orig" or id(m) not in layers)]
        if others:
            raise ValueError(f"torch.nn.utils.prune prunes {name}.{others[0].removesuffix('_orig')}: masks here are of "
                             "conv and linear weights; make that pruning permanent first (prune.remove)")
    masks, tied = {}, _tied(model)
    for name, m in weight_layers(model):
        if "weight_orig" in m._parameters:
            masks.setdefault(tied[f"{name}.weight"], m.weight_mask != 0)
            if remove:
                torch_prune.remove(m, "weight")
    return masks


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


def collapse(masks: Masks, connected: bool | None = None) -> str:
    """What ``masks`` empty, in words: "" when every pruned layer keeps a weight. An emptied
    classifier (the last pruned layer), or emptied layers that leave no path from input to output
    (``connected`` False: ``connected``'s answer), mean a net that predicts one class whatever it is
    trained to; layers emptied beside a path that survives (a residual block's shortcut, with its
    branch kept) do not (``connected`` True), and None says it is not known."""
    emptied = [name for name, m in masks.items() if not bool(m.any())]
    if not emptied:
        return ""
    last = list(masks)[-1]
    others = [n for n in emptied if n != last]
    listed = (f"{len(others)} layer{'s' if len(others) > 1 else ''} emptied ({', '.join(others[:4])}"
              f"{', ...' if len(others) > 4 else ''})") if others else ""
    if last in emptied:
        return "; ".join([f"the classifier {last} keeps none of its {masks[last].numel()} weights"]
                         + [listed] * bool(others)) + ": the net can only predict one class, at chance"
    if connected is False:
        return f"{listed}: no path from input to output is left, the net predicts one class, at chance"
    if connected:
        return f"{listed}, but a path around them is left (a residual block's other branch): it can learn"
    return f"{listed}: unless a path bypasses them, the net predicts one class"


def at_chance(masks: Masks, connected: bool | None = None) -> bool:
    """Whether ``masks`` leave a net that can only guess (``collapse``): its classifier emptied, or
    no path from input to output left."""
    last = list(masks)[-1]
    return not bool(masks[last].any()) or (connected is False and any(not bool(m.any()) for m in masks.values()))


def connected(model: nn.Module, masks: Masks, in_shape: tuple[int, ...]) -> bool:
    """Whether some path from the input to the output survives ``masks``: the gradient of the
    output's sum with respect to an all-ones input of SynFlow's linearized net (float64, every
    parameter and buffer by its absolute value, eval mode: ``_linearized``) with the masks
    multiplied in is not zero. All its terms are products of non-negative factors along paths, so
    it is zero exactly when every path crosses a pruned weight. A masked or parametrized model is
    read as the weights it computes with (``_unmasked_copy``)."""
    plain = _unmasked_copy(model) if applied_masks(model) or _computed(model) else model
    net, weights, ones = _linearized(plain, in_shape)
    with torch.no_grad():
        for n, w in weights.items():
            if n in masks:
                w.mul_(masks[n].to(w.device))
    ones.requires_grad_(True)
    grad, = torch.autograd.grad(net(ones).sum(), [ones])
    return bool((grad != 0).any())


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
    """``save_masks``'s runs, the masks unpacked onto ``device`` (None for a run that is not pruned);
    a file that is not such masks is refused by name (``checkpoint_file.load``)."""
    from .checkpoint_file import load

    runs = load(path)
    return {key: {**run, "masks": unpack(run["masks"], device) if run["masks"] else None}
            for key, run in runs.items()}


def mask_facts(runs: dict[str, dict]) -> pd.DataFrame:
    """What a job's masks do, one row per (run, pruned layer): ``layer_table`` with the run's key,
    its facts, its achieved sparsity, the number of layers it emptied (layer collapse) and
    ``collapse``, what that emptying means in words ("" when nothing is emptied)."""
    tables = []
    for key, run in runs.items():
        if not run.get("masks"):
            continue
        t = layer_table(run["masks"])
        facts = {k: v for k, v in run.items() if k != "masks"}
        t = t.assign(**facts, achieved_sparsity=sparsity(run["masks"]), collapsed_layers=int(t["collapsed"].sum()),
                     collapse=collapse(run["masks"], run.get("connected")))
        t.insert(0, "run", key)
        tables.append(t)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=["run", "layer", "name"])


# --- back to the edge of chaos (RP Proposition 1, Algorithm 1) ----------------------------------------


RESCALINGS = ("eq7", "authors")


@torch.no_grad()
def rescale(model: nn.Module, masks: Masks, sigma_w: float | None = None, scale: str = "eq7") -> nn.Module:
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
    the variance, for a 3x3 conv it is 9 / sigma_w^2 times it. Slices with nothing kept stay at zero.

    ``scale="authors"`` is the RP authors' code instead (sAviOr287/imagenet_ICLR, ``pruner/SNIP.py``,
    lines 153-157 for convs, 143-149 for linear rows): rho = 1 / (sqrt(alpha) / sigma_w^2 + 0.001)
    per slice, so each slice's kept sum of squares is about sigma_w^4 (4 at He's sigma_w^2 = 2), 18
    times Eq. 7's 2 / 9 for a 3x3 conv and twice its 2 for a linear row. Under a batch norm after
    every conv the two give the same function at init (a constant factor per layer cancels); the
    classifier's logits are sqrt(2) larger, and in training a conv's 4.2-fold larger weights see
    an 18-fold smaller effective learning rate (batch norm makes the layer scale-invariant).
    """
    if scale not in RESCALINGS:
        raise ValueError(f"scale must be one of {RESCALINGS}, got {scale!r}")
    if scale == "authors" and sigma_w is None:
        raise ValueError('scale="authors" rescales each slice to a sum of squares of sigma_w^4: pass sigma_w')
    modules = dict(model.named_modules())
    for name, mask in masks.items():
        module = modules[name.rsplit(".", 1)[0]]
        w = module.parametrizations.weight.original if parametrize.is_parametrized(module, "weight") else module.weight
        alpha = ((w * mask) ** 2).sum(dim=1, keepdim=True)  # [out, 1, *kernel]: one per slice
        positions = w[0, 0].numel()  # kh * kw for a conv, 1 for a linear layer
        if scale == "authors":  # their 1 / (sqrt(alpha / sigma_w^4) + 0.001), masked to the kept weights
            rho = torch.where(alpha > 0, 1.0 / (alpha.sqrt() / sigma_w**2 + 0.001), torch.zeros_like(alpha))
        else:
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
