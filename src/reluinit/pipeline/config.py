"""Reading the workflow config: one scale's settings of an experiment, and clear errors.

The workflow validates the config against ``workflow/schemas/config.schema.yaml`` (``validate``,
Snakemake's rules with a faster parse); ``explain`` turns a rejection into one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:  # the workflow validates; a job, or the GPU check on a machine without it, never needs it
    import jsonschema


def settings(config: dict, exp_id: str, scale: str | None = None) -> dict:
    """The settings of ``exp_id`` at ``scale`` (default: ``config["scale"]``).

    ``paper`` holds every setting; ``quick`` lists only what it shrinks, over ``paper``;
    ``smoke`` is ``paper`` with the block's optional ``smoke`` overrides (``SMOKE`` below).
    """
    scale = scale or config["scale"]
    merged = _at_scale(config["experiments"][exp_id], scale)
    if "training" in merged:  # the trained nets it measures: that spec's settings, same scale
        merged["train"] = training_settings(config, merged["training"], scale)
    if isinstance(merged.get("recipe"), str):  # how it trains: a named recipe, same scale
        merged["recipe"] = recipe(config, merged["recipe"], scale)
    if "recipes_by_dataset" in merged:
        merged["recipes_by_dataset"] = {d: recipe(config, r, scale) for d, r in merged["recipes_by_dataset"].items()}
    if "dataset" in merged or "datasets" in merged:  # where to load it from, and whether the quick stand-in applies
        merged.update(data_dir=config["data_dir"], scale=scale)
    return merged


def recipe(config: dict, name: str, scale: str) -> dict:
    """A named recipe (config `recipes:`) at ``scale``, with its name."""
    if name not in config.get("recipes", {}):
        raise KeyError(f"no recipe {name!r} under `recipes:` in the config; known: {sorted(config.get('recipes', {}))}")
    return {**_at_scale(config["recipes"][name], scale), **smoke_knobs(config, scale), "name": name}


def training_settings(config: dict, spec: str, scale: str | None = None) -> dict:
    """A training spec's settings at ``scale``, with the data directory and scale it loads from."""
    scale = scale or config["scale"]
    merged = {**_at_scale(config["training"][spec], scale), **smoke_knobs(config, scale),
              "data_dir": config["data_dir"], "scale": scale}
    if isinstance(merged.get("recipe"), str):  # how its nets train: a named recipe, same scale
        merged["recipe"] = recipe(config, merged["recipe"], scale)
    return merged


# The smoke scale runs the paper scale's jobs, models and input shapes, truncated in one place:
# every training run stops after ``max_steps`` optimizer steps (``training.Recipe.max_steps``) and
# evaluates on the first ``eval_examples`` test examples; what a generic knob cannot cut (a
# measurement's net count, points) is cut by an experiment's own ``smoke:`` block.
SMOKE = {"max_steps": 2, "eval_examples": 64}


def smoke_knobs(config: dict, scale: str) -> dict:
    """The smoke scale's truncation knobs (config ``smoke:`` over ``SMOKE``); none at other scales."""
    return {**SMOKE, **(config.get("smoke") or {})} if scale == "smoke" else {}


def _at_scale(block: dict, scale: str) -> dict:
    merged = dict(block["paper"])
    if scale != "paper":
        merged.update(block.get(scale) or {})
    return merged


def key_path(error: jsonschema.ValidationError) -> str:
    """``experiments.OP-F1.paper.widths[0]`` for a validation error's location."""
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def explain(error: jsonschema.ValidationError, command_line: bool = True) -> str:
    """One line that names the offending key and says what is wrong with it (``command_line``: the
    value may have come from ``--config``, whose nested values arrive as strings)."""
    err = error
    # For "anyOf/oneOf" failures the most specific sub-error says more.
    import jsonschema

    best = jsonschema.exceptions.best_match([error])
    if best is not None:
        err = best
    where = key_path(err)
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        where = f"{where}.{missing}" if where != "<top level>" else missing
        return f"invalid config: missing key '{where}'"
    if err.validator in ("additionalProperties", "unevaluatedProperties"):
        # jsonschema names the offenders as "('a', 'b' were unexpected)".
        found = re.search(r"\((.*) (?:was|were) unexpected\)", err.message)
        unknown = found.group(1) if found else err.message
        what = "experiment id" if where == "experiments" else "key"
        line = f"invalid config at '{where}': unknown {what} {unknown}"
        if err.validator == "additionalProperties":
            line += f" (known: {', '.join(sorted(err.schema.get('properties', {})))})"
        return line
    if isinstance(err.instance, float) and not math.isfinite(err.instance):
        return f"invalid config: key '{where}' = {err.instance!r}: a finite number is meant here (not .nan or .inf)"
    if isinstance(err.instance, float) and err.validator == "type" and "integer" in str(err.validator_value):
        return (f"invalid config: key '{where}' = {err.instance!r}: a whole number is meant here, written without "
                f"a decimal point or exponent (2, not 2.0 or 2e0)")
    line = f"invalid config: key '{where}' = {err.instance!r}: {err.message}"
    kinds = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
    if (isinstance(err.instance, str) and err.validator == "type" and re.fullmatch(r"[-+]?\d+[eE][-+]?\d+", err.instance)
            and {"number", "integer"} & set(kinds)):
        # YAML 1.1 reads an exponent without a decimal point as text
        how = ("digits" if "number" not in kinds
               else f"a decimal point, e.g. {err.instance.lower().replace('e', '.0e', 1)}")
        line += f" (YAML reads {err.instance} as text, not a number: write it with {how})"
    elif isinstance(err.instance, str) and err.validator == "type" and command_line:
        # `--config key={a: {b: [1, 2]}}` hands nested values over as strings
        line += (" (values nested under --config arrive as strings: put the change in a YAML file and pass "
                 "`--configfile my.yaml`, which Snakemake merges over config.yaml)")
    return line


def rejected(error: jsonschema.ValidationError, files, command_line: Mapping | None = None,
             unset: str | None = None) -> str:
    """``explain``'s line with where the key is set (``locate`` in the config ``files``, unless the
    run's ``--config`` values ``command_line``, which Snakemake applies last, set it) and the fix:
    what a run that the schema refuses ends with. ``unset``: what to name for a key no file sets
    where the command has no ``--config`` (default: the command line's ``--config``)."""
    import jsonschema

    err = jsonschema.exceptions.best_match([error]) or error
    keys = list(err.absolute_path)
    if err.validator in ("additionalProperties", "unevaluatedProperties"):
        keys += re.findall(r"'([^']+)'", err.message.split("(")[-1])[:1]  # the first unknown key itself
    where = None if _sets(command_line, keys) else locate(files, keys)
    return (f"{where or unset or 'the command line (--config)'}: {explain(error, command_line=not (where or unset))}; correct it "
            "there (every key and its type: workflow/schemas/config.schema.yaml)")


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML file that sets one key twice: YAML keeps the second and drops the first
    with no word (a second ``quick:`` under an experiment replaces its whole quick block). The
    message names the file, both lines and the key's path, and says to delete one."""


def read_yaml(path: str | Path):
    """The YAML document at ``path``, parsed by libyaml where PyYAML has it: the same data as
    ``yaml.safe_load`` in a tenth of the time (config.yaml and claims.yaml, about 1,000 lines each,
    are read by every Snakemake start and every claims job). ``yaml.YAMLError`` when it is not YAML,
    ``DuplicateKeyError`` (one) where a mapping sets a key twice (a walk of the parsed nodes, about 5%
    of the parse)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(Path(path).read_text())
    try:
        node = loader.get_single_node()
        twice = _set_twice(node) if node is not None else None
        if twice:
            key, first, second = twice
            from ..integrity import shown

            raise DuplicateKeyError(f"{shown(path)}, lines {first} and {second}: key '{key}' is set twice, and YAML "
                                    "would keep the second silently; delete one of them and run the command again")
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


_MERGE = "tag:yaml.org,2002:merge"  # `<<: *anchor`: the keys beside it override the anchor's, by design


_STR, _COMPLEX = "tag:yaml.org,2002:str", object()


def _key(node):
    """A mapping key as the mapping holds it: a string's text; another scalar's value (``1`` and
    ``1.0`` are one key, ``~`` and ``null`` another, ``1`` and ``"1"`` two); a key that is itself
    a list or mapping, none to compare (``_COMPLEX``)."""
    if not isinstance(node, yaml.ScalarNode):
        return _COMPLEX
    return node.value if node.tag == _STR else yaml.safe_load(node.value)


def _set_twice(root) -> tuple[str, int, int] | None:
    """The first key a mapping under ``root`` (a composed YAML node) sets twice, as its path
    (``experiments.EP-F2.quick``, ``claims[3].expect``) and the two lines; None when none is."""
    todo, seen = [(root, "")], set()
    while todo:
        node, path = todo.pop()
        if id(node) in seen:  # an alias: walked once
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}
            for key, value in node.value:
                if key.tag == _MERGE:
                    continue
                name = _key(key)
                if name in lines:
                    return f"{path}.{key.value}" if path else key.value, lines[name], key.start_mark.line + 1
                if name is not _COMPLEX:
                    lines[name] = key.start_mark.line + 1
                if not isinstance(value, yaml.ScalarNode):
                    todo.append((value, f"{path}.{name}" if path else str(name)))
        elif isinstance(node, yaml.SequenceNode):
            todo += [(item, f"{path}[{i}]") for i, item in enumerate(node.value) if not isinstance(item, yaml.ScalarNode)]
    return None


SCHEMA = Path("workflow", "schemas", "config.schema.yaml")  # in the checkout


def read_config(path: str | Path) -> dict:
    """A whole config (``config.yaml`` or a copy of it, as `plan --config` reads) as the workflow reads
    it, the schema's defaults filled in; ``ValueError`` with the one sentence that refuses it: not
    YAML or a key set twice (its lines), a value the schema refuses (its key and line) or a recipe
    no ``recipes:`` block holds."""
    import jsonschema

    if problem := yaml_problem(path):
        raise ValueError(problem)
    config = read_yaml(path)
    try:
        here = Path(__file__).resolve().parents[3] / SCHEMA  # this library's checkout's, else the config's
        validate(config, here if here.exists() else Path(path).resolve().parent / SCHEMA)
    except jsonschema.ValidationError as e:
        raise ValueError(rejected(e, [path], unset=str(path))) from None
    if unknown_recipes(config):
        raise ValueError(unknown_recipes(config)[0])
    return config


def validate(config: dict, schema_path: str | Path) -> None:
    """Check ``config`` against the JSON schema at ``schema_path`` and fill in its defaults, as
    Snakemake's ``snakemake.utils.validate`` does (draft 2020-12, ``properties`` set their
    ``default``), with the schema read by ``read_yaml``. Raises ``jsonschema.ValidationError``."""
    import jsonschema

    schema = read_yaml(schema_path)
    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def with_defaults(validator, properties, instance, subschema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(key, sub["default"])
        yield from check_properties(validator, properties, instance, subschema)

    def finite_number(checker, instance) -> bool:  # YAML's .nan and .inf are floats, never a setting
        return base.TYPE_CHECKER.is_type(instance, "number") and (
            not isinstance(instance, float) or math.isfinite(instance))

    def whole_number(checker, instance) -> bool:  # JSON schema counts 2.0 an integer; range(2.0) does not
        return isinstance(instance, int) and not isinstance(instance, bool)

    checker = base.TYPE_CHECKER.redefine_many({"number": finite_number, "integer": whole_number})
    jsonschema.validators.extend(base, {"properties": with_defaults}, type_checker=checker)(schema).validate(config)


def yaml_problem(path: str | Path) -> str | None:
    """One line naming ``path``, the line and what is wrong when it is not readable YAML (Snakemake's
    own message names neither the file nor the line), or when it sets a key twice; None when it reads."""
    try:
        read_yaml(path)
        return None
    except DuplicateKeyError as e:
        return str(e)
    except yaml.YAMLError:
        pass
    try:  # the pure-Python parser again, for its message (libyaml's can lack the problem's words)
        with open(path) as f:
            yaml.safe_load(f)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        return f"{path}{at} is not valid YAML: {problem}; correct it there and run the command again"
    return None


def _sets(values, keys) -> bool:
    """Whether ``values`` (``--config``'s) set the key path ``keys``, or a part of it whole."""
    if not values:
        return False
    for key in keys:
        if not isinstance(values, Mapping):
            return True  # a value above the key, given whole (nested values arrive as strings)
        if str(key) not in values:
            return False
        values = values[str(key)]
    return True


def locate(files, keys) -> str | None:
    """``"my.yaml, line 12"``: where the last of ``files`` (later ones override earlier ones, as
    Snakemake merges them) that sets the key path ``keys`` sets it, or the deepest part of it that
    it sets; None when no file sets any of it (a value from ``--config``)."""
    from ..integrity import shown

    for path in reversed([shown(f) for f in files]):
        try:
            node = yaml.compose(Path(path).read_text())
        except (OSError, yaml.YAMLError):
            continue
        found = None
        for key in keys:
            if isinstance(node, yaml.MappingNode):
                match = [(k, v) for k, v in node.value if k.value == str(key)]
                if not match:
                    break
                found, node = match[-1][0], match[-1][1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                found = node = node.value[key]
            else:
                break
        if found is not None:
            return f"{path}, line {found.start_mark.line + 1}"
    return None


def unknown_recipes(config: dict) -> list[str]:
    """One line per ``recipe`` (of an experiment or a training spec, or a ``recipes_by_dataset``
    value) that names no recipe under ``recipes:``, with its key and the known names."""
    known = config.get("recipes", {})
    lines = []
    for section in ("training", "experiments"):
        for owner, block in (config.get(section) or {}).items():
            for scale, s in block.items():
                named = {"recipe": s.get("recipe")} if isinstance(s, dict) else {}
                named |= {f"recipes_by_dataset.{d}": r for d, r in ((s or {}).get("recipes_by_dataset") or {}).items()}
                for key, name in named.items():
                    if isinstance(name, str) and name not in known:
                        lines.append(f"invalid config: key '{section}.{owner}.{scale}.{key}' = {name!r} names no "
                                     f"recipe under `recipes:` (known: {', '.join(sorted(known))})")
    return lines
