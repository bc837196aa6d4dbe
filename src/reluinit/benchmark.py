"""Benchmarks of the two hot paths: the trajectory engine and pruning at initialization.

    python -m reluinit.benchmark trajectories [--width 784] [--depth 20] [--points 10001]
                                              [--chunk 2047] [--dtype float32] [--device auto]
    python -m reluinit.benchmark pruning [--batch 256] [--rounds 100] [--device auto]

``trajectories``: the engine (``reluinit.trajectories.measure``) does one ``[chunk, k] x [k, k]`` product per
layer and chunk plus the bookkeeping (differences, norms, transitions, pattern hashes). Its rate
counts only the products' FLOPs, so the ratio to ``torch.mm`` on the same shapes is the share of
time spent multiplying. Prints both rates in GFLOP/s and the ratio.

``pruning``: seconds to score ResNet32 with doubled filters (about 1.86M prunable weights) with
SNIP and GraSP on a batch of CIFAR-shaped images and with SynFlow (its rounds, float64).
"""

import argparse
import time

import torch

from .models import ResNet, initialize
from .nets import resolve_device
from .pruning import grasp_scores, snip_scores, synflow_masks
from .sampling import random_net
from .trajectories import Line, measure


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def rate(fn, flops: float, repeats: int) -> float:
    fn()  # warm-up
    _sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync()
        best = min(best, time.perf_counter() - t0)
    return flops / best / 1e9


def pruning(a) -> None:
    device = resolve_device(a.device)
    # channels-last: the layout oneDNN (CPU) and cuDNN convolutions run fastest in.
    model = initialize(ResNet(32), "he", seed=0).to(device, memory_format=torch.channels_last)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(a.batch, 3, 32, 32, generator=gen).to(device, memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch,), generator=gen).to(device)
    n = sum(m.weight.numel() for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)))
    print(f"device {device}, ResNet32 (doubled filters, {n:,} prunable weights), batch {a.batch}, "
          f"{torch.get_num_threads()} threads")
    for name, fn in [("SNIP", lambda: snip_scores(model, x, y)), ("GraSP", lambda: grasp_scores(model, x, y)),
                     (f"SynFlow ({a.rounds} rounds, float64)", lambda: synflow_masks(model, (3, 32, 32), 0.01, a.rounds))]:
        fn()  # warm-up: kernel selection and allocations are not the scoring's cost
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        print(f"{name:32s} {time.perf_counter() - t0:7.2f} s")


def main() -> None:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="what", required=True)
    p = sub.add_parser("trajectories")
    p.add_argument("--width", type=int, default=784)
    p.add_argument("--depth", type=int, default=20)
    p.add_argument("--points", type=int, default=10001)
    p.add_argument("--chunk", type=int, default=2047, help="pieces per chunk (chunk + 1 points)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=3)
    q = sub.add_parser("pruning")
    q.add_argument("--batch", type=int, default=256)
    q.add_argument("--rounds", type=int, default=100)
    q.add_argument("--device", default="auto")
    a = top.parse_args()
    if a.what == "pruning":
        return pruning(a)
    device, dtype = resolve_device(a.device), getattr(torch, a.dtype)
    k, n = a.width, a.points
    net = random_net([k] * (a.depth + 1), "gaussian", 2.0, bias=0.01, seed=0, device=device, dtype=dtype)
    gen = torch.Generator().manual_seed(1)
    path = Line(*(torch.randn(2, k, generator=gen, dtype=torch.float64).to(device)))
    flops = 2.0 * n * k * k * a.depth
    engine = rate(lambda: measure(net, path, n - 1, chunk=a.chunk), flops, a.repeats)
    with_patterns = rate(lambda: measure(net, path, n - 1, chunk=a.chunk, patterns=True), flops, a.repeats)
    x = torch.randn(n, k, device=device, dtype=dtype)
    w = net.weights[0]

    def plain():
        for start in range(0, n - 1, a.chunk):  # the engine's shapes: chunks share a boundary point
            for _ in range(a.depth):
                torch.mm(x[start: start + a.chunk + 1], w.T)

    mm = rate(plain, flops, a.repeats)
    print(f"device {device}, {a.dtype}, width {k}, depth {a.depth}, {n} points, chunks of {a.chunk}, "
          f"{torch.get_num_threads()} threads")
    print(f"torch.mm          {mm:8.1f} GFLOP/s")
    print(f"trajectory engine {engine:8.1f} GFLOP/s  (lengths, growth, transitions)")
    print(f"  with patterns   {with_patterns:8.1f} GFLOP/s  (also distinct activation patterns)")
    print(f"ratio engine / mm {engine / mm:8.3f}")
    print(f"  with patterns   {with_patterns / mm:8.3f}")


if __name__ == "__main__":
    main()
