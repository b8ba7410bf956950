"""Arms with uniform reward noise: a copyable skeleton of a bayesfair environment module.

Copy this file into ``bayesfair/environments/`` (or any importable package), rename the function
and its declared name, and replace ``reset``/``step``. The ``@declare`` decorator registers it for
study configs and ``bayesfair list`` and checks its parameters; the registry-driven contract test
(``tests/test_contract.py``) builds it from the declared ``example`` and checks ``reset``/``step``.
Constructors that take Python objects (a :class:`~bayesfair.core.groups.Groups`, a data table) declare a
second, config-friendly function next to them that builds those objects from plain values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._validate import finite_array
from bayesfair.core.declare import Unit, declare
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.environments.base import Environment

__all__ = ["uniform_noise_arms"]


@declare("environment", example={"means": [0.2, 0.5, 0.8], "width": 0.1})
def uniform_noise_arms(means: list[float], width: Unit = 0.1) -> Environment:
    """K arms with rewards r_t,a ~ U[mu_a - width, mu_a + width].

    Parameters
    ----------
    means : list of float [K]
        The mean reward of every arm.
    width : float
        Half-width of the uniform noise, in [0, 1].
    """
    mu = finite_array("means", means, ndim=1)
    k, w = mu.size, float(width)
    mu_j = jnp.asarray(mu, jnp.float32)
    groups = Groups.single(k)

    def reset(key: jax.Array) -> jax.Array:
        return mu_j  # per-run parameters (fixed means here)

    def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
        noise = jax.random.uniform(key, (k,), jnp.float32, -w, w)
        return Round(Observation(t=t), params + noise, params)

    spec = Spec(n_arms=k, group_of_arm=groups.labels, n_groups=1,
                reward_range=(float(np.min(mu) - w), float(np.max(mu) + w)), rewards="bounded")
    return Environment(spec, groups, reset, step, lambda p: p, "uniform_noise_arms",
                       {"means": mu.tolist(), "width": w})
