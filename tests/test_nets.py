import math

import pytest
import torch

from reluinit.inits import SCHEMES, weight_std
from reluinit.nets import sample_mlp


def test_shapes_and_seed_reproducibility():
    a = sample_mlp([5, 7, 3], "he", readout=True, seed=4)
    b = sample_mlp([5, 7, 3], "he", readout=True, seed=4)
    c = sample_mlp([5, 7, 3], "he", readout=True, seed=5)
    assert [w.shape for w in a.weights] == [(7, 5), (3, 7)]
    assert a.widths == [5, 7, 3] and a.n_hidden == 1
    assert all(torch.equal(x, y) for x, y in zip(a.weights, b.weights))
    assert not torch.equal(a.weights[0], c.weights[0])


@pytest.mark.parametrize("init,hidden_var,readout_var", [
    ("he", 2 / 300, 2 / 600),            # 2 / fan_in everywhere
    ("he_fan_out", 2 / 600, 2 / 600),    # 2 / width of the ReLU layer touched
    ("glorot", 2 / 900, 2 / 610),         # 2 / (fan_in + fan_out)
])
def test_init_variances(init, hidden_var, readout_var):
    net = sample_mlp([300, 600, 10], init, readout=True, seed=0, dtype=torch.float64)
    # 180k and 6k draws: the sample variance is within 3% and 10% of the target.
    assert net.weights[0].var().item() == pytest.approx(hidden_var, rel=0.03)
    assert net.weights[1].var().item() == pytest.approx(readout_var, rel=0.1)


def test_lemma1_norm_preserved_in_expectation():
    """OP Lemma 1: with variance 2/m (fan-out), E‖ReLU(Ru)‖² = ‖u‖² for any fixed u."""
    u = torch.randn(50, dtype=torch.float64)
    sq = []
    for seed in range(400):
        net = sample_mlp([50, 200], "he_fan_out", seed=seed, dtype=torch.float64)
        _, h = net.preactivations(u[None])
        sq.append(h.square().sum().item() / u.square().sum().item())
    sq = torch.tensor(sq)
    # Per net, the ratio has variance 5/m = 0.025; over 400 nets the mean's std is 0.008.
    assert sq.mean().item() == pytest.approx(1.0, abs=0.03)
    assert sq.var().item() == pytest.approx(5 / 200, rel=0.25)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown init"):
        sample_mlp([2, 2], "lecun", seed=0)
    with pytest.raises(ValueError, match="positive"):
        sample_mlp([2, -1], "he", seed=0)
    assert set(SCHEMES) >= {"he", "he_fan_out", "glorot", "kaiming_fan_out", "sigma"}
    assert math.isclose(weight_std("he", 8, 2), 0.5)


def test_one_scheme_one_formula_for_an_mlp_and_any_torch_model():
    """``inits`` is the one home of the schemes: the MLP sampler and ``initialize`` on a torch model
    give layers of the same standard deviation (He by fan-in, Glorot, OP's fan-out He, sigma_w)."""
    from reluinit import inits, models

    for scheme, kw in [("he", {}), ("glorot", {}), ("sigma", {"sigma_w": 1.5})]:
        net = sample_mlp([400, 300, 200], scheme if scheme != "sigma" else "gaussian", seed=0, **kw)
        model = inits.initialize(models.ffnn(400, 300, 1, 200, bias=False), scheme, seed=0, **kw)
        for a, b in zip(net.weights, [m.weight for _, m in inits.weight_layers(model)]):
            assert math.isclose(float(a.std()), float(b.std()), rel_tol=0.02), scheme
    assert math.isclose(weight_std("he_fan_out", 100, 400), math.sqrt(2 / 400))
    assert math.isclose(weight_std("he_fan_out", 100, 400, readout=True), math.sqrt(2 / 100))
    assert weight_std("kaiming_fan_out", 27, 9 * 16, conv=True) == math.sqrt(2 / 144)
    assert weight_std("kaiming_fan_out", 64, 10) == 0.01
