# The two Quickstart commands (`make demo`, `make test`) do their own set-up: a virtual
# environment in .venv with the CPU build of torch pinned first, then petrov itself.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0
PACKAGES := cli common grids operators datasets train evaluate export inverse pretrained
SOURCES := pyproject.toml __init__.py __main__.py $(shell find $(PACKAGES) -name '*.py' -o -name '*.toml' 2>/dev/null) \
	$(wildcard pretrained/*/*.json pretrained/*/*.pt)

.PHONY: install test test-all demo demo-record tables docs pretrained clean

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

# The whole suite also compares the paper presets with the reference Galerkin Transformer, installed from
# the "reference" extra (tests/test_reference_equivalence.py; skipped, with its reason, without it).
$(VENV)/.installed-reference: $(VENV)/.installed
	$(BIN)/pip install --quiet ".[test,reference]"
	touch $@

# --rootdir=tests: the repository root is the package itself (its __init__.py); a rootdir above the tests
# makes pytest import it under the checkout folder's name, which fails for a name such as tmp.Ab3x.
# Two worker processes of one thread each (pytest-xdist), a test file to a worker (--dist loadscope: a
# file's module fixtures, such as its trained runs, are built once); the README's test, the longest, starts
# first (tests/conftest.py, which also turns off xdist's reordering of the files by their number of tests).
# PYTEST_WORKERS=0 runs the suite in this process.
PYTEST_WORKERS ?= 2
PYTEST := OMP_NUM_THREADS=1 $(BIN)/pytest -q -p no:cacheprovider --rootdir=tests -n $(PYTEST_WORKERS) --dist loadscope

test: $(VENV)/.installed
	$(PYTEST) -m "not slow" tests

# everything, the slow tests and the comparison with the reference included (what CI runs)
test-all: $(VENV)/.installed-reference
	$(PYTEST) tests

demo: $(VENV)/.installed
	$(BIN)/python examples/burgers.py --out runs/demo-burgers

# The demo measured for the docs: the same run in a folder of its own, its figure written as the record
# benchmarks/results/demo-burgers.json (command, commit, CPU, versions, date); `make tables` then renders
# it. `make demo` writes no record, so a user's checkout stays as it was.
demo-record: $(VENV)/.installed
	PETROV_QUICK=0 $(BIN)/python examples/burgers.py --out runs/demo-record --record

# The result tables between `<!-- table: NAME -->` and `<!-- /table -->` in README.md, benchmarks/README.md
# and docs/, rendered from the records in benchmarks/results/ (docs/render_tables.py says how to add one);
# `make docs` and tests/test_records.py fail while a table differs from its records.
tables: $(VENV)/.installed
	$(BIN)/python docs/render_tables.py

# The shipped operators (pretrained/NAME/: the run's best.pt and config.json, and the model card), trained by
# petrov's own commands in this folder (runs/pretrained/, data/) at fixed epochs, evaluated and packed with
# the measured figures (python -m petrov.pretrained.build --help). Hours of CPU (docs/pretrained.md); an
# interrupted build continues where it stopped. PRETRAINED_FLAGS: e.g. --only burgers-1024, or --quick (toy
# sizes into a temporary folder, nothing shipped: a check that the path runs).
PRETRAINED_FLAGS ?=
pretrained: $(VENV)/.installed
	$(BIN)/python -m petrov.pretrained.build $(if $(findstring --quick,$(PRETRAINED_FLAGS)),,--dest pretrained) $(PRETRAINED_FLAGS)

# The documentation site (mkdocs-material + mkdocstrings, pinned in the "docs" extra), offline and
# strict: every warning fails the build, an unresolved cross-reference included. The API reference reads
# the package as it installs (the top-level folders as petrov.*), staged in build/docs-src; the hooks in
# docs/hooks/ add a page per module, model and mixer and the config-file reference, and typeset the
# formulas. The gallery's figures are committed with the facts of the trained runs they were drawn
# from (docs/gallery/); docs/gallery.py only writes the page, and `python docs/gallery.py --train`
# redraws them. docs/check_site.py then checks the built site (every public name documented, no raw
# Sphinx role, no broken table, search from the file system).
# The repository root is the package: the staging folder is named petrov, as mkdocstrings looks it up.
#
# The search box of the site opened from the file system (site/index.html) runs its worker through the
# iframe-worker shim that mkdocs-material's offline plugin expects (the plugin would otherwise load it
# from a CDN whenever a page is read): fetched once from the npm registry with npm, pinned and checked.
IFRAME_WORKER_VERSION := 1.0.4
IFRAME_WORKER_SHA256 := e8c5d12d87829c503afba01d67772ea9f4aba5b7ae57a0c98e1917711030efbb
DOCS_VENDOR := $(VENV)/share/petrov-docs

$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/pip install --quiet ".[docs]"
	touch $@

$(DOCS_VENDOR)/iframe-worker-shim.js: $(BIN)/python
	@command -v npm >/dev/null || { echo "make docs needs npm (Node.js) to fetch iframe-worker"; exit 1; }
	mkdir -p $(DOCS_VENDOR)
	cd $(DOCS_VENDOR) && npm pack --silent "iframe-worker@$(IFRAME_WORKER_VERSION)" >/dev/null
	echo "$(IFRAME_WORKER_SHA256)  $(DOCS_VENDOR)/iframe-worker-$(IFRAME_WORKER_VERSION).tgz" | sha256sum --check --quiet
	tar -xzOf $(DOCS_VENDOR)/iframe-worker-$(IFRAME_WORKER_VERSION).tgz package/shim/index.js > $@.tmp
	mv $@.tmp $@

docs: $(VENV)/.installed-docs $(DOCS_VENDOR)/iframe-worker-shim.js
	rm -rf build/docs-src && mkdir -p build/docs-src/petrov
	for f in __init__.py __main__.py $(PACKAGES); do ln -s "$(CURDIR)/$$f" build/docs-src/petrov/$$f; done
	$(BIN)/python docs/gallery.py --check
	$(BIN)/python docs/render_tables.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python docs/check_site.py site

clean:
	rm -rf $(VENV) build site *.egg-info
