"""Training: one engine (``fit``) for every experiment that trains (LR's nets too:
``experiments.lr_train``).

``fit`` trains any ``nn.Module`` under a ``Recipe`` (SGD with momentum, weight decay and Nesterov,
or Adam; step schedules) with the data resident on the device and augmented there (random crop
with padding 4, horizontal flip), bf16 autocast and channels-last where asked, and no host
synchronisation inside an epoch but an occasional divergence check. It writes a checkpoint every
epoch (atomically; ``weights_only`` loadable) and resumes from it: a rerun after a kill gives the
same final weights, bit for bit on the CPU, as a run that was never interrupted. A loss that turns
NaN or inf stops the run, which is recorded as diverged at chance accuracy: a result, not a crash.
Pruning masks stay applied (``pruning.apply_masks``) and travel in the checkpoint.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import datasets, fingerprint, integrity
from .engine import Engine, flushed_denormals, loss_precision, mode_for
from .nets import tf32

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


# --- the recipe --------------------------------------------------------------------------------


@dataclass
class Recipe:
    """How to train: optimizer, schedule, length, data handling and precision.

    Length is ``epochs`` or, when given, ``iterations`` (optimizer steps; the last epoch is cut
    short). ``schedule``: ``"constant"``, ``"step"`` (x ``gamma`` at 1/2 and 3/4 of the epochs, as
    RP trains) or a list of milestone epochs. ``precision``: ``"fp32"`` (true fp32: TF32 is off
    in CUDA matmuls and cuDNN convolutions for the run, which PyTorch would otherwise let
    convolutions use), ``"tf32"`` (TF32 on for both: a GPU's faster fp32, 10-bit mantissa
    products), ``"bf16"`` (autocast) or ``"auto"`` (bf16 on CUDA, fp32 elsewhere). On a CPU
    ``fp32`` and ``tf32`` are the same. ``compile``: the training step eager (False), compiled
    whole by ``torch.compile`` (True; replayed as CUDA graphs on a GPU) or compiled where the run
    is long enough to repay it (``"auto"``); ``engine.mode_for`` decides, once per run.
    """

    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    nesterov: bool = False
    batch_size: int = 128
    epochs: int = 1
    iterations: int | None = None
    schedule: str | list = "step"
    gamma: float = 0.1
    augment: bool = False
    crop_pad: int = 4  # random-crop padding, in pixels (4 for 32x32 images)
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool | str = False  # the step's engine: False, True or "auto" (``engine.mode_for``)
    eval_batch_size: int = 1000
    check_every: int = 100  # steps between divergence checks (each one a host synchronisation)
    # The smoke scale's truncation (config ``smoke:``): stop after this many optimizer steps, and
    # evaluate on the first ``eval_examples`` test examples only. None (every other scale): no cut.
    max_steps: int | None = None
    eval_examples: int | None = None

    @classmethod
    def from_settings(cls, s: dict) -> Recipe:
        """A recipe from a config block, ignoring keys that are not recipe fields."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in s.items() if k in names})

    def n_epochs(self, steps_per_epoch: int) -> int:
        n = self.epochs if self.iterations is None else math.ceil(self.iterations / steps_per_epoch)
        return n if self.max_steps is None else min(n, math.ceil(self.max_steps / steps_per_epoch))

    def total_steps(self, steps_per_epoch: int) -> int:
        n = self.iterations or self.n_epochs(steps_per_epoch) * steps_per_epoch
        return n if self.max_steps is None else min(n, self.max_steps)

    def lr_at(self, epoch: int, n_epochs: int) -> float:
        """Learning rate of (1-based) ``epoch``."""
        if self.schedule == "constant":
            milestones = []
        elif self.schedule == "step":
            milestones = [n_epochs // 2, (3 * n_epochs) // 4]
        elif isinstance(self.schedule, list):
            milestones = self.schedule
        else:
            raise ValueError(f"schedule must be 'constant', 'step' or a list of epochs, not {self.schedule!r}")
        return self.lr * self.gamma ** sum(epoch > m for m in milestones)

    def optimizer_for(self, params, fused: bool = False) -> torch.optim.Optimizer:
        """The optimizer over ``params``; parameters marked ``no_weight_decay`` (a learnt scale such
        as EP's trajectory-regularization lambda) get none, and one with an ``lr_scale`` learns at
        that multiple of the recipe's rate (``fit`` keeps the multiple through the schedule).
        SGD is torch's fused one-kernel implementation on CUDA, the per-tensor one elsewhere (on
        the CPU the fused one rounds some elements differently, so a CPU run keeps its numbers);
        ``fused`` asks for it on the CPU too, and for Adam's, which rounds in another order on
        every device: what a stack of runs uses (``ensemble``), equal to its runs up to rounding."""
        params = list(params)
        special = [p for p in params if getattr(p, "no_weight_decay", False) or hasattr(p, "lr_scale")]
        if special:
            ids = {id(p) for p in special}
            groups = [{"params": [p for p in params if id(p) not in ids], "lr_scale": 1.0}]
            for p in special:
                scale = getattr(p, "lr_scale", 1.0)
                groups.append({"params": [p], "lr": self.lr * scale, "lr_scale": scale,
                               **({"weight_decay": 0.0} if getattr(p, "no_weight_decay", False) else {})})
            params = [g for g in groups if g["params"]]
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay,
                                   nesterov=self.nesterov,
                                   fused=(fused and _fusable(params)) or _fusable(params, cpu=False) or None)
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay,
                                    fused=(fused and _fusable(params)) or None)
        raise ValueError(f"unknown optimizer {self.optimizer!r}; known: sgd, adam")

    def autocast_dtype(self, device: torch.device) -> torch.dtype | None:
        if self.precision == "bf16" or (self.precision == "auto" and device.type == "cuda"):
            return torch.bfloat16
        if self.precision in ("fp32", "tf32", "auto"):
            return None
        raise ValueError(f"precision must be fp32, tf32, bf16 or auto, not {self.precision!r}")


def _fusable(params, cpu: bool = True) -> bool:
    """Whether torch's fused optimizers run on these parameters' devices (CUDA, and the CPU unless
    ``cpu`` is False)."""
    groups = params if params and isinstance(params[0], dict) else [{"params": params}]
    devices = ("cpu", "cuda") if cpu else ("cuda",)
    return all(p.device.type in devices for g in groups for p in g["params"])


# --- data resident on the device ------------------------------------------------------------------


class DeviceData:
    """A split held on the device, normalised per channel once, served in shuffled batches with
    augmentation done on the device (no worker processes, no host copies). ``black``: the
    normalised value of a black pixel, ``(0 - mean) / std`` per channel ([1, C, 1, 1]; None for
    data that are not images), which a random crop pads with."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, device, mean=None, std=None, dtype=torch.float32,
                 channels_last: bool = False):
        x = x.to(device=device, dtype=dtype)
        if x.dim() == 4:
            dims = (0, 2, 3)
            self.mean = x.mean(dim=dims, keepdim=True) if mean is None else mean
            self.std = x.std(dim=dims, keepdim=True).clamp_min(1e-6) if std is None else std
            # normalised as the images are, so that a raw black pixel and the padding are the same value
            self.black = (torch.zeros((1, x.shape[1], 1, 1), dtype=x.dtype, device=x.device) - self.mean) / self.std
            x = (x - self.mean) / self.std
        else:
            self.mean = self.std = self.black = None
        self.channels_last = channels_last and x.dim() == 4
        # stored once in the layout the model trains in: a batch is then a slice, never a second copy
        self.x = x.contiguous(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)
        self.y = y.to(device)
        self.device = torch.device(device)

    @classmethod
    def from_split(cls, split: datasets.Split, device, like: DeviceData | None = None, **kw) -> DeviceData:
        """``like``: normalise with another split's statistics (the test set with the train set's)."""
        return cls(split.x, split.y, device, mean=like.mean if like else None, std=like.std if like else None, **kw)

    def __len__(self) -> int:
        return len(self.y)

    def _fmt(self, xb: torch.Tensor) -> torch.Tensor:
        return xb.contiguous(memory_format=torch.channels_last) if self.channels_last else xb

    def batches(self, batch_size: int, gen: torch.Generator, augment: bool = False, pad: int = 4):
        """Shuffled batches for one epoch; with ``augment``, each image is shifted by a random crop of
        its version padded with black (``pad`` pixels of ``self.black``) and flipped left-right with
        probability 1/2."""
        for idx in self.order(gen).split(batch_size):
            xb, yb = self.take(idx)
            if augment and xb.dim() == 4:
                xb = self.augment(xb, gen, pad)
            yield self._fmt(xb), yb

    def order(self, gen: torch.Generator) -> torch.Tensor:
        """One epoch's order of the examples, drawn from ``gen`` (a run's own generator): what
        ``batches`` and a stack of runs (``ensemble``, one order per run) both take."""
        return torch.randperm(len(self), generator=gen, device=self.device)

    def augment(self, xb: torch.Tensor, gen: torch.Generator, pad: int = 4) -> torch.Tensor:
        """``xb`` ([B, C, H, W]) cropped and flipped at random from ``gen`` (``_crop_flip``),
        padded with this data's black."""
        return _crop_flip(xb, gen, pad, self.black)

    def take(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The examples at ``idx`` (any shape: ``[B]``, or ``[K, B]`` for K runs' batches at once),
        gathered with ``index_select`` (several times faster than indexing on the CPU)."""
        flat = idx.flatten()
        y = self.y.index_select(0, flat).view(idx.shape)
        if self.channels_last:  # gathered as NHWC rows, viewed back as NCHW: channels-last, no copy
            n, c, h, w = self.x.shape
            rows = self.x.permute(0, 2, 3, 1).index_select(0, flat)
            return rows.view(*idx.shape, h, w, c).movedim(-1, -3), y
        rows = self.x.view(len(self.x), -1)  # rows of one dimension: gathered twice as fast as [N, C, H, W]
        return rows.index_select(0, flat).view(*idx.shape, *self.x.shape[1:]), y

    def eval_batches(self, batch_size: int, n: int | None = None):
        """The first ``n`` examples (all by default) in order, ``batch_size`` at a time."""
        for start in range(0, len(self) if n is None else n, batch_size):
            yield self._fmt(self.x[start:start + batch_size]), self.y[start:start + batch_size]


def _crop_flip(xb: torch.Tensor, gen: torch.Generator, pad: int, fill: torch.Tensor | None = None) -> torch.Tensor:
    """Each image of ``xb`` ([B, C, H, W]) cropped at a random shift from its version padded by
    ``pad`` pixels of ``fill`` ([1, C, 1, 1], per channel; None: 0), then flipped left-right with
    probability 1/2; ``gen`` draws the shifts, then the flips. For normalised images ``fill`` is
    the normalised value of black (``DeviceData.black``): torchvision's ``RandomCrop(32,
    padding=4)`` before ``Normalize``, as the RP authors and Wang et al. augment, pads the raw
    pixels with 0. The image's own pixels are copied unchanged, bit for bit."""
    b, c, h, w = xb.shape
    padded = F.pad(xb, (pad, pad, pad, pad))
    if fill is not None and pad > 0:  # the border written over F.pad's zeros: the inside stays exact
        padded[..., :pad, :] = fill
        padded[..., -pad:, :] = fill
        padded[..., :pad] = fill
        padded[..., -pad:] = fill
    dev = xb.device
    shift = torch.randint(0, 2 * pad + 1, (2, b), generator=gen, device=dev)
    flip = torch.rand(b, generator=gen, device=dev) < 0.5
    rows = (shift[0, :, None] + torch.arange(h, device=dev))[:, None, :, None]
    cols = shift[1, :, None] + torch.arange(w, device=dev)
    cols = torch.where(flip[:, None], cols.flip(1), cols)[:, None, None, :]
    return padded[torch.arange(b, device=dev)[:, None, None, None], torch.arange(c, device=dev)[None, :, None, None],
                  rows, cols]


# --- the engine ------------------------------------------------------------------------------------

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def cross_entropy(model: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logits = model(xb)
    return F.cross_entropy(loss_precision(logits), yb), logits



@dataclass
class Run:
    """What ``fit`` returns: one row per epoch (epoch 0 = at initialization), the rows its
    ``on_epoch`` hook added, and whether the run diverged."""

    history: list[dict] = field(default_factory=list)
    measures: list[dict] = field(default_factory=list)
    diverged: bool = False

    @property
    def final(self) -> dict:
        return self.history[-1]

    def summary(self) -> dict:
        """Final- and best-epoch test accuracy (the anchors report the best epoch)."""
        best = max(self.history, key=lambda r: (r["test_acc"], -r["epoch"]))
        return {"final_test_acc": self.final["test_acc"], "best_test_acc": best["test_acc"],
                "best_epoch": best["epoch"], "epochs_run": self.final["epoch"], "diverged": self.diverged}


@torch.no_grad()
def evaluate(model: nn.Module, data: DeviceData, batch_size: int = 1000, autocast: torch.dtype | None = None,
             loss_fn: LossFn = cross_entropy, limit: int | None = None) -> tuple[float, float]:
    """Mean loss and accuracy over ``data``, or its first ``limit`` examples (eval mode; one
    synchronisation at the end)."""
    was_training = model.training
    model.eval()
    loss = torch.zeros((), device=data.device)
    correct = torch.zeros((), device=data.device, dtype=torch.long)
    n = len(data) if limit is None else min(limit, len(data))
    for xb, yb in data.eval_batches(max(1, min(batch_size, n)), n):
        with torch.autocast(data.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            batch_loss, logits = loss_fn(model, xb, yb)
        loss += batch_loss.float() * len(yb)
        correct += (logits.argmax(dim=1) == yb).sum()
    model.train(was_training)
    return (loss / n).item(), correct.item() / n


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write atomically and sealed (``integrity.write_atomic``): a job killed mid-write leaves the
    previous checkpoint intact, and a reader can tell a damaged file from a whole one. Written
    through a Python file, whose full disk is an ``OSError`` (ENOSPC) that names the file and gets
    the job's "the disk holding ... is full" (torch's own writer, given a path, says only
    ``[enforce fail at inline_container.cc] unexpected pos``)."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            out = _WriteErrors(f)
            try:
                torch.save(state, out)
            except RuntimeError:  # torch's writer ends an OSError of the file with its own error
                if out.error is None:
                    raise
                raise out.error from None

    integrity.write_atomic(path, write)


class _WriteErrors:
    """A binary file that keeps the first ``OSError`` its writes raised (``save_checkpoint``)."""

    def __init__(self, f):
        self.f, self.error = f, None

    def write(self, b) -> int:
        try:
            return self.f.write(b)
        except OSError as e:
            self.error = self.error or e
            raise

    def flush(self) -> None:
        self.f.flush()


def load_checkpoint(path: str | Path, device="cpu") -> dict | None:
    """The saved state, None when there is none; ``integrity.DamagedFile`` when it is not what was
    written (its seal), and torch's error when it does not load."""
    path = Path(path)
    if not path.exists():
        return None
    integrity.verify(path)
    return torch.load(path, map_location=device, weights_only=True)


# Bumped when what a checkpoint holds changes meaning: older checkpoints then start afresh
# (3: RP's VGG16 became the authors', pruned without batch norm; 4: fully connected nets are
# ``nets.MLP``, their state under ``layers.<i>``, and RP's masks come from the `prune` job).
CHECKPOINT_FORMAT = 4


@dataclass
class Checkpoint:
    """Where a training run keeps its resumable state, and the fingerprint of everything that
    determines the run (``fingerprint.settings_fingerprint``: model, init, pruning, recipe, dataset,
    seed, scale). A saved state is resumed (or, when finished, reused) only if it was written under
    the same fingerprint; otherwise the run starts afresh and the log says what changed."""

    path: Path
    fingerprint: dict = field(default_factory=dict)
    # found to hold another run: not read (nor reported) again until this run saves its own state
    _stale: bool = field(default=False, init=False, repr=False)

    def __post_init__(self):
        self.path = Path(self.path)
        self.fingerprint = fingerprint.plain({**self.fingerprint, "format": CHECKPOINT_FORMAT})

    def load(self, device="cpu") -> dict | None:
        """The saved state of this run, or None when there is none, it belongs to another run, or it
        is damaged (then it is moved aside to ``<name>.damaged`` and the log says why, once)."""
        try:
            state = None if self._stale else load_checkpoint(self.path, device)
        except Exception as e:  # noqa: BLE001 - whatever makes it unreadable, the run starts afresh
            aside = self.path.with_name(self.path.name + ".damaged")
            self.path.replace(aside)
            if integrity.seal_path(self.path).exists():
                integrity.seal_path(self.path).replace(integrity.seal_path(aside))
            log.warning("%s is damaged (%s: %s): moved to %s; the run starts afresh", self.path, type(e).__name__,
                        str(e).splitlines()[0] if str(e) else "", aside)
            return None
        if state is None:
            return None
        changed = fingerprint.changes(state.get("fingerprint"), self.fingerprint)
        if changed:
            self._stale = True
            log.info("%s: %s: starting afresh", self.path, "; ".join(changed))
            return None
        return state

    def save(self, state: dict) -> None:
        save_checkpoint({**state, "fingerprint": self.fingerprint}, self.path)
        self._stale = False


def as_checkpoint(checkpoint: Checkpoint | str | Path | None, **fingerprint) -> Checkpoint | None:
    """A ``Checkpoint`` as given, or one at a bare path fingerprinted by ``fingerprint``."""
    if checkpoint is None or isinstance(checkpoint, Checkpoint):
        return checkpoint
    return Checkpoint(checkpoint, fingerprint)


def fit(model: nn.Module, train: DeviceData, test: DeviceData, recipe: Recipe, *, seed: int,
        checkpoint: Checkpoint | str | Path | None = None, masks: dict | None = None,
        on_epoch: Callable[[int, nn.Module], list[dict]] | None = None, loss_fn: LossFn = cross_entropy,
        n_classes: int | None = None, stop_when: Callable[[dict], bool] | None = None) -> Run:
    """Train ``model`` (already on ``train.device``, masks already applied) under ``recipe``.

    Only parameters with ``requires_grad`` are optimised (freeze the rest to train one layer).
    ``on_epoch(epoch, model)`` runs at initialization (epoch 0) and after every epoch; its rows are
    kept (and checkpointed) with the epoch. With ``checkpoint``, state is saved there after every
    epoch and a run that finds one of its own (same fingerprint; a bare path is fingerprinted by
    ``seed`` and ``recipe``) resumes from it, or returns it unchanged when it had finished;
    ``masks`` are stored with it (the caller applies them, and keys the checkpoint by their digest,
    before resuming). ``stop_when(row)`` ends training
    after the first epoch whose row it accepts (TG-F6 trains until a test accuracy is reached).
    """
    checkpoint = as_checkpoint(checkpoint, seed=seed, recipe=asdict(recipe))
    deferred = _DEFERRED.get()
    if deferred is not None:  # ``ensemble.run_together``'s first pass: record the call, train nothing
        deferred.append(FitCall(model, train, test, recipe, seed, checkpoint, masks, on_epoch, loss_fn, n_classes,
                                stop_when))
        raise Deferred
    with tf32(recipe.precision == "tf32"), flushed_denormals(train.device.type == "cpu"):  # fp32 means fp32 on a GPU too (``Recipe``)
        return _fit(model, train, test, recipe, seed, checkpoint, masks, on_epoch, loss_fn, n_classes, stop_when)


def _fit(model, train, test, recipe, seed, checkpoint, masks, on_epoch, loss_fn, n_classes, stop_when) -> Run:
    device = train.device
    n_classes = n_classes or int(train.y.max().item()) + 1
    steps_per_epoch = math.ceil(len(train) / recipe.batch_size)
    n_epochs = recipe.n_epochs(steps_per_epoch)
    total_steps = recipe.total_steps(steps_per_epoch)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = recipe.optimizer_for(params)
    gen = torch.Generator(device=device).manual_seed(seed)
    autocast = recipe.autocast_dtype(device)
    run_step = Engine(mode_for(recipe.compile, device, total_steps), run_loss(model, loss_fn, autocast), opt)
    keyed_by_engine(checkpoint, run_step.mode)

    handed = _HANDED.get()
    state = handed.pop(0) if handed else (checkpoint.load(device) if checkpoint else None)
    if handed is not None and state is not None and state["seed"] != seed:
        raise RuntimeError(f"a run of seed {state['seed']} was handed to fit(seed={seed}): the runs of a job "
                           "must call fit in the same order twice (ensemble.run_together)")
    if state is not None:
        run = resume(model, opt, gen, state)
        if handed is None:
            log.info("resumed from %s at epoch %d of %d", checkpoint.path, run.final["epoch"], n_epochs)
    else:
        run = at_init(model, test, recipe, loss_fn, on_epoch, run_step.mode)

    step = run.final["step"]
    model.train()
    for epoch in range(run.final["epoch"] + 1, n_epochs + 1):
        if stopped(run, stop_when):
            break
        started = time.perf_counter()
        lr = recipe.lr_at(epoch, n_epochs)
        for group in opt.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.long)
        seen, finite = 0, torch.ones((), device=device, dtype=torch.bool)
        for xb, yb in train.batches(recipe.batch_size, gen, recipe.augment, recipe.crop_pad):
            if step >= total_steps:
                break
            loss, right = run_step(xb, yb)
            step += 1
            seen += len(yb)
            loss_sum += loss.float() * len(yb)
            correct += right
            finite &= torch.isfinite(loss)
            if step % recipe.check_every == 0 and not finite.item():
                break
        if not finite.item():
            diverged(run, epoch, step, lr, n_classes, time.perf_counter() - started, engine=run_step.mode)
        else:
            train_loss, train_acc = (loss_sum / max(seen, 1)).item(), correct.item() / max(seen, 1)
            train_seconds = time.perf_counter() - started  # the steps alone (the .item() above synchronised)
            test_loss, test_acc = evaluate(model, test, recipe.eval_batch_size, autocast, loss_fn, recipe.eval_examples)
            run.history.append(_row(epoch, step, lr, train_loss, train_acc, test_loss, test_acc,
                                    time.perf_counter() - started, train_seconds=train_seconds,
                                    engine=run_step.mode))
            run.measures += [dict(r, epoch=epoch) for r in (on_epoch(epoch, model) if on_epoch else [])]
            log.info("epoch %d/%d (step %d, lr %.3g): train loss %.4f acc %.4f, test loss %.4f acc %.4f, %.1f s",
                     epoch, n_epochs, step, lr, train_loss, train_acc, test_loss, test_acc, run.final["seconds"])
        if checkpoint:
            checkpoint.save(fit_state(model, opt, gen, run, masks, seed, recipe))
            if epoch < n_epochs and not stopped(run, stop_when):
                check_deadline(checkpoint.path)
    return run


# --- the steps of a run that ``fit`` and ``ensemble`` share ------------------------------------------


def keyed_by_engine(checkpoint: Checkpoint | None, mode: str) -> None:
    """A compiled step rounds differently from an eager one: its checkpoint's fingerprint names the
    engine (an eager run's is unchanged, so checkpoints written before engines existed resume)."""
    if checkpoint is not None and mode != "eager":
        checkpoint.fingerprint = {**checkpoint.fingerprint, "engine": mode}


def run_loss(forward: Callable, loss_fn: LossFn, autocast: torch.dtype | None):
    """``loss_fn`` of ``forward`` as ``engine.step`` takes it, ``(xb, yb) -> (loss, logits)``, under
    the recipe's autocast."""
    def loss(xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(xb.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            return loss_fn(forward, xb, yb)

    return loss


def resume(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator, state: dict) -> Run:
    """A run restored from its saved state (``fit_state``): weights, optimizer, data order, rows."""
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    gen.set_state(state["generator"].cpu())
    history = [{**row, "engine": row.get("engine", "unrecorded")}  # epochs saved before engines were named
               for row in state["history"]]
    return Run(history, state["measures"], state["diverged"])


def at_init(model: nn.Module, test: DeviceData, recipe: Recipe, loss_fn: LossFn, on_epoch,
            engine: str = "eager") -> Run:
    """A fresh run: epoch 0, the test loss and accuracy at initialization and ``on_epoch``'s rows."""
    test_loss, test_acc = evaluate(model, test, recipe.eval_batch_size, recipe.autocast_dtype(test.device), loss_fn,
                                   recipe.eval_examples)
    run = Run([_row(0, 0, math.nan, math.nan, math.nan, test_loss, test_acc, 0.0, engine=engine)])
    run.measures += [dict(r, epoch=0) for r in (on_epoch(0, model) if on_epoch else [])]
    log.info("epoch 0 (init): test loss %.4f, test accuracy %.4f", test_loss, test_acc)
    return run


def stopped(run: Run, stop_when: Callable[[dict], bool] | None) -> bool:
    """Whether a run trains no further: it diverged, or ``stop_when`` accepts its last trained epoch."""
    return run.diverged or (stop_when is not None and run.final["epoch"] > 0 and stop_when(run.final))


def diverged(run: Run, epoch: int, step: int, lr: float, n_classes: int, seconds: float, who: str = "",
             engine: str = "eager") -> None:
    """Record that the loss turned NaN or inf in ``epoch``: the run stops, at chance accuracy."""
    run.diverged = True
    log.warning("%sepoch %d: the loss became NaN or inf; the run stops and is recorded as diverged "
                "(test accuracy = chance, 1/%d)", who, epoch, n_classes)
    run.history.append(_row(epoch, step, lr, math.nan, math.nan, math.nan, 1.0 / n_classes, seconds, diverged=True,
                            engine=engine))


def fit_state(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator, run: Run, masks: dict | None,
              seed: int, recipe: Recipe) -> dict:
    """What a run's checkpoint holds (``fit`` resumes from it; ``ensemble`` writes the same)."""
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "generator": gen.get_state(),
            "history": run.history, "measures": run.measures, "diverged": run.diverged, "masks": masks or {},
            "seed": seed, "recipe": _plain(asdict(recipe))}


# --- fit, deferred and handed over (``ensemble.run_together``) ----------------------------------------


@dataclass
class FitCall:
    """The arguments of one ``fit`` call, recorded to train it in a stack with others."""

    model: nn.Module
    train: DeviceData
    test: DeviceData
    recipe: Recipe
    seed: int
    checkpoint: Checkpoint | None
    masks: dict | None
    on_epoch: Callable | None
    loss_fn: LossFn
    n_classes: int | None
    stop_when: Callable | None


class Deferred(Exception):
    """Raised by ``fit`` inside ``deferring()``: the call was recorded, not run."""


class OutOfTime(RuntimeError):
    """Raised at the end of an epoch past the time ``deadline`` set, once that epoch's checkpoint is
    written: called again, the run resumes from it (``reluinit.harvest``, on a machine lent for
    minutes)."""


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


@contextlib.contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """Inside, a run with a checkpoint stops with ``OutOfTime`` after the first epoch that ends at or
    past ``at`` (``time.monotonic()``) with epochs still to go; a run without one trains to its end."""
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline(saved_at) -> None:
    """``OutOfTime`` if ``deadline``'s time has come (called just after a checkpoint is saved)."""
    at = _DEADLINE.get()
    if at is not None and time.monotonic() >= at:
        raise OutOfTime(f"out of time: the run stopped after an epoch, its checkpoint {saved_at} resumes it")


# A stop raised into the run from outside (the harvest's budget signal) while files that must agree
# are being written: held until the last of them is written (``uninterrupted``).
_HOLD: dict = {"depth": 0, "stop": None}


def interrupt(stop: BaseException) -> None:
    """Raise ``stop`` here, or, inside ``uninterrupted``, as its block ends: what a signal handler
    calls to stop a run wherever it is without cutting a set of saves in two."""
    if _HOLD["depth"]:
        _HOLD["stop"] = stop
        return
    raise stop


def holding() -> bool:
    """Whether ``interrupt`` would wait (inside ``uninterrupted``)."""
    return _HOLD["depth"] > 0


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Inside, ``interrupt`` waits for the block's end. A stack's runs save each epoch in one such
    block (``ensemble``): a stop between two of its saves would resume the runs at different
    epochs, in other stacks, where they round differently (a run's place in a stack moves it
    between the vector and the scalar path of the fused optimizer), so a resumed run would no
    longer be the run that never stopped."""
    _HOLD["depth"] += 1
    try:
        yield
    finally:  # the outermost block takes the held stop; after the block's own error it is dropped
        _HOLD["depth"] -= 1
        stop = None if _HOLD["depth"] else _HOLD["stop"]
        if stop is not None:
            _HOLD["stop"] = None
    if stop is not None:
        raise stop


_DEFERRED: contextvars.ContextVar[list | None] = contextvars.ContextVar("deferred_fits", default=None)
_HANDED: contextvars.ContextVar[list | None] = contextvars.ContextVar("handed_states", default=None)


@contextlib.contextmanager
def deferring() -> Iterator[list[FitCall]]:
    """Inside, ``fit`` records its arguments in the list yielded and raises ``Deferred``."""
    calls: list[FitCall] = []
    token = _DEFERRED.set(calls)
    try:
        yield calls
    finally:
        _DEFERRED.reset(token)


@contextlib.contextmanager
def handing_over(states: list[dict]) -> Iterator[None]:
    """Inside, the next ``fit`` calls start from ``states`` in order (each a finished run's final
    state, ``fit_state``) instead of their checkpoints: they train nothing and return the run."""
    token = _HANDED.set(list(states))
    try:
        yield
    finally:
        _HANDED.reset(token)


def load_data(s: dict, device, channels_last: bool = False,
              fixed_stats: bool = False) -> tuple[DeviceData, DeviceData, datasets.Split]:
    """The train and test splits of ``s["dataset"]`` (the quick stand-in at the quick scale) on the
    device, normalised with the training set's statistics, or with ``fixed_stats`` the RP authors'
    constants where a dataset has them (``datasets.fixed_stats``: CIFAR, MNIST); and the training
    split itself (for pruning batches)."""
    split = datasets.load(s["dataset"], s["data_dir"], train=True, scale=s["scale"])
    mean = std = None
    stats = datasets.fixed_stats(s["dataset"], s["scale"]) if fixed_stats else None
    if stats is not None:
        mean, std = (torch.tensor(c, dtype=torch.float32, device=device).view(1, -1, 1, 1) for c in stats)
    train = DeviceData(split.x, split.y, device, mean=mean, std=std, channels_last=channels_last)
    test = DeviceData.from_split(datasets.load(s["dataset"], s["data_dir"], train=False, scale=s["scale"]), device,
                                 like=train, channels_last=channels_last)
    return train, test, split


def history_table(result: Run, **columns) -> pd.DataFrame:
    """A run's epochs as a tidy table (one row per epoch) with ``columns`` (the run's settings) and
    its final- and best-epoch test accuracy repeated on every row."""
    import pandas as pd

    return pd.DataFrame(result.history).assign(**columns, **{k: v for k, v in result.summary().items()
                                                          if k != "diverged"}, run_diverged=result.diverged)


def run_rows(result: Run, extra: list[dict] | None = None, **columns) -> pd.DataFrame:
    """A run's rows: its epochs (``kind == "epoch"``, ``history_table``), then the rows its
    ``on_epoch`` hook measured and ``extra`` ones, every row with ``columns`` (the run's settings)."""
    import pandas as pd

    hist = history_table(result, **columns).assign(kind="epoch")
    measured = pd.DataFrame(result.measures + (extra or []))
    if len(measured):
        measured = measured.assign(**columns)
    return pd.concat([hist, measured], ignore_index=True)


def _row(epoch, step, lr, train_loss, train_acc, test_loss, test_acc, seconds, diverged=False,
         train_seconds=math.nan, engine="eager") -> dict:
    """One epoch of a run's history; ``seconds`` with its evaluation, ``train_seconds`` its steps only
    (what ``reluinit.pipeline.smoke`` divides by the steps for the cost of a step); ``engine`` the
    step's (``engine.MODES``, "stacked ..." for a run trained in a stack)."""
    return {"epoch": epoch, "step": step, "lr": lr, "train_loss": train_loss, "train_acc": train_acc,
            "test_loss": test_loss, "test_acc": test_acc, "seconds": seconds, "train_seconds": train_seconds,
            "diverged": diverged, "engine": engine}


def _plain(d: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}
