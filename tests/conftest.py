"""Shared fixtures. Importing bayesfair first lets it expose one CPU device per core, so the
tests exercise the sharded simulator that users get by default.

The persistent compilation cache (bayesfair.core._compile) goes to pytest's own cache folder
(``.pytest_cache/d/bayesfair-jax``, ignored by git, removed by ``make clean``), never to the
user's home; the variable is set for the whole session, so the CLI tests' subprocesses share it
and a second ``make test`` loads the compiled chunk functions instead of compiling them."""

# isort: skip_file
import os

# XLA's CPU back end compiles with LLVM -O3 by default (xla_backend_optimization_level=3). The
# default suite mostly compiles many small programs once each (a clean clone starts with a cold
# compilation cache), so it asks for -O0: the whole default suite in a clean clone, cold cache,
# 2 workers, measured the same day: 14 min 47 s at -O3, 13 min 58 s at -O1, 10 min 35 s at -O0. The
# programs are the same (same HLO, same XLA passes); only the machine code is less optimized, so
# long executions get slower (a 2e6-shape Gamma KS test 0.6 -> 2.9 s) and an operation may round
# differently in two separately compiled programs (tests/test_diagnostics_checks.py compares such
# draws up to float32 rounding). A level the caller set in XLA_FLAGS wins:
# XLA_FLAGS=--xla_backend_optimization_level=3 runs the suite with the users' setting, and
# `make test-slow` (long runs, where execution dominates) does so.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

import bayesfair  # noqa: F401  (must precede jax: sets the host device count)
import jax
import numpy as np
import pytest

from bayesfair.core import merit as merit_mod


def pytest_configure(config):
    if getattr(config, "cache", None) is not None:  # absent with -p no:cacheprovider: a session folder
        folder = config.cache.mkdir("bayesfair-jax")
    else:
        import tempfile

        folder = tempfile.mkdtemp(prefix="bayesfair-jax-")
    os.environ["BAYESFAIR_COMPILE_CACHE_DIR"] = str(folder)
    # `make test` already runs two worker processes on two cores, so simulate's concurrent compilation
    # of a study's policies only adds threads there (measured: 39.0 s serial vs 41.7 s concurrent on
    # two test files from a cold cache). Tests compile serially unless they set this variable themselves
    # (test_simulate's concurrent-compilation test does).
    os.environ.setdefault("BAYESFAIR_SERIAL_COMPILE", "1")


@pytest.fixture
def key():
    return jax.random.key(20261121)


@pytest.fixture
def exp4():
    return merit_mod.exponential(4.0)


@pytest.fixture
def small_env():
    return bayesfair.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]), groups=[0, 0, 1, 1])
