import math

import torch

from reluinit import inits, training
from reluinit.experiments import lr_train
from reluinit.nets import sample_mlp


def _spec(epochs=3, **over):
    recipe = {"optimizer": "adam", "lr": 1e-2, "batch_size": 32, "epochs": epochs, "schedule": "constant",
              "check_every": 1}
    return {"seed": 1, "dataset": "mnist", "architectures": ["d2w16"], "runs": 1, "recipe": recipe,
            "checkpoints": [0, 3], "init": "he", "bias_std": 1e-3, "data_dir": "unused", "scale": "quick", **over}


def test_training_learns_and_checkpoints_round_trip(tmp_path):
    states = lr_train.train_classifier(_spec(), "d2w16", seed=5, device="cpu")
    assert [s["epoch"] for s in states] == [0, 3]
    assert states[0]["dataset"] == "digits"  # the quick scale's stand-in for MNIST, recorded
    assert states[-1]["test_acc"] > 0.8 > states[0]["test_acc"]
    lr_train.save(states, tmp_path / "net.pt")
    loaded = lr_train.load(tmp_path / "net.pt")  # weights_only=True
    net = lr_train.restore(loaded[-1])
    x = torch.rand(7, 64, dtype=torch.float64)
    assert torch.equal(net(x), lr_train.restore(states[-1])(x))


def test_same_seed_same_net():
    a = lr_train.train_classifier(_spec(epochs=1, checkpoints=[1]), "d2w16", seed=3)
    b = lr_train.train_classifier(_spec(epochs=1, checkpoints=[1]), "d2w16", seed=3)
    assert all(torch.equal(u, v) for u, v in zip(a[0]["weights"], b[0]["weights"]))


def test_an_architectures_runs_train_stacked_as_each_trains_alone(tmp_path, caplog):
    """LR's job (rule train_<spec>) trains an architecture's seeds as one stack: each run's
    checkpoints are those it gets alone, up to float64 rounding, and each resumes from its own
    file; with ``ensemble: false`` they train one by one, bit for bit as alone."""
    spec = _spec(epochs=3, checkpoints=[0, 1, 3])
    runs = [0, 1, 2]
    alone = [lr_train.train_classifier(spec, "d2w16", lr_train.run_seed(spec, "d2w16", r), "cpu", run=r) for r in runs]
    paths = [tmp_path / f"d2w16-run{r}.pt" for r in runs]
    with caplog.at_level("INFO", logger="reluinit.training"):
        together = lr_train.train_runs(spec, "d2w16", runs, "cpu", resume=paths)
    assert "training 3 runs as one stack" in caplog.text
    for a, b in zip(alone, together):
        assert [(s["epoch"], s["seed"], s["fingerprint"], round(s["test_acc"], 3)) for s in a] == \
            [(s["epoch"], s["seed"], s["fingerprint"], round(s["test_acc"], 3)) for s in b]
        for sa, sb in zip(a, b):
            for u, v in zip(sa["weights"] + sa["biases"], sb["weights"] + sb["biases"]):
                assert float((u - v).abs().max() / u.abs().max()) <= 1e-12
    assert len({float(s[-1]["weights"][0].sum()) for s in together}) == 3  # three nets, not one thrice
    caplog.clear()
    with caplog.at_level("INFO", logger="reluinit"):  # finished: each run read back from its own file
        again = lr_train.train_runs(spec, "d2w16", runs, "cpu", resume=paths)
    assert all(f"resumed from {p} at epoch 3 of 3" in caplog.text for p in paths), caplog.text
    assert all(torch.equal(u, v) for a, b in zip(together, again) for u, v in zip(a[-1]["weights"], b[-1]["weights"]))
    off = {**spec, "recipe": {**spec["recipe"], "ensemble": False}}
    caplog.clear()
    with caplog.at_level("INFO", logger="reluinit.training"):
        one_by_one = lr_train.train_runs(off, "d2w16", runs, "cpu")
    assert "as one stack" not in caplog.text
    assert all(torch.equal(u, v) for a, b in zip(alone, one_by_one) for u, v in zip(a[-1]["weights"], b[-1]["weights"]))


def test_divergence_is_a_result_not_a_crash():
    net = sample_mlp([4, 8, 3], "he", readout=True, seed=0, dtype=torch.float64)
    x = torch.randn(64, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (64,))
    net.weights[0] *= float("inf")
    recipe = training.Recipe(optimizer="adam", lr=1e-3, batch_size=16, epochs=2, schedule="constant", check_every=1)
    states = lr_train.train_adam(net, (x, y), (x, y), recipe, seed=0, checkpoints=[2])
    assert states[-1]["diverged"] and math.isnan(states[-1]["train_loss"])
    assert states[-1]["test_acc"] == 1 / 3


# --- the engine (training.fit) --------------------------------------------------------------------

import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from reluinit import datasets, models, pruning  # noqa: E402
from reluinit.training import DeviceData, Recipe, fit  # noqa: E402

DIGITS_RUN = """
import sys, torch
from reluinit import datasets, inits, models
from reluinit.training import DeviceData, Recipe, fit
torch.manual_seed(0)
tr, te = datasets.digits(True), datasets.digits(False)
train, test = DeviceData.from_split(tr, "cpu"), None
test = DeviceData.from_split(te, "cpu", like=train)
model = inits.initialize(models.build("ffnn", 10, (1, 8, 8), width=32, depth=2), "he", seed=1)
recipe = Recipe(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True, batch_size=64,
                epochs=int(sys.argv[2]), augment=True, crop_pad=1, schedule="step")
run = fit(model, train, test, recipe, seed=3, checkpoint=sys.argv[1] if sys.argv[1] != "-" else None)
torch.save(model.state_dict(), sys.argv[3])
"""


def _digits_run(tmp_path, checkpoint, epochs, out):
    script = tmp_path / "run.py"
    script.write_text(DIGITS_RUN)
    return [sys.executable, str(script), str(checkpoint), str(epochs), str(out)]


def test_kill_and_resume_gives_the_same_final_weights(tmp_path):
    """A run killed (SIGKILL) after a few epochs and restarted ends with exactly the weights of a
    run that was never interrupted (CPU, same seed)."""
    epochs = 12
    subprocess.run(_digits_run(tmp_path, "-", epochs, tmp_path / "straight.pt"), check=True)
    ckpt = tmp_path / "ckpt.pt"
    proc = subprocess.Popen(_digits_run(tmp_path, ckpt, epochs, tmp_path / "never.pt"))
    deadline = time.time() + 120
    while time.time() < deadline:
        state = training.load_checkpoint(ckpt) if ckpt.exists() else None
        if state is not None and state["history"][-1]["epoch"] >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "never.pt").exists(), "the first run finished before it was killed"
    killed_at = training.load_checkpoint(ckpt)["history"][-1]["epoch"]
    assert 3 <= killed_at < epochs
    subprocess.run(_digits_run(tmp_path, ckpt, epochs, tmp_path / "resumed.pt"), check=True)
    a = torch.load(tmp_path / "straight.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed.pt", weights_only=True)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    history = training.load_checkpoint(ckpt)["history"]
    assert [r["epoch"] for r in history] == list(range(epochs + 1))  # every epoch recorded once
    assert history[-1]["test_acc"] > 0.5


def _tiny(seed=0, **kw):
    model = inits.initialize(models.build("ffnn", 10, (1, 8, 8), width=16, depth=2, **kw), "he", seed=seed)
    train = DeviceData.from_split(datasets.digits(True), "cpu")
    return model, train, DeviceData.from_split(datasets.digits(False), "cpu", like=train)


def test_a_run_that_blows_up_is_recorded_as_diverged_at_chance():
    model, train, test = _tiny()
    run = fit(model, train, test, Recipe(optimizer="sgd", lr=1e6, momentum=0.9, epochs=5, batch_size=32,
                                         check_every=5), seed=0)
    assert run.diverged and run.final["diverged"]
    assert run.final["test_acc"] == pytest.approx(0.1) and math.isnan(run.final["train_loss"])
    assert run.final["epoch"] < 5  # stopped early
    assert run.summary()["diverged"]


def test_masks_survive_100_optimizer_steps_and_an_empty_layer_trains():
    model, train, test = _tiny()
    x, y = datasets.balanced_batch(datasets.digits(True), 5, seed=0)
    masks = pruning.prune(model, "snip", 0.3, x=x, y=y)
    first = next(iter(masks))
    masks[first] = torch.zeros_like(masks[first])  # a layer emptied by pruning
    pruning.apply_masks(model, masks)
    recipe = Recipe(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=1e-3, iterations=100, batch_size=32)
    run = fit(model, train, test, recipe, seed=1)
    assert run.final["step"] == 100 and not run.diverged
    for name, mask in masks.items():
        w = dict(model.named_modules())[name.rsplit(".", 1)[0]].weight
        assert torch.all(w[~mask] == 0), name
        assert torch.any(w[mask] != 0) or not mask.any()
    # nothing reaches past the empty layer: every input gets the same prediction, chance-level
    assert run.final["test_acc"] < 0.2


def test_step_schedule_and_best_epoch_bookkeeping():
    r = Recipe(lr=0.1, schedule="step")
    assert [r.lr_at(e, 160) for e in (1, 80, 81, 120, 121, 160)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001, 0.001])
    assert Recipe(lr=1.0, schedule=[2, 4]).lr_at(5, 10) == pytest.approx(0.01)
    model, train, test = _tiny()
    run = fit(model, train, test, Recipe(optimizer="adam", lr=1e-2, epochs=3, batch_size=64, schedule="constant"),
              seed=2, on_epoch=lambda e, m: [{"weight_norm": float(m.layers[0].weight.norm())}])
    s = run.summary()
    assert s["best_test_acc"] == max(r["test_acc"] for r in run.history) > 0.8
    assert [m["epoch"] for m in run.measures] == [0, 1, 2, 3]


def test_on_device_augmentation_crops_and_flips():
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.float32).view(2, 1, 4, 4)
    gen = torch.Generator().manual_seed(0)
    out = training._crop_flip(x, gen, pad=0)
    # without padding a crop is the image itself, possibly flipped left-right
    for a, b in zip(out, x):
        assert torch.equal(a, b) or torch.equal(a, b.flip(-1))
    out = training._crop_flip(x, gen, pad=2)
    assert out.shape == x.shape
    # every value of a shifted crop is either padding (0) or a pixel of the same image
    for a, b in zip(out, x):
        assert set(a.flatten().tolist()) <= set(b.flatten().tolist()) | {0.0}


def test_a_random_crop_pads_with_normalised_black_and_keeps_the_image_exact():
    """As torchvision's RandomCrop(padding=4) before Normalize (the RP authors', Wang et al.'s): the
    padding is a raw black pixel normalised, (0 - mean) / std per channel, not 0 (the mean colour);
    the image's own pixels come through bit for bit, and the random draws are those of a crop
    without a fill (the same shifts and flips)."""
    mean, std = (torch.tensor(c).view(1, 3, 1, 1) for c in datasets.FIXED_STATS["cifar10"])
    raw = torch.rand(5, 3, 6, 6, generator=torch.Generator().manual_seed(1))
    data = DeviceData(raw, torch.arange(5) % 2, "cpu", mean=mean, std=std)
    black = (0 - mean) / std
    one_black_pixel = DeviceData(torch.zeros(1, 3, 1, 1), torch.zeros(1, dtype=torch.long), "cpu", mean=mean, std=std)
    assert torch.equal(data.black, black) and torch.equal(data.black, one_black_pixel.x)
    pad = 2
    out = training._crop_flip(data.x, torch.Generator().manual_seed(3), pad, data.black)
    plain = training._crop_flip(data.x, torch.Generator().manual_seed(3), pad)  # zero padding, same draws
    # which output pixels come from the image: an image of ones, zero-padded, cropped with the same draws
    inside = training._crop_flip(torch.ones(5, 1, 6, 6), torch.Generator().manual_seed(3), pad).bool().expand_as(out)
    assert (~inside).any() and inside.any()
    assert torch.equal(out[inside], plain[inside])  # the image's pixels, exactly, where they were
    assert torch.equal(out, torch.where(inside, out, black.expand_as(out)))  # the border: black per channel
    assert not torch.equal(out, plain)
    # an all-black raw image crops to all black, whatever the shift
    dark = DeviceData(torch.zeros(4, 3, 6, 6), torch.arange(4) % 2, "cpu", mean=mean, std=std)
    xb = dark.augment(dark.take(torch.arange(4))[0], torch.Generator().manual_seed(0), pad=3)
    assert torch.equal(xb, black.expand_as(xb))


def test_bf16_autocast_trains_on_the_cpu_too():
    model, train, test = _tiny()
    run = fit(model, train, test, Recipe(optimizer="sgd", lr=0.05, momentum=0.9, epochs=4, batch_size=32,
                                         precision="bf16", schedule="constant"), seed=4)
    assert not run.diverged and run.final["test_acc"] > 0.8
    assert Recipe(precision="auto").autocast_dtype(torch.device("cpu")) is None
    assert Recipe(precision="auto").autocast_dtype(torch.device("cuda")) is torch.bfloat16


# --- checkpoints know their run (training.Checkpoint, provenance) ------------------------------------


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path, caplog):
    """A finished run is reused only under its own fingerprint; another learning rate, seed or
    setting starts afresh, and the log names what changed."""
    from reluinit.fingerprint import settings_fingerprint
    from reluinit.training import Checkpoint

    settings = {"model": "ffnn", "recipe": {"lr": 0.05}, "dataset": "mnist", "scale": "quick",
                "resources": {"gpu": 1}}
    path = tmp_path / "run.pt"

    def train(lr, seed=1, **extra):
        model, tr, te = _tiny()
        ck = Checkpoint(path, settings_fingerprint({**settings, "recipe": {"lr": lr}, **extra}, seed=seed))
        run = fit(model, tr, te, Recipe(optimizer="sgd", lr=lr, epochs=2, batch_size=64, schedule="constant"),
                  seed=seed, checkpoint=ck)
        return run, model

    first, _ = train(0.05)
    caplog.clear()
    with caplog.at_level("INFO", logger="reluinit.training"):
        reused, _ = train(0.05, resources={"gpu": 0})  # bookkeeping is not part of the run
    assert "resumed from" in caplog.text and "epoch 1/" not in caplog.text
    import pandas as pd

    pd.testing.assert_frame_equal(pd.DataFrame(reused.history), pd.DataFrame(first.history))  # reused as it is
    caplog.clear()
    with caplog.at_level("INFO", logger="reluinit.training"):
        changed, _ = train(0.01)
    assert "recipe.lr 0.05 -> 0.01: starting afresh" in caplog.text and "resumed from" not in caplog.text
    assert changed.history[-1]["train_loss"] != first.history[-1]["train_loss"]
    assert training.load_checkpoint(path)["fingerprint"]["recipe"]["lr"] == 0.01  # the new run's now
    caplog.clear()
    with caplog.at_level("INFO", logger="reluinit.training"):
        train(0.01, seed=2)
    assert "run.seed 1 -> 2: starting afresh" in caplog.text


def test_a_bare_checkpoint_path_is_fingerprinted_by_seed_and_recipe(tmp_path, caplog):
    path = tmp_path / "run.pt"
    model, tr, te = _tiny()
    fit(model, tr, te, Recipe(lr=0.05, epochs=1, batch_size=64), seed=1, checkpoint=path)
    state = training.load_checkpoint(path)
    assert state["fingerprint"]["format"] == training.CHECKPOINT_FORMAT and state["fingerprint"]["seed"] == 1
    with caplog.at_level("INFO", logger="reluinit.training"):
        model, tr, te = _tiny()
        fit(model, tr, te, Recipe(lr=0.05, epochs=1, batch_size=32), seed=1, checkpoint=path)
    assert "recipe.batch_size 64 -> 32: starting afresh" in caplog.text


def test_lr_training_resumes_only_its_own_run(tmp_path, caplog):
    """The `train` rule's runs: a finished run of the same spec is reused, another spec retrains."""
    path = tmp_path / "d2w16-run0.pt"
    spec = _spec(epochs=2, checkpoints=[0, 2])
    first = lr_train.train_classifier(spec, "d2w16", seed=5, device="cpu", resume=path, run=0)
    with caplog.at_level("INFO", logger="reluinit.training"):
        again = lr_train.train_classifier(spec, "d2w16", seed=5, device="cpu", resume=path, run=0)
    assert "resumed from" in caplog.text
    assert all(torch.equal(a, b) for a, b in zip(first[-1]["weights"], again[-1]["weights"]))
    assert first[-1]["fingerprint"]["recipe"]["lr"] == spec["recipe"]["lr"]
    caplog.clear()
    with caplog.at_level("INFO", logger="reluinit.training"):
        other = lr_train.train_classifier({**spec, "recipe": {**spec["recipe"], "lr": 5e-3}}, "d2w16", seed=5,
                                          device="cpu", resume=path, run=0)
    assert "recipe.lr 0.01 -> 0.005: starting afresh" in caplog.text
    assert not torch.equal(first[-1]["weights"][0], other[-1]["weights"][0])


def test_cifar_is_normalised_with_the_rp_authors_fixed_constants_when_asked():
    """RP's tables normalise CIFAR with fixed constants (the authors' code), not data statistics."""
    from unittest import mock

    x = torch.rand(6, 3, 4, 4)
    split = datasets.Split(x, torch.arange(6) % 3, "cifar10")
    with mock.patch.object(datasets, "load", return_value=split):
        s = {"dataset": "cifar10", "data_dir": "unused", "scale": "paper"}
        fixed, _, _ = training.load_data(s, "cpu", fixed_stats=True)
        own, _, _ = training.load_data(s, "cpu")
    mean, std = (torch.tensor(c).view(1, 3, 1, 1) for c in datasets.FIXED_STATS["cifar10"])
    assert torch.allclose(fixed.x, (x - mean) / std)
    assert torch.allclose(own.x.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-6)  # its own statistics
    # CIFAR-100 with its own constants (the authors' utils/data_utils.py), not CIFAR-10's
    assert datasets.FIXED_STATS["cifar100"] == ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))
    assert datasets.FIXED_STATS["cifar10"] == ((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))
    for name in ("cifar10", "cifar100"):  # a smoke stand-in normalises as its dataset does
        assert datasets.FIXED_STATS[datasets.SMOKE_STAND_INS[name]] == datasets.FIXED_STATS[name]
    with mock.patch.object(datasets, "load", return_value=datasets.Split(x, torch.arange(6) % 3, "cifar100")):
        hundred, _, _ = training.load_data({**s, "dataset": "cifar100"}, "cpu", fixed_stats=True)
    mean, std = (torch.tensor(c).view(1, 3, 1, 1) for c in datasets.FIXED_STATS["cifar100"])
    assert torch.allclose(hundred.x, (x - mean) / std)


def test_a_recipes_precision_sets_tf32_for_the_run_and_restores_it():
    """fp32 means fp32: TF32 off in matmuls and convolutions while the run trains (PyTorch's
    default lets convolutions use it), on for ``tf32``; the flags are put back afterwards."""
    model, train, test = _tiny()

    def flags():
        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    old = flags()
    try:
        for precision, outside, inside in (("fp32", True, False), ("tf32", False, True), ("bf16", True, False)):
            seen = []
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = outside
            fit(model, train, test, Recipe(optimizer="sgd", lr=0.01, iterations=2, batch_size=32, precision=precision),
                seed=0, on_epoch=lambda epoch, m, seen=seen: seen.append(flags()) or [])
            assert set(seen) == {(inside, inside)}, precision
            assert flags() == (outside, outside), precision
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
    with pytest.raises(ValueError, match="fp32, tf32, bf16 or auto"):
        Recipe(precision="fp16").autocast_dtype(torch.device("cpu"))


def test_a_stop_inside_an_uninterrupted_block_waits_for_its_end():
    """A ``Control``'s ``interrupt`` (what the harvest's and a job's signal handlers call) raises at
    once outside the block and at its end inside (nested blocks: the outermost's); an error of the
    block itself goes on, and the stop it held does not fire in a later block; another control's
    block does not hold it."""
    class Stop(BaseException):
        pass

    control = training.Control()
    with pytest.raises(Stop):
        control.interrupt(Stop())
    done = []
    with pytest.raises(Stop):
        with control.uninterrupted():
            with control.uninterrupted():
                control.interrupt(Stop())
                done.append("inner")
            done.append("outer")
    assert done == ["inner", "outer"]
    with pytest.raises(OSError):
        with control.uninterrupted():
            control.interrupt(Stop())
            raise OSError("disk full")
    with control.uninterrupted():
        done.append("later")
    assert done[-1] == "later"
    with training.Control().uninterrupted(), pytest.raises(Stop):
        control.interrupt(Stop())


def test_a_controls_deadline_stops_a_run_after_the_epoch_that_passes_it_and_it_resumes(tmp_path):
    """A run with a checkpoint stops with ``OutOfTime`` after its first epoch past the deadline (its
    checkpoint written), and resumes to the weights of a run never stopped; without a checkpoint a
    run trains to its end."""
    x, y = torch.randn(64, 4, dtype=torch.float64), torch.randint(0, 3, (64,))
    data = training.DeviceData(x, y, "cpu", dtype=torch.float64)
    recipe = training.Recipe(optimizer="sgd", lr=0.1, batch_size=16, epochs=3, schedule="constant")

    def spec(path=None):
        net = sample_mlp([4, 8, 3], "he", readout=True, seed=0, dtype=torch.float64).requires_grad_(True)
        return training.RunSpec(net, data, data, recipe, 0, path)

    past = training.Control(deadline=0.0)
    with pytest.raises(training.OutOfTime, match="checkpoint"):
        training.train_runs([spec(tmp_path / "a.pt")], control=past)
    assert torch.load(tmp_path / "a.pt", weights_only=True)["history"][-1]["epoch"] == 1
    resumed, never = spec(tmp_path / "a.pt"), spec()
    runs = training.train_runs([resumed, never], training.How(stack="never"))
    assert [r.final["epoch"] for r in runs] == [3, 3]
    assert all(torch.equal(p, q) for p, q in zip(resumed.model.state_dict().values(), never.model.state_dict().values()))


def test_a_full_disk_while_saving_a_checkpoint_is_a_full_disk_that_names_the_file(tmp_path, monkeypatch, caplog):
    """torch's writer, given a path, ended a full disk with ``RuntimeError: [enforce fail at
    inline_container.cc:672] unexpected pos`` and left a ``.pt.tmp``: written through a Python file,
    it is ENOSPC naming the checkpoint, the job says the disk is full, nothing half-written stays,
    and the previous checkpoint is intact."""
    import builtins
    import errno

    from reluinit import integrity
    from reluinit.pipeline import jobs

    path = tmp_path / "run.pt"
    training.save_checkpoint({"w": torch.arange(4.0)}, path)
    before = path.read_bytes()

    class Full:  # a disk with room for 1,000 bytes
        def __init__(self, f):
            self.f, self.room = f, 1000

        def write(self, b):
            if len(b) > self.room:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.room -= len(b)
            return self.f.write(b)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(training, "open", lambda p, mode: Full(builtins.open(p, mode)), raising=False)
    with pytest.raises(OSError) as err:
        training.save_checkpoint({"w": torch.randn(10_000)}, path)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt", integrity.seal_path(path).name]
    assert path.read_bytes() == before and torch.equal(training.load_checkpoint(path)["w"], torch.arange(4.0))
    with caplog.at_level("ERROR", logger="reluinit"):
        jobs._log_uncaught(OSError, err.value, None)
    assert f"the disk holding {tmp_path} is full (No space left on device, writing run.pt)" in caplog.text
