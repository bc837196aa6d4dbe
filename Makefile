# Two entry points for a fresh machine (Python >= 3.11 with venv and pip):
#   make quick   install everything into .venv and build every target at the quick scale
#   make test    install everything into .venv and run the test suite
#   make smoke   run the paper scale's smoke subset (one job per experiment, model and dataset)
PYTHON ?= python3
VENV ?= .venv
CORES ?= 2
BIN := $(VENV)/bin

.PHONY: install quick test smoke clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

# Reinstall when the package's requirements change.
$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e ".[test]"
	touch $@

install: $(VENV)/.installed

quick: install
	$(BIN)/snakemake all --cores $(CORES) --config scale=quick

test: install
	$(BIN)/python -m pytest -v

smoke: install
	$(BIN)/python -m pytest -v -m smoke

clean:
	rm -rf results .snakemake report.html report.zip
