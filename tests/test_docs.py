"""The documentation: the site (mkdocs.yml, docs/) builds in strict mode, so a broken link, a page
missing from the navigation or any warning fails here; its gallery shows every figure of the
committed reference and every catalogue id the reference lacks, with why; the README stays short;
one version is shared by the package, CITATION.cff and CHANGELOG.md; the troubleshooting page
names every error message the tests check."""

import html
import os
import re
import subprocess
import sys
import time
import tomllib
from importlib import metadata

import pytest
import yaml

from conftest import ROOT
from reluinit.pipeline import catalogue, plan
from reluinit.report import gallery, reference

# One worker runs this file's tests (pytest-xdist), so its module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_docs")

REF = ROOT / "reference" / "paper"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    seconds = time.monotonic() - start
    assert run.returncode == 0, f"the strict docs build failed:\n{run.stdout[-3000:]}{run.stderr[-5000:]}"
    assert seconds < 120, f"the strict docs build took {seconds:.0f} s"
    return out


def test_the_strict_build_writes_every_page(site):
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(items):
        for item in items:
            for value in (item.values() if isinstance(item, dict) else [item]):
                yield from (pages(value) if isinstance(value, list) else [value])

    for page in pages(nav):
        built = site / page.replace(".md", ".html")  # use_directory_urls: false
        assert built.exists(), f"{page} was not built"
    # the reference's notebooks and scorecard are served beside the pages that link them
    for paper in catalogue.PAPERS:
        assert (site / "reference" / "paper" / "reports" / f"{paper}.html").exists()
    assert (site / "reference" / "paper" / "reports" / "scorecard.html").exists()


def test_the_gallery_shows_every_reference_figure_and_every_absent_id(site):
    page = (site / "gallery.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    figures = sorted(p.stem for p in (REF / "figures").glob("*.png"))
    assert len(figures) >= 30
    shown = set(re.findall(r'<img[^>]+src="reference/paper/figures/([^"/]+)\.png"', page))
    assert shown == set(figures), f"missing {set(figures) - shown}, extra {shown - set(figures)}"
    for exp in figures:
        assert (site / "reference" / "paper" / "figures" / f"{exp}.png").exists(), exp
        settings = yaml.safe_load((REF / "figures" / f"{exp}.json").read_text())["settings"]
        assert f"{exp}.json" in text and all(f"{k}: " in text for k in settings), exp
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    absent = [e for e in catalogue.ENTRIES if e not in figures]
    assert absent == gallery.absent_ids(REF) and absent
    for exp in absent:
        why = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", reference.absent_why(exp, config, docs=""))  # links as shown
        assert f"{exp} ({catalogue.ENTRIES[exp].place}): {why}" in text, exp
        assert "(docs/" not in why, exp
    # every claim judged on a shown figure's table is there with its verdict, and each one not
    # reproduced with its reason
    card = gallery.claims.read(str(REF / "claims.csv"))
    for _, row in card[card["table"].isin(figures)].iterrows():
        assert re.search(rf"\b{re.escape(row['claim'])}\b", text), row["claim"]
        if row["verdict"] == "not reproduced":
            assert row["why"][:80] in text, row["claim"]


def test_the_gallery_follows_the_tree(tmp_path):
    """It is generated from the tree, not written by hand: a figure removed from a copy of the
    tree moves to the absent list."""
    import shutil

    copy = tmp_path / "paper"
    shutil.copytree(REF / "figures", copy / "figures")
    for name in ("claims.csv", "runs.csv"):
        shutil.copy(REF / name, copy / name)
    (copy / "figures" / "OP-F2.png").unlink()
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    text = gallery.markdown(copy, config)
    assert "figures/OP-F2.png" not in text and "- **OP-F2** (" in text and "figures/OP-F1.png" in text


def test_the_readme_is_short_and_links_into_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in ("getting-started", "running", "results", "cluster", "gallery", "troubleshooting", "api/index"):
        assert f"(docs/{page}.md)" in readme, page
    assert "(CHANGELOG.md)" in readme and "reference/paper/figures/" in readme


def test_one_version_for_package_citation_and_changelog():
    import reluinit

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    newest = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M).group(1)
    assert reluinit.__version__ == str(cff["version"]) == newest
    assert metadata.version("reluinit") == reluinit.__version__  # pyproject reads it (dynamic)
    assert "version" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dynamic"]


# The error messages the tests check (tests/test_errors.py, test_config.py, test_damage.py,
# test_integrity.py, test_datasets.py, test_claims.py), each of which the troubleshooting page
# must quote with its fix.
MESSAGES = [
    "is a catalogue id, not a target",
    "names no experiment of config.yaml",
    "a whole number is meant here",
    "`sbatch` is not on the PATH",
    "The SLURM controller does not answer",
    "torch sees no CUDA device",
    "names no recipe under `recipes:`",
    "invalid config: key",
    "missing key",
    "unknown experiment id",
    "which Snakemake merges over config.yaml",
    "could not download",
    "is not available here",
    "which needs no download",
    "then rerun",
    "is damaged (",
    "delete it and fetch",
    "the same size as written but other bytes. Rebuild it with",
    "moved to",
    "has MD5",
    "its measure uses",
    "unknown pruning method",
    "unknown init",
    "no integer C gives a discrete set",
    "starting afresh",
    "ImageNet (RP-T8, optional) does not fit in device memory",
    "is not valid YAML",
    "correct it there (every key and its type",
    "needs at least",
    "free space there",
    "is not a partition of this cluster",
    "sbatch refused this run's jobs",
    "has unknown key(s)",
    "lacks quote, fails; add",
    "sits under `cells:`, which holds paper tables (keys, rows); move it up into the `claims:` section",
    "has no column(s)",
    "does not declare may hold them",
    "the list of what",
    "listed again from the seals under",
    "its rows are not a count",
    "a pandas method or attribute, not its column",
    "the power '10 ** 10 ** 10'",
    "is not the recorded",
    "parts.csv has no record of part",
    "rename it back with",
    "has its own forward, so what it computes",
    "which can change what it computes",
    "rtol must be a number from 0 to",
    "patterns must hold each neuron's piece",
    "is not a checkpoint this pipeline wrote",
    "so the harvest cannot make its results tree",
    "so every part would run again",
    "is not a target: build it with",
    "names no part of",
    "the folder this Snakemake runs in",
    "is set twice, and YAML would keep the second silently",
    "where a cost table holds",
    "give a file in a folder that exists and you can write",
    "density must be a number in [0, 1]",
    "give (x, y) batches, tuples or lists",
    "is not a conv or linear weight of the model",
    "give a mask of the weight's shape",
    "are one tensor (tied weights)",
    "edited after export: its",
    "tables.csv records no digest for it",
    "records it but the tree does not hold it",
    "so the claims that read it are not judged",
    "tables.csv is damaged: it lacks the column(s)",
    "can be checked and no claim is judged on it",
    "is not an experiment's table in a reference tree",
    "refused as damaged or edited",
    "is empty (0 rows): rebuild it with",
    "give it `paper: OP` or a table of X",
    "holds no reference tree (no runs.csv)",
    "export takes catalogue ids (CATALOGUE.md lists them)",
]


def test_troubleshooting_quotes_every_message_the_tests_check(site):
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    missing = [m for m in MESSAGES if m not in page]
    assert not missing, f"docs/troubleshooting.md lacks {missing}"
    shown = _text(site / "troubleshooting.html")  # and the built page shows them, word for word
    missing = [m for m in MESSAGES if m not in shown]
    assert not missing, f"the built troubleshooting page does not show {missing}"


COMMAND = re.compile(r"(?:snakemake|python|make|bash|pip|git)\b")


def _text(page) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _commands(page) -> list[str]:
    """Every command a built page shows: a line of a code block or span that starts with one, and
    one quoted in backticks inside a code span (a message that gives its fix)."""
    codes = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<code[^>]*>(.*?)</code>", page.read_text(), re.S)]
    found = [line.strip() for c in codes for line in c.splitlines() if COMMAND.match(line.strip())]
    return found + [q for c in codes for q in re.findall(r"`([^`]*)`", c) if COMMAND.match(q)]


@pytest.mark.parametrize("page", ["troubleshooting", "running", "cluster", "getting-started"])
def test_every_command_a_page_shows_is_whole(site, page):
    """What the reader sees, not the Markdown: a backtick inside a code span once ended it early, and
    a <placeholder> in the rest was read as an HTML tag and vanished (`snakemake /fetched/mnist.json`)."""
    commands = _commands(site / f"{page}.html")
    assert commands
    for command in commands:
        assert "`" not in command, command  # a code span cut short
        assert not re.search(r"(^|\s)/\w", command), command  # a path whose first segment vanished
    text = _text(site / f"{page}.html")
    assert not re.search(r"^\s*: ", text, re.M), "a definition list shown as ': ' text"
    prose = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<(code|pre)\b.*?</\1>", "", (site / f"{page}.html").read_text(),
                                                        flags=re.S)))
    assert "`" not in prose, re.findall(r".{0,60}`.{0,60}", prose)[:3]  # a code span that ended early
    assert not re.search(r"\bsnakemake\s+/\w", text), re.findall(r"snakemake\s+/\S+", text)


# A path of the machine that built something (a home, a scratch or temporary folder): never shown.
MACHINE_PATH = re.compile(r"(?<![\w.~:/-])/(?:tmp|work|root|home|Users|mnt|scratch|opt|srv)/[^\s\"'<)`]*")


def test_no_machine_path_builders_note_or_dated_history_in_the_site_or_the_reference(site):
    shown = [p for p in site.rglob("*") if p.suffix in (".html", ".json")]
    kept = [p for p in (ROOT / "reference").rglob("*") if p.suffix in (".md", ".json", ".csv", ".log", ".txt", ".yaml")]
    for path in shown + kept:
        found = MACHINE_PATH.findall(path.read_text(errors="replace"))
        assert not found, f"{path} shows {found[:3]}"
    pages = [(p, _text(p)) for p in site.rglob("*.html") if p.name != "changelog.html"]  # the one place for history
    pages += [(p, p.read_text()) for p in (ROOT / "reference").rglob("*.md")]
    assert len(pages) > 30 and any(p.parent.name == "papers" for p, _ in pages)
    for page, text in pages:
        assert not re.search(r"\blent (machine|GPU)\b|\$OUT\b", text), (page, re.findall(r".{40}(?:lent|\$OUT).{20}", text))
        assert not re.search(r"\b(on|Later on) 20\d\d-\d\d-\d\d\b|\bLater:", text), (page, re.findall(r".{40}(?:on 20\d\d-\d\d-\d\d|Later:).{20}", text))


def test_the_cluster_page_quotes_the_plans_numbers(site):
    numbers = plan.numbers(yaml.safe_load((ROOT / "config.yaml").read_text()), "paper")
    text = re.sub(r"\s+", " ", _text(site / "cluster.html"))
    assert f"at the paper scale {numbers['jobs']} measurement, pruning and training jobs ({numbers['train_part']} training" in text
    assert f"{numbers['gpu_hours']} GPU-hours and {numbers['cpu_hours']} CPU-hours requested" in text
    assert "<!-- plan:" not in (site / "cluster.html").read_text() + (site / "performance.html").read_text()


@pytest.mark.parametrize("paper", ["tg", "ep", "op", "lr", "rp", "x"])
def test_a_paper_page_opens_with_a_reference_figure_and_the_command_that_rebuilds_it(site, paper):
    page = (site / "papers" / f"{paper}.html").read_text()
    first = re.search(r'<img [^>]*src="\.\./reference/paper/figures/([\w-]+)\.png"', page)
    first_section = page.index("<h2") if "<h2" in page else len(page)
    assert first and page.index(first.group(0)) < first_section, "no figure before the first section"
    exp = first.group(1)
    assert (site / "reference" / "paper" / "figures" / f"{exp}.png").exists()
    assert f"snakemake {exp.lower().replace('-', '_')} --cores 2" in _text(site / "papers" / f"{paper}.html")
    assert f'href="../gallery.html#{exp.lower()}"' in page and f"reference/paper/reports/{paper.upper()}.html" in page


def test_the_home_page_leads_to_your_own_network_and_make_quick_says_what_to_open():
    assert "(your-own-network.md)" in (ROOT / "docs" / "index.md").read_text()
    dry = subprocess.run(["make", "-n", "quick"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "results/quick/reports/scorecard.html" in dry and "results/quick/reports/{TG,EP,OP,LR,RP,X}.html" in dry


def test_no_message_shows_markdown_it_meant_to_format(site):
    """A code span closed with the wrong number of backticks swallows the bold and the next span:
    the page then shows `**, **` as text inside a code box."""
    for page in sorted(site.glob("*.html")):
        for code in re.findall(r"<code[^>]*>(.*?)</code>", page.read_text(), re.S):
            shown = html.unescape(re.sub(r"<[^>]+>", "", code))
            assert "`**" not in shown and "**`" not in shown, (page.name, shown[:120])
