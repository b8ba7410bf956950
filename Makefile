# bayesfair: `make demo` and `make test` set up .venv themselves (Python >= 3.12 found by
# .ci/find-python; override with PYTHON=/path/to/python3.12).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench lint clean venv docs docs-full docs-inventories notebooks

venv: $(STAMP)

$(STAMP): pyproject.toml
	@set -e; \
	if [ ! -x "$(PY)" ] || ! "$(PY)" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
	  base=$$(./.ci/find-python); \
	  echo "creating $(VENV) with $$base"; \
	  rm -rf $(VENV); "$$base" -m venv $(VENV); \
	fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bayesfair demo --out demo-output

# the default suite in PYTEST_WORKERS processes (pytest-xdist; whole test files per worker, so a
# module's fixtures are computed once); PYTEST_WORKERS=0 runs it in one process
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# the slow tests run with XLA's default -O3 (long executions; tests/conftest.py otherwise asks for -O0)
test-slow: $(STAMP)
	XLA_FLAGS="$$XLA_FLAGS --xla_backend_optimization_level=3" $(PY) -m pytest -q -m slow

# Every policy family vs its NumPy reference, fresh process and steady state (writes
# results/benchmarks/grid_bench.json; hours on 2 cores). `make bench BENCH_ARGS=--quick` for a smoke
# run; the per-family scripts in experiments/benchmarks/ give the deeper analyses (README there).
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) experiments/benchmarks/grid_bench.py $(BENCH_ARGS)

# documentation site (Sphinx + myst-nb, API reference from the docstrings): docs/_build/html/index.html
# `docs` executes the notebook pages whose code changed since the last build (myst-nb's jupyter-cache
# in docs/_build/.jupyter_cache: about 18 min the first time on the loaded 2-core machine, 35 s after); warnings are errors, as in
# tests/test_docs.py. `docs-full` executes every notebook page again (the cache is keyed on the
# code cells, not on the package). `docs-inventories` downloads the intersphinx inventories into
# docs/_inv (needs a network; without them the site builds without the links to numpy, jax, ...).
DOCS_OUT := docs/_build

docs: $(STAMP)
	$(PY) -m sphinx -b html -W --keep-going -q docs $(DOCS_OUT)/html
	@echo "open $(DOCS_OUT)/html/index.html"

docs-full: $(STAMP)
	$(PY) -m sphinx -b html -W --keep-going -E -D nb_execution_mode=force docs $(DOCS_OUT)/html-full
	@echo "open $(DOCS_OUT)/html-full/index.html"

docs-inventories: $(STAMP)
	$(PY) docs/_inv/fetch.py

# execute the notebooks (jupytext + nbconvert, this venv's kernel) into build/notebooks/*.ipynb;
# the data folder is found as everywhere else (docs/datasets.md: BAYESFAIR_DATA, ../shared/data, cache)
NOTEBOOKS := $(filter-out docs/notebooks/README.md,$(wildcard docs/notebooks/*.md))

notebooks: $(STAMP)
	@mkdir -p build/notebooks
	@set -e; for nb in $(NOTEBOOKS); do \
	  out=build/notebooks/$$(basename $$nb .md).ipynb; echo "executing $$nb -> $$out"; \
	  PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/jupytext --to ipynb --execute --output $$out $$nb; \
	done

lint: $(STAMP)
	$(PY) -m ruff check bayesfair tests experiments

clean:
	rm -rf $(VENV) demo-output .pytest_cache $(DOCS_OUT) docs/generated build/notebooks
