"""bayesfair: fair multi-armed and linear contextual bandits, done the Bayesian way.

On import, if JAX has not been imported yet, the host CPU is exposed as one XLA device per core
(the simulator shards independent runs over them). Set ``BAYESFAIR_HOST_DEVICES=1`` to opt out,
or call :func:`set_host_devices` before importing JAX.
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def set_host_devices(n: int) -> bool:
    """Expose ``n`` CPU devices to XLA; only effective before JAX is first imported.

    Returns True if the setting was applied.
    """
    if "jax" in _sys.modules:
        return False
    flags = [f for f in _os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    flags.append(f"--xla_force_host_platform_device_count={int(n)}")
    _os.environ["XLA_FLAGS"] = " ".join(flags)
    return True


if "xla_force_host_platform_device_count" not in _os.environ.get("XLA_FLAGS", ""):
    set_host_devices(int(_os.environ.get("BAYESFAIR_HOST_DEVICES", _os.cpu_count() or 1)))

from bayesfair import merit  # noqa: E402
from bayesfair.compat import IncompatibleError  # noqa: E402
from bayesfair.environments import (  # noqa: E402
    UniformMeans,
    bernoulli_arms,
    compas_bandit,
    family_income_bandit,
    gaussian_arms,
    gmf_adult,
    gmf_multigroup,
    gmf_synthetic,
    linear_bandit,
    multilabel_bandit,
    synthetic_biased,
    yeast_bandit,
)
from bayesfair.groups import Groups  # noqa: E402
from bayesfair.io import ResultsFileError, read_results, tidy, write_results  # noqa: E402
from bayesfair.merit import Merit, fair_policy  # noqa: E402
from bayesfair.outputs import OutputError  # noqa: E402
from bayesfair.policies import (  # noqa: E402
    Policy,
    bf_ts,
    bf_ucb,
    epsilon_greedy,
    fair_greedy,
    fair_greedy_multigroup,
    fairx_eg,
    fairx_lineg,
    fairx_lints,
    fairx_linucb,
    fairx_ts,
    fairx_ucb,
    gef,
    gef_ts,
    greedy,
    group_fair_top_interval,
    group_fair_ts,
    interval_chaining,
    lints,
    linucb,
    mf,
    mf_ts,
    naive_fair,
    oful,
    thompson,
    top_interval,
    ucb1,
    uniform,
    uniform_random,
)
from bayesfair.posteriors import (  # noqa: E402
    Outcome,
    beta_bernoulli,
    group_bias_posterior,
    hierarchical_logit_normal,
    linear_known_variance,
    linear_normal_inverse_gamma,
    mcmc_posterior,
    normal_inverse_gamma,
    normal_known_variance,
)
from bayesfair.simulate import SimulationError, checkpoint_grid, simulate  # noqa: E402

__all__ = [
    "__version__",
    "set_host_devices",
    "merit",
    "Merit",
    "fair_policy",
    "Groups",
    "UniformMeans",
    "bernoulli_arms",
    "gaussian_arms",
    "Policy",
    "fairx_ts",
    "fairx_ucb",
    "fairx_eg",
    "ucb1",
    "thompson",
    "epsilon_greedy",
    "uniform",
    "bf_ucb",
    "bf_ts",
    "gef",
    "gef_ts",
    "mf",
    "mf_ts",
    "fairx_lints",
    "fairx_linucb",
    "fairx_lineg",
    "linucb",
    "lints",
    "top_interval",
    "interval_chaining",
    "naive_fair",
    "group_fair_top_interval",
    "group_fair_ts",
    "fair_greedy",
    "fair_greedy_multigroup",
    "oful",
    "greedy",
    "uniform_random",
    "linear_bandit",
    "multilabel_bandit",
    "yeast_bandit",
    "synthetic_biased",
    "compas_bandit",
    "family_income_bandit",
    "gmf_synthetic",
    "gmf_multigroup",
    "gmf_adult",
    "Outcome",
    "beta_bernoulli",
    "normal_known_variance",
    "normal_inverse_gamma",
    "linear_known_variance",
    "linear_normal_inverse_gamma",
    "group_bias_posterior",
    "hierarchical_logit_normal",
    "mcmc_posterior",
    "simulate",
    "checkpoint_grid",
    "read_results",
    "ResultsFileError",
    "IncompatibleError",
    "OutputError",
    "SimulationError",
    "write_results",
    "tidy",
]
