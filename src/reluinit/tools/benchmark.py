"""Benchmarks of the hot paths: the trajectory engine, pruning at initialization and training.

    python -m reluinit.tools.benchmark trajectories [--width 784] [--depth 20] [--points 10001]
                                              [--chunk 2047] [--dtype float32] [--device auto]
    python -m reluinit.tools.benchmark pruning [--batch 256] [--rounds 100] [--device auto] [--against DIR] [--floor]
    python -m reluinit.tools.benchmark pruning --against DIR --masks [--model resnet20] [--density 0.1]
                                              [--batch 256] [--batches 2] [--rounds 100] [--same-count]
                                              [--methods magnitude snip grasp synflow]
    python -m reluinit.tools.benchmark training [--steps 20] [--only TG-F6 ...] [-k K] [--device auto]
    python -m reluinit.tools.benchmark training --resnet [--steps 20] [--batch 128] [--workers 4] [--epoch]
    python -m reluinit.tools.benchmark regions [--widths 16 32 64] [--depth 3] [--lines 100] [--device auto]

``trajectories``: the engine (``reluinit.trajectories.measure``) does one ``[chunk, k] x [k, k]`` product per
layer and chunk plus the bookkeeping (differences, norms, transitions, pattern hashes). Its rate
counts only the products' FLOPs, so the ratio to ``torch.mm`` on the same shapes is the share of
time spent multiplying. Prints both rates in GFLOP/s and the ratio.

``pruning``: seconds to score ResNet32 with doubled filters (about 1.86M prunable weights) with
SNIP and GraSP on a batch of CIFAR-shaped images and with SynFlow (its rounds, float64); with
``--against <Synaptic-Flow checkout>`` its pruners on its own ResNet32 (doubled filters) in its own
layout (NCHW) and the same batch, side by side; with
``--floor`` the forward and backward passes alone, which any implementation of the same scores runs.

``pruning --masks``: the masks of ``pruning.prune`` beside Synaptic-Flow's own (its pruners run by
its ``prune_loop``) on its lottery ResNet (``resnet20``, seed 0, eval mode, on the CPU), copied into
torch's own layer classes for ``prune``: magnitude, SNIP and GraSP (``--batches`` random
CIFAR-shaped batches, cross-entropy) and SynFlow (``--rounds``, float64), globally and per layer,
one shot or on a schedule. Per case: the weights whose keep/prune decision differs, and of those the
ones Synaptic-Flow's count rule explains (it keeps ceil(density * n) of a pool, we round(density * n):
the weights ranked between the two counts), the ties at its threshold (its score within ``--rtol`` of
it) and the rest. ``--same-count`` gives its
pruners our count, every round, to show what is left.

``training``: seconds to train K small nets of the papers one by one and as one stacked model
(``training.train_runs`` of their ``RunSpec``s, ``How(stack="never")`` and ``"always"``), the ratio, and the largest relative difference of any
weight between the two (float rounding: a batched product rounds differently; the same on 2 runs
in float64, where it is rounding of 1e-16 grown by training alone): TG-F6's 20 MLPs,
RP-F3's 27 depth-20 and depth-100 tanh nets (each with its own mask) and EP-F7's 3 nets that train
W^(1), at their recipes' batch sizes and optimizers, on MNIST-shaped random data. Beside the stack's
rate of optimizer steps, the same run times the ceiling: the step's batched products alone
(``products_rate``), and prints the share of it the engine reaches.

``training --resnet``: images per second and seconds per CIFAR-10 epoch (50,000 images) of ResNet32 with
doubled filters, SGD, random crop and flip, on CIFAR-shaped random images: the engine
(``training.fit``: data resident on the device, augmentation there, channels-last) in fp32 and with
bf16 autocast, and a plain ``torch.utils.data.DataLoader`` baseline (uint8 images on the host,
per-image torchvision transforms in worker processes, fp32), with the ratios. ``--epoch`` times
one full 50,000-image epoch instead of ``--steps`` steps.

``regions``: seconds to partition the square [-2, 2]^2 exactly into the linear regions of random He
ReLU nets (N(0, 1) biases, ``regions.plane_regions``, float64) beside Regioncam (PyPI ``regioncam``,
float32, the same nets), with both region counts; and to split ``--lines`` random lines through a
784-64-64-64 net (``regions.split_lines``, all at once) beside Regioncam's 1-D mode, line by line.
The public entry points (``plane_partition``, ``regions_on_line`` on the same nets as a user's
``nn.Sequential``) are timed beside the library's own calls, and the difference printed. Without
``regioncam`` installed only our times are printed.

``precision``: what measuring TG's sweeps in float32 (their ``dtype`` setting) changes. For each
float32 experiment, at the paper's sizes, the same nets (drawn in float64, then cast) are measured
in both types on three settings of its sweep: per net the number the figures and claims read (the
mean growth factor over hidden layers; TG-F2: the length at the last layer). Prints, per setting,
the largest change over nets next to the spread across nets (their sd), and writes the rows.
"""

import argparse
import functools
import time

import torch

from ..inits import initialize
from ..models import ResNet
from ..nets import resolve_device
from ..pruning import grasp_scores, snip_scores, synflow_masks
from ..sampling import random_net
from ..trajectories import Line, measure


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
    ours = [("SNIP", lambda: snip_scores(model, x, y)), ("GraSP", lambda: grasp_scores(model, x, y)),
            (f"SynFlow ({a.rounds} rounds, float64)", lambda: synflow_masks(model, (3, 32, 32), 0.01, a.rounds))]
    theirs = _synaptic_flow(a, device, x, y) if a.against else [None] * 3
    floors = _passes(model, x, y, a.rounds) if a.floor else [None] * 3
    for (name, fn), other, floor in zip(ours, theirs, floors):
        ours_s = _seconds(fn)
        line = f"{name:32s} {ours_s:7.2f} s"
        if other is not None:
            t = _seconds(other)
            line += f"   Synaptic-Flow {t:7.2f} s   ({t / ours_s:.2f}x as long)"
        if floor is not None:
            line += f"   the passes alone {_seconds(floor):7.2f} s"
        print(line)


def _passes(model, x, y, rounds):
    """The passes alone that any implementation of each score runs, on the same net and batch, with
    nothing around them: SNIP's forward and backward to the weights; GraSP's forward, backward
    keeping its graph and backward through that (Hg); SynFlow's ``rounds`` float64 forward and
    backward passes of the |theta| net on the all-ones input. ``--floor`` prints them: how far
    below an implementation's time any other of the same scores can go."""
    from torch import nn
    from torch.func import functional_call

    from ..pruning import _linearized, prunable

    weights = list(prunable(model).values())
    loss = nn.CrossEntropyLoss()

    def snip():
        torch.autograd.grad(loss(model(x), y), weights)

    def grasp():  # in NCHW, as grasp_scores runs (batch norm's double backward is slower channels-last)
        w = {n: t.detach().contiguous().requires_grad_(True) for n, t in prunable(model).items()}
        out = functional_call(model, w, (x.contiguous(),))
        g = torch.autograd.grad(loss(out / 200, y), list(w.values()), create_graph=True)
        torch.autograd.grad(sum((a * a.detach()).sum() for a in g), list(w.values()))

    net, _, ones = _linearized(model, tuple(x.shape[1:]))  # SynFlow's own float64 |theta| copy and input
    lin = list(prunable(net).values())

    def synflow():
        for _ in range(rounds):
            torch.autograd.grad(net(ones).sum(), lin)

    return [snip, grasp, synflow]


def _seconds(fn) -> float:
    fn()  # warm-up: kernel selection and allocations are not the scoring's cost
    _sync()
    t0 = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - t0


def _synaptic_flow(a, device, x, y):
    """Synaptic-Flow's SNIP, GraSP and SynFlow (``Pruners/pruners.py`` of a checkout at ``a.against``,
    imported, not copied) on its own model in its own layout: ``wide_resnet32`` of its
    ``Models/lottery_resnet.py`` (ResNet32 with doubled filters, as ours), NCHW, with the masked
    parameters its ``Utils/generator.py`` hands the pruners, on the same batch (made contiguous) and
    rounds. SynFlow runs its rounds as its ``prune_loop`` does (exponential schedule), on a float64
    copy. Prints the model's prunable weights beside ours."""
    from torch import nn

    mods = _synaptic_flow_modules(a.against)
    sf, wide_resnet32, masked_parameters = mods.pruners, mods.lottery_resnet.wide_resnet32, mods.masked_parameters

    def net(dtype=torch.float32):
        torch.manual_seed(0)
        model = wide_resnet32((3, 32, 32), 10).to(device, dtype)  # NCHW: the layout it runs in
        return model, list(masked_parameters(model))

    (m32, p32), (m64, p64), loss = net(), net(torch.float64), nn.CrossEntropyLoss()
    x = x.contiguous()
    print(f"Synaptic-Flow: its wide_resnet32, NCHW, {sum(p.numel() for _, p in p32):,} prunable weights")

    def synflow():
        torch.set_default_dtype(torch.float64)  # its all-ones input, made with torch.ones, in float64
        try:
            m64.eval()
            pruner = sf.SynFlow(p64)
            for r in range(a.rounds):
                pruner.score(m64, loss, [(x.double(), y)], device)
                pruner.mask(0.01 ** ((r + 1) / a.rounds), "global")  # its "sparsity": the fraction kept
        finally:
            torch.set_default_dtype(torch.float32)
            for mask, _ in p64:
                mask.fill_(1.0)

    return [lambda: sf.SNIP(p32).score(m32, loss, [(x, y)], device),
            lambda: sf.GraSP(p32).score(m32, loss, [(x, y)], device), synflow]


def _synaptic_flow_modules(path):
    """The modules of a Synaptic-Flow checkout at ``path`` (imported, not copied; they import each
    other as top-level packages): its pruners, ``prune_loop``, lottery ResNets, layers and
    ``masked_parameters``."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(path))
    try:
        from Layers import layers
        from Models import lottery_resnet
        from prune import prune_loop
        from Pruners import pruners
        from Utils.generator import masked_parameters
    finally:
        sys.path.remove(str(path))
    return SimpleNamespace(layers=layers, lottery_resnet=lottery_resnet, prune_loop=prune_loop, pruners=pruners,
                           masked_parameters=masked_parameters)


def _as_torch_layers(model):
    """A copy of a Synaptic-Flow model in the form ``prune`` takes: its masked conv, linear and
    batch norm layers as the torch classes they extend (its all-ones mask buffers dropped), the
    same weights and buffers. Its residual ``Identity2d`` scale (a parameter of ones) stays."""
    import copy

    from torch import nn

    net = copy.deepcopy(model)
    for m in net.modules():
        base = next((b for b in (nn.Conv2d, nn.Linear, nn.BatchNorm2d, nn.BatchNorm1d) if isinstance(m, b)), None)
        if base is not None and type(m) is not base:
            m.__class__ = base
            m._buffers.pop("weight_mask", None)
            m._buffers.pop("bias_mask", None)
    return net


# (method, scope, schedule, rounds): where prune's options and Synaptic-Flow's coincide. None rounds:
# --rounds. Magnitude on a schedule with nothing trained between rounds keeps what one shot keeps,
# in both; SynFlow's default is 100 rounds on the exponential schedule.
MASK_CASES = [("magnitude", "global", None, 1), ("magnitude", "layer", None, 1), ("magnitude", "global", "linear", 10),
              ("snip", "global", None, 1), ("snip", "layer", None, 1),
              ("grasp", "global", None, 1), ("grasp", "layer", None, 1),
              ("synflow", "global", "exponential", None), ("synflow", "layer", "exponential", None),
              ("synflow", "global", "linear", None)]


def _mask_keeping_round(pruner, density: float, scope: str) -> None:
    """Synaptic-Flow's ``Pruner.mask`` rule (prune every score at or below the k-th smallest of a
    pool) with our count: k = n - round(density * n), where it takes k = int((1 - density) * n) and
    so keeps ceil(density * n) unless density * n is a whole number. ``pruning --masks
    --same-count``: what is left of the differences once the counts agree."""
    pairs = pruner.masked_parameters
    for pool in [pairs] if scope == "global" else [[pair] for pair in pairs]:
        s = torch.cat([pruner.scores[id(p)].flatten() for _, p in pool])
        k = len(s) - round(density * len(s))
        if k >= 1:
            threshold = torch.kthvalue(s, k).values
            for mask, p in pool:
                mask.copy_((pruner.scores[id(p)] > threshold).to(mask.dtype))


def pruning_masks(a) -> None:
    """``pruning --masks``: our masks beside Synaptic-Flow's own (its pruners and ``prune_loop``),
    case by case of ``MASK_CASES``, on its ``resnet20`` (CPU, seed 0) and ``--batches`` random
    CIFAR-shaped batches. Prints per case the weights whose keep/prune decision differs and sorts
    them: the count rule (it keeps ``N - int((1 - d) N)`` weights of a pool, we ``round(d N)``: weights
    ranked between the two counts in its order), then ties (its final score within ``--rtol`` of its
    threshold) and the rest."""
    import contextlib
    import io

    from ..pruning import prune

    sf = _synaptic_flow_modules(a.against)
    torch.manual_seed(0)
    base = getattr(sf.lottery_resnet, a.model)((3, 32, 32), 10).eval()  # eval: prune_loop's default
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randn(a.batch, 3, 32, 32, generator=gen), torch.randint(0, 10, (a.batch,), generator=gen))
               for _ in range(a.batches)]
    ours_net = _as_torch_layers(base).eval()
    with torch.no_grad():
        same = torch.equal(ours_net(batches[0][0]), base(batches[0][0]))
    n = sum(p.numel() for _, p in sf.masked_parameters(base))
    print(f"Synaptic-Flow {a.model}, {n:,} prunable weights, density {a.density}, {a.batches} batches of {a.batch}, "
          f"eval mode, CPU, {torch.get_num_threads()} threads; our copy's outputs {'equal' if same else 'DIFFER'}"
          + ("; its count set to ours (--same-count)" if a.same_count else ""))
    print(f"{'method':9s} {'scope':6s} {'schedule':17s} {'compared':>8s} {'kept ours':>9s} {'theirs':>7s} "
          f"{'differ':>6s} {'count':>5s} {'ties':>5s} {'other':>5s}")
    for method, scope, schedule, rounds in [case for case in MASK_CASES if case[0] in a.methods]:
        rounds = rounds or a.rounds
        theirs, scores = _their_masks(sf, base, method, scope, schedule or "exponential", rounds, a.density, batches,
                                      a.same_count)
        kwargs = {"in_shape": (3, 32, 32)} if method == "synflow" else {"data": batches} if method != "magnitude" else {}
        if schedule:
            kwargs |= {"schedule": schedule, "rounds": rounds}
        with contextlib.redirect_stdout(io.StringIO()):
            ours = list(prune(ours_net, method, a.density, scope=scope, **kwargs).values())
        assert [m.shape for m in ours] == [m.shape for m in theirs]
        pools = [list(range(len(ours)))] if scope == "global" else [[i] for i in range(len(ours))]
        differ = ties = count = 0
        for pool in pools:
            o, t = (torch.cat([ms[i].flatten() for i in pool]) for ms in (ours, theirs))
            s = torch.cat([scores[i].flatten() for i in pool]).double()
            k = len(s) - round(a.density * len(s)) if a.same_count else int((1.0 - a.density) * len(s))
            threshold = torch.kthvalue(s, k).values  # its last threshold, as it takes it
            d = o != t
            rank = torch.empty(len(s), dtype=torch.long)
            rank[torch.argsort(s, descending=True, stable=True)] = torch.arange(len(s))
            lo, hi = sorted((int(o.sum()), int(t.sum())))
            by_count = d & (rank >= lo) & (rank < hi)  # the places one count has and the other not
            tie = d & ~by_count & ((s - threshold).abs() <= a.rtol * threshold.abs())
            differ, ties, count = differ + int(d.sum()), ties + int(tie.sum()), count + int(by_count.sum())
        kept_ours, kept_theirs = sum(int(m.sum()) for m in ours), sum(int(m.sum()) for m in theirs)
        label = f"{schedule}, {rounds}" if schedule else "one shot"
        print(f"{method:9s} {scope:6s} {label:17s} {n:8,d} {kept_ours:9,d} {kept_theirs:7,d} "
              f"{differ:6d} {count:5d} {ties:5d} {differ - ties - count:5d}")


def _their_masks(sf, base, method, scope, schedule, rounds, density, batches, same_count=False):
    """Synaptic-Flow's masks and final scores of ``method`` on a fresh copy of ``base``, by its own
    ``prune_loop`` (eval mode; SynFlow in float64, as ours always scores, its all-ones input made in
    the default type: float64 while it runs). ``same_count``: its pruner thresholds with our count
    (``_mask_keeping_round``)."""
    import contextlib
    import copy
    import io

    from torch import nn

    pruner_class = {"magnitude": sf.pruners.Mag, "snip": sf.pruners.SNIP, "grasp": sf.pruners.GraSP,
                    "synflow": sf.pruners.SynFlow}[method]
    model = copy.deepcopy(base)
    data = batches
    if method == "synflow":
        model, data = model.double(), [(x.double(), y) for x, y in batches]
    params = list(sf.masked_parameters(model))
    pruner = pruner_class(params)
    if same_count:
        pruner.mask = functools.partial(_mask_keeping_round, pruner)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(model.fc.weight.dtype)
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):  # its tqdm bar
            sf.prune_loop(model, nn.CrossEntropyLoss(), pruner, data, torch.device("cpu"), density, schedule,
                          "global" if scope == "global" else "local", rounds)
    except SystemExit:  # its loop quits after pruning when the kept count is 5 or more off density * N
        print(f"  (its prune_loop's final count check quit, the masks set: {out.getvalue().strip().splitlines()[-1]})")
    finally:
        torch.set_default_dtype(previous)
    return [m.bool() for m, _ in params], [pruner.scores[id(p)].detach() for _, p in params]


def regioncam_faces(net, half_side: float) -> list[int]:
    """Regioncam's region count of the square ``[-half_side, half_side]^2`` after each hidden layer of
    ``net`` (a 2-D input ``nets.MLP``; Regioncam computes in float32)."""
    import numpy as np
    import regioncam

    rc, counts = regioncam.Regioncam(size=half_side), []
    for w, b in list(zip(net.weights, net.biases))[: net.n_hidden]:
        rc.linear(np.ascontiguousarray(w.detach().cpu().numpy().T, dtype=np.float32),
                  b.detach().cpu().numpy().astype(np.float32))
        rc.relu()
        counts.append(rc.num_faces)
    return counts


def regions(a) -> None:
    import numpy as np

    from ..nets import as_mlp, sample_mlp
    from ..regions import plane_partition, plane_regions, regions_on_line, split_lines

    try:
        import regioncam
    except ImportError:
        regioncam = None
        print("regioncam is not installed (pip install regioncam): our times only")
    device = resolve_device(a.device)
    print(f"device {device}, {torch.get_num_threads()} threads; best of {a.repeats}")
    for width in a.widths:
        net = sample_mlp([2] + [width] * a.depth + [1], "he", readout=True, bias_std=1.0, seed=0,
                         dtype=torch.float64).to(device)
        n = len(plane_regions(net, np.zeros(2), np.eye(2)[0], np.eye(2)[1], 2.0)[-1])
        user = _sequential(net)  # the same net as a user's nn.Sequential, through the public entry point
        ours, public, convert = _best_of(
            lambda net=net: plane_regions(net, np.zeros(2), np.eye(2)[0], np.eye(2)[1], 2.0),
            lambda user=user: plane_partition(user, np.zeros(2), np.eye(2)[0], np.eye(2)[1], 2.0),
            lambda user=user: as_mlp(user), repeats=a.repeats)
        line = (f"plane, depth {a.depth} width {width:4d}: {n:7,} regions in {ours:8.4f} s"
                f"   public plane_partition {public:8.4f} s ({public / ours - 1:+.1%}; as_mlp {convert / ours:.2%})")
        if regioncam is not None:
            theirs = _best(lambda net=net: regioncam_faces(net, 2.0), a.repeats)
            line += f"   Regioncam {regioncam_faces(net, 2.0)[-1]:7,} in {theirs:8.4f} s   ({ours / theirs:.1f}x as long)"
        print(line)
    net = sample_mlp([784, 64, 64, 64], "he", bias_std=1.0, seed=0, dtype=torch.float64).to(device)
    gen = torch.Generator().manual_seed(1)
    x0, x1 = (torch.randn(a.lines, 784, generator=gen, dtype=torch.float64).to(device) for _ in range(2))
    n = len(split_lines(net, x0, x1).t0)
    user = _sequential(net)
    ours, public = _best_of(lambda: split_lines(net, x0, x1), lambda: regions_on_line(user, x0, x1, 0.0, 1.0),
                            repeats=a.repeats)
    line = (f"{a.lines} lines, 784-64-64-64: {n:7,} intervals in {ours:8.4f} s (batched)"
            f"   public regions_on_line {public:8.4f} s ({public / ours - 1:+.1%})")
    if regioncam is not None:
        layers = [(np.ascontiguousarray(w.cpu().numpy().T, dtype=np.float32), b.cpu().numpy().astype(np.float32))
                  for w, b in zip(net.weights, net.biases)]

        def theirs_1d():
            total = 0
            for p, q in zip(x0.cpu().numpy(), x1.cpu().numpy()):
                rc = regioncam.Regioncam1D.through_points(np.stack([p, q]).astype(np.float32))
                for w, b in layers:
                    rc.linear(w, b)
                    rc.relu()
                total += rc.num_edges
            return total

        t = _best(theirs_1d, a.repeats)
        line += f"   Regioncam 1-D {theirs_1d():7,} edges in {t:8.4f} s   ({ours / t:.1f}x as long)"
    print(line)


def _sequential(net):
    """``net`` (an ``MLP``) as the ``nn.Sequential`` a user would write, holding the same weights."""
    from torch import nn

    mods = []
    for i, layer in enumerate(net.layers):
        mods.append(layer)
        if not (net.readout and i == len(net.layers) - 1):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def _best(fn, repeats: int) -> float:
    return _best_of(fn, repeats=repeats)[0]


def _best_of(*fns, repeats: int) -> list[float]:
    """The best time of each of ``fns``, run in turn ``repeats`` times (interleaved, so that a
    machine's slow spell weighs on each alike)."""
    for fn in fns:
        fn()  # warm-up
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            _sync()
            t0 = time.perf_counter()
            fn()
            _sync()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


class _HostImages(torch.utils.data.Dataset):
    """The baseline's dataset: uint8 images on the host, transformed one at a time."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        from torchvision.transforms import v2

        self.images, self.labels = images, labels
        self.transform = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(),
                                     v2.ToDtype(torch.float32, scale=True),
                                     v2.Normalize([0.49, 0.48, 0.45], [0.25, 0.24, 0.26])])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.labels[i]


# The ensembles timed (config.yaml's paper settings): (name, model, activation, width, depth,
# initialization (sigma_w, sigma_b; None: RP's edge of chaos of tanh at sigma_b 0.2), recipe, K, what differs)
ENSEMBLES = [
    ("TG-F6", "relu", 32, 10, (2.0, 0.01), dict(optimizer="adam", lr=1e-3, batch_size=128), 20, "seeds"),
    ("RP-F3 depth 20", "tanh", 100, 20, None, dict(optimizer="sgd", lr=1e-3, momentum=0.0, batch_size=100), 27,
     "seeds, masks"),
    ("RP-F3 depth 100", "tanh", 100, 100, None, dict(optimizer="sgd", lr=1e-3, momentum=0.0, batch_size=100), 27,
     "seeds, masks"),
    ("EP-F7", "hardtanh", 100, 6, (1.0, 0.0), dict(optimizer="sgd", lr=0.01, momentum=0.9, batch_size=128), 3,
     "seeds (W^(1) trained)"),
]


def _ensemble_specs(case, device, data, steps: int, dtype=torch.float32):
    """A function giving run ``seed`` of one case as a job would build it (``training.RunSpec``):
    its own seed (and its own random mask at one of RP-F3's nine sparsities), on ``data``."""
    from ..inits import init_point
    from ..models import build
    from ..pruning import apply_masks
    from ..training import Recipe, RunSpec

    name, activation, width, depth, point, recipe, _, _ = case
    sigma_w, sigma_b = point or init_point("eoc", activation, 0.2)[1:]
    recipe = Recipe(**recipe, iterations=steps, schedule="constant", check_every=100)
    train, test = data

    def spec(seed: int) -> RunSpec:
        model = build("ffnn", 10, (1, 28, 28), activation, width=width, depth=depth)
        initialize(model, "sigma", sigma_w=sigma_w, sigma_b=sigma_b, seed=seed)
        model.to(device, dtype)
        if name.startswith("RP"):
            gen = torch.Generator().manual_seed(seed)
            density = 1 - 0.1 * (1 + seed % 9)
            apply_masks(model, {f"layers.{i}.weight": (torch.rand(layer.weight.shape, generator=gen) < density).to(device)
                                for i, layer in enumerate(model.layers)})
        if name.startswith("EP"):
            for i, p in enumerate(model.parameters()):
                p.requires_grad_(i in (2, 3))  # W^(1) and its bias
        return RunSpec(model, train, test, recipe, seed)

    return spec


def _trained(specs: list, stack: str) -> tuple[list, float]:
    """``specs`` trained (``training.train_runs``; ``stack``: ``"never"``, one by one, or
    ``"always"``, as one stack): their models, and the seconds of their optimizer steps alone (no
    start or evaluation; a stack's shared among its runs)."""
    from ..training import How, train_runs

    runs = train_runs(specs, How(stack=stack))
    return [s.model for s in specs], sum(h["train_seconds"] for r in runs for h in r.history if h["epoch"] > 0)


def products_rate(widths: list[int], k: int, batch: int, device, repeats: int = 3) -> tuple[float, float]:
    """The ceiling of a stacked step: run-steps per second of its batched products alone, and
    their FLOP per run-step. One step of K nets of ``widths`` is, per layer, the forward product
    ``[K, B, in] x [K, in, out]``, the weights' gradient ``[K, in, B] x [K, B, out]`` and (but for
    the first layer) the input's ``[K, B, out] x [K, out, in]``, in the layouts the stack uses and
    written into buffers allocated once: what any engine of the same step must compute."""
    device = resolve_device(device)
    gen = torch.Generator().manual_seed(0)
    pairs = list(zip(widths[:-1], widths[1:]))
    make = lambda *shape: torch.randn(*shape, generator=gen).to(device)  # noqa: E731
    w = [make(k, a, b) for a, b in pairs]
    h = [make(k, batch, a) for a, _ in pairs]
    g = [make(k, batch, b) for _, b in pairs]
    out = [torch.empty(k, batch, b, device=device) for _, b in pairs]
    grad_w = [torch.empty_like(x) for x in w]
    grad_h = [torch.empty(k, batch, a, device=device) for a, _ in pairs]

    def products():
        for i in range(len(pairs)):
            torch.bmm(h[i], w[i], out=out[i])
        for i in reversed(range(len(pairs))):
            torch.bmm(h[i].transpose(1, 2), g[i], out=grad_w[i])
            if i:
                torch.bmm(g[i], w[i].transpose(1, 2), out=grad_h[i])

    flop = sum(2 * batch * a * b * (3 if i else 2) for i, (a, b) in enumerate(pairs))
    return 1.0 / _best_of(products, repeats=repeats)[0], flop


def ensemble_rows(device, steps: int, only=None, k: int | None = None, repeats: int = 1, float64: bool = True):
    """One row per net of ``ENSEMBLES`` (those whose names start with one of ``only``), each as soon
    as it is measured: K runs (``training.RunSpec``) timed one by one and as one stack
    (``training.train_runs``, ``How(stack="always")``), the best
    of ``repeats`` interleaved timings, and the largest relative weight difference (fp32, and with
    ``float64`` the same on 2 runs in float64). What ``benchmark training`` prints and the GPU
    check's ``ensembles`` stage writes."""
    from ..training import DeviceData

    device = resolve_device(device)
    gen = torch.Generator().manual_seed(0)
    for case in ENSEMBLES:
        if only and not any(case[0].startswith(o) for o in only):
            continue
        n_runs = k or case[6]
        n = steps * case[5]["batch_size"]
        x = torch.randn(n, 1, 28, 28, generator=gen)
        y = torch.randint(0, 10, (n,), generator=gen)

        def data(dtype, x=x, y=y):
            zero, one = torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)
            return (DeviceData(x, y, device, mean=zero, std=one, dtype=dtype),
                    DeviceData(x[:1000], y[:1000], device, mean=zero, std=one, dtype=dtype))

        spec = _ensemble_specs(case, device, data(torch.float32), steps)
        _trained([spec(10**6), spec(10**6 + 1)], "always")  # warm-up: both paths, allocator, kernels
        _trained([spec(10**6)], "never")
        t_alone = t_together = train_alone = train_together = float("inf")
        for _ in range(repeats):  # the best of interleaved repeats: a busy machine only slows one
            specs = [spec(seed) for seed in range(n_runs)]
            _sync()
            t0 = time.perf_counter()
            alone, seconds = _trained(specs, "never")
            _sync()
            t_alone, train_alone = min(t_alone, time.perf_counter() - t0), min(train_alone, seconds)
            specs = [spec(seed) for seed in range(n_runs)]
            t0 = time.perf_counter()
            together, seconds = _trained(specs, "always")
            _sync()
            t_together, train_together = min(t_together, time.perf_counter() - t0), min(train_together, seconds)
        # ``ratio`` counts each run's start and evaluation, which stacking does not shorten;
        # ``training_ratio`` the optimizer steps alone, what a long run spends its time on
        # the ceiling: the step's products alone, timed in the same run
        stack_steps_per_s, flop = products_rate([784] + [case[2]] * case[3] + [10], n_runs, case[5]["batch_size"],
                                                device, repeats=10)  # the best of 10: milliseconds each
        ceiling = n_runs * stack_steps_per_s
        row = dict(nets=case[0], k=n_runs, steps=steps, alone_s=t_alone, stacked_s=t_together,
                   ratio=t_alone / t_together, training_ratio=train_alone / train_together,
                   stacked_run_steps_per_s=n_runs * steps / t_together,
                   stacked_train_run_steps_per_s=n_runs * steps / train_together,
                   products_run_steps_per_s=ceiling, share_of_products=n_runs * steps / train_together / ceiling,
                   products_gflop_per_s=ceiling * flop / 1e9,
                   max_rel_difference=_largest_difference(alone, together), max_rel_difference_float64=float("nan"),
                   differ_by=case[7], device=str(device))
        if float64:  # what is left of the difference when rounding is 1e-16
            spec64 = _ensemble_specs(case, device, data(torch.float64), steps, torch.float64)
            row["max_rel_difference_float64"] = _largest_difference(
                _trained([spec64(0), spec64(1)], "never")[0], _trained([spec64(0), spec64(1)], "always")[0])
        yield row


def ensembles(a) -> None:
    """K runs one by one and as one stack (``training.train_runs``)."""
    print(f"device {resolve_device(a.device)}, {torch.get_num_threads()} threads, {a.steps} steps per run, "
          f"MNIST-shaped random data, best of {a.repeats}")
    print(f"{'nets':17s} {'K':>3s} {'one by one':>11s} {'ensemble':>9s} {'ratio':>6s} {'steps alone':>11s} "
          f"{'run-steps/s':>12s} {'steps only':>11s} {'products':>9s} {'share':>6s} {'max rel diff':>13s} "
          f"{'in float64':>13s}  differ by")
    for r in ensemble_rows(a.device, a.steps, a.only, a.k, a.repeats):
        print(f"{r['nets']:17s} {r['k']:3d} {r['alone_s']:10.2f}s {r['stacked_s']:8.2f}s {r['ratio']:5.1f}x "
              f"{r['training_ratio']:10.1f}x {r['stacked_run_steps_per_s']:12.0f} "
              f"{r['stacked_train_run_steps_per_s']:11.0f} {r['products_run_steps_per_s']:9.0f} "
              f"{r['share_of_products']:6.0%} {r['max_rel_difference']:13.1e} "
              f"{r['max_rel_difference_float64']:13.1e}  {r['differ_by']}", flush=True)
    print("run-steps/s: the stack's whole time (start, evaluation); steps only: its optimizer steps; products: "
          "the same steps' batched products alone (the ceiling); share: steps only / products")


def _largest_difference(alone, together) -> float:
    """The largest difference of any weight between two lists of models, relative to the largest
    weight of its tensor."""
    return max(float((p - q).abs().max() / p.abs().max().clamp_min(1e-30))
               for m1, m2 in zip(alone, together)
               for p, q in zip(m1.state_dict().values(), m2.state_dict().values()) if p.is_floating_point())


def training(a) -> None:
    if not a.resnet:
        return ensembles(a)
    from ..training import DeviceData, Recipe, fit

    device = resolve_device(a.device)
    n = 50_000 if a.epoch else a.steps * a.batch
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (n, 3, 32, 32), generator=gen, dtype=torch.uint8)
    labels = torch.randint(0, 10, (n,), generator=gen)
    print(f"device {device}, ResNet32 (doubled filters), batch {a.batch}, {n:,} CIFAR-shaped images per timing, "
          f"{torch.get_num_threads()} threads")

    def model():
        return initialize(ResNet(32), "he", seed=0).to(device)

    small = DeviceData(images[:a.batch].float() / 255, labels[:a.batch], device)
    rates = {}
    for precision in ("fp32", "bf16"):
        data = DeviceData(images.float() / 255, labels, device, channels_last=True)
        recipe = Recipe(lr=0.1, momentum=0.9, weight_decay=1e-4, batch_size=a.batch, epochs=1, augment=True,
                        precision=precision, channels_last=True, check_every=10**9)
        fit(model(), DeviceData(images[:2 * a.batch].float() / 255, labels[:2 * a.batch], device, channels_last=True),
            small, recipe, seed=0)  # warm-up: kernel selection, allocator
        run = fit(model(), data, small, recipe, seed=0)
        rates[f"engine {precision}"] = n / run.final["seconds"]
        del data

    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loader = torch.utils.data.DataLoader(_HostImages(images, labels), batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers, pin_memory=device.type == "cuda",
                                         persistent_workers=a.workers > 0)

    def epoch(limit=None):
        for i, (x, y) in enumerate(loader):
            if limit is not None and i >= limit:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        _sync()

    epoch(limit=2)  # warm-up, workers started
    t0 = time.perf_counter()
    epoch()
    rates["DataLoader fp32"] = n / (time.perf_counter() - t0)
    for name, r in rates.items():
        print(f"{name:18s} {r:9.1f} images/s  {50_000 / r:8.1f} s per CIFAR-10 epoch")
    base = rates["DataLoader fp32"]
    print(f"speed-up over the DataLoader: fp32 {rates['engine fp32'] / base:.2f}x, bf16 {rates['engine bf16'] / base:.2f}x")


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
    q.add_argument("--against", metavar="DIR", help="a Synaptic-Flow checkout: time its pruners beside ours")
    q.add_argument("--floor", action="store_true", help="also time the passes alone (their forward and backward passes)")
    q.add_argument("--masks", action="store_true", help="with --against: compare masks with its pruners' instead of timing")
    q.add_argument("--model", default="resnet20", help="--masks: its lottery ResNet (default resnet20)")
    q.add_argument("--density", type=float, default=0.1, help="--masks: the fraction of weights kept")
    q.add_argument("--batches", type=int, default=2, help="--masks: random batches for SNIP and GraSP")
    q.add_argument("--methods", nargs="+", default=["magnitude", "snip", "grasp", "synflow"],
                   help="--masks: only these methods' cases")
    q.add_argument("--same-count", action="store_true", help="--masks: its pruners keep round(d n) weights, as ours")
    q.add_argument("--rtol", type=float, default=1e-5, help="--masks: a score this close to the threshold is a tie")
    t = sub.add_parser("training")
    t.add_argument("--resnet", action="store_true", help="the engine on ResNet32 against a DataLoader")
    t.add_argument("--only", nargs="+", help="ensembles: only these nets (TG-F6, RP-F3, EP-F7; a prefix)")
    t.add_argument("-k", type=int, help="ensembles: runs per stack (default: each net's K)")
    t.add_argument("--repeats", type=int, default=1, help="ensembles: best of this many timings of each")
    t.add_argument("--steps", type=int, default=20, help="timed optimizer steps per run (with --resnet: without --epoch)")
    t.add_argument("--batch", type=int, default=128)
    t.add_argument("--workers", type=int, default=4, help="DataLoader worker processes of the baseline")
    t.add_argument("--epoch", action="store_true", help="time one full 50,000-image epoch")
    t.add_argument("--device", default="auto")
    r = sub.add_parser("regions")
    r.add_argument("--widths", type=int, nargs="+", default=[16, 32, 64])
    r.add_argument("--depth", type=int, default=3)
    r.add_argument("--lines", type=int, default=100)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--device", default="auto")
    a = top.parse_args()
    if a.what == "regions":
        return regions(a)
    if a.what == "pruning" and a.masks:
        if not a.against:
            top.error("pruning --masks compares with Synaptic-Flow: give --against <its checkout>")
        return pruning_masks(a)
    if a.what == "pruning":
        return pruning(a)
    if a.what == "training":
        return training(a)
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
