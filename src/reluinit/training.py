"""Training: one trainer for every experiment that trains (LR's nets too: ``experiments.lr_train``).

A run is a value, ``RunSpec``: its net (built, initialized, masked), its data, its ``Recipe``
(SGD with momentum, weight decay and Nesterov, or Adam; step schedules), seed, checkpoint and
per-epoch hooks, and what its job makes of it once trained (``then``). ``train_runs`` takes a
job's specs, a ``How`` (engine, stacking) and a ``Control`` (deadline, stops from outside) and
trains them through one epoch loop, one at a time or stacked (``plan``; ``ensemble.Stack``);
``fit`` is one run alone. Data stay resident on the device and are augmented there (random crop
with padding 4, horizontal flip), with bf16 autocast and channels-last where asked, and no host
synchronisation inside an epoch but an occasional divergence check. A run writes a checkpoint
every epoch (atomically; ``weights_only`` loadable) and resumes from it: a rerun after a kill gives
the same final weights, bit for bit on the CPU, as a run that was never interrupted. A loss that
turns NaN or inf stops the run, which is recorded as diverged at chance accuracy: a result, not a
crash. Pruning masks stay applied (``pruning.apply_masks``) and travel in the checkpoint.
"""

from __future__ import annotations

import contextlib
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

from . import checkpoint_file, datasets, fingerprint, integrity
from .engine import Engine, flushed_denormals, loss_precision, mode_for, run_loss
from .ensemble import Stack
from .nets import MLP, tf32

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

    def fmt(self, xb: torch.Tensor) -> torch.Tensor:
        """A batch in the layout the model trains in (channels-last where asked)."""
        return xb.contiguous(memory_format=torch.channels_last) if self.channels_last else xb

    def order(self, gen: torch.Generator) -> torch.Tensor:
        """One epoch's order of the examples, drawn from ``gen`` (a run's own generator, which then
        draws the epoch's augmentation, batch by batch: ``augment``); the trainer's batches are its
        slices (``take``), for a run alone and for each run of a stack."""
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
            yield self.fmt(self.x[start:start + batch_size]), self.y[start:start + batch_size]


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
    written (its seal), ``checkpoint_file.NotACheckpoint`` when it does not load (never run)."""
    return checkpoint_file.load(path, device) if Path(path).exists() else None


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
            if isinstance(e, checkpoint_file.NotACheckpoint):  # one sentence of ours, never torch's advice
                log.warning("%s is not a checkpoint this pipeline wrote (%s): moved to %s, never loaded, and the run "
                            "starts afresh; delete %s", self.path, e.what, aside, aside)
                return None
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


# --- a run as a value ----------------------------------------------------------------------------------


@dataclass(eq=False)
class RunSpec:
    """One training run, as a value: the net (built, initialized, its masks applied and rescaled:
    on ``train.device``), its data, its recipe and seed, where it keeps its checkpoint, and what is
    measured during it. ``train`` trains a list of them, alone or stacked.

    Only parameters with ``requires_grad`` are optimised (freeze the rest to train one layer).
    ``on_epoch(epoch, model)`` runs at initialization (epoch 0) and after every epoch; its rows are
    kept (and checkpointed) with the epoch. With ``checkpoint``, state is saved there after every
    epoch and a run that finds one of its own (same fingerprint; a bare path is fingerprinted by
    ``seed`` and ``recipe``) resumes from it, or returns it unchanged when it had finished;
    ``masks`` are stored with it (the caller applies them, and keys the checkpoint by their digest,
    before resuming). ``stop_when(row)`` ends training after the first epoch whose row it accepts
    (TG-F6 trains until a test accuracy is reached). ``stack``: whether it may train stacked with
    others (a recipe's ``ensemble: false`` says no). ``then(run)``: what the job makes of the
    trained run (its rows; ``result``), with ``model`` holding the trained weights."""

    model: nn.Module
    train: DeviceData
    test: DeviceData
    recipe: Recipe
    seed: int
    checkpoint: Checkpoint | str | Path | None = None
    masks: dict | None = None
    on_epoch: Callable[[int, nn.Module], list[dict]] | None = None
    loss_fn: LossFn = cross_entropy
    n_classes: int | None = None
    stop_when: Callable[[dict], bool] | None = None
    stack: bool = True
    then: Callable[[Run], object] | None = None
    name: str = ""  # the run's key in its job (logs, the job's record of trained runs)

    def __post_init__(self):
        self.checkpoint = as_checkpoint(self.checkpoint, seed=self.seed, recipe=asdict(self.recipe))

    def result(self, run: Run):
        """What the job makes of this spec's trained ``run``: ``then(run)``, or the run itself."""
        return self.then(run) if self.then else run


def fit(model: nn.Module, train: DeviceData, test: DeviceData, recipe: Recipe, *, seed: int,
        checkpoint: Checkpoint | str | Path | None = None, masks: dict | None = None,
        on_epoch: Callable[[int, nn.Module], list[dict]] | None = None, loss_fn: LossFn = cross_entropy,
        n_classes: int | None = None, stop_when: Callable[[dict], bool] | None = None,
        control: Control | None = None) -> Run:
    """Train ``model`` (already on ``train.device``, masks already applied) under ``recipe``: one
    run alone (``train`` of one ``RunSpec``; its fields say what each argument does)."""
    spec = RunSpec(model, train, test, recipe, seed, checkpoint, masks, on_epoch, loss_fn, n_classes, stop_when)
    return train_runs([spec], How(stack="never"), control)[0]


# --- how a job runs, and run control -------------------------------------------------------------------


@dataclass(frozen=True)
class How:
    """How a job's runs train, decided here once: ``stack`` ``"auto"`` (runs that can stack and
    whose nets repay it: ``plan``), ``"always"`` (every run that can, where it does not pay too: the
    benchmark's comparison) or ``"never"``; ``engine`` the step's (``engine.MODES``), or None for
    the one the recipe's ``compile`` asks for (``engine.mode_for``, once per group of runs);
    ``train`` False: train nothing, only read finished runs from their checkpoints (a measuring
    job: ``NotTrained`` names a run that is not). The threads a job computes on are set once when
    it starts (``pipeline.jobs.start``)."""

    stack: str = "auto"
    engine: str | None = None
    train: bool = True

    def __post_init__(self):
        if self.stack not in ("auto", "always", "never"):
            raise ValueError(f"How.stack must be 'auto', 'always' or 'never', not {self.stack!r}")


class OutOfTime(RuntimeError):
    """Raised at the end of an epoch past a ``Control``'s deadline, once that epoch's checkpoint is
    written: called again, the run resumes from it (``reluinit.harvest``, on a machine lent for
    minutes)."""


class NotTrained(RuntimeError):
    """A run asked for trained (``How(train=False)``) has no finished checkpoint: ``runs`` names each
    (its checkpoint, and the epoch it stands at)."""

    def __init__(self, runs: list[str]):
        self.runs = runs
        super().__init__("not trained: " + "; ".join(runs))


class Control:
    """What may stop training from outside, as a value the trainer receives: a ``deadline``
    (``time.monotonic()``: a run with a checkpoint stops with ``OutOfTime`` after the first epoch
    that ends at or past it with epochs still to go; a run without one trains to its end), and a
    stop raised into it by a signal handler (``interrupt``), which waits while files that must
    agree are being written (``uninterrupted``)."""

    def __init__(self, deadline: float | None = None):
        self.deadline = deadline
        self._depth = 0
        self._stop: BaseException | None = None

    def check_deadline(self, saved_at) -> None:
        """``OutOfTime`` if the deadline has come (called just after a checkpoint is saved)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise OutOfTime(f"out of time: the run stopped after an epoch, its checkpoint {saved_at} resumes it")

    def interrupt(self, stop: BaseException) -> None:
        """Raise ``stop`` here, or, inside ``uninterrupted``, as its block ends: what a signal handler
        calls to stop a run wherever it is without cutting a set of saves in two."""
        if self._depth:
            self._stop = stop
            return
        raise stop

    def holding(self) -> bool:
        """Whether ``interrupt`` would wait (inside ``uninterrupted``)."""
        return self._depth > 0

    @contextlib.contextmanager
    def uninterrupted(self) -> Iterator[None]:
        """Inside, ``interrupt`` waits for the block's end. A stack's runs save each epoch in one such
        block: a stop between two of its saves would resume the runs at different epochs, in other
        stacks, where they round differently (a run's place in a stack moves it between the vector
        and the scalar path of the fused optimizer), so a resumed run would no longer be the run
        that never stopped."""
        self._depth += 1
        try:
            yield
        finally:  # the outermost block takes the held stop; after the block's own error it is dropped
            self._depth -= 1
            stop = None if self._depth else self._stop
            if stop is not None:
                self._stop = None
        if stop is not None:
            raise stop


# --- which runs stack ------------------------------------------------------------------------------------


def stackable(spec: RunSpec) -> str | None:
    """Why ``spec`` cannot train in a stack (None when it can)."""
    if not spec.stack:
        return "its recipe says `ensemble: false`"
    if spec.loss_fn is not cross_entropy:
        return "its loss is not plain cross-entropy"
    if spec.recipe.channels_last:
        return "channels-last"
    if any(isinstance(m, nn.modules.batchnorm._NormBase) for m in spec.model.modules()):
        return "batch norm keeps running statistics per run"
    return None


def pays(spec: RunSpec) -> bool:
    """Whether stacking ``spec``'s net is worth it: a ``nets.MLP`` (batched products) on any device;
    other nets (``vmap``: convolutions become grouped ones) on a GPU only, where a small net is
    bound by launches. On the CPU a stack of three depth-10 ``cnn``s ran at 0.75x the rate of the
    same runs one by one (2 cores: the convolutions already keep them busy)."""
    return isinstance(spec.model, MLP) or spec.train.device.type != "cpu"


def signature(spec: RunSpec) -> tuple:
    """Runs with equal signatures stack: the same parameters and buffers (names, shapes, types,
    which train), the same recipe, the same data objects and device."""
    model = spec.model
    params = tuple((n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in model.named_parameters())
    buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in model.named_buffers())
    return (type(model), _structure(model), params, buffers, repr(asdict(spec.recipe)), id(spec.train),
            id(spec.test), spec.n_classes, str(spec.train.device))


def _structure(model: nn.Module) -> str:
    """The modules and their settings (activations, padding, ...), without the weights."""
    return repr(model) + (f" {model.activation} {model.negative_slope} {model.readout}" if isinstance(model, MLP)
                          else "")


def plan(specs: list[RunSpec], how: How = How()) -> list[tuple[list[int], bool]]:
    """Groups of ``specs`` as they train: ``(indices, stacked)``, the stacks first (two or more runs
    of one ``signature`` that ``stackable`` allows and that ``pays``, or with ``how.stack ==
    "always"`` any), then every other run alone, in order."""
    groups: dict[tuple, list[int]] = {}
    alone = []
    for i, spec in enumerate(specs):
        if how.stack != "never" and stackable(spec) is None:
            groups.setdefault(signature(spec), []).append(i)
        else:
            alone.append(i)
    stacks = []
    for indices in groups.values():
        if len(indices) > 1 and (how.stack == "always" or pays(specs[indices[0]])):
            stacks.append((indices, True))
        else:
            alone += indices
    return stacks + [([i], False) for i in sorted(alone)]


# --- the trainer ---------------------------------------------------------------------------------------


def train_runs(specs: list[RunSpec], how: How = How(), control: Control | None = None) -> list[Run]:
    """Train ``specs`` (each resumed from its checkpoint where it has one) and return their runs, in
    order: stacked where ``plan`` says, otherwise one by one, all through one epoch loop
    (``_epochs``). ``control``: a deadline and stops from outside (a fresh one by default)."""
    control = control or Control()
    runs: list[Run | None] = [None] * len(specs)
    for indices, stacked in plan(specs, how):
        for i, run in zip(indices, _train_group([specs[i] for i in indices], stacked, how, control)):
            runs[i] = run
    return runs


class _Member:
    """One run as the trainer holds it: its spec, model, trainable parameters and optimizer (what its
    checkpoint is written from), its data order's generator and its rows so far."""

    def __init__(self, spec: RunSpec, index: int):
        self.spec, self.index = spec, index
        self.model = spec.model.to(memory_format=torch.channels_last) if spec.recipe.channels_last else spec.model
        self.params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        self.opt = spec.recipe.optimizer_for(self.params.values())
        self.gen = torch.Generator(device=spec.train.device).manual_seed(spec.seed)
        self.run = Run()

    @property
    def position(self) -> tuple[int, int]:
        return self.run.final["epoch"], self.run.final["step"]

    def finished(self, n_epochs: int) -> bool:
        return self.run.final["epoch"] >= n_epochs or stopped(self.run, self.spec.stop_when)

    def start(self, n_epochs: int, engine: str, fresh: bool = True) -> None:
        """Resume from the checkpoint, or (``fresh``) evaluate at initialization; without either,
        ``run`` stays None."""
        c = self.spec
        state = c.checkpoint.load(c.train.device) if c.checkpoint else None
        if state is not None:
            self.run = resume(self.model, self.opt, self.gen, state)
            log.info("resumed from %s at epoch %d of %d", c.checkpoint.path, self.run.final["epoch"], n_epochs)
        elif fresh:
            self.run = at_init(self.model, c.test, c.recipe, c.loss_fn, c.on_epoch, engine)
        else:
            self.run = None

    def save(self) -> None:
        """This run's state (``fit_state``), written to its checkpoint when it has one."""
        c = self.spec
        if c.checkpoint:
            c.checkpoint.save(fit_state(self.model, self.opt, self.gen, self.run, c.masks, c.seed, c.recipe))

    def diverge(self, epoch: int, step: int, lr: float, seconds: float, engine: str, who: str = "") -> None:
        c = self.spec
        diverged(self.run, epoch, step, lr, c.n_classes or int(c.train.y.max().item()) + 1, seconds, who=who,
                 engine=engine)


class _Alone:
    """One run trained through the epoch loop on its model's own forward pass (what a ``Stack`` is
    for several runs): its step, its batches and its per-epoch train loss."""

    def __init__(self, members: list[_Member], recipe: Recipe, device: torch.device, engine_mode: str):
        (m,) = self.members = members
        self.step = Engine(engine_mode, run_loss(m.model, m.spec.loss_fn, recipe.autocast_dtype(device)), m.opt)

    def set_lr(self, lr: float) -> None:
        for group in self.members[0].opt.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)

    def write_back(self) -> None:
        """Nothing: the run trains its own model."""

    @staticmethod
    def batch(data: DeviceData, orders: list[torch.Tensor], start: int, recipe: Recipe, members: list[_Member]):
        xb, yb = data.take(orders[0][start:start + recipe.batch_size])
        if recipe.augment and xb.dim() == 4:
            xb = data.augment(xb, members[0].gen, recipe.crop_pad)
        return data.fmt(xb), yb

    @staticmethod
    def mean_loss(loss_sum: torch.Tensor, i: int, seen: int) -> float:
        return (loss_sum[i] / max(seen, 1)).item()  # divided in float32, as a run alone always has been


class _Stacked(Stack):
    """Several runs trained through the epoch loop as one ``ensemble.Stack``."""

    @staticmethod
    def batch(data: DeviceData, orders: list[torch.Tensor], start: int, recipe: Recipe, members: list[_Member]):
        xb, yb = data.take(torch.stack(orders)[:, start:start + recipe.batch_size])
        if recipe.augment and xb.dim() == 5:
            xb = torch.stack([data.augment(xb[i], m.gen, recipe.crop_pad) for i, m in enumerate(members)])
        return xb, yb

    @staticmethod
    def mean_loss(loss_sum: torch.Tensor, i: int, seen: int) -> float:
        return float(loss_sum[i]) / max(seen, 1)


def _train_group(specs: list[RunSpec], stacked: bool, how: How, control: Control) -> list[Run]:
    """Train runs of one group of ``plan`` (one run alone, or runs that stack) to their ends; runs
    resumed at different epochs train in separate stacks."""
    first = specs[0]
    recipe, data = first.recipe, first.train
    device = data.device
    steps_per_epoch = math.ceil(len(data) / recipe.batch_size)
    n_epochs = recipe.n_epochs(steps_per_epoch)
    mode = how.engine or mode_for(recipe.compile, device, recipe.total_steps(steps_per_epoch))
    label = f"stacked {mode}" if stacked else mode
    members = [_Member(spec, i) for i, spec in enumerate(specs)]
    for m in members:
        keyed_by_engine(m.spec.checkpoint, mode)  # a compiled step's checkpoints name it
    # a run alone starts (its evaluation at initialization) with subnormals flushed, a stack's runs
    # before: as each always has, so that epoch 0's numbers stay the ones committed
    with contextlib.nullcontext() if stacked else _precision(recipe, device):
        for m in members:
            m.start(n_epochs, label, fresh=how.train)
    if not how.train:
        untrained = [m for m in members if m.run is None or not m.finished(n_epochs)]
        if untrained:
            raise NotTrained([f"{m.spec.name or m.index}: {m.spec.checkpoint.path if m.spec.checkpoint else 'no checkpoint'}"
                              + (f" (epoch {m.run.final['epoch']} of {n_epochs})" if m.run else " (none)")
                              for m in untrained])
        return [m.run for m in members]
    by_position: dict[tuple, list[_Member]] = {}
    for m in members:
        if not m.finished(n_epochs):
            by_position.setdefault(m.position, []).append(m)
    for group in by_position.values():
        with _precision(recipe, device):
            _epochs(group, stacked, n_epochs, steps_per_epoch, mode, label, control)
    return [m.run for m in members]


def _precision(recipe: Recipe, device: torch.device):
    """The run's arithmetic: fp32 means fp32 on a GPU too (``Recipe``), subnormals flushed on a CPU."""
    stack = contextlib.ExitStack()
    stack.enter_context(tf32(recipe.precision == "tf32"))
    stack.enter_context(flushed_denormals(device.type == "cpu"))
    return stack


def _epochs(members: list[_Member], stacked: bool, n_epochs: int, steps_per_epoch: int, mode: str, label: str,
            control: Control) -> None:
    """The one epoch loop: train runs that stand at the same epoch and step, alone (one run) or as
    one stack, until each is done; each epoch's checkpoints saved all or none."""
    first = members[0].spec
    recipe, data = first.recipe, first.train
    device = data.device
    total_steps = recipe.total_steps(steps_per_epoch)
    autocast = recipe.autocast_dtype(device)
    epoch0, step = members[0].position
    for m in members:
        m.model.train()
    group = None
    if stacked:
        log.info("training %d runs as one stack (%s) from epoch %d of %d", len(members),
                 type(first.model).__name__, epoch0, n_epochs)
    for epoch in range(epoch0 + 1, n_epochs + 1):
        members = in_epoch = [m for m in members if not m.finished(n_epochs)]
        if not members:
            break
        if group is None or group.members != members:
            group = _group(members, stacked, recipe, device, mode)
        started = time.perf_counter()
        lr = recipe.lr_at(epoch, n_epochs)
        group.set_lr(lr)
        k = len(members)
        orders = [data.order(m.gen) for m in members]  # each run's own
        loss_sum = torch.zeros(k, device=device)
        correct = torch.zeros(k, device=device, dtype=torch.long)
        finite = torch.ones(k, device=device, dtype=torch.bool)
        seen, epoch_step = 0, step
        for start in range(0, len(data), recipe.batch_size):
            if epoch_step >= total_steps:
                break
            xb, yb = group.batch(data, orders, start, recipe, group.members)
            losses, right = group.step(xb, yb)
            epoch_step += 1
            seen += yb.shape[-1]
            loss_sum += losses.float() * yb.shape[-1]
            correct += right
            finite &= torch.isfinite(losses)
            if epoch_step % recipe.check_every == 0 and not bool(finite.all()):
                # the runs whose loss turned non-finite stop here; the rest go on
                group, keep, orders, loss_sum, correct, finite = _drop_diverged(
                    group, finite, orders, loss_sum, correct, epoch, epoch_step, lr, started, label, recipe, device,
                    mode)
                members, k = keep, len(keep)
                if not members:
                    break
        step = epoch_step
        if members:
            group.write_back()
            seconds_train = (time.perf_counter() - started) / k
            for i, m in enumerate(group.members):
                c = m.spec
                if not bool(finite[i]):
                    m.diverge(epoch, step, lr, seconds_train, label, _who(m, stacked))
                    continue
                evaluated = time.perf_counter()
                test_loss, test_acc = evaluate(m.model, c.test, recipe.eval_batch_size, autocast, c.loss_fn,
                                               recipe.eval_examples)
                train_loss, train_acc = group.mean_loss(loss_sum, i, seen), int(correct[i]) / max(seen, 1)
                # ``seconds`` with the run's evaluation, ``train_seconds`` its steps alone
                m.run.history.append(_row(epoch, step, lr, train_loss, train_acc, test_loss, test_acc,
                                          seconds_train + time.perf_counter() - evaluated,
                                          train_seconds=seconds_train, engine=label))
                m.run.measures += [dict(row, epoch=epoch) for row in (c.on_epoch(epoch, m.model) if c.on_epoch else [])]
                if not stacked:
                    log.info("epoch %d/%d (step %d, lr %.3g): train loss %.4f acc %.4f, test loss %.4f acc %.4f, %.1f s",
                             epoch, n_epochs, step, lr, train_loss, train_acc, test_loss, test_acc,
                             m.run.final["seconds"])
        # the epoch is saved whole or not at all: every run resumes at the same epoch, in the same
        # stack; a run that diverged in it is saved with them
        with control.uninterrupted(), integrity.together():  # a stop waits for the saves; a full disk keeps none
            for m in in_epoch:
                m.save()
        if not members:
            break
        if stacked:
            accs = [m.run.final["test_acc"] for m in group.members]
            log.info("epoch %d/%d (step %d, lr %.3g): %d runs, test accuracy %.4f to %.4f, %.1f s", epoch,
                     n_epochs, step, lr, k, min(accs), max(accs), time.perf_counter() - started)
        going = [m for m in group.members if not m.finished(n_epochs)]
        if going and all(m.spec.checkpoint for m in going):  # stop once all is saved
            control.check_deadline(going[0].spec.checkpoint.path if not stacked
                                   else going[0].spec.checkpoint.path.parent)


def _who(m: _Member, stacked: bool) -> str:
    return f"run {m.index} (seed {m.spec.seed}), " if stacked else ""


def _drop_diverged(group, finite, orders, loss_sum, correct, epoch, step, lr, started, label, recipe, device, mode):
    """Write back, record the diverged runs (saved with the epoch's other runs), and regroup the rest."""
    group.write_back()
    stacked = isinstance(group, _Stacked)
    keep = [m for i, m in enumerate(group.members) if bool(finite[i])]
    seconds = (time.perf_counter() - started) / len(group.members)
    for i, m in enumerate(group.members):
        if not bool(finite[i]):
            m.diverge(epoch, step, lr, seconds, label, _who(m, stacked))
    rows = [i for i in range(len(group.members)) if bool(finite[i])]
    new = None
    if keep:
        new = _group(keep, stacked, recipe, device, mode)
        new.set_lr(lr)
    index = torch.tensor(rows, dtype=torch.long, device=loss_sum.device)
    return new, keep, [orders[i] for i in rows], loss_sum[index], correct[index], finite[index]


def stepper(specs: list[RunSpec], mode: str, stacked: bool):
    """The step the trainer takes for ``specs`` under engine ``mode`` (one run alone, or runs that
    stack as one), with ``batch(data, orders, start, recipe, members)``, ``write_back()`` and
    ``members`` (each with its ``model``): what the GPU check's engines stage times, step by step."""
    first = specs[0]
    return _group([_Member(spec, i) for i, spec in enumerate(specs)], stacked, first.recipe, first.train.device, mode)


def _group(members: list[_Member], stacked: bool, recipe: Recipe, device: torch.device, mode: str):
    """What the epoch loop steps: ``members`` as one ``_Stacked``, or its one run ``_Alone``."""
    return (_Stacked if stacked else _Alone)(members, recipe, device, mode)


# --- the steps of a run ----------------------------------------------------------------------------------


def keyed_by_engine(checkpoint: Checkpoint | None, mode: str) -> None:
    """A compiled step rounds differently from an eager one: its checkpoint's fingerprint names the
    engine (an eager run's is unchanged, so checkpoints written before engines existed resume)."""
    if checkpoint is not None and mode != "eager":
        checkpoint.fingerprint = {**checkpoint.fingerprint, "engine": mode}


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
    """What a run's checkpoint holds (a run resumes from it)."""
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "generator": gen.get_state(),
            "history": run.history, "measures": run.measures, "diverged": run.diverged, "masks": masks or {},
            "seed": seed, "recipe": _plain(asdict(recipe))}


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
