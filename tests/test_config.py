import json
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from reluinit.pipeline import bounds, plan
from reluinit.pipeline.config import (
    explain,
    locate,
    read_yaml,
    rejected,
    settings,
    unknown_recipes,
    validate,
    yaml_problem,
)

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


def test_validation_is_snakemakes_with_its_defaults_and_errors():
    """The workflow validates with ``config.validate`` (the schema parsed by libyaml), not Snakemake's
    ``validate``: the same config comes out, defaults filled in, and the same key is refused."""
    from snakemake.utils import validate as snakemakes

    schema = ROOT / "workflow/schemas/config.schema.yaml"
    assert read_yaml(schema) == SCHEMA and read_yaml(ROOT / "config.yaml") == CONFIG
    ours, theirs = json.loads(json.dumps(CONFIG)), json.loads(json.dumps(CONFIG))
    del ours["batching"]["smoke"], theirs["batching"]["smoke"]  # a default of the schema: filled in again
    validate(ours, schema)
    snakemakes(theirs, str(schema))
    assert ours == theirs and ours["batching"]["smoke"] == "part"
    bad = json.loads(json.dumps(CONFIG))
    bad["experiments"]["OP-F1"]["quick"]["widths"] = ["wide"]
    with pytest.raises(jsonschema.ValidationError) as ours_err:
        validate(json.loads(json.dumps(bad)), schema)
    with pytest.raises(Exception) as theirs_err:
        snakemakes(bad, str(schema))
    cause = theirs_err.value.__cause__ or theirs_err.value.__context__
    assert list(ours_err.value.absolute_path) == list(cause.absolute_path) == ["experiments", "OP-F1", "quick", "widths", 0]
    assert explain(ours_err.value) == explain(cause)


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


@pytest.mark.parametrize("key, value", [("sigma_w2", float("nan")), ("sigma_b", float("inf")),
                                        ("sigma_w2", float("-inf"))])
def test_a_non_finite_number_is_refused_by_name(key, value):
    """YAML's .nan and .inf are floats, and a plain JSON schema takes them for numbers (a NaN passes
    every minimum): the job would then die deep in linear algebra. ``validate`` refuses them."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["experiments"]["EP-F18"]["paper"][key] = value
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    assert explain(refused.value) == (f"invalid config: key 'experiments.EP-F18.paper.{key}' = {value!r}: "
                                      "a finite number is meant here (not .nan or .inf)")


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


def test_a_rejected_key_is_located_in_the_file_that_sets_it(tmp_path):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text("experiments:\n  OP-F2:\n    quick:\n      n_samples: many\n")
    config = json.loads(json.dumps(CONFIG))
    config["experiments"]["OP-F2"]["quick"]["n_samples"] = "many"
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(config))
    line = rejected(jsonschema.exceptions.best_match(errors), [ROOT / "config.yaml", overlay])
    assert line.startswith(f"{overlay}, line 4: invalid config: key 'experiments.OP-F2.quick.n_samples' = 'many'")
    assert line.endswith("correct it there (every key and its type: workflow/schemas/config.schema.yaml)")
    # set by --config, which Snakemake applies over every file: named as the command line's, not the file's
    for given in ({"experiments": {"OP-F2": {"quick": {"n_samples": "many"}}}}, {"experiments": "{OP-F2: ...}"}):
        line = rejected(jsonschema.exceptions.best_match(errors), [ROOT / "config.yaml", overlay], given)
        assert line.startswith("the command line (--config): invalid config: key 'experiments.OP-F2.quick.n_samples'"), line
    assert rejected(jsonschema.exceptions.best_match(errors), [ROOT / "config.yaml", overlay],
                    {"experiments": {"OP-F1": {}}, "scale": "quick"}).startswith(f"{overlay}, line 4:")
    # set only in config.yaml: located there, at the key's own line
    text = (ROOT / "config.yaml").read_text().splitlines()
    where = locate([ROOT / "config.yaml", tmp_path / "absent.yaml"], ["experiments", "OP-F1", "paper", "widths"])
    assert Path(where.split(", line ")[0]).resolve() == (ROOT / "config.yaml").resolve()  # shown relative to here
    assert text[int(where.rsplit(" ", 1)[1]) - 1].strip().startswith("widths:")
    # an unknown key is located at itself
    overlay.write_text("surprise: 1\n")
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors({**CONFIG, "surprise": 1}))
    assert rejected(jsonschema.exceptions.best_match(errors), [overlay]).startswith(f"{overlay}, line 1: ")
    assert locate([overlay], ["results"]) is None  # set by no file: from --config


def test_a_config_file_that_is_not_yaml_is_named_with_its_line(tmp_path):
    bad = tmp_path / "config.yaml"
    bad.write_text("scale: quick\nexperiments: [OP-F1\n  bad: : x\n")
    problem = yaml_problem(bad)
    assert problem.startswith(f"{bad}, line 3, column ") and "is not valid YAML" in problem
    assert yaml_problem(ROOT / "config.yaml") is None


@pytest.mark.parametrize("width,fits", [(4060, True), (70_000, False), (2_000_000, False)])
def test_a_width_no_job_could_hold_is_refused_before_it_starts(width, fits):
    config = json.loads(json.dumps(CONFIG))
    config["experiments"]["OP-F1"]["quick"]["widths"] = [100, width]
    found = bounds.oversized(config, "quick", machine_mb=24_000)
    assert (found == []) is fits
    if not fits:
        assert found[0].startswith("OP-F1 at the quick scale needs at least ")
        assert f"width {width:,}, depth 10" in found[0] and found[0].endswith("under experiments.OP-F1.quick in the config")
    # the floor is weights and activations in float64: 10 layers of 4060^2 and 200 x 4060 x 11, plus 500 x 4060 in
    need, _ = bounds.memory_floor({"widths": [4060], "depth": 10, "input_dim": 500, "n_samples": 200})
    assert need == 8 * (10 * 4060**2 + 500 * 4060 + 200 * 4060 * 11)
    if fits:  # a machine smaller than the job's declared memory refuses what fits the declaration
        assert "than the 1.0 GB this machine has" in bounds.oversized(config, "quick", machine_mb=1024)[0]


def test_every_shipped_experiment_fits_its_declared_memory():
    for scale in ("paper", "quick", "smoke"):
        assert bounds.oversized(CONFIG, scale) == [], scale


def test_the_slurm_profile_asks_for_what_the_plan_prints(tmp_path):
    """`python -m reluinit.pipeline.plan` prints what each job asks for; the SLURM profile must not
    ask for something else (it once gave LR's training jobs a GPU, 32 GB and 12 h: the plan says 0, 8 GB, 6 h)."""
    assert plan.profile_conflicts(CONFIG, ROOT / "profiles" / "slurm" / "config.yaml", "quick") == []
    other = tmp_path / "profile.yaml"
    other.write_text("set-resources:\n  train_LR_MNIST: {gpu: 1, mem_mb: 32000, runtime: '12h'}\n"
                     "  train_part: {slurm_partition: gpu}\n  measure: {mem_mb: 8000}\n")
    found = plan.profile_conflicts(CONFIG, other, "quick")
    assert [line.split(": set-resources ")[1] for line in found] == [
        "train_LR_MNIST: gpu=1, where the rule declares 0", "train_LR_MNIST: mem_mb=32000, where the rule declares 8000",
        "train_LR_MNIST: runtime=12h, where the rule declares 6h"]


@pytest.mark.parametrize("exp,changes,said", [
    ("LR-F2", {"n_nets": 10**6}, "n_nets = 1,000,000 makes about 1,000,000 jobs, more than the 10,000 jobs"),
    ("RP-T4", {"reps": 10**6}, "reps = 1,000,000 makes about 6,000,000 training runs, more than the 100,000 runs"),
    ("TG-F4", {"n_draws": 10**7, "ks": [10, 1000]}, "n_draws = 10,000,000 holds at least 74.5 GB (each draw a row of "
                                                     "1,000 values"),
    ("EP-F14", {"n_steps": 10**7, "n_nets": 10**6}, "n_steps = 10,000,000 times n_nets = 1,000,000 needs at least"),
    ("OP-F1", {"n_samples": 10**6}, "OP-F1 at the quick scale needs at least"),
])
def test_a_count_no_plan_or_job_could_hold_is_refused_naming_its_key(exp, changes, said):
    """Counts of nets, runs, draws, steps or samples are refused before planning (LR-F2's 10^9 nets
    were a dictionary of 10^9 parts that `snakemake -n` never finished), each naming its key."""
    config = json.loads(json.dumps(CONFIG))
    config["experiments"][exp].setdefault("quick", {}).update(changes)
    t0 = time.monotonic()
    found = bounds.refused(config, "quick")
    assert time.monotonic() - t0 < 10
    line = next((f for f in found if f.startswith(said) or f.startswith(f"{exp} at the quick scale: {said}")), None)
    assert line is not None, found
    assert all(f.endswith(f"under experiments.{exp}.quick in the config") for f in found), found
    config["experiments"][exp]["quick"].update({k: 3 for k in changes if k != "ks"})  # small again: nothing refused
    assert bounds.refused(config, "quick") == []


@pytest.mark.parametrize("block,name,key", [("training", "LR-MNIST", "runs"), ("recipes", "lr-mnist", "epochs"),
                                            ("experiments", "LR-F3", "n_noisy"), ("experiments", "EP-F16", "n_walks")])
def test_no_count_anywhere_in_the_config_passes_the_cap(block, name, key):
    """A count the time floor cannot price (LR-F3's noisy copies of trained nets, a recipe's epochs,
    a training spec's runs) still meets the cap: each ran without end, or planned until memory ran out."""
    config = json.loads(json.dumps(CONFIG))
    config[block][name].setdefault("quick", {})[key] = 10**9
    found = bounds.refused(config, "quick")
    assert found and found[-1] == (f"{block}.{name}.quick: {key} = 1,000,000,000 is more than the 10,000,000 any count "
                                   f"may be here (the papers' largest is 100,000): lower {key} under {block}.{name}.quick "
                                   "in the config"), found


def test_every_shipped_count_is_within_its_bounds():
    for scale in ("paper", "quick", "smoke"):
        assert bounds.refused(CONFIG, scale) == [], scale


def test_the_time_floor_is_one_pass_per_unit_through_the_widest_net():
    assert bounds.unit_cost({"widths": [16, 64], "depth": 5}, "n_pieces") == 5 * 64**2
    assert bounds.unit_cost({"ks": [10, 1000]}, "n_draws") == 1000
    assert bounds.unit_cost({"model": "resnet32"}, "reps") == 1
    assert bounds.counts({"n_nets": 3, "n_classes": 10, "convergence_pieces": [300, 1000], "recipe": {"epochs": 9},
                          "reps": 2, "width": 7}) == {"n_nets": 3, "convergence_pieces": 1000, "recipe.epochs": 9,
                                                       "reps": 2}


def test_more_lines_than_test_images_can_pair_is_refused_naming_the_key(tmp_path):
    """X-F1's lines join pairs of test images: 225 lines at the quick scale (448 images) ended in
    torch's "size of tensor a (224) must match ... (225)", naming nothing."""
    from reluinit.experiments import x

    s = settings({**CONFIG, "data_dir": str(tmp_path)}, "X-F1", "quick")
    s["n_lines"] = 10**6
    with pytest.raises(ValueError, match=r"^X-F1: n_lines = 1000000 joins 2000000 test images, and this test set has "
                                         r"[\d,]+: lower n_lines under experiments.X-F1.quick") as err:
        x.f1_measure(s, next(iter(x.f1_parts(s))), device="cpu")
    assert err.value.ends_in_fix  # the run's last words (jobs.TODO_PREFIX)


@pytest.mark.parametrize("experiment, key, value", [("OP-F1", "widths", [2.0]), ("LR-F1", "n_nets", 2.0),
                                                    ("OP-F1", "seed", 1e20), ("OP-F1", "seed", 2**40)])
def test_a_count_or_seed_that_is_no_whole_number_or_too_large_is_refused_by_name(experiment, key, value):
    """JSON schema counts 2.0 an integer: ``widths: [2.0]`` and ``n_nets: 2.0`` passed and ended in
    torch's or Python's tracebacks (one in a dry run), ``seed: 1e20`` in torch's overflow."""
    config = json.loads(json.dumps(CONFIG))
    config["experiments"][experiment]["paper"][key] = value
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    said = explain(refused.value)
    assert said.startswith(f"invalid config: key 'experiments.{experiment}.paper.{key}") and (
        "a whole number is meant here" in said or "is greater than the maximum of 2147483647" in said), said


def test_an_exponent_without_a_decimal_point_is_text_to_yaml_and_the_refusal_says_so():
    """``seed: 1e20`` in a YAML file is the string "1e20" (YAML 1.1): the schema's "'1e20' is not of
    type 'integer'" said nothing of why; the refusal says how YAML reads it and how to write it."""
    config = json.loads(json.dumps(CONFIG))
    config["experiments"]["OP-F1"]["paper"]["seed"] = yaml.safe_load("x: 1e20")["x"]
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    assert explain(refused.value) == ("invalid config: key 'experiments.OP-F1.paper.seed' = '1e20': '1e20' is not of "
                                      "type 'integer' (YAML reads 1e20 as text, not a number: write it with digits)")
    config["experiments"]["OP-F1"]["paper"]["seed"] = 7
    config["experiments"]["TG-F1"]["paper"]["bias"] = "2e3"  # a real number's key: the decimal point
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    assert explain(refused.value).endswith("(YAML reads 2e3 as text, not a number: write it with a decimal point, "
                                           "e.g. 2.0e3)")
