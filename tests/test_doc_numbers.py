"""Numbers and commands the README and the docs show, from one source each: the plan's counts and
prices are written into the Markdown by `python -m reluinit.pipeline.plan --write-docs` (so GitHub
shows them) and must be current; RP's GPU tables on the cluster page quote what `plan --ids` prints;
a time or a count quoted on two pages is the same on both, and a time is the one the Performance
page measured; no line of a code block is wider than the site's content column; and the first
screen of the pages readers open to do something shows it."""

import html
import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from reluinit import datasets
from reluinit.pipeline import paths, plan

PAGES = plan.docs_pages(ROOT)
CLUSTER = ROOT / "docs" / "cluster.md"

# Characters of a code line the content column shows whole: the Material theme's code block at a
# 1400 px wide window holds 80 of its 13.6 px monospace characters (measured in Chromium: 656 px
# inside the padding, 8.18 px a character); a wider line scrolls out of sight. The copy button
# covers the first line from its 79th character.
CODE_COLUMNS = 80
FIRST_LINE_COLUMNS = 78


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_the_plans_numbers_in_the_pages_are_current(config):
    cached = {}
    stale = [str(p.relative_to(ROOT)) for p in PAGES if plan.docs_text(p.read_text(), config, ROOT, cached) != p.read_text()]
    assert not stale, f"{stale}: run `python -m reluinit.pipeline.plan --write-docs`"
    text = CLUSTER.read_text()
    assert plan.BLOCK.search(text) and len(plan.INLINE.findall(text)) >= 8  # the cluster page's numbers, in it
    assert not re.search(r"<!-- plan:[\w.-]+ -->(?!.*?<!-- /plan -->)", text), "a plan marker with no number"


def test_write_docs_fills_a_marker_and_the_rp_block(config, tmp_path):
    numbers = plan.numbers(config, "paper")
    page = "jobs: <!-- plan:jobs -->0<!-- /plan -->, GPU-hours <!-- plan:gpu_hours -->?<!-- /plan -->"
    filled = plan.docs_text(page, config, ROOT)
    assert f"<!-- plan:jobs -->{numbers['jobs']}<!-- /plan -->" in filled and numbers["gpu_hours"] in filled


def _plan_prints(*args) -> str:
    run = subprocess.run([sys.executable, "-m", "reluinit.pipeline.plan", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_rp_section_quotes_what_plan_prints_per_table():
    printed = _plan_prints("paper", "--ids", *plan.RP_GPU_TABLES, "--cost", plan.DOCS_COST)
    rows = {line.split()[0]: line.split()[1:] for line in printed.splitlines() if re.match(r"(RP-T\d|sum)\s", line)}
    assert set(rows) == {*plan.RP_GPU_TABLES, "sum"}
    assert plan.cost_run(ROOT / plan.DOCS_COST) in printed  # the card and date of the measured prices
    text = CLUSTER.read_text()
    section = text[text.index("## RP's trained tables on a GPU cluster"):text.index("## What will it cost")]
    assert plan.cost_run(ROOT / plan.DOCS_COST) in section and plan.DOCS_COST in section
    commands = [line.split("#")[0].split() for line in section.splitlines() if line.startswith("snakemake rp_t")]
    for exp in plan.RP_GPU_TABLES:
        jobs, declared, measured, _cpu, longest = rows[exp]
        row = next(line for line in section.splitlines() if line.startswith(f"| {exp} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[3:7] == [jobs, declared, measured, f"{longest} h"], (row, rows[exp])
        assert ["snakemake", paths.target(exp), "--profile", "profiles/slurm"] in commands, exp
    total = next(line for line in section.splitlines() if line.startswith("| all five"))
    assert f"| {rows['sum'][0]} | {rows['sum'][1]} | {rows['sum'][2]} |" in total
    # the one command for all five, whole, and what the data are and where they go
    targets = " ".join(paths.target(e) for e in plan.RP_GPU_TABLES)
    assert f"snakemake {targets} --profile profiles/slurm \\" in section
    for needed in (datasets.TINY_IMAGENET_URL, datasets.TINY_IMAGENET_MD5, f"{datasets.TINY_IMAGENET_DIR}/train/<wnid>/images/",
                   f"{datasets.TINY_IMAGENET_DIR}/val/<wnid>/", f"{datasets.SHAPES['tiny_imagenet'][1]} class folders",
                   "--unlock", "retries: 1", "figures/RP-T1.png"):
        assert needed in section, needed


def test_the_rp_page_links_its_gpu_tables_before_its_first_figure():
    page = (ROOT / "docs" / "papers" / "rp.md").read_text()
    link = page.find("(../cluster.md#rps-trained-tables-on-a-gpu-cluster)")
    assert 0 <= link < page.index("![") and "## RP's trained tables on a GPU cluster" in CLUSTER.read_text()
    assert "(#rps-trained-tables-on-a-gpu-cluster)" in CLUSTER.read_text().split("## ", 1)[0]  # the cluster page's top


def _code_lines(text: str):
    """(line, its limit) of every line of a page's fenced code blocks, whatever their language."""
    for block in re.finditer(r"^ *```[^\n]*\n(.*?)^ *```", text, re.S | re.M):
        for i, line in enumerate(block.group(1).splitlines()):
            yield line, FIRST_LINE_COLUMNS if i == 0 else CODE_COLUMNS


def test_no_code_line_is_wider_than_the_content_column():
    wide = [f"{p.relative_to(ROOT)}: {line}" for p in PAGES for line, limit in _code_lines(p.read_text())
            if len(line) > limit]
    assert not wide, (f"break these (at most {CODE_COLUMNS} characters, {FIRST_LINE_COLUMNS} on a block's first "
                      "line): in shell, with `\\`; in Python, inside the brackets, or move a trailing comment "
                      "onto its own line above; in a text table, wrap the description column:\n" + "\n".join(wide))
    assert list(_code_lines("```bash\nmake quick\nmake test\n```\ntext\n```python\nx = 1\n```\n```\nplain\n```\n")) == [
        ("make quick", FIRST_LINE_COLUMNS), ("make test", CODE_COLUMNS), ("x = 1", FIRST_LINE_COLUMNS),
        ("plain", FIRST_LINE_COLUMNS)]


# The times the pages quote, each from its row of the Performance page's table: (command, the row's
# first cell, the pattern of the measured minutes and seconds in it).
TIMES = [
    ("make quick", "Quick build", r"(\d+) min (\d+) s"),
    ("make test", "Test suite", r"tests in (\d+) min (\d+) s"),
    ("make test-build", "Test suite", r"`make test-build` \(\d+ tests\) (\d+) min (\d+) s"),
    ("make test-fast", "Test suite", r"`make test-fast` \(\d+ tests\) (\d+) min (\d+) s"),
    ("make smoke", "Smoke subset", r"`make smoke` (\d+) min (\d+) s"),
    ("snakemake smoke", "Smoke subset", r"jobs in (\d+) min (\d+) s"),
]
COMMAND = re.compile(r"(make quick|make test-fast|make test-build|make test|make smoke|snakemake smoke)(?![-\w])")
QUOTED = re.compile(r"(?:~|about )(\d+)(?: 1/2|½)? minutes?|(\d+) min (\d+) s")


def measured_minutes() -> dict[str, int]:
    """Each command's time as the Performance page measured it, in whole minutes."""
    rows = {r.split("|")[1].strip(): r for r in (ROOT / "docs" / "performance.md").read_text().splitlines()
            if r.startswith("| ")}
    out = {}
    for command, row, pattern in TIMES:
        minutes, seconds = re.search(pattern, rows[row]).groups()
        out[command] = round(int(minutes) + int(seconds) / 60)
    return out


def quoted_times(text: str) -> list[tuple[str, str, int]]:
    """(command, the quote, its minutes) for every time a page quotes after naming a command on the
    same line: a time belongs to the command named last before it."""
    found = []
    for line in text.splitlines():
        events = sorted([(m.start(), "command", m.group(1)) for m in COMMAND.finditer(line)]
                        + [(m.start(), "time", m) for m in QUOTED.finditer(line)], key=lambda e: e[0])
        command = None
        for _, kind, value in events:
            if kind == "command":
                command = value
            elif command:
                minutes = int(value.group(1)) if value.group(1) else round(int(value.group(2)) + int(value.group(3)) / 60)
                found.append((command, value.group(0), minutes))
    return found


def test_every_page_quotes_the_measured_time_of_each_command():
    measured = measured_minutes()
    assert measured["make quick"] and measured["make test"] > measured["make test-fast"]
    wrong = [f"{p.relative_to(ROOT)}: {command} '{quote}', measured {measured[command]} minutes"
             for p in PAGES if p.name not in ("performance.md", "claims.md")
             for command, quote, minutes in quoted_times(p.read_text()) if minutes != measured[command]]
    assert not wrong, "\n".join(wrong)
    quoted = {c for p in PAGES for c, _, _ in quoted_times(p.read_text())}
    assert quoted >= {"make quick", "make test", "make test-fast", "make test-build", "make smoke"}
    assert quoted_times("make test    # suite: ~14 minutes; make test-fast ~3 minutes") == [
        ("make test", "~14 minutes", 14), ("make test-fast", "~3 minutes", 3)]


WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def test_counts_quoted_on_two_pages_agree():
    """"six runnable examples" is Your own network's count of sections with a Python example;
    the README's "Two commands" are those of the block under it."""
    own = (ROOT / "docs" / "your-own-network.md").read_text()
    examples = sum("```python" in section for section in own.split("\n## ")[1:])
    for page in PAGES:
        for word in re.findall(r"\b(\w+)\s+runnable examples", re.sub(r"\s+", " ", page.read_text())):
            assert WORDS.get(word.lower()) == examples, f"{page.relative_to(ROOT)}: {word} runnable examples, {examples} on the page"
    readme = (ROOT / "README.md").read_text()
    heading = re.search(r"^## (\w+) commands\n(.*?)```bash\n(.*?)```", readme, re.S | re.M)
    assert heading and WORDS[heading.group(1).lower()] == len(heading.group(3).strip().splitlines())
    assert not re.search(r"\(\w+ commands\)", (ROOT / "docs" / "index.md").read_text())


# What each page's reader came for, one of which the first screen must show: a table, a figure, a
# command or a message with its fix (a definition list).
READER = re.compile(r"<(table|img|pre|dl)\b")


def _article(page) -> str:
    body = page.read_text()
    body = body[body.index("<article"):]
    return body[body.index("</h1>") + 5:]  # after the title


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.mark.parametrize("page", ["reference", "troubleshooting", "performance", "cluster"])
def test_the_first_screen_shows_the_readers_content(site, page):
    """At 1400x900 the first screen holds the title and about 700 characters of prose: the page's
    first table, figure, command or error entry must start before that much text."""
    article = _article(site / f"{page}.html")
    first = READER.search(article)
    assert first, page
    prose = html.unescape(re.sub(r"<[^>]+>", "", article[:first.start()]))
    assert len(" ".join(prose.split())) < 700, (page, " ".join(prose.split())[:300])
