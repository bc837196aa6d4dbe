"""The README's status table is the one the registry and config give: it cannot say "planned" for
what is built, or miss an experiment."""

import yaml

from conftest import ROOT
from reluinit import catalogue


def test_readme_status_table_is_generated_from_the_catalogue():
    table = catalogue.status_table(yaml.safe_load((ROOT / "config.yaml").read_text()))
    readme = (ROOT / "README.md").read_text()
    assert table in readme, "README's status table is stale: paste `python -m reluinit.catalogue`"
    assert "planned" not in readme.split("## ", 1)[0]
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert all(exp in table for exp in config["experiments"])
