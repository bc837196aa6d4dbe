"""RP's GPU tables as a cluster job prunes them, checked on the CPU: magnitude pruning's init keeps
the classifier, GraSP scores the authors' batches, the rescaling trick at either scale, the masks of
several sparsities from one scoring equal one ``prune`` each, and the mask audit's rows."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from reluinit import datasets
from reluinit.experiments import rp_train
from reluinit.models import build
from reluinit.pruning import collapse, prune, prune_each, prune_with_s_cr, rescale
from reluinit.tools import mask_audit


def _cifar_run(method: str, model: str = "resnet32", dataset: str = "cifar10") -> dict:
    return {"activation": "relu", "init": "he", "dataset": dataset, "model": model, "width": None,
            "method": method, "sparsity": 0.98, "rep": 0, "seed": 0, "key": f"{model}-{method}"}


def test_magnitude_pruning_at_the_paper_size_keeps_the_classifier_the_authors_init_would_empty():
    """RP-T2's MBP cells: on the paper's ResNet32 (doubled filters) a global magnitude threshold at
    98% sparsity keeps none of the classifier's 1,280 weights under the authors' init (N(0, 0.01^2)
    against convs of std 0.04 to 0.27), so the net could only guess one class; the MBP run's own
    init (Kaiming by fan-in everywhere) keeps a share of every layer."""
    split, _ = mask_audit.stand_in("cifar10", 1)
    s = {"batch_per_class": 1}
    model, name, _, _ = rp_train.run_model(s, _cifar_run("mbp"), split)
    fc = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].weight.detach()
    assert abs(float(fc.std()) - (2 / fc.shape[1]) ** 0.5) < 0.01  # He by fan-in, not the authors' 0.01
    kept = prune(model, "magnitude", 0.02)
    assert not collapse(kept) and all(m.any() for m in kept.values())
    authors, _, _, _ = rp_train.run_model(s, _cifar_run("random"), split)  # the other methods' init
    emptied = prune(authors, "magnitude", 0.02)
    assert not list(emptied.values())[-1].any() and collapse(emptied).startswith("the classifier")


def test_grasp_scores_the_authors_draws_cut_into_class_sorted_halves():
    """``pruning_batch``: GraSP of a dataset with a ``grasp_batch`` gets ``draws`` class-balanced
    draws of ``per_class`` images, each cut into the half with the first classes and the half with
    the last; draw 0 is SNIP's batch; without an entry GraSP scores SNIP's one batch."""
    split, norm = mask_audit.stand_in("cifar100", 10)
    s = {"batch_per_class": 10, "dataset": "cifar100", "grasp_batch": {"cifar100": {"per_class": 5, "draws": 2}}}
    run = _cifar_run("grasp", dataset="cifar100")
    batch = rp_train.pruning_batch(s, run, "grasp", norm, split, "cpu")
    halves = batch["data"]
    assert len(halves) == 4 and batch["in_shape"] == (3, 32, 32)
    for x, y in halves:
        assert len(y) == 250 and x.shape == (250, 3, 32, 32)
    assert set(halves[0][1].tolist()) == set(range(50)) and set(halves[1][1].tolist()) == set(range(50, 100))
    first, _ = datasets.balanced_batch(split, 5, run["seed"])
    assert torch.equal(halves[0][0], (first[:250] - norm.mean) / norm.std)
    assert not torch.equal(halves[0][0], halves[2][0])  # the second draw is another one
    snip = rp_train.pruning_batch(s, run, "snip", norm, split, "cpu")
    assert set(snip) == {"x", "y", "in_shape"} and len(snip["y"]) == 1000
    plain = rp_train.pruning_batch({**s, "grasp_batch": {}}, run, "grasp", norm, split, "cpu")
    assert torch.equal(plain["x"], snip["x"])


@pytest.mark.parametrize("method, name, batches", [
    ("random", "resnet8", 0), ("magnitude", "vgg16", 0), ("synflow", "resnet8", 0), ("snip", "resnet8", 1),
    ("snip", "vgg16", 2), ("grasp", "resnet8", 1), ("grasp", "resnet8", 2)])
def test_masks_of_several_sparsities_from_one_scoring_equal_one_prune_each(method, name, batches):
    """``prune_each`` (the mask audit's: one scoring per net) gives at every density the masks and
    s_cr of its own ``prune_with_s_cr`` call, on a ResNet and on a VGG's batch-norm-free view, with
    no data, one batch (prune's own path) and two (``data=``, GraSP's halves)."""
    torch.manual_seed(0)
    x, y = torch.randn(20, 3, 16, 16), torch.arange(10).repeat(2)
    model = build(name, 10, (3, 16, 16))
    data = [{"in_shape": (3, 16, 16)}, {"x": x, "y": y}, {"data": [(x[:10], y[:10]), (x[10:], y[10:])]}][batches]
    kw = dict(seed=3, rounds=4)
    each = prune_each(model, method, [0.5, 0.02], **data, **kw)
    for d, (masks, s_cr) in zip([0.5, 0.02], each):
        one, one_s_cr = prune_with_s_cr(model, method, d, **data, **kw)
        assert list(masks) == list(one) and all(torch.equal(masks[n], one[n]) for n in one), d
        assert s_cr == one_s_cr or (s_cr != s_cr and one_s_cr != one_s_cr)


def test_the_rescaling_trick_at_the_papers_scale_and_at_the_authors():
    """Eq. 7 (``eq7``) leaves each kept (output channel, kernel position) slice of a 3x3 conv a sum
    of squares of sigma_w^2 / 9 and each linear row sigma_w^2; the authors' scale (``authors``,
    pruner/SNIP.py) leaves 4 / (1 + 0.001 * 2 / |slice|)^2, about sigma_w^4 = 4: 18 times a conv
    slice's and twice a row's. Under batch norm the conv layers compute the same function."""
    torch.manual_seed(0)
    model = build("vgg16", 10, (3, 32, 32))
    masks = prune(model, "random", 0.3, seed=1)
    sums = {}
    for scale in ("eq7", "authors"):
        net = build("vgg16", 10, (3, 32, 32))
        net.load_state_dict(model.state_dict())
        rescale(net, masks, sigma_w=2 ** 0.5, scale=scale)
        w = {n: p.detach() * masks[n] for n, p in net.named_parameters() if n in masks}
        sums[scale] = {n: (t**2).sum(dim=1) for n, t in w.items()}
    conv, fc = list(masks)[0], list(masks)[-1]
    kept = masks[conv].any(dim=1)
    assert torch.allclose(sums["eq7"][conv][kept], torch.tensor(2 / 9), rtol=1e-5)
    assert torch.allclose(sums["eq7"][fc], torch.tensor(2.0), rtol=1e-5)
    before = ((model.state_dict()[conv] * masks[conv]) ** 2).sum(dim=1)[kept].sqrt()  # each slice's norm
    norm = sums["authors"][conv][kept].sqrt()
    assert torch.allclose(norm, 2 / (1 + 0.002 / before), rtol=1e-5) and (norm < 2).all()
    assert torch.allclose(sums["authors"][conv][kept] / sums["eq7"][conv][kept], 18 / (1 + 0.002 / before) ** 2)
    with pytest.raises(ValueError, match="scale must be one of"):
        rescale(model, masks, sigma_w=1.0, scale="four")


def test_the_mask_audit_prunes_a_tables_nets_as_their_jobs_do(tmp_path):
    """The audit at the quick scale for RP-T2 on CIFAR-10: one row per (model, method, sparsity,
    layer), the data-free pruners not marked stand-in, the paper's value beside each cell where the
    claim has one, and an MBP net keeping its classifier; the masks of a data-free cell are those of
    the prune job of a run with seed 0."""
    from reluinit.pipeline import plan
    from reluinit.pipeline.config import read_yaml

    config = read_yaml("config.yaml")
    config["experiments"]["RP-T2"]["quick"].update(methods=["mbp", "random", "snip"])
    out = tmp_path / "audit.csv"
    audit = mask_audit.run(config, ["RP-T2"], "quick", out)
    assert out.exists() and set(audit["method"]) == {"mbp", "random", "snip"}
    assert not audit.loc[audit["method"] != "snip", "stand_in"].any() and audit.loc[audit["method"] == "snip", "stand_in"].all()
    mbp = audit[audit["method"] == "mbp"]
    assert (mbp["classifier_kept"] > 0).all() and (mbp["init"] == "he").all()
    assert (audit["chance"] == 10).all()
    again = mask_audit.run(config, ["RP-T2"], "quick", out)  # a rerun skips the nets it has
    pd.testing.assert_frame_equal(again.reset_index(drop=True), pd.read_csv(out).fillna({"collapse": ""}),
                                  check_dtype=False)
    assert list(plan.collapsed_cells(audit).columns)[:6] == ["table", "dataset", "model", "activation", "method",
                                                             "sparsity"]


def test_a_collapsed_net_says_so_in_words():
    masks = {"a.weight": torch.ones(3, 3, dtype=torch.bool), "b.weight": torch.zeros(3, 3, dtype=torch.bool),
             "fc.weight": torch.zeros(2, 3, dtype=torch.bool)}
    said = collapse(masks)
    assert said.startswith("the classifier fc.weight keeps none of its 6 weights") and "b.weight" in said
    assert collapse({"a.weight": torch.ones(2, 2, dtype=torch.bool)}) == ""


@pytest.mark.parametrize("emptied, joined", [
    (["blocks.1.shortcut.0.weight"], True),  # the branch beside it still carries the signal
    (["blocks.1.shortcut.0.weight", "blocks.1.branch.3.weight"], False),  # both paths of a block cut
    (["stem.0.weight"], False),  # every path starts there
    ([], True)])
def test_connected_tells_a_cut_net_from_one_with_a_path_around_an_emptied_layer(emptied, joined):
    """``connected`` against brute force: a ResNet whose masks cut every path gives the same output
    for any two inputs (eval mode), one with a path left gives different ones; an emptied shortcut
    with its block's branch kept is such a path, and ``collapse`` says the net can still learn."""
    from reluinit.pruning import apply_masks, connected, prunable

    torch.manual_seed(0)
    net = build("resnet8", 10, (3, 8, 8))
    masks = {n: torch.zeros_like(w, dtype=torch.bool) if n in emptied else torch.ones_like(w, dtype=torch.bool)
             for n, w in prunable(net).items()}
    assert connected(net, masks, (3, 8, 8)) is joined
    apply_masks(net, masks)
    net.eval()
    with torch.no_grad():
        a, b = net(torch.randn(2, 3, 8, 8)), net(torch.randn(2, 3, 8, 8))
    assert (not torch.allclose(a, b)) is joined
    said = collapse(masks, joined)
    assert said == "" if not emptied else ("it can learn" in said) is joined


def test_the_committed_mask_audit_covers_every_cell_of_the_gpu_tables_at_the_papers_sizes():
    """``reference/paper/RP/mask-audit.csv.gz`` holds exactly the cells the paper scale trains in
    RP-T1, T2, T3, T5 and T9 (``mask_audit.nets``, which prunes nothing); every MBP cell keeps
    classifier weights; no cell of a data-free pruner (its masks are a cluster job's) leaves its net
    at chance. Fails when the config gains a cell the audit has not pruned."""
    from conftest import ROOT
    from reluinit.pipeline.config import read_yaml

    key = ["table", "dataset", "model", "activation", "method", "sparsity"]
    config = read_yaml(ROOT / "config.yaml")
    wanted = {(table, run["dataset"], run["model"], run["activation"], run["method"], round(float(sp), 6))
              for table, _, run, sparsities in mask_audit.nets(config, list(mask_audit.TABLES), "paper")
              for sp in sparsities}
    audit = pd.read_csv(ROOT / "reference" / "paper" / "RP" / "mask-audit.csv.gz", keep_default_na=False,
                        na_values=[""])
    cells = audit.drop_duplicates(key)
    have = {(*row[:5], round(float(row[5]), 6)) for row in cells[key].itertuples(index=False)}
    assert len(wanted) == 242 and have == wanted
    mbp = cells[cells["method"] == "mbp"]
    assert len(mbp) == 18 and (mbp["classifier_kept"] > 0).all()
    data_free = cells[cells["pruner"].isin(mask_audit.DATA_FREE)]
    assert len(data_free) == 69 and not data_free["at_chance"].astype(str).eq("True").any()
