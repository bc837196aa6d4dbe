"""Many small nets trained as one: the runs of a job that share an architecture, a recipe and their
data train as a stack (``fit_together``), one batched product per layer for all of them instead of
one small product per run.

Small nets spend their time in per-operation overhead, not arithmetic (TG-F6's 100 MLPs of width
32, RP-F3's 27 tanh nets per depth): stacking K of them turns K launches into one larger one, as
PyTorch's model ensembling does (``torch.func.stack_module_state`` and ``vmap``).

Each run keeps everything that makes it itself: its initial weights and masks, its data order (its
own ``torch.Generator``, drawn exactly as ``training.fit`` draws it), its optimizer state, its
learning-rate schedule position and its stopping rule. A run that diverges or meets its
``stop_when`` leaves the stack (the rest go on); runs resumed at different epochs train in
separate stacks. What each run returns and checkpoints is what ``training.fit`` would write, key for
key, so results, checkpoints and fingerprints do not change; the weights agree with training one by
one up to float rounding (batched products round differently from single ones, and a run's place
in the stack decides which of its elements take the fused optimizer's scalar path). A stack saves
each epoch's checkpoints all or none (``training.uninterrupted``), so a run stopped and resumed
trains on in the stack it left, bit for bit. Per-run rows carry the stack's time divided among its
runs (their ``seconds`` add up to the time spent).

How a job uses it (``experiments.training_jobs``): its runs' code is run once with ``fit``
deferred (``training.deferring``: each ``fit`` call is recorded, not run), the recorded calls train
together, and the runs' code is run again with each ``fit`` handed its finished state
(``training.handing_over``), so the code after ``fit`` (measuring the trained net) runs unchanged.
Models that cannot stack (batch norm, channels-last, a loss other than
cross-entropy) and runs of a recipe with ``ensemble: false`` train one by one, as before.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import asdict

import torch
import torch.nn.functional as F
from torch import nn

from . import integrity
from .engine import Engine, flushed_denormals, loss_precision, mode_for
from .nets import MLP, tf32
from .training import (
    FitCall,
    Run,
    _row,
    at_init,
    check_deadline,
    cross_entropy,
    diverged,
    evaluate,
    fit_state,
    keyed_by_engine,
    resume,
    run_loss,
    stopped,
    uninterrupted,
)

log = logging.getLogger(__name__)


# --- which runs stack ------------------------------------------------------------------------------


def stackable(call: FitCall) -> str | None:
    """Why ``call`` cannot train in a stack (None when it can)."""
    r = call.recipe
    if call.loss_fn is not cross_entropy:
        return "its loss is not plain cross-entropy"
    if r.channels_last:
        return "channels-last"
    if any(isinstance(m, nn.modules.batchnorm._NormBase) for m in call.model.modules()):
        return "batch norm keeps running statistics per run"
    return None


def pays(call: FitCall) -> bool:
    """Whether stacking ``call``'s net is worth it: a ``nets.MLP`` (batched products) on any device;
    other nets (``vmap``: convolutions become grouped ones) on a GPU only, where a small net is
    bound by launches. On the CPU a stack of three depth-10 ``cnn``s ran at 0.75x the rate of the
    same runs one by one (2 cores: the convolutions already keep them busy)."""
    return isinstance(call.model, MLP) or call.train.device.type != "cpu"


def signature(call: FitCall) -> tuple:
    """Runs with equal signatures stack: the same parameters and buffers (names, shapes, types,
    which train), the same recipe, the same data objects and device."""
    model = call.model
    params = tuple((n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in model.named_parameters())
    buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in model.named_buffers())
    return (type(model), _structure(model), params, buffers, repr(asdict(call.recipe)), id(call.train),
            id(call.test), call.n_classes, str(call.train.device))


def _structure(model: nn.Module) -> str:
    """The modules and their settings (activations, padding, ...), without the weights."""
    return repr(model) + (f" {model.activation} {model.negative_slope} {model.readout}" if isinstance(model, MLP)
                          else "")


# --- the stack --------------------------------------------------------------------------------------


class _Member:
    """One run: its model and optimizer (what its checkpoint is written from), generator, history."""

    def __init__(self, call: FitCall, index: int):
        self.call, self.index = call, index
        self.model = call.model
        self.params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        self.opt = call.recipe.optimizer_for(self.params.values())
        self.gen = torch.Generator(device=call.train.device).manual_seed(call.seed)
        self.run = Run()
        self.state: dict | None = None  # the final state, once the run is done

    @property
    def position(self) -> tuple[int, int]:
        return self.run.final["epoch"], self.run.final["step"]

    def finished(self, n_epochs: int) -> bool:
        return self.run.final["epoch"] >= n_epochs or stopped(self.run, self.call.stop_when)

    def save(self) -> None:
        """This run's state as ``fit`` checkpoints it, written to its checkpoint when it has one."""
        c = self.call
        self.state = fit_state(self.model, self.opt, self.gen, self.run, c.masks, c.seed, c.recipe)
        if c.checkpoint:
            c.checkpoint.save(self.state)


class _Stack:
    """The trainable parameters of ``members`` stacked along a new first dimension (leaf tensors),
    their optimizer state likewise, and a forward pass over a batch per member ``[K, B, ...]``."""

    def __init__(self, members: list[_Member], engine_mode: str = "eager"):
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
        self.opt = first.call.recipe.optimizer_for(self.params.values(), fused=True)
        self.step = Engine(engine_mode, run_loss(self, _cross_entropy_per_run, first.call.recipe.autocast_dtype(
            first.call.train.device)), self.opt, self.grad_masks)
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



def _cross_entropy_per_run(stack: _Stack, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


# --- training ---------------------------------------------------------------------------------------


def fit_together(calls: list[FitCall]) -> list[dict]:
    """Train the runs of ``calls`` (all of one ``signature``) as stacks; return each run's final
    state, what ``training.fit`` would have checkpointed at its end, in the order of ``calls``."""
    members = [_Member(c, i) for i, c in enumerate(calls)]
    first = calls[0]
    recipe, train = first.recipe, first.train
    steps_per_epoch = math.ceil(len(train) / recipe.batch_size)
    n_epochs = recipe.n_epochs(steps_per_epoch)
    mode = mode_for(recipe.compile, train.device, recipe.total_steps(steps_per_epoch))
    for m in members:
        keyed_by_engine(m.call.checkpoint, mode)  # as ``fit``: a compiled stack's checkpoints name it
        _start(m, n_epochs, mode)
    by_position: dict[tuple, list[_Member]] = {}
    for m in members:
        if m.finished(n_epochs):
            m.state = m.state or fit_state(m.model, m.opt, m.gen, m.run, m.call.masks, m.call.seed, recipe)
        else:
            by_position.setdefault(m.position, []).append(m)
    for group in by_position.values():
        with tf32(recipe.precision == "tf32"), flushed_denormals(train.device.type == "cpu"):  # as ``fit``
            _train(group, n_epochs, steps_per_epoch, mode)
    return [m.state for m in members]


def _start(m: _Member, n_epochs: int, mode: str) -> None:
    """Resume ``m`` from its checkpoint, as ``fit`` does, or evaluate it at initialization."""
    c = m.call
    state = c.checkpoint.load(c.train.device) if c.checkpoint else None
    if state is not None:
        m.run, m.state = resume(m.model, m.opt, m.gen, state), state
        log.info("resumed from %s at epoch %d of %d", c.checkpoint.path, m.run.final["epoch"], n_epochs)
    else:
        m.run = at_init(m.model, c.test, c.recipe, c.loss_fn, c.on_epoch, f"stacked {mode}")


def _train(members: list[_Member], n_epochs: int, steps_per_epoch: int, mode: str) -> None:
    """Train runs that stand at the same epoch and step as one stack until each is done."""
    first = members[0].call
    recipe, train = first.recipe, first.train
    device = train.device
    total_steps = recipe.total_steps(steps_per_epoch)
    autocast = recipe.autocast_dtype(device)
    epoch0, step = members[0].position
    for m in members:
        m.model.train()
    stack = None
    log.info("training %d runs as one stack (%s) from epoch %d of %d", len(members), type(first.model).__name__,
             epoch0, n_epochs)
    for epoch in range(epoch0 + 1, n_epochs + 1):
        members = in_epoch = [m for m in members if not m.finished(n_epochs)]
        if not members:
            break
        if stack is None or stack.members != members:
            stack = _Stack(members, mode)
        started = time.perf_counter()
        lr = recipe.lr_at(epoch, n_epochs)
        stack.set_lr(lr)
        k = len(members)
        orders = torch.stack([train.order(m.gen) for m in members])  # each run's own, as ``DeviceData.batches``
        loss_sum = torch.zeros(k, device=device)
        correct = torch.zeros(k, device=device, dtype=torch.long)
        finite = torch.ones(k, device=device, dtype=torch.bool)
        seen, epoch_step = 0, step
        for start in range(0, len(train), recipe.batch_size):
            if epoch_step >= total_steps:
                break
            idx = orders[:, start:start + recipe.batch_size]
            xb, yb = train.take(idx)
            if recipe.augment and xb.dim() == 5:
                xb = torch.stack([train.augment(xb[i], m.gen, recipe.crop_pad) for i, m in enumerate(stack.members)])
            losses, right = stack.step(xb, yb)
            epoch_step += 1
            seen += yb.shape[1]
            loss_sum += losses.float() * yb.shape[1]
            correct += right
            finite &= torch.isfinite(losses)
            if epoch_step % recipe.check_every == 0 and not bool(finite.all()):
                # the runs whose loss turned non-finite stop here, as ``fit`` stops them; the rest go on
                stack, keep, orders, loss_sum, correct, finite = _drop_diverged(
                    stack, finite, orders, loss_sum, correct, epoch, epoch_step, lr, started)
                members, k = keep, len(keep)
                if not members:
                    break
        step = epoch_step
        if members:
            stack.write_back()
            seconds_train = (time.perf_counter() - started) / k
            for i, m in enumerate(stack.members):
                c = m.call
                if not bool(finite[i]):
                    _diverge(m, epoch, step, lr, seconds_train, mode)
                    continue
                evaluated = time.perf_counter()
                test_loss, test_acc = evaluate(m.model, c.test, recipe.eval_batch_size, autocast, c.loss_fn,
                                               recipe.eval_examples)
                train_loss, train_acc = float(loss_sum[i]) / max(seen, 1), int(correct[i]) / max(seen, 1)
                # as ``fit``'s rows: ``seconds`` with the run's evaluation, ``train_seconds`` its steps alone
                m.run.history.append(_row(epoch, step, lr, train_loss, train_acc, test_loss, test_acc,
                                          seconds_train + time.perf_counter() - evaluated,
                                          train_seconds=seconds_train, engine=f"stacked {mode}"))
                m.run.measures += [dict(row, epoch=epoch) for row in (c.on_epoch(epoch, m.model) if c.on_epoch else [])]
        # the stack's epoch is saved whole or not at all: every run resumes at the same epoch, in the
        # same stack (``training.uninterrupted``); a run that diverged in it is saved with them
        with uninterrupted(), integrity.together():  # a stop waits for the saves; a full disk keeps none
            for m in in_epoch:
                m.save()
        if not members:
            break
        accs = [m.run.final["test_acc"] for m in stack.members]
        log.info("epoch %d/%d (step %d, lr %.3g): %d runs, test accuracy %.4f to %.4f, %.1f s", epoch, n_epochs,
                 step, lr, k, min(accs), max(accs), time.perf_counter() - started)
        going = [m for m in stack.members if not m.finished(n_epochs)]
        if going and all(m.call.checkpoint for m in going):  # as ``fit``: stop once all is saved
            check_deadline(going[0].call.checkpoint.path.parent)
    for m in members:
        if m.state is None:
            m.save()


def _drop_diverged(stack, finite, orders, loss_sum, correct, epoch, step, lr, started):
    """Write back, record the diverged runs (``fit``'s diverged row; saved with the epoch's other
    runs), and restack the rest."""
    stack.write_back()
    keep = [m for i, m in enumerate(stack.members) if bool(finite[i])]
    seconds = (time.perf_counter() - started) / len(stack.members)
    for i, m in enumerate(stack.members):
        if not bool(finite[i]):
            _diverge(m, epoch, step, lr, seconds, stack.step.mode)
    rows = torch.tensor([i for i in range(len(stack.members)) if bool(finite[i])], dtype=torch.long,
                        device=orders.device)
    new = _Stack(keep, stack.step.mode) if keep else None
    if new is not None:
        new.set_lr(lr)
    return new, keep, orders[rows], loss_sum[rows], correct[rows], finite[rows]


def _diverge(m: _Member, epoch: int, step: int, lr: float, seconds: float, mode: str) -> None:
    c = m.call
    diverged(m.run, epoch, step, lr, c.n_classes or int(c.train.y.max().item()) + 1, seconds,
             who=f"run {m.index} (seed {c.seed}), ", engine=f"stacked {mode}")


# --- a job's runs -------------------------------------------------------------------------------------


def run_together(runs: list, call, stack=None, always: bool = False) -> list:
    """``[call(run) for run in runs]``, with the ``training.fit`` each makes trained in stacks
    (only runs for which ``stack(run)`` is true, when given; only where it ``pays`` unless
    ``always``).

    First pass: ``call(run)`` for every run with ``fit`` deferred (what comes before it runs, then
    the run stops at ``fit``); the recorded calls that stack (``stackable``, equal ``signature``,
    two or more) train together (``fit_together``); second pass: ``call(run)`` again, its ``fit``
    handed the finished state, so it returns at once and what follows it (measuring the trained
    net) runs as usual. A run whose ``fit`` does not stack trains in its second pass, alone."""
    from .training import Deferred, deferring, handing_over

    if sum(stack is None or bool(stack(run)) for run in runs) < 2:
        return [call(run) for run in runs]
    recorded: list[FitCall | None] = []
    for run in runs:
        if stack is not None and not stack(run):
            recorded.append(None)
            continue
        with deferring() as calls:
            try:
                call(run)
            except Deferred:
                pass
        c = calls[0] if calls else None
        recorded.append(c if c is not None and stackable(c) is None else None)  # the rest are dropped now
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(recorded):
        if c is not None:
            groups.setdefault(signature(c), []).append(i)
    states: list[dict | None] = [None] * len(runs)
    for members in groups.values():
        if len(members) > 1 and (always or pays(recorded[members[0]])):
            for i, state in zip(members, fit_together([recorded[i] for i in members])):
                states[i] = state
    recorded.clear()
    out = []
    for run, state in zip(runs, states):
        if state is None:
            out.append(call(run))
        else:
            with handing_over([state]):
                out.append(call(run))
    return out
