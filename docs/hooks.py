"""MkDocs hooks (mkdocs.yml `hooks:`): pages and files generated from the repository at build
time, so that the site cannot drift from it.

- the reference's figures (``reference/paper/figures/*.png``), its executed notebooks and its
  scorecard (``reference/paper/reports/*.html``) are served at the same paths under the site;
- ``catalogue.md`` is ``CATALOGUE.md`` and ``changelog.md`` is ``CHANGELOG.md``;
- ``<!-- gallery -->`` in ``gallery.md`` becomes ``reluinit.report.gallery.markdown()`` and
  ``<!-- verdicts -->`` in ``reference.md`` the reference's verdict block;
- the plan's numbers are in the Markdown itself (``<!-- plan:jobs -->1,736<!-- /plan -->``, written by
  ``python -m reluinit.pipeline.plan --write-docs`` so that GitHub shows them too; tests/test_doc_numbers.py
  checks they are current): the build only drops their markers.
"""

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
COPIED = ["reference/paper/figures/*.png", "reference/paper/reports/*.html"]
PAGES = {"catalogue.md": "CATALOGUE.md", "changelog.md": "CHANGELOG.md"}


def on_files(files, config):
    for pattern in COPIED:
        for path in sorted(ROOT.glob(pattern)):
            files.append(File(str(path.relative_to(ROOT)), str(ROOT), config["site_dir"], config["use_directory_urls"]))
    for page, source in PAGES.items():
        files.append(File.generated(config, page, content=(ROOT / source).read_text()))
    return files


def on_page_markdown(markdown, page, config, files):
    if "<!-- plan:" in markdown:  # the plan's numbers stay, their markers go (module doc)
        import re

        markdown = re.sub(r"<!-- plan:[\w.-]+ -->(.*?)<!-- /plan -->", r"\1", markdown, flags=re.S)
        markdown = re.sub(r"<!-- (end of )?plan:rp-tables[^\n]*-->\n?", "", markdown)
    if "<!-- gallery -->" in markdown:  # the marker's line (a note for readers of the source) becomes the gallery
        import yaml

        from reluinit.report import gallery

        config_yaml = yaml.safe_load((ROOT / "config.yaml").read_text())
        line = next(line for line in markdown.splitlines() if "<!-- gallery -->" in line)
        markdown = markdown.replace(line, gallery.markdown(ROOT / "reference" / "paper", config_yaml))
    if "<!-- verdicts -->" in markdown:
        import pandas as pd

        from reluinit.report import claims, reference

        root = ROOT / "reference" / "paper"
        runs = pd.read_csv(root / "runs.csv", dtype=reference.TEXT)
        markdown = markdown.replace("<!-- verdicts -->", reference.verdicts(claims.read(str(root / "claims.csv")), runs,
                                                                            absent=True, docs=""))
    return markdown
