"""Many small nets trained as one: the runs of a job that share an architecture, a recipe and their
data train as a stack, one batched product per layer for all of them instead of one small product
per run. This module holds the stack itself; ``training.train`` decides which runs stack
(``training.plan``: ``stackable``, ``signature``, ``pays``) and trains a stack through the same
epoch loop as a run alone.

Small nets spend their time in per-operation overhead, not arithmetic (TG-F6's 100 MLPs of width
32, RP-F3's 27 tanh nets per depth): stacking K of them turns K launches into one larger one, as
PyTorch's model ensembling does (``torch.func.stack_module_state`` and ``vmap``).

Each run keeps everything that makes it itself: its initial weights and masks, its data order (its
own ``torch.Generator``, drawn as a run alone draws it), its optimizer state, its learning-rate
schedule position and its stopping rule. A run that diverges or meets its ``stop_when`` leaves the
stack (the rest go on); runs resumed at different epochs train in separate stacks. What each run
returns and checkpoints is what it would write alone, key for key, so results, checkpoints and
fingerprints do not change; the weights agree with training one by one up to float rounding
(batched products round differently from single ones, and a run's place in the stack decides
which of its elements take the fused optimizer's scalar path). A stack saves each epoch's
checkpoints all or none (``training.Control.uninterrupted``), so a run stopped and resumed trains
on in the stack it left, bit for bit. Per-run rows carry the stack's time divided among its runs
(their ``seconds`` add up to the time spent).

Models that cannot stack (batch norm, channels-last, a loss other than cross-entropy) and runs of
a recipe with ``ensemble: false`` train one by one.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .engine import Engine, loss_precision, run_loss
from .nets import MLP


class Stack:
    """The trainable parameters of ``members`` (each with its ``model``, ``params``: its trainable
    parameters by name, and ``opt``: its own optimizer, what its checkpoint is written from)
    stacked along a new first dimension (leaf tensors), their optimizer state likewise, and a
    forward pass over a batch per member ``[K, B, ...]``; ``step`` takes one optimizer step of
    every member (``engine.Engine`` under ``engine_mode``), ``write_back`` copies each member's
    slice back into its own model and optimizer."""

    def __init__(self, members: list, recipe, device: torch.device, engine_mode: str = "eager"):
        self.members = members
        first = members[0]
        self.forward, self.transposed, masked = _forward(first.model)
        lay = self._lay
        self.params = {}
        for n in first.params:
            stacked = torch.stack([lay(n, m.params[n].detach()) for m in members]).requires_grad_(True)
            for attr in ("no_weight_decay", "lr_scale"):  # what ``Recipe.optimizer_for`` reads
                if hasattr(first.params[n], attr):
                    setattr(stacked, attr, getattr(first.params[n], attr))
            self.params[n] = stacked
        # frozen parameters (EP-F7 trains one layer) and buffers (pruning masks) stay constants
        per_run = [{**dict(m.model.named_parameters()), **dict(m.model.named_buffers())} for m in members]
        self.constants = {n: torch.stack([lay(n, tensors[n].detach()) for tensors in per_run])
                          for n in per_run[0] if n not in self.params}
        # a weight whose mask the forward pass does not apply: zero where pruned (as the mask
        # parametrization keeps it), its gradient masked in every step (``engine.step``)
        self.grad_masks = [(self.params[w], self.constants[mask]) for w, mask in masked.items()]
        with torch.no_grad():
            for p, mask in self.grad_masks:
                p.mul_(mask)
        self.opt = recipe.optimizer_for(self.params.values(), fused=True)
        self.step = Engine(engine_mode, run_loss(self, _cross_entropy_per_run, recipe.autocast_dtype(device)),
                           self.opt, self.grad_masks)
        for n, p in self.params.items():
            per_run = [m.opt.state.get(m.params[n], {}) for m in members]
            if per_run[0]:
                self.opt.state[p] = {key: _stack_state(key, [lay(n, s[key]) for s in per_run]) for key in per_run[0]}

    def _lay(self, name: str, t):
        """A run's tensor in the stack's layout (``_forward``: a product's weights transposed), and
        back (a transposition is its own inverse)."""
        return t.transpose(-1, -2) if name in self.transposed and isinstance(t, torch.Tensor) and t.dim() == 2 else t

    def set_lr(self, lr: float) -> None:
        for opt in [self.opt] + [m.opt for m in self.members]:
            for group in opt.param_groups:
                group["lr"] = lr * group.get("lr_scale", 1.0)

    @torch.no_grad()
    def write_back(self) -> None:
        """Copy each member's slice of the stack into its own model and optimizer."""
        for k, m in enumerate(self.members):
            for n, p in self.params.items():
                m.params[n].copy_(self._lay(n, p[k]))
                state = self.opt.state.get(p)
                if state:
                    m.opt.state[m.params[n]] = {key: self._lay(n, _unstack_state(key, v, k)).contiguous()
                                                for key, v in state.items()}

    def __call__(self, xb: torch.Tensor) -> torch.Tensor:
        return self.forward(self.params, self.constants, xb)


def _cross_entropy_per_run(stack: Stack, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each run's mean cross-entropy on its own batch ``[K]``, and the logits ``[K, B, C]``: the
    stack's ``training.cross_entropy``."""
    logits = stack(xb)
    losses = F.cross_entropy(loss_precision(logits).flatten(0, 1), yb.flatten(), reduction="none")
    return losses.view(yb.shape).mean(dim=1), logits


# Optimizer state shared by every run of a stack (they have all taken the same steps): kept once.
SHARED_STATE = frozenset({"step"})


def _stack_state(key: str, values: list):
    """One entry of K runs' optimizer state as one: per-parameter tensors (momentum, Adam's
    moments) stacked, shared ones (``SHARED_STATE``) kept once."""
    v0 = values[0]
    if key in SHARED_STATE or not isinstance(v0, torch.Tensor):
        return v0.clone() if isinstance(v0, torch.Tensor) else v0
    return torch.stack(values)


def _unstack_state(key: str, value, k: int):
    if key in SHARED_STATE or not isinstance(value, torch.Tensor):
        return value.clone() if isinstance(value, torch.Tensor) else value
    return value[k].clone()


def _forward(model: nn.Module):
    """``(f, transposed, masked)``: ``f(params, constants, x [K, B, ...]) -> logits [K, B, C]``,
    the names of the tensors ``f`` takes transposed, and the weights whose masks ``f`` leaves to
    the step (``{weight: mask}``, ``engine.step``'s gradient masks). For ``nets.MLP`` one batched product per layer
    (``baddbmm`` where ``MLP`` does ``addmm``) on weights stored ``[K, in, out]``, so that neither
    pass copies a transposed operand; for any other model ``vmap`` of
    ``torch.func.functional_call`` over the model's structure (masks are buffers of its mask
    parametrizations, applied as in the model)."""
    if isinstance(model, MLP):
        return _mlp_forward(model)
    from torch.func import functional_call, vmap

    skeleton = copy.deepcopy(model).to("meta")

    def one(params, constants, x):
        return functional_call(skeleton, {**params, **constants}, (x,))

    return vmap(one), frozenset(), {}


def _mlp_forward(model: MLP):
    layers, masked = [], {}
    for i, layer in enumerate(model.layers):
        pruned = hasattr(layer, "parametrizations")
        weight = f"layers.{i}.parametrizations.weight.original" if pruned else f"layers.{i}.weight"
        if pruned:
            masked[weight] = f"layers.{i}.parametrizations.weight.0.factor"  # the mask as a float
        bias = f"layers.{i}.bias" if layer.bias is not None else None
        layers.append((weight, bias))
    last = len(layers) - 1

    def forward(params, constants, x):
        values = {**params, **constants}
        h = x.flatten(2)
        for i, (weight, bias) in enumerate(layers):
            w = values[weight]
            a = torch.bmm(h, w) if bias is None else torch.baddbmm(values[bias][:, None], h, w)
            if model.readout and i == last:
                return a
            h = model.act(a, inplace=True)  # the net's own activation, at its own slope
        return h

    return forward, frozenset(n for weight, _ in layers for n in (weight, masked.get(weight)) if n), masked
