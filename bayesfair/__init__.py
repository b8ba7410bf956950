"""bayesfair: fair multi-armed and linear contextual bandits, done the Bayesian way.

``import bayesfair as bf`` gives the everyday names: the workflow verbs (:func:`simulate`,
:func:`load_config`, :func:`read_results`, :func:`save_policy`, ...), the common policies,
posteriors and environments, and the subpackages as namespaces (``bf.policies``,
``bf.posteriors``, ``bf.environments``, ``bf.merit``, ``bf.diagnostics``, ``bf.plotting``,
``bf.datasets``, ``bf.inference``); every other public name lives in its subpackage.

On import, if JAX's backend is not yet initialized (no JAX operation has run), the host CPU is
exposed as one XLA device per core (the simulator shards independent runs over them); importing
JAX itself first is fine. Set ``BAYESFAIR_HOST_DEVICES=N`` for N devices (``1`` to opt out): at
most one per core, a larger N is capped with a warning, and a value that is not a positive integer
is ignored with a warning. A device count the user chose through JAX
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``, ``JAX_NUM_CPU_DEVICES=N`` or
``jax_num_cpu_devices``), or :func:`set_host_devices`, wins and is not capped: that is how to force
more devices than cores. If the backend already runs with fewer CPU devices than cores, the import
warns (the simulator then uses fewer cores: ~1.7x slower on 2 cores).
"""

import importlib as _importlib
import operator as _operator
import os as _os
import warnings as _warnings

from bayesfair.core.version import __version__


def set_host_devices(n: int) -> bool:
    """Expose ``n`` CPU devices to XLA (JAX's ``jax_num_cpu_devices``).

    Effective until JAX's backend is initialized, i.e. before the first JAX operation of the
    process (importing JAX does not initialize it). Returns True if the setting was applied,
    False if the backend already runs (its device count then stays what it is).
    """
    try:
        count = None if isinstance(n, bool) else _operator.index(n)  # ints and NumPy integers
    except TypeError:
        count = None
    if count is None or count < 1:
        raise ValueError(f"set_host_devices: n must be a positive integer, got {n!r}")
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX refuses once its backends are initialized
        return False
    return True


def _host_devices_wanted() -> int:
    """The CPU devices to expose: ``BAYESFAIR_HOST_DEVICES``, at most one per core; one per core
    when it is unset or not a positive integer (a warning: the setting changes only the speed, never
    the numbers, so a typo in it should not make ``import bayesfair`` fail in every script, notebook
    and Dask worker of the environment)."""
    cores = _os.cpu_count() or 1
    raw = _os.environ.get("BAYESFAIR_HOST_DEVICES")
    if raw is None:
        return cores
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        _warnings.warn(f"BAYESFAIR_HOST_DEVICES must be a positive integer (CPU devices to expose), got {raw!r}: "
                       f"using one device per core ({cores}); set it to a count from 1 to {cores}, or unset it",
                       RuntimeWarning, stacklevel=3)
        return cores
    if n > cores:
        _warnings.warn(f"BAYESFAIR_HOST_DEVICES={n} is more than this machine's {cores} cores: using {cores} (more "
                       "devices than cores run no faster and each costs memory and start-up time). To force "
                       f"{n}, set JAX's own JAX_NUM_CPU_DEVICES={n} (bayesfair leaves it as it is) or call "
                       f"bayesfair.set_host_devices({n}) before the first JAX operation",
                       RuntimeWarning, stacklevel=3)
        return cores
    return n


def _default_host_devices() -> None:
    """One CPU device per core at import, unless the user chose a count or the backend already runs."""
    if "xla_force_host_platform_device_count" in _os.environ.get("XLA_FLAGS", ""):
        return
    import jax

    if jax.config.jax_num_cpu_devices >= 0:  # set by the user before importing bayesfair
        return
    n = _host_devices_wanted()
    if set_host_devices(n) or n == 1 or jax.default_backend() != "cpu":
        return
    have = jax.local_device_count()
    if have < n:
        _warnings.warn(
            f"bayesfair: JAX's backend was initialized (a JAX operation ran) before bayesfair was imported, "
            f"with {have} CPU device(s) for {n} cores, so simulate() shards its runs over {have} device(s) instead of "
            f"{n} (on 2 cores ~1.7x slower). Import bayesfair (or call bayesfair.set_host_devices) before the "
            f"first JAX operation; set BAYESFAIR_HOST_DEVICES={have} to accept this without the warning.",
            RuntimeWarning, stacklevel=3)


_default_host_devices()

# The public names, each imported from its module on first use (PEP 562 module ``__getattr__``),
# so that ``import bayesfair`` costs JAX's import and little else: a process that serves online
# decisions never loads the simulator, the diagnostics or the fitting code (and their Python-level
# set-up), and ``bf.simulate`` still imports the whole simulator the first time it is read.
_SOURCES = {
    # workflow
    "simulate": "bayesfair.simulation.simulator",
    "checkpoint_grid": "bayesfair.simulation.simulator",
    "load_config": "bayesfair.workflow.config",
    "read_results": "bayesfair.simulation.results",
    "write_results": "bayesfair.simulation.results",
    "tidy": "bayesfair.simulation.results",
    "save_policy": "bayesfair.workflow.persist",
    "load_policy": "bayesfair.workflow.persist",
    "online": "bayesfair.workflow.online",
    # the error of a bad config
    "ConfigError": "bayesfair.core.declare",
    # building blocks
    "Policy": "bayesfair.policies",
    "Groups": "bayesfair.core.groups",
    **dict.fromkeys(["fairx_ts", "fairx_ucb", "fairx_eg", "thompson", "ucb1", "uniform", "bf_ucb",
                     "bf_ts", "fairx_lints", "group_fair_top_interval", "fair_greedy"],
                    "bayesfair.policies"),
    **dict.fromkeys(["beta_bernoulli", "normal_known_variance", "normal_inverse_gamma"],
                    "bayesfair.posteriors"),
    **dict.fromkeys(["bernoulli_arms", "gaussian_arms", "linear_bandit"],
                    "bayesfair.environments"),
}
# the namespaces: the module itself
_MODULES = {"merit": "bayesfair.core.merit",
            **{name: f"bayesfair.{name}" for name in ("policies", "posteriors", "environments", "datasets",
                                                      "diagnostics", "plotting", "inference")}}


def __getattr__(name: str):
    """Import a public name's module the first time the name is read, and keep the name."""
    if name in _MODULES:
        value = _importlib.import_module(_MODULES[name])
    elif name in _SOURCES:
        value = getattr(_importlib.import_module(_SOURCES[name]), name)
    else:
        raise AttributeError(f"module 'bayesfair' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "__version__",
    "set_host_devices",
    # workflow
    "simulate",
    "checkpoint_grid",
    "load_config",
    "read_results",
    "write_results",
    "tidy",
    "save_policy",
    "load_policy",
    "online",
    # the error of a bad config
    "ConfigError",
    # building blocks
    "Policy",
    "Groups",
    # policies
    "fairx_ts",
    "fairx_ucb",
    "fairx_eg",
    "thompson",
    "ucb1",
    "uniform",
    "bf_ucb",
    "bf_ts",
    "fairx_lints",
    "group_fair_top_interval",
    "fair_greedy",
    # posteriors
    "beta_bernoulli",
    "normal_known_variance",
    "normal_inverse_gamma",
    # environments
    "bernoulli_arms",
    "gaussian_arms",
    "linear_bandit",
    # namespaces
    "merit",
    "policies",
    "posteriors",
    "environments",
    "datasets",
    "diagnostics",
    "plotting",
    "inference",
]
