import math

import torch

from reluinit import training
from reluinit.nets import sample_mlp


def _spec(**over):
    return {"seed": 1, "dataset": "mnist", "architectures": ["d2w16"], "runs": 1, "epochs": 3,
            "checkpoints": [0, 3], "lr": 1e-2, "batch_size": 32, "init": "he", "bias_std": 1e-3,
            "data_dir": "unused", "scale": "quick", **over}


def test_training_learns_and_checkpoints_round_trip(tmp_path):
    states = training.train_classifier(_spec(), "d2w16", seed=5, device="cpu")
    assert [s["epoch"] for s in states] == [0, 3]
    assert states[0]["dataset"] == "digits"  # the quick scale's stand-in for MNIST, recorded
    assert states[-1]["test_acc"] > 0.8 > states[0]["test_acc"]
    training.save(states, tmp_path / "net.pt")
    loaded = training.load(tmp_path / "net.pt")  # weights_only=True
    net = training.restore(loaded[-1])
    x = torch.rand(7, 64, dtype=torch.float64)
    assert torch.equal(net.forward(x)[1], training.restore(states[-1]).forward(x)[1])


def test_same_seed_same_net():
    a = training.train_classifier(_spec(epochs=1, checkpoints=[1]), "d2w16", seed=3)
    b = training.train_classifier(_spec(epochs=1, checkpoints=[1]), "d2w16", seed=3)
    assert all(torch.equal(u, v) for u, v in zip(a[0]["weights"], b[0]["weights"]))


def test_divergence_is_a_result_not_a_crash():
    net = sample_mlp([4, 8, 3], "he", readout=True, seed=0, dtype=torch.float64)
    x = torch.randn(64, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (64,))
    net.weights[0] *= float("inf")
    states = training.train_adam(net, (x, y), (x, y), epochs=2, lr=1e-3, batch_size=16, seed=0, checkpoints=[2])
    assert states[-1]["diverged"] and math.isnan(states[-1]["train_loss"])
    assert states[-1]["test_acc"] == 1 / 3
