"""A new experiment in one command: every file the catalogue, the workflow and the tests need.

    python -m reluinit.pipeline.new X-F2 --paper X [--place "Figure 2"] [--shows "What it shows."]

writes, and prints what it wrote:

* ``src/reluinit/experiments/<module>.py``: ``parts`` (one job) and ``measure`` (a stub measurement
  of seeded draws, so that the id builds from the first minute: replace it with the science, which
  goes into the library, and call it from here);
* ``src/reluinit/figures/<module>.py``: ``figure`` and ``summary`` of that table;
* the catalogue entry (``pipeline/catalogue.py``), ``paper:`` and ``quick:`` blocks in
  ``config.yaml`` (a seed no other experiment uses), its schema line, a section of the paper's
  notebook, and a commented claim stub, every field filled, at the end of ``claims.yaml``'s
  ``claims:`` section (above ``cells:``, which holds paper tables);
* and regenerates ``CATALOGUE.md`` and the README's status table.

``<module>`` is the id in lower case (``x_f2``). Then ``snakemake x_f2 --cores 2 --config
scale=quick`` builds it. What the author fills in: the measurement (library and ``measure``), the
figure, the settings, the claims (uncommented), and the notebook's prose; then ``python -m
reluinit.pipeline.regenerate`` rewrites every generated file (the claims' record, the plan's numbers, the
reference's verdicts).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from . import regenerate

MEASURE = '''"""{id}: {shows} (made by ``python -m reluinit.pipeline.new``: replace the stub measurement)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import resolve_part


def parts(s: dict) -> dict[str, dict]:
    """One job; a sweep would name one part per setting."""
    return {{"all": {{}}}}


def measure(s: dict, key: str, device: str = "auto", inputs=()) -> pd.DataFrame:
    """A stub: |z| of ``n`` seeded standard normal draws. Put the science in the library (a module of
    ``reluinit``, with a test against theory or brute force) and call it here; one row per measurement."""
    _, seed = resolve_part(parts(s), s["seed"], key)
    z = np.random.default_rng(seed).standard_normal(s["n"])
    return pd.DataFrame({{"draw": np.arange(s["n"]), "value": np.abs(z)}}).assign(net_seed=seed)
'''

FIGURE = '''"""{id}: its figure and summary (tables in, figures out, no torch)."""

from __future__ import annotations

import pandas as pd

from ..report import plotting


def figure(table: pd.DataFrame, s: dict):
    fig, axes = plotting.panels(1, width=5.0)
    axes[0].hist(table["value"], bins=30)
    axes[0].set(xlabel="value", ylabel="draws", title="{id}")
    return fig


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The numbers a reader compares with the paper."""
    return table[["value"]].agg(["mean", "std"]).reset_index()
'''

CLAIM = """
  # {id} (python -m reluinit.pipeline.new): to use it, delete the "# " that starts each line from
  # "- id" down, state what the paper says, then run python -m reluinit.pipeline.regenerate. As it
  # stands it claims the stub's measurement: the mean of |z| for z ~ N(0, 1) is sqrt(2/pi) = 0.798.
  # - id: {claim_id}
  #   paper: {paper}
  #   place: {place}
  #   claim: the mean of |z| over the draws is sqrt(2/pi) = 0.798
  #   table: {id}
  #   columns: [value]
  #   measure: t.value.mean()
  #   expect: "0.798 ± 0.1"
  #   kind: claim
  #   expect_from: "paper, our tolerance"
  #   quote: "the paper's words the claim stands on (Section, page)"
  #   ours: "what is not the paper's: the tolerance 0.1 (about 1.6 standard errors at the quick scale's 100 draws)"
  #   fails: "a mean of 0.65 (draws of |z| / 1.2), as a scaling bug could give"
"""


def _free_claim_id(claims_text: str, paper: str) -> str:
    taken = [int(n) for n in re.findall(rf"\bid: {paper}-(\d+)\b", claims_text)]
    return f"{paper}-{max(taken, default=0) + 1}"


def _insert_claim(root: Path, exp_id: str, paper: str, place: str) -> Path:
    """The commented stub at the end of the ``claims:`` section, above ``cells:`` (the paper tables)."""
    path = root / "claims.yaml"
    text = path.read_text()
    stub = CLAIM.format(id=exp_id, paper=paper, place=place, claim_id=_free_claim_id(text, paper))
    at = text.find("\ncells:")
    if at >= 0:  # above the comment lines that introduce the cells, too
        while text.rfind("\n", 0, at) >= 0 and text[text.rfind("\n", 0, at) + 1:at].startswith("#"):
            at = text.rfind("\n", 0, at)
    path.write_text(text.rstrip("\n") + "\n" + stub if at < 0 else text[:at].rstrip("\n") + "\n" + stub + "\n" + text[at:].lstrip("\n"))
    return path


def module_name(exp_id: str) -> str:
    return exp_id.lower().replace("-", "_")


def _free_seed(config_text: str) -> int:
    seeds = [int(s) for s in re.findall(r"\bseed: (\d+)", config_text)]
    return max(seeds, default=0) + 1


def _insert_entry(root: Path, exp_id: str, place: str, shows: str) -> Path:
    path = root / "src/reluinit/pipeline/catalogue.py"
    text = path.read_text()
    end = text.index("\n}\n", text.index("ENTRIES = {"))
    m = module_name(exp_id)
    entry = (f'\n    "{exp_id}": Entry({json.dumps(place)}, "{m}", parts="parts", measure="measure",\n'
             f'          figure="figure", summary="summary",\n          shows={json.dumps(shows)}),')
    path.write_text(text[:end] + entry + text[end:])
    return path


def _insert_config(root: Path, exp_id: str) -> Path:
    path = root / "config.yaml"
    text = path.read_text()
    block = (f"  {exp_id}:   # made by python -m reluinit.pipeline.new: the stub's settings\n"
             f"    paper: {{seed: {_free_seed(text)}, n: 1000}}\n    quick: {{n: 100}}\n")
    path.write_text(text.replace("\nexperiments:\n", "\nexperiments:\n" + block, 1))
    return path


def _insert_schema(root: Path, exp_id: str) -> Path:
    path = root / "workflow/schemas/config.schema.yaml"
    lines = path.read_text().splitlines(keepends=True)
    paper = exp_id.split("-")[0]
    ids = [i for i, line in enumerate(lines) if re.match(r"\s+[A-Z]+-[A-Za-z0-9]+: \{\$ref", line)]
    same = [i for i in ids if lines[i].strip().startswith(paper + "-")]
    at = (same or ids)[-1] + 1
    indent = re.match(r"\s*", lines[ids[-1]]).group(0)
    lines.insert(at, f'{indent}{exp_id}: {{$ref: "#/$defs/experiment"}}\n')
    path.write_text("".join(lines))
    return path


def _insert_notebook(root: Path, exp_id: str, paper: str, shows: str) -> Path:
    path = root / "notebooks" / f"{paper}.ipynb"
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and "reports.contents(" in src:
            src = re.sub(r'(reports\.contents\(results, "[A-Z]+", \[[^\]]*)\]', rf'\1, "{exp_id}"]', src)
            cell["source"] = src.splitlines(keepends=True)
    nb["cells"] += [
        {"cell_type": "markdown", "id": f"{module_name(exp_id)}-section", "metadata": {},
         "source": [f'<a id="{exp_id}"></a>\n', "\n", f"## {exp_id} (paper {paper})\n", "\n",
                    f"**Paper:** {shows}"]},
        {"cell_type": "code", "execution_count": None, "id": f"{module_name(exp_id)}-show", "metadata": {}, "outputs": [],
         "source": [f'reports.show(results, "{exp_id}", card)']},
    ]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return path


def new(exp_id: str, paper: str, root: str | Path = ".", place: str = "ours", shows: str = "What it shows.") -> list[Path]:
    """Write every file a new id needs (module doc); returns them in the order written."""
    root = Path(root)
    if not re.fullmatch(r"[A-Z]+-[A-Za-z]+\d+[a-z]?", exp_id) or not exp_id.startswith(paper + "-"):
        raise SystemExit(f"{exp_id!r} is not an id of paper {paper} (e.g. {paper}-F2, {paper}-T3): "
                         f"python -m reluinit.pipeline.new {paper}-F2 --paper {paper}")
    m = module_name(exp_id)
    exp, fig = root / f"src/reluinit/experiments/{m}.py", root / f"src/reluinit/figures/{m}.py"
    if exp.exists() or exp_id in (root / "src/reluinit/pipeline/catalogue.py").read_text():
        raise SystemExit(f"{exp_id} exists already ({exp}); pick a new id")
    exp.write_text(MEASURE.format(id=exp_id, shows=shows.rstrip(".")))
    fig.write_text(FIGURE.format(id=exp_id))
    written = [exp, fig, _insert_entry(root, exp_id, place, shows), _insert_config(root, exp_id),
               _insert_schema(root, exp_id), _insert_notebook(root, exp_id, paper, shows)]
    return written + [_insert_claim(root, exp_id, paper, place)] + regenerate.catalogue(root)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("id", help="the new catalogue id, e.g. X-F2")
    p.add_argument("--paper", required=True, help="its paper: TG, EP, OP, LR, RP or X")
    p.add_argument("--place", default="ours", help='where it is in the paper, e.g. "Figure 2"')
    p.add_argument("--shows", default="What it shows.", help="one sentence: what it shows")
    p.add_argument("--root", default=".", help="the checkout (default: here)")
    a = p.parse_args()
    for path in new(a.id, a.paper, a.root, a.place, a.shows):
        print("wrote", Path(path).resolve().relative_to(Path(a.root).resolve()))
    print(f"next: the science in the library, its call in measure, the settings, the figure; build it with "
          f"`snakemake {module_name(a.id)} --cores 2 --config scale=quick`; uncomment and state its claim (the stub "
          f"above `cells:` in claims.yaml); then `python -m reluinit.pipeline.regenerate` and `make test`")


if __name__ == "__main__":
    main()
