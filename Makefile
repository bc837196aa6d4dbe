# Two entry points for a fresh machine (Python >= 3.11 with venv and pip):
#   make quick   install everything into .venv and build every target at the quick scale
#   make test    install everything into .venv and run the test suite (the command CI runs): unit
#                tests and the workflow's mechanics on a tiny build of eight quick targets
#   make test-fast  the suite without the tests that run Snakemake or SLURM: the inner loop
#   make test-build  the tests that read the whole quick build, which they make (CI runs them too)
#   make smoke   run the paper scale's smoke subset (one job per experiment, model and dataset)
#   make generated  regenerate every generated file (catalogue, plan numbers, claims record, reference)
#   make docs    build the documentation site into site/ (strict: a broken link or any warning fails)
#   make docs-serve  serve it at http://127.0.0.1:8000, rebuilt as pages change
#   make reference DATA_DIR=<folder with MNIST>  rerun the CPU reference at the paper scale into
#                results/paper, then export and render it into reference/ (hours on 2 cores)
PYTHON ?= python3
VENV ?= .venv
CORES ?= 2
DATA_DIR ?= data
BIN := $(VENV)/bin

.PHONY: install quick test test-fast test-build smoke generated docs docs-serve reference clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

# Reinstall when the package's requirements change. The docs extra too: the suite builds the site.
$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e ".[test,docs]"
	touch $@

install: $(VENV)/.installed

quick: install
	$(BIN)/snakemake all --cores $(CORES) --config scale=quick
	@echo ""
	@echo "Open results/quick/reports/scorecard.html (every claim, judged), a paper's notebook"
	@echo "results/quick/reports/{TG,EP,OP,LR,RP,X}.html, or the figures in results/quick/figures/."

# One pytest-xdist worker per core (tests/conftest.py shares the tiny build between them).
test: install
	$(BIN)/python -m pytest -v -n $(CORES)

# What the whole quick scale shows (every figure drawn, every claim judged, the report): marker
# `build`, on one quick build of every target that the tests share.
test-build: install
	$(BIN)/python -m pytest -v -n $(CORES) -m build

test-fast: install
	$(BIN)/python -m pytest -n $(CORES) -m "not workflow and not slurm and not smoke"

smoke: install
	$(BIN)/python -m pytest -v -m smoke

generated: install
	$(BIN)/python -m reluinit.pipeline.regenerate

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve

# The CPU experiments of the reference (reluinit.report.reference.EXPERIMENTS), all in one run.
reference: install
	$(BIN)/snakemake $(shell $(BIN)/python -m reluinit.report.reference targets) --cores $(CORES) --keep-going \
		--config scale=paper data_dir=$(DATA_DIR)
	$(BIN)/python -m reluinit.tools.precision --data-dir $(DATA_DIR) --out reference/paper/precision.csv
	$(BIN)/python -m reluinit.report.reference export
	$(BIN)/python -m reluinit.report.reference render

clean:
	rm -rf results .snakemake report.html report.zip site
