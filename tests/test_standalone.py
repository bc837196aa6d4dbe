"""The repository stands alone: a user's clone has no ``../shared`` beside it, so nothing a reader
opens (README, catalogue, notebooks, the Snakemake report's pages) may link outside the repository;
papers are linked by their public identifiers. A licence and a citation file ship with it."""

import re
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT
from reluinit.pipeline import catalogue

# One worker runs this file's tests (pytest-xdist), so its module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_standalone")

# [text](target) in markdown (README, notebooks' markdown cells) and `text <target>`_ in rst.
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
RST_LINK = re.compile(r"<([^>\s]+)>`_")
# a path in backticks that climbs out of its folder: `../shared/EXPERIMENTS.md`
CLIMBING_PATH = re.compile(r"`(\.\./[^`]*)`")
# href="..." and src="..." (or single quotes) in rendered HTML
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']*)["']""")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """What a clone of the working tree holds: the files git tracks (or would, once added), copied
    alone into an empty folder (no sibling ``shared/``, no results, no .venv)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    dest = tmp_path_factory.mktemp("user") / "reluinit"
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / name)
    assert not (dest.parent / "shared").exists()
    return dest


def _documents(clone):
    """(file, text a reader sees) for every page a reader opens."""
    docs = [clone / "README.md", clone / "CATALOGUE.md"]
    docs += sorted((clone / "workflow" / "report").glob("*.rst"))
    out = [(p, p.read_text()) for p in docs]
    for nb in sorted((clone / "notebooks").glob("*.ipynb")):
        cells = yaml.safe_load(nb.read_text())["cells"]  # JSON is YAML
        out.append((nb, "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")))
    return out


def _outside_links(path, text, root):
    """The links and ``../`` paths of one page that point outside ``root`` or to nothing."""
    name = path.relative_to(root)
    bad = []
    for target in MD_LINK.findall(text) + RST_LINK.findall(text):
        if re.match(r"https?://", target) or target.startswith("#"):
            continue
        resolved = (path.parent / target.split("#")[0]).resolve()
        if not resolved.is_relative_to(root.resolve()) or not resolved.exists():
            bad.append(f"{name}: ({target})")
    bad += [f"{name}: `{p}`" for p in CLIMBING_PATH.findall(text)
            if not (path.parent / p).resolve().is_relative_to(root.resolve())]
    return bad + ([f"{name}: mentions ../shared"] if "../shared" in text else [])


def html_links_outside(page, root):
    """The ``href``/``src`` targets of a rendered HTML page that are neither an http(s) address, a
    ``data:`` URI or an anchor, nor a file inside ``root`` that exists."""
    bad = []
    for target in HTML_LINK.findall(page.read_text(errors="replace")):
        if re.match(r"(https?:|data:|mailto:|#|javascript:)", target) or not target:
            continue
        resolved = (page.parent / target.split("#")[0].split("?")[0]).resolve()
        if not resolved.is_relative_to(root.resolve()) or not resolved.exists():
            bad.append(f"{page.relative_to(root)}: {target}")
    return bad


def test_no_rendered_page_of_the_reference_links_outside_it(clone):
    """Every href and src of the reference's HTML (scorecard, notebooks) resolves inside the clone
    (the quick build's pages: tests/test_workflow.py)."""
    pages = sorted((clone / "reference").rglob("*.html"))
    assert len(pages) >= 6
    bad = [line for page in pages for line in html_links_outside(page, clone)]
    assert not bad, "links outside the repository:\n" + "\n".join(bad[:20])


def test_the_html_link_check_can_fail(tmp_path):
    page = tmp_path / "repo" / "reports" / "RP.html"
    page.parent.mkdir(parents=True)
    page.write_text('<a href="../../../../shared/papers/rp.txt">text</a> <img src="missing.png"> '
                    '<a href="https://arxiv.org/abs/1">arXiv</a> <a href="#RP-T1">x</a> <img src="data:image/png;base64,AA">')
    assert html_links_outside(page, tmp_path / "repo") == ["reports/RP.html: ../../../../shared/papers/rp.txt",
                                                           "reports/RP.html: missing.png"]


def test_no_document_links_outside_the_repository(clone):
    bad = [line for path, text in _documents(clone) for line in _outside_links(path, text, clone)]
    assert not bad, "links outside the repository:\n" + "\n".join(bad)


def test_the_link_check_catches_what_the_readme_had(tmp_path):
    """The check can fail: the README's old links to ../shared, and a link to a missing file."""
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "EXPERIMENTS.md").write_text("catalogue")
    readme = root / "README.md"
    old = "the catalogue, [`../shared/EXPERIMENTS.md`](../shared/EXPERIMENTS.md); papers in `../shared/papers/`"
    assert len(_outside_links(readme, old, root)) == 4  # the link, two paths, the mention
    assert _outside_links(readme, "[gone](CATALOGUE.md)", root) == ["README.md: (CATALOGUE.md)"]
    (root / "CATALOGUE.md").write_text("here")
    assert _outside_links(readme, "[ok](CATALOGUE.md), [arXiv](https://arxiv.org/abs/1)", root) == []


def test_readme_links_the_catalogue_and_every_paper(clone):
    readme = (clone / "README.md").read_text()
    assert "(CATALOGUE.md)" in readme and (clone / "CATALOGUE.md").exists()
    for paper, ref in catalogue.REFERENCES.items():
        assert ref["url"] in readme, f"README does not link {paper} ({ref['url']})"
        assert ref["url"] in (clone / "CATALOGUE.md").read_text()


def test_license_and_citation_name_the_five_papers(clone):
    assert "MIT License" in (clone / "LICENSE").read_text()
    cff = yaml.safe_load((clone / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "MIT" and cff["authors"]
    titles = {r["title"].lower(): r for r in cff["references"]}
    for paper in catalogue.REFERENCES:
        title = catalogue.PAPERS[paper].lower()
        assert title in titles, f"CITATION.cff lacks {paper}: {catalogue.PAPERS[paper]}"
        assert titles[title]["url"] == catalogue.REFERENCES[paper]["url"]
        assert titles[title]["authors"] and titles[title]["year"]


def test_no_documentation_page_points_outside_the_repository(clone):
    """The site's pages (docs/): the strict build (tests/test_docs.py) checks that their links
    resolve inside the site; here, that none names ``../shared`` or a path climbing out of the clone."""
    pages = sorted((clone / "docs").rglob("*.md"))
    assert len(pages) >= 15
    bad = [f"{p.relative_to(clone)}: {found}" for p in pages for found in
           (["../shared"] if "../shared" in p.read_text() else [])
           + [c for c in CLIMBING_PATH.findall(p.read_text()) if not (p.parent / c).resolve().is_relative_to(clone.resolve())]]
    assert not bad, bad
