# bayesfair: `make demo` and `make test` set up .venv themselves (Python >= 3.12 found by
# .ci/find-python; override with PYTHON=/path/to/python3.12).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench lint clean venv

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

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# Every policy family vs its NumPy reference, fresh process and steady state (writes
# results/benchmarks/grid_bench.json; hours on 2 cores). `make bench BENCH_ARGS=--quick` for a smoke
# run; the per-family scripts in experiments/benchmarks/ give the deeper analyses (README there).
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) experiments/benchmarks/grid_bench.py $(BENCH_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check bayesfair tests experiments

clean:
	rm -rf $(VENV) demo-output .pytest_cache
