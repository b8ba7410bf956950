"""Shared fixtures. Importing bayesfair first lets it expose one CPU device per core."""

import jax
import numpy as np
import pytest

import bayesfair  # noqa: F401  (must precede jax)
from bayesfair import merit as merit_mod


@pytest.fixture
def key():
    return jax.random.key(20261121)


@pytest.fixture
def exp4():
    return merit_mod.exponential(4.0)


@pytest.fixture
def small_env():
    return bayesfair.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]), groups=[0, 0, 1, 1])
