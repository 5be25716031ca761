# The two Quickstart commands (`make demo`, `make test`) do their own set-up: a virtual
# environment in .venv with the CPU build of torch pinned first, then petrov itself.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0
SOURCES := pyproject.toml $(shell find petrov common operators datasets train evaluate inverse -name '*.py' -o -name '*.toml' 2>/dev/null)

.PHONY: install test test-all demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	$(BIN)/pip install --quiet "$(TORCH_PIN)"

# A regular (non-editable) install, as a user gets from pip; redone whenever a source changes.
# setuptools' build/ directory is removed first: it would ship modules deleted from the sources.
$(VENV)/.installed: $(BIN)/python $(SOURCES)
	rm -rf build
	$(BIN)/pip install --quiet ".[test]"
	touch $@

install: $(VENV)/.installed

test: $(VENV)/.installed
	OMP_NUM_THREADS=2 $(BIN)/pytest -m "not slow" -q -p no:cacheprovider --rootdir=. tests

test-all: $(VENV)/.installed
	$(BIN)/pytest -q -p no:cacheprovider --rootdir=. tests

demo: $(VENV)/.installed
	$(BIN)/python examples/burgers.py --out runs/demo-burgers

clean:
	rm -rf $(VENV) build *.egg-info
