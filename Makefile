# The two Quickstart commands (`make demo`, `make test`) do their own set-up: a virtual
# environment in .venv with the CPU build of torch pinned first, then petrov itself.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0
PACKAGES := cli common operators datasets train evaluate inverse
SOURCES := pyproject.toml __init__.py __main__.py $(shell find $(PACKAGES) -name '*.py' -o -name '*.toml' 2>/dev/null)

.PHONY: install test test-all demo docs clean

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

# The documentation site (mkdocs-material + mkdocstrings, pinned in the "docs" extra), offline and
# strict: every warning fails the build. The API reference reads the package as it installs (the
# top-level folders as petrov.*), staged in build/docs-src; the gallery's figures come from quick runs
# of the examples (docs/gallery.py); every public name must have its entry (docs/check_api.py).
# The repository root is the package: the staging folder is named petrov, as mkdocstrings looks it up.
$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/pip install --quiet ".[docs]"
	touch $@

docs: $(VENV)/.installed-docs
	rm -rf build/docs-src && mkdir -p build/docs-src/petrov && cp __init__.py __main__.py build/docs-src/petrov/
	for d in $(PACKAGES); do ln -s "$(CURDIR)/$$d" build/docs-src/petrov/$$d; done
	OMP_NUM_THREADS=2 $(BIN)/python docs/gallery.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python docs/check_api.py site

clean:
	rm -rf $(VENV) build site docs/gallery/*/ *.egg-info
