"""The conda environments list the same packages and bounds as pyproject.toml."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))


def _name(requirement):
    return re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0].lower()


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_requirements_match_pyproject(env):
    spec = yaml.safe_load(env.read_text())
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict))
    bounds = {_name(r): r for r in PYPROJECT}
    for requirement in pip:
        assert requirement in PYPROJECT, f"{env.name}: {requirement!r} differs from {bounds.get(_name(requirement))!r}"


def test_every_conda_directive_names_an_existing_env():
    named = set()
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        named |= set(re.findall(r'"\.\./\.\./envs/([\w-]+\.yaml)"', smk.read_text()))
    assert named and named <= {p.name for p in ENVS}
