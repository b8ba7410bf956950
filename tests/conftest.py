"""Shared fixtures. Importing bayesfair first lets it expose one CPU device per core, so the
tests exercise the sharded simulator that users get by default.

The persistent compilation cache (bayesfair._compile) goes to pytest's own cache folder
(``.pytest_cache/d/bayesfair-jax``, ignored by git, removed by ``make clean``), never to the
user's home; the variable is set for the whole session, so the CLI tests' subprocesses share it
and a second ``make test`` loads the compiled chunk functions instead of compiling them."""

# isort: skip_file
import os

import bayesfair  # noqa: F401  (must precede jax: sets the host device count)
import jax
import numpy as np
import pytest

from bayesfair import merit as merit_mod


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
