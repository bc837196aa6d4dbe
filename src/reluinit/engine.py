"""How a training step runs on the hardware: the one step body every engine calls, the engines
(eager, stacked, compiled, graphed) as values decided once, and the CPU's floating-point mode.

``training.train`` trains runs alone or stacked (``ensemble.Stack``); either way it calls ``step``
for every optimizer step, through the ``Engine`` decided once for them. Per-epoch work (learning
rate, evaluation, checkpoint, deadline) stays with its epoch loop.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence

import torch

log = logging.getLogger(__name__)


# --- subnormal numbers on the CPU ------------------------------------------------------------------


_ON_EVERY_THREAD = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_lock = threading.Lock()
_depth = 0  # flushed_denormals contexts open (nested ones leave the mode to the outermost)


@functools.cache  # the runtime a process has loaded does not change: /proc/self/maps read once
def _openmp() -> ctypes.CDLL | None:
    """The GNU OpenMP runtime torch runs its CPU threads on (Linux), or None. Other packages load
    their own copies (scikit-learn's ``libgomp-<hash>.so``, for one, which sorts before it):
    torch's own, in its ``lib`` folder, is tried first, so the mode is set on torch's pool."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libgomp" in line and "/" in line}
    except OSError:
        return None
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib") + os.sep
    for path in sorted(paths, key=lambda p: (not p.startswith(torch_lib), p)):
        try:
            lib = ctypes.CDLL(path)
            parallel = lib.GOMP_parallel  # present in every libgomp since GCC 4.9
        except (OSError, AttributeError):
            continue
        parallel.argtypes = [_ON_EVERY_THREAD, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
        parallel.restype = None
        return lib
    return None


def _set_flush(on: bool) -> None:
    """Set flush-to-zero and denormals-are-zero on the calling thread and on every thread of
    torch's CPU pool. The mode is per thread (the x86 MXCSR register), so
    ``torch.set_flush_denormal`` alone reaches only the thread that calls it, while the pool's
    threads do half of every product."""
    torch.set_flush_denormal(on)
    lib = _openmp()
    if lib is not None and torch.get_num_threads() > 1:
        lib.GOMP_parallel(_ON_EVERY_THREAD(lambda _: torch.set_flush_denormal(on)), None, torch.get_num_threads(), 0)


@contextlib.contextmanager
def flushed_denormals(enabled: bool = True) -> Iterator[None]:
    """Within, the CPU computes subnormal floats (below 1.2e-38 in fp32, 2.2e-308 in fp64) as zero,
    on every thread of torch's pool; the default mode is restored after.

    Why: the gradient of a deep tanh net at the edge of chaos, pruned, vanishes with depth into
    subnormal numbers, which x86 cores compute at a hundredth of their speed; at depth 100 that
    made RP-F3's stacked step 2.7x slower on 2 cores. A gradient that small moves no weight (its
    step is ulps below any weight above 1e-30), so training gives the same weights (shown in
    ``tests/test_engine.py`` and on the performance page). CUDA devices compute subnormals at full
    speed; nothing is done there. Where torch's threads are not GNU OpenMP's (macOS), only the
    calling thread is set."""
    if not enabled:
        yield
        return
    global _depth
    with _lock:
        if _depth == 0:
            _set_flush(True)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _set_flush(False)


# --- the step -------------------------------------------------------------------------------------

LossFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def step(loss: LossFn, opt: torch.optim.Optimizer, xb: torch.Tensor, yb: torch.Tensor,
         grad_masks: Sequence[tuple[torch.Tensor, torch.Tensor]] = ()) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step, the body every engine runs: ``loss(xb, yb) -> (losses, logits)``
    (``losses`` a scalar for one run, ``[K]`` for a stack of K: each run's mean loss), backward of
    their sum (each run's parameters get the gradient of its own loss), the masks of
    ``grad_masks`` (``(parameter, mask)``) multiplied into the gradients, the update. Returns the
    losses and each run's count of correct predictions, on the device (no synchronisation).

    A gradient masked before the update keeps a pruned weight that is zero at exactly zero through
    SGD (momentum, weight decay, Nesterov) and Adam: each moves a weight only by its gradient and
    by the weight itself. So a stack keeps its weights masked without multiplying masks into them
    in every forward pass and again in every backward pass, bit for bit as a mask parametrization
    (``pruning.apply_masks``) would train them."""
    losses, logits = loss(xb, yb)
    opt.zero_grad(set_to_none=True)
    losses.sum().backward()
    for p, mask in grad_masks:
        p.grad.mul_(mask)
    opt.step()
    return losses.detach(), (logits.detach().argmax(dim=-1) == yb).sum(dim=-1)


def loss_precision(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` in the type a loss is computed in: float32 for half-precision logits (autocast's
    bf16), their own type for float32 and float64 (a float64 run's loss is not rounded to float32)."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def run_loss(forward: Callable, loss_fn: Callable, autocast: torch.dtype | None) -> LossFn:
    """``loss_fn(forward, xb, yb)`` as ``step`` takes a loss, ``(xb, yb) -> (loss, logits)``, under
    the recipe's autocast (``autocast``: its dtype, None for none); ``forward`` a model, or a stack
    of runs (``ensemble.Stack``)."""
    def loss(xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(xb.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            return loss_fn(forward, xb, yb)

    return loss


# --- engines --------------------------------------------------------------------------------------


MODES = ("eager", "compiled", "graphed")


def mode_for(compile: bool | str, device: torch.device, steps: int) -> str:
    """The engine a recipe's ``compile`` asks for on ``device`` for a run of ``steps`` optimizer
    steps: ``False`` eager; ``True`` compiled, graphed on CUDA; ``"auto"`` the same where the run is
    long enough to repay the compile (``AUTO_MIN_STEPS``), else eager."""
    if compile == "auto":
        compile = steps >= AUTO_MIN_STEPS[torch.device(device).type == "cuda"]
    if compile is True:
        return "graphed" if torch.device(device).type == "cuda" else "compiled"
    if compile is False:
        return "eager"
    raise ValueError(f"compile must be true, false or 'auto', not {compile!r}")


# Steps from which ``compile: auto`` compiles, keyed by "on CUDA". The CPU: never. On 2 cores the
# compiled step of a stack of 27 depth-100 nets ran 0.94x the eager one after a 35 s compile, a
# lone depth-100 net 1.24x after 66 s (the performance page). CUDA: a compile of about a minute is
# repaid within 1,200 (a lone depth-100 ffnn, 18 steps/s eager on an H100, at the 10x graphs aim
# for) to 5,100 steps (doubled ResNet32, 42.8 steps/s, at 2x); not yet measured on a GPU.
AUTO_MIN_STEPS = {False: 10**12, True: 5000}


# The compiled step on the CPU keeps the eager step's memory layout. Inductor's layout optimization
# would run a convolution net channels-last, and oneDNN's channels-last weight gradient of a strided
# 1x1 convolution with 2 to 7 input channels is wrong on AVX2 CPUs (torch 2.14.1, an AMD EPYC without
# AVX-512: off by 15-170% of the gradient's largest entry, changing from call to call; 8 or more
# input channels and contiguous tensors are exact). tests/test_engine.py trains such a net.
CPU_COMPILE_OPTIONS = {"layout_optimization": False}


class Engine:
    """A run's (or a stack's) step under one of ``MODES``, decided once: ``step`` called as it is
    (eager), or compiled once by ``torch.compile`` over the whole of it (forward, loss, backward,
    update, masks), on CUDA with ``mode="reduce-overhead"`` so that each compiled part replays as
    a CUDA graph (graphed).

    A compiled step has fixed shapes: a batch of another shape than the first full one (an
    epoch's short last batch) runs the same body eagerly, so it never recompiles; and the first
    step runs eagerly too, so that the optimizer's state exists when the step is compiled (an
    empty state would compile a second time at the next step). Nothing of the engine enters a
    checkpoint: the model and optimizer it steps are the run's own."""

    def __init__(self, mode: str, loss: LossFn, opt: torch.optim.Optimizer,
                 grad_masks: Sequence[tuple[torch.Tensor, torch.Tensor]] = ()):
        if mode not in MODES:
            raise ValueError(f"engine must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode, self.loss, self.opt, self.grad_masks = mode, loss, opt, tuple(grad_masks)
        self.shape: tuple | None = None  # of the batch the compiled step is for
        self.eager_steps = 0  # steps run eagerly by a compiled engine (short batches, the first)
        self._compiled = None

    def _body(self, xb, yb):
        return step(self.loss, self.opt, xb, yb, self.grad_masks)

    def __call__(self, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mode == "eager":
            return self._body(xb, yb)
        if self.shape is None:  # the first step: eager, and the shape to compile for
            self.shape = tuple(xb.shape)
            self.eager_steps += 1
            return self._body(xb, yb)
        if tuple(xb.shape) != self.shape:
            self.eager_steps += 1
            return self._body(xb, yb)
        if self._compiled is None:
            if self.mode == "graphed":
                self._compiled = torch.compile(self._body, dynamic=False, mode="reduce-overhead")
            else:  # the CPU: the eager step's layout (``CPU_COMPILE_OPTIONS``)
                self._compiled = torch.compile(self._body, dynamic=False, options=CPU_COMPILE_OPTIONS)
        if self.mode == "graphed":
            torch.compiler.cudagraph_mark_step_begin()
        return self._compiled(xb, yb)
