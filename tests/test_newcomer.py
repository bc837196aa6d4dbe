"""Small things a newcomer reads: every rule says what it does (`snakemake --list-rules`), the conda
environments name rules that exist, and no job prints an empty "Shell command: None"."""

import re

import pytest
import yaml

from conftest import ROOT, snakemake

RULE_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]


@pytest.mark.workflow
def test_every_rule_has_a_docstring():
    run = snakemake("--list-rules")
    assert run.returncode == 0, run.stderr[-2000:]
    rules = [line for line in run.stdout.splitlines() if line.strip()]
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert len(rules) >= 2 * len(config["experiments"])  # a figure rule and a short target per id
    bare = [line for line in rules if not re.fullmatch(r"\S+ \(.+\)", line)]
    assert not bare, f"rules without a docstring: {bare}"


def test_environment_files_name_the_rules_that_use_them():
    text = "\n".join(p.read_text() for p in RULE_FILES)
    named_rules = set(re.findall(r"^rule (\w+):", text, re.M)) | {"figure_<id>", "train_<spec>"}
    for env in sorted((ROOT / "envs").glob("*.yaml")):
        listed = re.search(r"\(rules?: ([^)]*)\)", env.read_text().splitlines()[0])
        assert listed, f"{env.name}: first line should name its rules"
        names = {n.strip() for n in listed.group(1).split(",")}
        assert names <= named_rules, f"{env.name} names rules that do not exist: {names - named_rules}"
        # ... and every rule that uses it (figure and train_<spec> rules are made in loops)
        users = {m.group(1) for m in re.finditer(rf"^rule (\w+):(?:(?!^\s*rule\b).)*?envs/{env.name}", text, re.M | re.S)}
        assert users <= names, f"{env.name}: used by {users - names} too"


def test_profiles_do_not_print_empty_shell_commands():
    for profile in (ROOT / "profiles").glob("*/config.yaml"):
        assert not yaml.safe_load(profile.read_text()).get("printshellcmds"), profile
