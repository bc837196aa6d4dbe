"""The README's status table is the one the registry and config give: it cannot say "planned" for
what is built, or miss an experiment."""

import pytest
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


def test_catalogue_file_is_generated_from_registry_and_config():
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    expected = catalogue.catalogue_markdown(config)
    assert (ROOT / "CATALOGUE.md").read_text() == expected, (
        "CATALOGUE.md is stale: run `python -m reluinit.catalogue catalogue > CATALOGUE.md`")
    # every configured id has a row with its place, and both scales' settings come from the config
    for exp in config["experiments"]:
        assert f"| {exp} | {catalogue.ENTRIES[exp][0]} |" in expected
    assert "widths: [100, 500, 2000, 4060]" in expected  # OP-F1's paper block
    assert "widths: [100, 500, 4060]" in expected  # ... and its quick one
    assert "RP-T8" in expected and "optional: not built by `all`" in expected


def test_catalogue_follows_a_config_change_and_names_a_missing_entry():
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["experiments"]["OP-F1"]["quick"]["n_samples"] = 123
    assert "n_samples: 123" in catalogue.catalogue_markdown(config)
    config["experiments"]["OP-F9"] = config["experiments"]["OP-F1"]
    with pytest.raises(KeyError, match="OP-F9"):
        catalogue.catalogue_markdown(config)


def test_every_paper_has_a_public_link():
    for paper in catalogue.REFERENCES.values():
        assert paper["url"].startswith("https://") and (
            paper["url"].endswith(paper["id"].split(":")[-1].strip()) or paper["id"].split()[-1] in paper["url"])
