import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from reluinit.pipeline.config import explain, settings, unknown_recipes

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())


def _error(config):
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(config))
    assert errors, "config was accepted"
    return explain(jsonschema.exceptions.best_match(errors))


def test_shipped_config_is_valid_and_at_paper_scale():
    jsonschema.Draft202012Validator(SCHEMA).validate(CONFIG)
    assert CONFIG["scale"] == "paper"


def test_paper_settings_are_the_catalogue_sizes():
    f1 = settings(CONFIG, "OP-F1")
    assert f1["widths"] == [100, 500, 2000, 4060]
    assert (f1["n_samples"], f1["input_dim"], f1["n_classes"], f1["depth"]) == (2000, 500, 20, 10)
    f3 = settings(CONFIG, "OP-F3")
    assert (f3["depth"], f3["width_center"], f3["width_variations"]) == (20, 1000, [1, 200, 500])


def test_quick_overrides_only_what_it_lists():
    paper, quick = settings(CONFIG, "OP-F1", "paper"), settings(CONFIG, "OP-F1", "quick")
    changed = {k for k in paper if paper[k] != quick[k]}
    assert changed == set(CONFIG["experiments"]["OP-F1"]["quick"])


@pytest.mark.parametrize("edit,message", [
    (lambda c: c["experiments"]["OP-F1"]["paper"]["widths"].__setitem__(1, -5),
     "key 'experiments.OP-F1.paper.widths[1]' = -5"),
    (lambda c: c["experiments"]["OP-F2"]["quick"].__setitem__("n_samples", "many"),
     "key 'experiments.OP-F2.quick.n_samples' = 'many'"),
    (lambda c: c["experiments"]["OP-F3"]["paper"].pop("depth"),
     "missing key 'experiments.OP-F3.paper.depth'"),
    (lambda c: c.pop("results"), "missing key 'results'"),
    (lambda c: c["experiments"].__setitem__("OP-F7", c["experiments"]["OP-F1"]),
     "unknown experiment id 'OP-F7'"),
    (lambda c: c.__setitem__("scale", "huge"), "key 'scale' = 'huge'"),
])
def test_bad_values_are_named(edit, message):
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    edit(config)
    assert message in _error(config)


def test_an_unknown_recipe_names_its_key_and_the_known_recipes():
    config = json.loads(json.dumps(yaml.safe_load((ROOT / "config.yaml").read_text())))  # anchors unshared
    assert unknown_recipes(config) == []
    config["experiments"]["RP-T2"]["paper"]["recipes_by_dataset"]["cifar100"] = "rp-cifar1000"
    config["experiments"]["RP-F3"]["quick"]["recipe"] = "sgd-fast"
    assert unknown_recipes(config) == [
        "invalid config: key 'experiments.RP-F3.quick.recipe' = 'sgd-fast' names no recipe under `recipes:` "
        f"(known: {', '.join(sorted(config['recipes']))})",
        "invalid config: key 'experiments.RP-T2.paper.recipes_by_dataset.cifar100' = 'rp-cifar1000' names no "
        f"recipe under `recipes:` (known: {', '.join(sorted(config['recipes']))})"]


def test_a_nested_value_given_as_a_string_points_to_configfile():
    """What `--config "experiments={OP-F1: {quick: {widths: [100, 500]}}}"` hands over: strings."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["experiments"]["OP-F1"]["quick"]["widths"] = ["100", "500"]
    assert _error(config).endswith("pass `--configfile my.yaml`, which Snakemake merges over config.yaml)")
