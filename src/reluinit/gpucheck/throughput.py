"""Throughput of every training family of the paper DAG, and runs packed on one device.

A *family* is a (model, dataset, recipe) combination of the training jobs that
``reluinit.pipeline.smoke.subset`` lists (``plan.run_family`` names it; a net an experiment builds for
itself is "<ID> net"), and the nets LR's figures read (``train LR-MNIST``). Each is timed on
what its own experiment builds: the job runs at the smoke scale (generated tensors of the real
shapes and class counts, the paper's models, batch sizes and recipes; ``--tiny``: the quick scale):
the check asks the job for its first run's ``training.RunSpec`` (``measure.specs``, what the job
trains: the model initialized and pruned, the data on the device, the recipe and the loss). So a
new training experiment is timed without a line here, and a model is never described twice.

Then, on that model:

* the engine (``training.train_runs``, the run alone: data on the device, augmentation there, the recipe's precision and
  layout, its step's engine in ``engine``): one epoch of warm-up steps and one timed epoch,
  ``train_seconds`` of the second (eager, compiled and graphed side by side: the engines stage);
* evaluation: seconds per test image (``training.evaluate``, the recipe's eval batch);
* the baseline: a plain ``torch.utils.data.DataLoader`` over the same tensors on the host (fp32,
  NCHW, per-image random crop and flip in its workers where the recipe augments, ``pin_memory``)
  and an ordinary loop with the recipe's optimizer, warm-up steps, then the same number timed.

``projected_hours`` is one paper run's: its optimizer steps (``Recipe.total_steps`` over the real
training set) times the seconds per step, plus an evaluation of the real test set per epoch.
``declared_hours`` is what the config declares for one such run (``plan.run_hours``).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field, fields, replace

import pandas as pd
import torch

from .common import generated, sync

log = logging.getLogger(__name__)

LR_SPEC_PREFIX = "train "


@dataclass
class Family:
    model: str
    dataset: str
    recipe: str
    spec: object  # () -> training.RunSpec: the first run of its job, built
    experiments: list[str] = field(default_factory=list)
    paper: dict = field(default_factory=dict)  # model, epochs, steps per run at the paper scale
    depth: float = math.nan  # the depth of the run it times, where runs of the family differ in depth

    @property
    def name(self) -> str:
        return f"{self.model} / {self.dataset} / {self.recipe}"


def families(config: dict, scale: str, device) -> dict[tuple[str, str, str], Family]:
    """Every family of the paper DAG, with a way to build the run it times at ``scale`` (smoke or quick)."""
    from ..pipeline import catalogue, smoke
    from ..pipeline.config import settings, training_settings
    from ..pipeline.plan import run_depth, run_family

    found: dict[tuple[str, str, str], Family] = {}
    for exp, keys in smoke.subset(config, scale).items():
        e = catalogue.get(exp)
        s = settings(config, exp, scale)
        paper = settings(config, exp, "paper")
        parts = e.parts(s)
        for key in keys:
            for i, run in enumerate(parts[key]["runs"].values() if e.trains else []):
                # a job's first run is the one timed: a later run of another family has no way in
                model, dataset, recipe = run_family(exp, s, run)
                fam = found.setdefault((model, dataset, recipe["name"]), Family(
                    model, dataset, recipe["name"], None, paper=_paper_run(paper, exp, model, dataset)))
                if fam.spec is None and i == 0:  # the run the job times: its first
                    fam.spec, fam.depth = _job(e, s, key, device), run_depth(s, run)
                if exp not in fam.experiments:
                    fam.experiments.append(exp)
            for spec, arch, r in e.trained(s, key):
                ts = training_settings(config, spec, scale)
                fam = found.setdefault((arch, ts["dataset"], spec), Family(
                    arch, ts["dataset"], spec, _train_net(spec, ts, arch, r, device),
                    paper=_paper_spec(training_settings(config, spec, "paper"))))
                if LR_SPEC_PREFIX + spec not in fam.experiments:
                    fam.experiments.append(LR_SPEC_PREFIX + spec)
    return found


def _job(e, s, key, device):
    return lambda: e.specs(s, key, str(device), first=1)[0]


def _train_net(spec, ts, arch, run, device):
    from ..pipeline.catalogue import trainer

    lr_train = trainer(spec)
    return lambda: lr_train.classifier_spec(ts, arch, lr_train.run_seed(ts, arch, run), str(device))


def _paper_run(paper: dict, exp: str, model: str, dataset: str) -> dict:
    """One paper-scale run of this family: its steps and epochs over the real data
    (``plan.run_steps``) and the hours the config declares for it."""
    from ..pipeline.plan import run_family, run_hours, run_steps

    recipe = run_family(exp, paper, {"model": model, "dataset": dataset})[2]
    return run_steps(recipe, dataset) | {"declared_hours": run_hours(paper, model)}


def _paper_spec(ts: dict) -> dict:
    """The same for a net of a training spec (LR-MNIST: its recipe; rule `train_<spec>`)."""
    from ..pipeline.plan import TRAIN, hours, run_steps

    return run_steps(ts["recipe"], ts["dataset"]) | {"declared_hours": hours(TRAIN["runtime"])}


# --- the run a family times ----------------------------------------------------------------------


def capture(family: Family) -> dict:
    """The fields of the family's run (``training.RunSpec``), as the job builds it."""
    if family.spec is None:
        raise RuntimeError(f"{family.name}: no smoke job starts with a run of it (only the first run of a job is timed)")
    spec = family.spec()
    return {f.name: getattr(spec, f.name) for f in fields(spec)}


# --- timing --------------------------------------------------------------------------------------


def resized(data, n: int):
    """``data`` (a ``training.DeviceData``) with exactly ``n`` examples, repeating it where it has fewer."""
    out = copy.copy(data)
    idx = torch.arange(n, device=data.device) % len(data)
    out.x, out.y = data.x[idx], data.y[idx]
    return out


def engine(c: dict, steps: int, warm: int, eval_images: int | None = None) -> dict:
    """Seconds per optimizer step of ``fit`` on the captured run: an epoch of ``warm`` steps (kernel
    choice, allocations), then a timed epoch of ``steps`` (its ``train_seconds``, the steps alone);
    and seconds per test image of an evaluation (of the first ``eval_images`` test images, all by
    default)."""
    from ..training import evaluate, fit

    recipe = replace(c["recipe"], epochs=1, iterations=None, max_steps=None, eval_examples=None, schedule="constant")
    loss_fn = c.get("loss_fn", _default_loss())
    test = resized(c["test"], min(len(c["test"]), 64))
    for n in (warm, steps):
        run = fit(c["model"], resized(c["train"], n * recipe.batch_size), test, recipe, seed=n, loss_fn=loss_fn,
                  n_classes=c.get("n_classes"))
        if run.diverged:
            return {"status": "diverged on generated data"}
    seconds = run.history[1]["train_seconds"]
    autocast = recipe.autocast_dtype(c["train"].device)
    test = resized(c["test"], min(len(c["test"]), eval_images or len(c["test"])))
    evaluate(c["model"], test, recipe.eval_batch_size, autocast, loss_fn)  # warm-up
    sync(test.device)
    t0 = time.perf_counter()
    evaluate(c["model"], test, recipe.eval_batch_size, autocast, loss_fn)
    eval_s = (time.perf_counter() - t0) / len(test)
    return {"status": "ok", "engine": run.history[1]["engine"], "steps_timed": steps,
            "seconds_per_step": seconds / steps,
            "eval_seconds_per_image": eval_s}


def _default_loss():
    from ..training import cross_entropy

    return cross_entropy


class HostImages(torch.utils.data.Dataset):
    """The baseline's dataset: tensors on the host, each image cropped and flipped on its own in a
    worker process where the recipe augments."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, augment: bool, pad: int):
        self.x, self.y, self.transform = x, y, None
        if augment:
            from torchvision.transforms import v2

            self.transform = v2.Compose([v2.RandomCrop(x.shape[-1], padding=pad), v2.RandomHorizontalFlip()])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        return (self.transform(x) if self.transform else x), self.y[i]


def baseline(c: dict, steps: int, warm: int, workers: int) -> float:
    """Optimizer steps per second of a plain DataLoader loop on the same model and tensors (fp32,
    NCHW): ``warm`` steps (workers started, kernels chosen), then ``steps`` timed. TF32 is set as
    the engine's run sets it (off unless the recipe says ``tf32``): PyTorch's default, TF32
    convolutions, would compare two precisions."""
    from ..nets import tf32

    with tf32(c["recipe"].precision == "tf32"):
        return _baseline(c, steps, warm, workers)


def _baseline(c: dict, steps: int, warm: int, workers: int) -> float:
    recipe, data = c["recipe"], c["train"]
    dev = data.device
    model = c["model"].to(memory_format=torch.contiguous_format)
    opt = recipe.optimizer_for(p for p in model.parameters() if p.requires_grad)
    n = (warm + steps) * recipe.batch_size
    src = resized(data, n)
    dataset = HostImages(src.x.cpu(), src.y.cpu(), recipe.augment and src.x.dim() == 4, recipe.crop_pad)
    loader = torch.utils.data.DataLoader(dataset, batch_size=recipe.batch_size, shuffle=True, num_workers=workers,
                                         pin_memory=dev.type == "cuda", drop_last=True)
    loss_fn = c.get("loss_fn", _default_loss())
    model.train()
    t0 = None
    for i, (x, y) in enumerate(loader):
        if i == warm:
            sync(dev)
            t0 = time.perf_counter()
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss, _ = loss_fn(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sync(dev)
    return steps / (time.perf_counter() - t0)


def run(check) -> dict[str, pd.DataFrame]:
    """The throughput table and the cost table it yields; families in order of the GPU-hours the
    config declares for them (the largest bills first), each started only while the budget holds one."""
    scale = "quick" if check.tiny else "smoke"
    steps, warm, workers, eval_images = (2, 1, 2, 64) if check.tiny else (30, 10, 8, None)
    found = families(check.config, scale, check.device)
    weight = _declared_totals(check.config)
    order = sorted(found.values(), key=lambda f: -weight.get((f.model, f.dataset, f.recipe), 0.0))
    rows = []
    for fam in order:
        row = dict(family=fam.name, model=fam.model, dataset=fam.dataset, recipe=fam.recipe,
                   experiments=" ".join(fam.experiments), depth=fam.depth, device=str(check.device),
                   baseline_workers=workers, **{k: fam.paper[k] for k in ("train_images", "steps_per_epoch", "epochs",
                                                                       "declared_hours")})
        per_family = 2 if check.tiny else 15
        if check.left() < per_family:
            rows.append(row | {"status": f"skipped: {check.left():.0f} s of the budget left"})
            continue
        t0 = time.perf_counter()
        try:
            c = capture(fam)
            model, recipe = c["model"], c["recipe"]
            row |= dict(module=type(model).__name__, parameters=sum(p.numel() for p in model.parameters()),
                        batch_size=recipe.batch_size, precision=recipe.precision, channels_last=recipe.channels_last,
                        augment=recipe.augment)
            row |= engine(c, steps, warm, eval_images)
            if row["status"] == "ok":
                row["baseline_steps_per_s"] = baseline(c, steps, warm, workers)
        except Exception as e:  # one family's failure is a row, not the end of the stage
            log.exception("%s failed", fam.name)
            row["status"] = f"failed: {type(e).__name__}: {e}"
        c = None  # the next family gets the device's memory
        if check.device.type == "cuda":
            torch.cuda.empty_cache()
        rows.append(row)
        log.info("%s: %s in %.1f s", fam.name, row["status"], time.perf_counter() - t0)
    table = pd.DataFrame(rows)
    for col in ("seconds_per_step", "eval_seconds_per_image", "baseline_steps_per_s", "steps_timed", "module",
                "parameters", "batch_size", "precision", "channels_last", "augment", "engine"):
        if col not in table:
            table[col] = math.nan
    table["steps_per_s"] = 1 / table["seconds_per_step"]
    table["images_per_s"] = table["steps_per_s"] * table["batch_size"]
    test_images = table["family"].map({f.name: f.paper["test_images"] for f in found.values()})
    steps_run = table["family"].map({f.name: f.paper["steps"] for f in found.values()})
    eval_epoch = test_images * table["eval_seconds_per_image"]
    table["seconds_per_epoch"] = table["steps_per_epoch"] * table["seconds_per_step"] + eval_epoch
    table["projected_hours"] = (steps_run * table["seconds_per_step"] + table["epochs"] * eval_epoch) / 3600
    table["engine_gain"] = table["steps_per_s"] / table["baseline_steps_per_s"]
    cost = table[table["status"] == "ok"][["model", "dataset", "recipe", "experiments", "depth", "batch_size",
                                            "precision", "seconds_per_step", "eval_seconds_per_image", "device"]]
    return {"throughput": table, "gpu-cost": cost}


def _declared_totals(config: dict) -> dict[tuple[str, str, str], float]:
    """GPU-hours the paper scale's config declares per family, over every training run of `all`."""
    from ..pipeline import catalogue
    from ..pipeline.config import settings
    from ..pipeline.plan import default_experiments, run_family, run_hours

    totals: dict = {}
    for exp in default_experiments(config, "paper"):
        e = catalogue.get(exp)
        if not e.trains:
            continue
        s = settings(config, exp, "paper")
        for part in e.parts(s).values():
            for run in part["runs"].values():
                model, dataset, recipe = run_family(exp, s, run)
                key = (model, dataset, recipe["name"])
                totals[key] = totals.get(key, 0.0) + run_hours(s, model)
    return totals


# --- packing: several training processes on one device -------------------------------------------


def _pack_worker(device: str, tiny: bool, barrier, results, index: int) -> None:
    """One of several processes training ResNet32 (doubled filters, the rp-cifar10 recipe) on
    generated CIFAR-10 shapes: warm-up steps, then, once every process is ready, timed steps."""
    from ..inits import initialize
    from ..models import ResNet
    from ..tools.memory import peak_rss_bytes
    from ..training import Recipe, fit

    dev = torch.device(device)
    if dev.type == "cpu":
        torch.set_num_threads(1)
    depth, batch, steps, shape = (8, 16, 3, (3, 16, 16)) if tiny else (32, 128, 30, (3, 32, 32))
    model = initialize(ResNet(depth), "kaiming_fan_out", seed=index).to(dev)
    recipe = Recipe(lr=0.1, momentum=0.9, weight_decay=1e-4, batch_size=batch, epochs=1, schedule="constant",
                    augment=True, precision="fp32", channels_last=True)
    data = generated(steps * batch, dev, shape, seed=index)
    test = generated(batch, dev, shape, seed=100 + index)
    fit(model, data, test, recipe, seed=index)  # warm-up
    barrier.wait(timeout=120)
    run = fit(model, data, test, recipe, seed=index + 1)
    memory = (torch.cuda.max_memory_reserved(dev) if dev.type == "cuda"
              else peak_rss_bytes()) / 2**20
    results.put(dict(process=index, steps_timed=steps, steps_per_s=steps / run.history[1]["train_seconds"],
                     memory_mb=memory))


def _collect(results, procs, n: int, deadline: float) -> list[dict]:
    """The ``n`` workers' rows; a worker that died or a deadline passed stops the stage with the reason."""
    import queue

    got = []
    while len(got) < n:
        try:
            got.append(results.get(timeout=2))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.perf_counter() > deadline:
                for p in procs:
                    p.kill()
                raise RuntimeError(f"packing {n} processes: {len(got)} reported"
                                   + (f", a worker exited with {dead[0]}" if dead else ", out of time")) from None
    for p in procs:
        p.join(timeout=30)
    return got


def packing(check) -> pd.DataFrame:
    """1, 2, 4 and 8 processes at once (``--tiny``: 1 and 2): each one's steps per second and memory,
    their sum, and that sum over one process's rate."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # CUDA in a child needs a fresh interpreter
    counts = [1, 2] if check.tiny else [1, 2, 4, 8]
    rows = []
    for n in counts:
        if rows and check.left() < (5 if check.tiny else 20) * (1 + n / 4):
            log.warning("packing: %d processes skipped, %.0f s of the budget left", n, check.left())
            break
        barrier, results = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_pack_worker, args=(str(check.device), check.tiny, barrier, results, i))
                 for i in range(n)]
        for p in procs:
            p.start()
        got = _collect(results, procs, n, deadline=time.perf_counter() + (60 if check.tiny else 240))
        total = sum(g["steps_per_s"] for g in got)
        rows += [dict(processes=n, aggregate_steps_per_s=total, device=str(check.device), **g) for g in got]
        log.info("packing: %d processes, %.2f steps/s together", n, total)
    table = pd.DataFrame(rows)
    one = table.loc[table["processes"] == 1, "aggregate_steps_per_s"].iloc[0]
    return table.assign(gain_over_one=table["aggregate_steps_per_s"] / one)
