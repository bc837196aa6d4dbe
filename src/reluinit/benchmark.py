"""Throughput of the trajectory engine next to a plain matrix product of the same size.

    python -m reluinit.benchmark [--width 784] [--depth 20] [--points 10001]
                                 [--chunk 2047] [--dtype float32] [--device auto]

The engine (``reluinit.trajectories.measure``) does one ``[chunk, k] x [k, k]`` product per
layer and chunk plus the bookkeeping (differences, norms, transitions, pattern hashes). Its rate
counts only the products' FLOPs, so the ratio to ``torch.mm`` on the same shapes is the share of
time spent multiplying. Prints both rates in GFLOP/s and the ratio.
"""

import argparse
import time

import torch

from .nets import resolve_device
from .sampling import random_net
from .trajectories import Line, measure


def rate(fn, flops: float, repeats: int) -> float:
    fn()  # warm-up
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return flops / best / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=784)
    p.add_argument("--depth", type=int, default=20)
    p.add_argument("--points", type=int, default=10001)
    p.add_argument("--chunk", type=int, default=2047, help="pieces per chunk (chunk + 1 points)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
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
