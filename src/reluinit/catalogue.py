"""What the pipeline builds, per paper, read from the experiment registry and the config, so that
neither the README's status table nor the experiment catalogue (``CATALOGUE.md``) can drift from
the code: ``python -m reluinit.catalogue`` prints the table, ``python -m reluinit.catalogue
catalogue > CATALOGUE.md`` writes the catalogue (tests/test_catalogue.py checks both are current).

The catalogue's prose (each id's place in its paper and what it shows) lives here, next to the
papers' public identifiers; its settings and status are read from ``config.yaml``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import experiments
from .config import settings


def _order(exp_id: str):
    """Figures, then tables, then theorems, each by number: TG-F3a after TG-F2, EP-F10 after EP-F9."""
    kind, number, rest = re.fullmatch(r"[A-Z]+-([A-Za-z]+)(\d+)(.*)", exp_id).groups()
    return ["F", "T", "Th"].index(kind) if kind in ("F", "T", "Th") else 9, int(number), rest


def status_table(config: dict) -> str:
    """A markdown table: each paper, the catalogue ids ``all`` builds (both scales) and the optional
    ones it leaves out."""
    by_paper: dict[str, list[str]] = {p: [] for p in experiments.PAPERS}
    for exp in config["experiments"]:
        by_paper[experiments.paper_of(exp)].append(exp)
    lines = ["| id | paper | built by `snakemake all` |", "|---|---|---|"]
    for paper, ids in by_paper.items():
        if not ids:
            continue
        ids = sorted(ids, key=_order)
        built = [e for e in ids if not settings(config, e, "paper").get("optional", False)]
        optional = [e for e in ids if e not in built]
        cell = ", ".join(built) + (f"; configured, optional: {', '.join(optional)}" if optional else "")
        lines.append(f"| {paper} | {experiments.PAPERS[paper]} | {cell} |")
    return "\n".join(lines)


# --- the papers, by their public identifiers ----------------------------------------------------

REFERENCES = {
    "TG": {
        "authors": "Ilan Price, Jared Tanner",
        "venue": "IEEE International Conference on Machine Learning and Applications (ICMLA) 2021",
        "url": "https://arxiv.org/abs/1911.10651",
        "id": "arXiv:1911.10651",
    },
    "EP": {
        "authors": "Maithra Raghu, Ben Poole, Jon Kleinberg, Surya Ganguli, Jascha Sohl-Dickstein",
        "venue": "ICML 2017 (PMLR 70)",
        "url": "https://arxiv.org/abs/1606.05336",
        "id": "arXiv:1606.05336",
    },
    "OP": {
        "authors": "Devansh Arpit, Yoshua Bengio",
        "venue": "preprint, 2019",
        "url": "https://arxiv.org/abs/1901.03611",
        "id": "arXiv:1901.03611",
    },
    "LR": {
        "authors": "Boris Hanin, David Rolnick",
        "venue": "ICML 2019",
        "url": "https://arxiv.org/abs/1901.09021",
        "id": "arXiv:1901.09021",
    },
    "RP": {
        "authors": "Soufiane Hayou, Jean-Francois Ton, Arnaud Doucet, Yee Whye Teh",
        "venue": "ICLR 2021",
        "url": "https://openreview.net/forum?id=vXj_ucZQ4hA",
        "id": "OpenReview vXj_ucZQ4hA",
    },
}

# --- each catalogue id: where it is in its paper, and what it shows (our words) ----------------

ENTRIES = {
    "TG-F1": ("Figure 1", "A circle through input space, its pre-activations projected to 2-D at the "
              "input, layer 6 and layer 12 of a ReLU net (σ_w = 2)."),
    "TG-F2": ("Figure 2", "Expected trajectory length per layer, one curve per density α, sparse-Gaussian "
              "weights at σ_w = 6 on a line between two MNIST test points."),
    "TG-F3a": ("Figure 3a", "Growth factor E[‖dz(d+1)‖/‖dz(d)‖] vs σ_w at α = 0.5 for Gaussian, uniform and "
               "discrete weights, with the lower bounds of Corollaries 1-3."),
    "TG-F3b": ("Figure 3b", "The same growth factor vs α at σ_w = 2."),
    "TG-F4": ("Figure 4", "E‖u_J‖ vs α for a vector uniform on the sphere (≈ √α) and a one-hot one (= α)."),
    "TG-F5": ("Figure 5", "TG-F3a and b between random points of R^500, on straight lines and on curved "
              "paths (semicircles in random planes)."),
    "TG-F6": ("Figure 6", "Growth factor of trained nets vs their post-training σ_w, for lines within a "
              "class and between classes; the same nets before training in black."),
    "EP-F1": ("Figure 1", "Regions of input space (R²) cut by a 3-hidden-layer ReLU net of width 4, "
              "layer by layer."),
    "EP-F2": ("Figure 2", "Transitions along a circle vs depth and vs width for several σ_w², hard-tanh "
              "and ReLU."),
    "EP-F3": ("Figure 3", "A circle projected to 2-D after each layer of a tanh net of width 100."),
    "EP-F4": ("Figure 4", "Trajectory length after each block of a CIFAR-10 conv net at initialization, "
              "several σ_w²."),
    "EP-F5": ("Figure 5", "Transitions vs trajectory length for several widths and σ_w² (hard-tanh)."),
    "EP-F6": ("Figure 6", "Accuracy of a trained CIFAR-10 conv net vs noise added to one layer at a time."),
    "EP-F7": ("Figure 7", "Train and test accuracy of an MNIST net when only one hidden layer is trained."),
    "EP-F8": ("Figure 8", "Trajectory length per layer through training of a conv net without batch norm."),
    "EP-F9": ("Figure 9", "Each layer's weight scale σ_w through the same training."),
    "EP-F10": ("Figure 10", "As EP-F8 with batch norm."),
    "EP-F11": ("Figure 11", "Accuracy through training: plain, batch norm, trajectory regularization."),
    "EP-F12": ("Figure 12", "Trajectory length per layer of fully connected ReLU nets, several σ_w² and "
               "widths, on MNIST inputs."),
    "EP-F13": ("Figure 13", "Hard-tanh lengths per layer by width and by σ_w², and the growth ratio "
               "between Theorem 3's bounds."),
    "EP-F14": ("Figure 14", "Dichotomies of 15 inputs as the first layer's weights sweep a great circle, "
               "vs depth and vs width."),
    "EP-F15": ("Figure 15", "Dichotomies vs remaining depth when the swept layer moves up the net."),
    "EP-F16": ("Figure 16", "Unique dichotomies vs transitions, beside a random walk flipping one label "
               "per transition."),
    "EP-F17": ("Figure 17", "As EP-F7 on CIFAR-10."),
    "EP-F18": ("Figure 18", "Trajectory length per layer through training of an MNIST fully connected net "
               "started at small σ_w."),
    "OP-F1": ("Figure 1", "Per layer, ‖h_l‖/‖x‖ and ‖∂ℓ/∂W_l‖_F/(‖δ‖‖x‖) over random inputs, He vs Glorot, "
              "several widths."),
    "OP-F2": ("Figure 2", "Measured distortion ε vs width of a one-hidden-layer net, against the ε that "
              "Lemma 2 (forward) and Lemma 5 (backward) guarantee."),
    "OP-F3": ("Figure 3", "Gradient ratio per layer when the layers' widths vary around a centre."),
    "LR-F1": ("Figure 1", "The exact regions of a ReLU net with 2-D input at initialization."),
    "LR-F2": ("Figure 2", "The same for a second net."),
    "LR-F3": ("Figure 3", "Telgarsky's sawtooth, exact and with small weight noise: its pieces counted."),
    "LR-F4": ("Figure 4", "The piecewise-linear function of a net with 1-D input at initialization."),
    "LR-F5": ("Figure 5", "Regions along lines through training examples, divided by the number of "
              "neurons, through training, several architectures."),
    "LR-F6": ("Figure 6", "Mean distance to the nearest region boundary through training, against "
              "C/#neurons; scaled by #neurons; vs test accuracy."),
    "LR-F7": ("Figure 7", "Histogram of log10 distances to the nearest boundary through training."),
    "LR-F8": ("Figure 8", "Regions in the plane through three training images (digits 0, 1, 2), through "
              "training."),
    "RP-F1": ("Figure 1", "Share of incoming weights each neuron keeps after SBP at 70% sparsity, at the "
              "edge of chaos vs in the chaotic phase."),
    "RP-F2": ("Figure 2", "Percent of weights kept per layer after SBP: ResNet32 vs Stable ResNet32."),
    "RP-F3": ("Figure 3", "Test accuracy over depth × sparsity of tanh FFNNs on MNIST: EOC with "
              "rescaling, EOC, ordered phase."),
    "RP-F4": ("Figure 4 (appendix)", "RP-F2 as the percent pruned per layer."),
    "RP-F5": ("Figure 5 (appendix)", "RP-F3 for ELU and tanh."),
    "RP-T1": ("Table 1", "CIFAR-10 accuracy of SNIP vs SBP-SR on ResNet32/50/104 at 90 to 99.9% sparsity."),
    "RP-T2": ("Table 2", "CIFAR-10 and CIFAR-100 accuracy of every pruner at 90, 95 and 98% sparsity."),
    "RP-T3": ("Table 3", "The same on Tiny ImageNet at 85, 90 and 95%."),
    "RP-T4": ("Table 4", "A vanilla CNN on MNIST at 50% sparsity: ordered, EOC, EOC with rescaling."),
    "RP-T5": ("Table 5", "VGG16 and 3xVGG16 on CIFAR-10: SNIP, SynFlow, EOC with rescaling."),
    "RP-T7": ("Table 7 (appendix)", "Critical sparsity of magnitude pruning vs Proposition 4's bound, "
              "first layer's variance divided by γ."),
    "RP-T8": ("Table 8 (appendix)", "ResNet50 on ImageNet, 90 epochs."),
    "RP-T9": ("Table 9 (appendix)", "ReLU vs tanh ResNets on CIFAR-10, SBP-SR vs SNIP, 90 to 99.9%."),
    "RP-Th1": ("Section 2, Theorem 1", "Critical sparsity of SBP in the ordered phase (κ = 0.2, L = N = 100) "
               "vs the theorem's bound."),
    "X-F1": ("ours", "Regions per line / #neurons (LR) and transitions (EP) vs depth at fixed width, "
             "σ_w² in {2, 4, 8, 16}, ReLU and hard-tanh."),
}


def _fmt(value) -> str:
    """A setting as compact YAML-like text for one table cell."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value).replace("|", "\\|")


def _block(block: dict | None) -> str:
    return "; ".join(f"{k}: {_fmt(v)}" for k, v in (block or {}).items()) or "as paper"


def _status(config: dict, exp: str) -> str:
    block = config["experiments"][exp]["paper"]
    e = experiments.get(exp)
    words = ["optional: not built by `all`" if block.get("optional") else "built by `all`"]
    if e.source:
        words.append(f"drawn from {e.source}'s runs")
    elif e.trains:
        words.append("trains its nets")
    if "training" in block:
        words.append(f"measures trained nets `{block['training']}`")
    return "; ".join(words)


def catalogue_markdown(config: dict) -> str:
    """The whole experiment catalogue: per paper its public link, then per id its place in the
    paper, what it shows, its settings at both scales (the quick column lists only what that
    scale changes) and whether ``all`` builds it."""
    missing = [e for e in config["experiments"] if e not in ENTRIES]
    if missing:
        raise KeyError(f"no catalogue entry for {missing}: add them to reluinit.catalogue.ENTRIES")
    by_paper: dict[str, list[str]] = {p: [] for p in experiments.PAPERS}
    for exp in config["experiments"]:
        by_paper[experiments.paper_of(exp)].append(exp)
    out = [
        "# Experiment catalogue",
        "",
        "<!-- generated by `python -m reluinit.catalogue catalogue > CATALOGUE.md` from the experiment",
        "     registry and config.yaml; tests/test_catalogue.py checks it is current. Do not edit. -->",
        "",
        "Every figure and table of the five papers this pipeline rebuilds, by its stable id. Build one",
        "with `snakemake <id in lower case, - as _> --cores 2` (e.g. `snakemake op_f1`), add",
        "`--config scale=quick` after it for the small settings. *Paper scale* lists the experiment's",
        "`paper:` block in `config.yaml`; *quick scale* lists only what its `quick:` block changes.",
        "Named recipes and training specs are under `recipes:` and `training:` in the same file.",
    ]
    for paper, ids in by_paper.items():
        if not ids:
            continue
        ref = REFERENCES.get(paper)
        out += ["", f"## {paper}: {experiments.PAPERS[paper]}", ""]
        if ref:
            out += [f"{ref['authors']}. {ref['venue']}. [{ref['id']}]({ref['url']})", ""]
        out += ["| id | place | what | paper scale | quick scale | status |", "|---|---|---|---|---|---|"]
        for exp in sorted(ids, key=_order):
            place, what = ENTRIES[exp]
            block = config["experiments"][exp]
            source = experiments.get(exp).source
            paper_cell = _block(block["paper"]) if block["paper"] or not source else f"{source}'s settings"
            out.append(f"| {exp} | {place} | {what} | {paper_cell} | {_block(block.get('quick'))} "
                       f"| {_status(config, exp)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    import yaml

    what = argv.pop(0) if argv and argv[0] in ("status", "catalogue") else "status"
    path = Path(argv[0]) if argv else Path("config.yaml")
    config = yaml.safe_load(path.read_text())
    print(status_table(config) if what == "status" else catalogue_markdown(config).rstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1:])
