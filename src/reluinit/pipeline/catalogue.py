"""The experiment catalogue: every figure and table id the pipeline rebuilds, with its paper, its
place in the paper, what it shows, and the module and functions that compute and plot it.

This is the one place an id is wired to code: each ``Entry`` names its module and each role's
function (``parts``, ``measure``, ``figure``, ``summary``, and ``masks`` where it prunes), and
``get("TG-F2")`` imports ``reluinit.experiments.tg`` and returns its ``f2_parts`` and ``f2_measure``,
with ``f2_figure`` and ``f2_summary`` from ``reluinit.figures.tg`` (docs/adding-an-experiment.md).
Nothing registers itself on import, and the library never imports the experiments: only ``get``
reaches them, by name.

The same table writes the README's status table (``python -m reluinit.pipeline.catalogue``) and
``CATALOGUE.md`` (``python -m reluinit.pipeline.catalogue catalogue > CATALOGUE.md``) with the settings read
from ``config.yaml``; tests/test_catalogue.py checks that both are current and that the
catalogue, ``config.yaml``, its schema and the shared experiment list name the same ids."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import provenance

PACKAGE = __package__.rsplit(".", 1)[0]  # reluinit: the experiments and figures live beside this floor

PAPERS = {
    "TG": "Trajectory growth lower bounds for random sparse deep ReLU networks",
    "EP": "On the expressive power of deep neural networks",
    "OP": "The benefits of over-parameterization at initialization in deep ReLU networks",
    "LR": "Complexity of linear regions in deep networks",
    "RP": "Robust pruning at initialization",
    "X": "Across the papers (ours)",
}


def paper_of(exp_id: str) -> str:
    """``"OP-F1" -> "OP"``."""
    return exp_id.split("-", 1)[0]


@dataclass(frozen=True)
class Entry:
    """One catalogue id: where it is in its paper, what it shows, and where its code is: functions
    ``parts``, ``measure``, ``figure``, ``summary`` (and ``trained``) of ``reluinit.experiments.<module>``.
    ``trains``: its jobs train nets (rule ``train_part``); ``masks``: the function that prunes each
    part's nets (rule ``prune``), whose file its ``measure`` reads; ``source``: it plots another id's
    runs."""
    place: str
    module: str
    parts: str
    measure: str
    figure: str
    summary: str
    shows: str
    trains: bool = False
    trained: str | None = None
    masks: str | None = None
    source: str | None = None
    undefined: tuple[str, ...] = ()  # columns that may hold NaN or inf (``undefined``)


# What NaN (or inf) means in a column that may hold one (an entry's ``undefined``). A measured column
# outside these is refused when its table is written (``jobs.check_finite``), makes a claim that
# reads it "invalid", and each figure says how many of its values it could not draw.
UNDEFINED = {
    "growth": "no earlier length: the input layer, or a path collapsed to a point",
    "length_ratio": "no earlier length: the input layer, or a path collapsed to a point",
    "length_exact": "exact lengths are computed for the first exact_nets nets only",
    "discretisation_error": "no exact length to compare with",
    **{f"chi_measured_{stage}{sd}": "pruning emptied a layer: no signal passes, chi is undefined"
       for stage in ("dense", "pruned", "rescaled", "rescaled_random", "rescaled_redrawn") for sd in ("", "_sd")},
}
# Settings columns a table may leave empty in every row: a setting its runs do not have (RP's tables
# of nets named by init and method have no `setup`; its convolutional nets no `depth`). Any other
# numeric column with no value in the whole table was measured and lost: its NaN count
# (``jobs.nonfinite``), so the writer refuses it and a claim that reads it is "invalid".
UNSET = frozenset({"depth", "setup"})
# A training run's history: the row before training (epoch 0) has taken no step, and the row of the
# epoch a run diverged has no loss. Not a number that went missing: figures do not count them.
HISTORY = {col: "the row before training, or of the epoch a run diverged: no training step to measure"
           for col in ("lr", "train_loss", "train_acc", "train_seconds", "test_loss")}
BLANKS = frozenset(HISTORY.values())


def undefined(exp_id: str) -> dict[str, str]:
    """The columns of ``exp_id``'s table that may hold NaN or inf, with what such a value means there:
    its entry's ``undefined``, and a training run's history where it trains ({} for an id not in the
    catalogue)."""
    e = ENTRIES.get(exp_id)
    if e is None:
        return {}
    return {**(HISTORY if e.trains else {}), **{c: UNDEFINED[c] for c in e.undefined}}


@dataclass(frozen=True)
class Experiment:
    """An id's functions, loaded (``get``)."""
    id: str
    parts: Callable[[dict], dict[str, dict]]
    measure: Callable
    trained: Callable[[dict, str], list[tuple[str, str, int]]] = lambda settings, key: []
    masks: Callable | None = None
    trains: bool = False
    source: str | None = None

    @property
    def paper(self) -> str:
        return paper_of(self.id)

    # What an experiment that trains adds to its ``measure`` (``experiments.training_jobs``): the
    # training job, its runs' specs, and what the runs measure during training.
    @property
    def train(self) -> Callable | None:
        return getattr(self.measure, "train", None) if self.trains else None

    @property
    def specs(self) -> Callable | None:
        return getattr(self.measure, "specs", None) if self.trains else None

    @property
    def during(self) -> tuple:
        return getattr(self.measure, "during", ()) if self.trains else ()

    # The figure and summary load when asked: a measuring job (a third of a quick build's jobs)
    # then never imports seaborn, matplotlib and scipy (about 0.8 s of its start-up).
    @property
    def figure(self) -> Callable:
        return figures_of(self.id)[0]

    @property
    def summary(self) -> Callable:
        return figures_of(self.id)[1]


def entry(exp_id: str) -> Entry:
    """The catalogue entry of ``exp_id``, without importing its code (what the workflow reads while
    it parses: whether an id trains, prunes or plots another's runs)."""
    try:
        return ENTRIES[exp_id]
    except KeyError:
        raise KeyError(f"no experiment {exp_id!r} in the catalogue; known: {sorted(ENTRIES)}") from None


def get(exp_id: str) -> Experiment:
    """The functions of ``exp_id``, from its module (imported now: a job pays for its own module's
    imports alone; its figure module's only when ``figure`` or ``summary`` is asked for)."""
    e = entry(exp_id)
    parts, measure = _function(e, "parts"), _function(e, "measure")
    extra = {role: _function(e, role) for role in ("trained", "masks") if getattr(e, role)}
    return Experiment(exp_id, parts, measure, trains=e.trains, source=e.source, **extra)


FIGURE_ROLES = ("figure", "summary")


def _where(e: Entry, role: str) -> tuple[str, str]:
    """(module path, function name) of one role of an entry: ``"lr:plane_measure"`` names a function
    of another experiment module (EP-F1 measures as LR-F1 does), a bare name one of the entry's own;
    the figure roles live in ``reluinit.figures.<module>`` when it exists."""
    module, _, name = getattr(e, role).rpartition(":")
    module = module or e.module
    return (_figure_module(module) if role in FIGURE_ROLES else f"{PACKAGE}.experiments.{module}"), name


def _function(e: Entry, role: str) -> Callable:
    module, name = _where(e, role)
    return getattr(importlib.import_module(module), name)


def trainer(spec: str):
    """The experiment module that trains the nets of training spec ``spec`` (config ``training:``,
    rule ``paths.train_rule``): its ``train_runs``, ``train_classifier`` and ``run_seed``. LR-MNIST, the one spec, is LR's."""
    return importlib.import_module(f"{PACKAGE}.experiments.lr_train")


def parts(exp_id: str, settings: dict) -> dict[str, dict]:
    """``get(exp_id).parts(settings)`` as plain data, remembered where the workflow plans
    (``provenance.memo``): a Snakemake process then finds an experiment's jobs without importing its
    code (torch)."""
    return provenance.memo("parts", [exp_id, settings], lambda: get(exp_id).parts(settings))


def trained(exp_id: str, settings: dict, key: str) -> list[tuple[str, str, int]]:
    """``get(exp_id).trained(settings, key)``, the trained nets a job reads, remembered like ``parts``
    (and ``[]`` without an import for the ids that read none)."""
    if not entry(exp_id).trained:
        return []
    found = provenance.memo("trained", [exp_id, settings, key], lambda: get(exp_id).trained(settings, key))
    return [tuple(t) for t in found]


def trained_with(exp_id: str, settings: dict, run: dict) -> dict:
    """What decides how one training run of ``exp_id`` trains besides its fields: its module's
    ``trained_with(settings, run)`` (``rp_train``'s), which must be equal for a run a table takes from
    another experiment (config ``shared``, ``reluinit.pipeline.shared``)."""
    module, _ = _where(entry(exp_id), "parts")
    found = getattr(importlib.import_module(module), "trained_with", None)
    if found is None:
        raise ValueError(f"{exp_id}'s runs cannot be shared: {module} defines no trained_with(settings, run), "
                         f"which says what decides how a run trains; remove the `shared` that names it from config.yaml")
    return found(settings, run)


def figures_of(exp_id: str) -> tuple[Callable, Callable]:
    """``(figure, summary)`` of ``exp_id`` alone: a figure job imports no torch when its experiment's
    module has them in ``reluinit.figures`` (every id shipped does)."""
    entry = ENTRIES[exp_id]
    return _function(entry, "figure"), _function(entry, "summary")


def _figure_module(module: str) -> str:
    """``reluinit.figures.<module>`` if there is one, else the experiment's own module (which may keep
    its figure code, at the cost of torch's import in its figure job)."""
    # (the file, not importlib's find_spec, which imports reluinit.figures and with it the plotting stack)
    here = (Path(__file__).parent.parent / "figures" / f"{module}.py").exists()
    return f"{PACKAGE}.figures.{module}" if here else f"{PACKAGE}.experiments.{module}"


def code_names(exp_id: str) -> dict[str, str]:
    """``{"measure": "reluinit.experiments.tg.f2_measure", "figure": ...}``: where to read an id's code
    (the figure rules' messages say it)."""
    entry = ENTRIES[exp_id]
    return {role: ".".join(_where(entry, role)) for role in ("parts", "measure", "figure", "summary", "masks")
            if getattr(entry, role)}


def _order(exp_id: str):
    """Figures, then tables, then theorems, each by number: TG-F3a after TG-F2, EP-F10 after EP-F9."""
    kind, number, rest = re.fullmatch(r"[A-Z]+-([A-Za-z]+)(\d+)(.*)", exp_id).groups()
    return ["F", "T", "Th"].index(kind) if kind in ("F", "T", "Th") else 9, int(number), rest


def status_table(config: dict) -> str:
    """A markdown table: each paper, the catalogue ids ``all`` builds (both scales) and the optional
    ones it leaves out."""
    from .config import settings

    by_paper: dict[str, list[str]] = {p: [] for p in PAPERS}
    for exp in config["experiments"]:
        by_paper[paper_of(exp)].append(exp)
    lines = ["| id | paper | built by `snakemake all` |", "|---|---|---|"]
    for paper, ids in by_paper.items():
        if not ids:
            continue
        ids = sorted(ids, key=_order)
        built = [e for e in ids if not settings(config, e, "paper").get("optional", False)]
        optional = [e for e in ids if e not in built]
        cell = ", ".join(built) + (f"; configured, optional: {', '.join(optional)}" if optional else "")
        lines.append(f"| {paper} | {PAPERS[paper]} | {cell} |")
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
    "TG-F1": Entry("Figure 1", "tg", parts="projection_parts", measure="projection_measure",
          figure="f1_figure", summary="projection_summary",
          shows="A circle through input space, its pre-activations projected to 2-D at the input, layer "
          "6 and layer 12 of a ReLU net (σ_w = 2)."),
    "TG-F2": Entry("Figure 2", "tg", parts="f2_parts", measure="f2_measure",
          figure="f2_figure", summary="f2_summary",
          shows="Expected trajectory length per layer, one curve per density α, sparse-Gaussian weights "
          "at σ_w = 6 on a line between two MNIST test points.",
          undefined=("growth", "length_exact", "discretisation_error")),
    "TG-F3a": Entry("Figure 3a", "tg", parts="f3_parts", measure="f3a_measure",
          figure="f3a_figure", summary="growth_summary",
          shows="Growth factor E[‖dz(d+1)‖/‖dz(d)‖] vs σ_w at α = 0.5 for Gaussian, uniform and "
          "discrete weights, with the lower bounds of Corollaries 1-3.",
          undefined=("growth",)),
    "TG-F3b": Entry("Figure 3b", "tg", parts="f3_parts", measure="f3b_measure",
          figure="f3b_figure", summary="growth_summary",
          shows="The same growth factor vs α at σ_w = 2.",
          undefined=("growth",)),
    "TG-F4": Entry("Figure 4", "tg", parts="f4_parts", measure="f4_measure",
          figure="f4_figure", summary="f4_summary",
          shows="E‖u_J‖ vs α for a vector uniform on the sphere (≈ √α) and a one-hot one (= α)."),
    "TG-F5": Entry("Figure 5", "tg", parts="f5_parts", measure="f5_measure",
          figure="f5_figure", summary="growth_summary",
          shows="TG-F3a and b between random points of R^500, on straight lines and on curved paths "
          "(semicircles in random planes).",
          undefined=("growth",)),
    "TG-F6": Entry("Figure 6", "tg_train", parts="f6_parts", measure="f6_measure",
          figure="f6_figure", summary="f6_summary",
          shows="Growth factor of trained nets vs their post-training σ_w, for lines within a class and "
          "between classes; the same nets before training in black.",
          trains=True,
          undefined=("growth",)),
    "EP-F1": Entry("Figure 1", "ep", parts="lr:net_parts", measure="lr:plane_measure",
          figure="f1_figure", summary="lr:plane_summary",
          shows="Regions of input space (R²) cut by a 3-hidden-layer ReLU net of width 4, layer by "
          "layer."),
    "EP-F2": Entry("Figure 2", "ep", parts="grid_parts", measure="grid_measure",
          figure="f2_figure", summary="transitions_summary",
          shows="Transitions along a circle vs depth and vs width for several σ_w², hard-tanh and ReLU.",
          undefined=("growth",)),
    "EP-F3": Entry("Figure 3", "ep", parts="tg:projection_parts", measure="tg:projection_measure",
          figure="f3_figure", summary="tg:projection_summary",
          shows="A circle projected to 2-D after each layer of a tanh net of width 100."),
    "EP-F4": Entry("Figure 4", "ep_conv", parts="f4_parts", measure="f4_measure",
          figure="f4_figure", summary="f4_summary",
          shows="Trajectory length after each block of a CIFAR-10 conv net at initialization, several "
          "σ_w²."),
    "EP-F5": Entry("Figure 5", "ep", parts="grid_parts", measure="grid_measure",
          figure="f5_figure", summary="f5_summary",
          shows="Transitions vs trajectory length for several widths and σ_w² (hard-tanh).",
          undefined=("growth",)),
    "EP-F6": Entry("Figure 6", "ep_conv", parts="f6_parts", measure="f6_measure",
          figure="f6_figure", summary="f6_summary",
          shows="Accuracy of a trained CIFAR-10 conv net vs noise added to one layer at a time.",
          trains=True),
    "EP-F7": Entry("Figure 7", "ep_fc", parts="one_parts", measure="one_measure",
          figure="f7_figure", summary="one_summary",
          shows="Train and test accuracy of an MNIST net when only one hidden layer is trained.",
          trains=True),
    "EP-F8": Entry("Figure 8", "ep_conv", parts="train_parts", measure="train_measure",
          figure="f8_figure", summary="f8_summary",
          shows="Trajectory length per layer through training of a conv net without batch norm.",
          trains=True),
    "EP-F9": Entry("Figure 9", "ep_conv", parts="train_parts", measure="train_measure",
          figure="f9_figure", summary="f9_summary",
          shows="Each layer's weight scale σ_w through the same training.",
          trains=True, source="EP-F8"),
    "EP-F10": Entry("Figure 10", "ep_conv", parts="train_parts", measure="train_measure",
          figure="f10_figure", summary="f10_summary",
          shows="As EP-F8 with batch norm.",
          trains=True, source="EP-F8"),
    "EP-F11": Entry("Figure 11", "ep_conv", parts="train_parts", measure="train_measure",
          figure="f11_figure", summary="f11_summary",
          shows="Accuracy through training: plain, batch norm, trajectory regularization.",
          trains=True, source="EP-F8"),
    "EP-F12": Entry("Figure 12", "ep", parts="grid_parts", measure="grid_measure",
          figure="f12_figure", summary="length_summary",
          shows="Trajectory length per layer of fully connected ReLU nets, several σ_w² and widths, on "
          "MNIST inputs.",
          undefined=("growth",)),
    "EP-F13": Entry("Figure 13", "ep", parts="f13_parts", measure="f13_measure",
          figure="f13_figure", summary="f13_summary",
          shows="Hard-tanh lengths per layer by width and by σ_w², and the growth ratio between Theorem "
          "3's bounds.",
          undefined=("growth", "length_ratio")),
    "EP-F14": Entry("Figure 14", "ep", parts="dichotomy_parts", measure="f14_measure",
          figure="f14_figure", summary="dichotomy_summary",
          shows="Dichotomies of 15 inputs as the first layer's weights sweep a great circle, vs depth "
          "and vs width."),
    "EP-F15": Entry("Figure 15", "ep", parts="dichotomy_parts", measure="f15_measure",
          figure="f15_figure", summary="dichotomy_summary",
          shows="Dichotomies vs remaining depth when the swept layer moves up the net."),
    "EP-F16": Entry("Figure 16", "ep", parts="dichotomy_parts", measure="f16_measure",
          figure="f16_figure", summary="f16_summary",
          shows="Unique dichotomies vs transitions, beside a random walk flipping one label per "
          "transition."),
    "EP-F17": Entry("Figure 17", "ep_fc", parts="one_parts", measure="one_measure",
          figure="f17_figure", summary="one_summary",
          shows="As EP-F7 on CIFAR-10.",
          trains=True),
    "EP-F18": Entry("Figure 18", "ep_fc", parts="f18_parts", measure="f18_measure",
          figure="f18_figure", summary="f18_summary",
          shows="Trajectory length per layer through training of an MNIST fully connected net started "
          "at small σ_w.",
          trains=True),
    "OP-F1": Entry("Figure 1", "op", parts="f1_parts", measure="f1_measure",
          figure="f1_figure", summary="f1_summary",
          shows="Per layer, ‖h_l‖/‖x‖ and ‖∂ℓ/∂W_l‖_F/(‖δ‖‖x‖) over random inputs, He vs Glorot, "
          "several widths."),
    "OP-F2": Entry("Figure 2", "op", parts="f2_parts", measure="f2_measure",
          figure="f2_figure", summary="f2_summary",
          shows="Measured distortion ε vs width of a one-hidden-layer net, against the ε that Lemma 2 "
          "(forward) and Lemma 5 (backward) guarantee."),
    "OP-F3": Entry("Figure 3", "op", parts="f3_parts", measure="f3_measure",
          figure="f3_figure", summary="f3_summary",
          shows="Gradient ratio per layer when the layers' widths vary around a centre."),
    "LR-F1": Entry("Figure 1", "lr", parts="net_parts", measure="plane_measure",
          figure="f1_figure", summary="plane_summary",
          shows="The exact regions of a ReLU net with 2-D input at initialization."),
    "LR-F2": Entry("Figure 2", "lr", parts="net_parts", measure="plane_measure",
          figure="f2_figure", summary="plane_summary",
          shows="The same layer by layer for nets of width 16, each beside a one-layer net with as many neurons."),
    "LR-F3": Entry("Figure 3", "lr", parts="f3_parts", measure="f3_measure",
          figure="f3_figure", summary="f3_summary",
          shows="Telgarsky's sawtooth, exact and with small weight noise: its pieces counted."),
    "LR-F4": Entry("Figure 4", "lr", parts="net_parts", measure="f4_measure",
          figure="f4_figure", summary="f4_summary",
          shows="The piecewise-linear function of a net with 1-D input at initialization."),
    "LR-F5": Entry("Figure 5", "lr", parts="trained_parts", measure="f5_measure",
          figure="f5_figure", summary="f5_summary",
          shows="Regions along lines through training examples, divided by the number of neurons, "
          "through training, several architectures.",
          trained="trained_inputs"),
    "LR-F6": Entry("Figure 6", "lr", parts="trained_parts", measure="f6_measure",
          figure="f6_figure", summary="f6_summary",
          shows="Mean distance to the nearest region boundary through training, against C/#neurons; "
          "scaled by #neurons; vs test accuracy.",
          trained="trained_inputs"),
    "LR-F7": Entry("Figure 7", "lr", parts="trained_parts", measure="f6_measure",
          figure="f7_figure", summary="f7_summary",
          shows="Histogram of log10 distances to the nearest boundary through training.",
          trained="trained_inputs"),
    "LR-F8": Entry("Figure 8", "lr", parts="trained_parts", measure="f8_measure",
          figure="f8_figure", summary="f8_summary",
          shows="Regions in the plane through three training images (digits 0, 1, 2), through training.",
          trained="trained_inputs"),
    "RP-F1": Entry("Figure 1", "rp", parts="f1_parts", measure="f1_measure",
          figure="f1_figure", summary="f1_summary",
          shows="Share of incoming weights each neuron keeps after SBP at 70% sparsity, at the edge of "
          "chaos vs in the chaotic phase.",
          undefined=tuple(c for c in UNDEFINED if c.startswith("chi_measured"))),
    "RP-F2": Entry("Figure 2", "rp", parts="f2_parts", measure="f2_measure",
          figure="f2_figure", summary="f2_summary",
          shows="Percent of weights kept per layer after SBP: ResNet32 vs Stable ResNet32.", masks="f2_masks"),
    "RP-F3": Entry("Figure 3", "rp_train", parts="heat_parts", measure="heat_measure",
          figure="heat_figure", summary="heat_summary",
          shows="Test accuracy over depth × sparsity of tanh FFNNs on MNIST: EOC with rescaling, EOC, "
          "ordered phase; beside it, the cells that decide its claims under the settings the paper "
          "leaves open (SGD momentum 0 and 0.9, ordered chi 0.8 and 0.9).",
          trains=True, masks="heat_masks"),
    "RP-F4": Entry("Figure 4 (appendix)", "rp", parts="f2_parts", measure="f2_measure",
          figure="f4_figure", summary="f2_summary",
          shows="RP-F2 as the percent pruned per layer.", masks="f2_masks"),
    "RP-F5": Entry("Figure 5 (appendix)", "rp_train", parts="heat_parts", measure="heat_measure",
          figure="heat_figure", summary="heat_summary",
          shows="RP-F3 for ELU and tanh.",
          trains=True, masks="heat_masks"),
    "RP-T1": Entry("Table 1", "rp_train", parts="accuracy_parts", measure="accuracy_measure",
          figure="accuracy_figure", summary="accuracy_summary",
          shows="CIFAR-10 accuracy of SNIP vs SBP-SR on ResNet32/50/104 at 90 to 99.9% sparsity.",
          trains=True, masks="accuracy_masks"),
    "RP-T2": Entry("Table 2", "rp_train", parts="accuracy_parts", measure="accuracy_measure",
          figure="accuracy_figure", summary="accuracy_summary",
          shows="CIFAR-10 and CIFAR-100 accuracy of every pruner at 90, 95 and 98% sparsity.",
          trains=True, masks="accuracy_masks"),
    "RP-T3": Entry("Table 3", "rp_train", parts="accuracy_parts", measure="accuracy_measure",
          figure="accuracy_figure", summary="accuracy_summary",
          shows="The same on Tiny ImageNet at 85, 90 and 95%.",
          trains=True, masks="accuracy_masks"),
    "RP-T4": Entry("Table 4", "rp_train", parts="t4_parts", measure="t4_measure",
          figure="t4_figure", summary="t4_summary",
          shows="A vanilla CNN on MNIST at 50% sparsity: ordered, EOC, EOC with rescaling.",
          trains=True, masks="t4_masks"),
    "RP-T5": Entry("Table 5", "rp_train", parts="accuracy_parts", measure="accuracy_measure",
          figure="accuracy_figure", summary="accuracy_summary",
          shows="VGG16 and 3xVGG16 on CIFAR-10: SNIP, SynFlow, EOC with rescaling.",
          trains=True, masks="accuracy_masks"),
    "RP-T7": Entry("Table 7 (appendix)", "rp", parts="t7_parts", measure="t7_measure",
          figure="t7_figure", summary="t7_summary",
          shows="Critical sparsity of magnitude pruning vs Proposition 4's bound, first layer's "
          "variance divided by γ."),
    "RP-T8": Entry("Table 8 (appendix)", "rp_train", parts="accuracy_parts", measure="accuracy_measure",
          figure="accuracy_figure", summary="accuracy_summary",
          shows="ResNet50 on ImageNet, 90 epochs.",
          trains=True, masks="accuracy_masks"),
    "RP-T9": Entry("Table 9 (appendix)", "rp_train", parts="accuracy_parts", measure="accuracy_measure",
          figure="accuracy_figure", summary="accuracy_summary",
          shows="ReLU vs tanh ResNets on CIFAR-10, SBP-SR vs SNIP, 90 to 99.9%.",
          trains=True, masks="accuracy_masks"),
    "RP-Th1": Entry("Section 2, Theorem 1", "rp", parts="th1_parts", measure="th1_measure",
          figure="th1_figure", summary="th1_summary",
          shows="Critical sparsity of SBP in the ordered phase (κ = 0.2, L = N = 100) vs the theorem's "
          "bound."),
    "X-F1": Entry("ours", "x", parts="f1_parts", measure="f1_measure",
          figure="f1_figure", summary="f1_summary",
          shows="Regions per line / #neurons (LR) and transitions (EP) vs depth at fixed width, σ_w² in "
          "{2, 4, 8, 16}, ReLU and hard-tanh."),
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
    e = get(exp)
    words = ["optional: not built by `all`" if block.get("optional") else "built by `all`"]
    if e.source:
        words.append(f"drawn from {e.source}'s runs")
    elif e.trains:
        words.append("trains its nets")
    shared = block.get("shared")
    if shared:  # the paper's tables share these cells, and so do ours (reluinit.pipeline.shared)
        cells = " and ".join(f"{k} {' or '.join(map(_fmt, v))}" for k, v in shared["cells"].items())
        words.append(f"its runs of {cells} are {shared['from']}'s (`shared`)")
    takers = [t for t, b in config["experiments"].items() if (b["paper"].get("shared") or {}).get("from") == exp]
    if takers:
        words.append(f"its runs also fill {' and '.join(takers)}'s shared cells")
    if "training" in block:
        words.append(f"measures trained nets `{block['training']}`")
    return "; ".join(words)


def catalogue_markdown(config: dict) -> str:
    """The whole experiment catalogue: per paper its public link, then per id its place in the
    paper, what it shows, its settings at both scales (the quick column lists only what that
    scale changes) and whether ``all`` builds it."""
    missing = [e for e in config["experiments"] if e not in ENTRIES]
    if missing:
        raise KeyError(f"no catalogue entry for {missing}: add them to reluinit.pipeline.catalogue.ENTRIES")
    by_paper: dict[str, list[str]] = {p: [] for p in PAPERS}
    for exp in config["experiments"]:
        by_paper[paper_of(exp)].append(exp)
    out = [
        "# Experiment catalogue",
        "",
        "<!-- generated by `python -m reluinit.pipeline.catalogue catalogue > CATALOGUE.md` from the experiment",
        "     catalogue and config.yaml; tests/test_catalogue.py checks it is current. Do not edit. -->",
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
        out += ["", f"## {paper}: {PAPERS[paper]}", ""]
        if ref:
            out += [f"{ref['authors']}. {ref['venue']}. [{ref['id']}]({ref['url']})", ""]
        out += ["| id | place | what | paper scale | quick scale | status |", "|---|---|---|---|---|---|"]
        for exp in sorted(ids, key=_order):
            place, what = ENTRIES[exp].place, ENTRIES[exp].shows
            block = config["experiments"][exp]
            source = get(exp).source
            paper_cell = _block(block["paper"]) if block["paper"] or not source else f"{source}'s settings"
            out.append(f"| {exp} | {place} | {what} | {paper_cell} | {_block(block.get('quick'))} "
                       f"| {_status(config, exp)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    from .config import read_yaml, yaml_problem

    what = argv.pop(0) if argv and argv[0] in ("status", "catalogue") else "status"
    path = Path(argv[0]) if argv else Path("config.yaml")
    if problem := yaml_problem(path):  # not YAML, or a key set twice
        raise SystemExit(problem)
    config = read_yaml(path)
    print(status_table(config) if what == "status" else catalogue_markdown(config).rstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1:])
