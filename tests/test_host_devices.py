"""`import bayesfair` exposes one CPU device per core whenever JAX's backend is not yet running.

Each case runs in a fresh interpreter: the device count is fixed once JAX's backend starts, so it
cannot be tested inside this (already initialized) test process. Importing JAX before bayesfair
used to leave the backend at one device, and a 2-core TS study ran ~1.7x slower without a word.
"""

import os
import subprocess
import sys

import pytest

import bayesfair

CORES = os.cpu_count() or 1


def _run(code, *, strict=True, **env_extra):
    """``code`` in a fresh interpreter without the device settings of this one (``strict``: a
    RuntimeWarning is an error)."""
    env = {k: v for k, v in os.environ.items() if k not in ("BAYESFAIR_HOST_DEVICES", "JAX_NUM_CPU_DEVICES")}
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags)
    env.update(env_extra)
    strict_flags = ["-W", "error::RuntimeWarning"] if strict else []
    args = code if isinstance(code, list) else ["-c", code]
    return subprocess.run([sys.executable, *strict_flags, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def _devices(proc):
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip().splitlines()[-1])


def test_importing_jax_first_still_gives_one_device_per_core():
    assert _devices(_run("import jax; import bayesfair; print(jax.local_device_count())")) == CORES
    assert _devices(_run("import bayesfair, jax; print(jax.local_device_count())")) == CORES


@pytest.mark.skipif(CORES < 2, reason="one core: one device is all there is, nothing to warn about")
def test_a_backend_started_before_the_import_is_named_in_a_warning():
    proc = _run("import jax.numpy as jnp; jnp.ones(1); import bayesfair")
    assert proc.returncode != 0  # -W error turns the warning into an exception
    assert "RuntimeWarning" in proc.stderr and "before bayesfair was imported" in proc.stderr
    assert f"with 1 CPU device(s) for {CORES} cores" in proc.stderr
    assert "BAYESFAIR_HOST_DEVICES=1" in proc.stderr
    # Accepting one device says so through the variable, and then nothing warns.
    code = "import jax, jax.numpy as jnp; jnp.ones(1); import bayesfair; print(jax.local_device_count())"
    assert _devices(_run(code, BAYESFAIR_HOST_DEVICES="1")) == 1


@pytest.mark.parametrize("env_extra", [{"XLA_FLAGS": "--xla_force_host_platform_device_count=3"},
                                       {"JAX_NUM_CPU_DEVICES": "3"}],
                         ids=["xla-flag", "jax-option"])
def test_a_device_count_the_user_chose_wins(env_extra):
    assert _devices(_run("import bayesfair, jax; print(jax.local_device_count())", **env_extra)) == 3


def test_a_bayesfair_host_devices_count_up_to_the_cores_is_used_as_it_is():
    # BAYESFAIR_HOST_DEVICES is capped at the cores (below); JAX's own settings, above, are not
    n = min(3, CORES)
    assert _devices(_run("import bayesfair, jax; print(jax.local_device_count())", BAYESFAIR_HOST_DEVICES=str(n))) == n


def test_bayesfair_host_devices_above_the_cores_is_capped_with_a_warning_and_jax_forces_more():
    # BAYESFAIR_HOST_DEVICES=100000 on a 2-run study: no output after 6 min, RSS 12.3 GB and growing
    code = "import bayesfair, jax; print(jax.local_device_count())"
    proc = _run(code, BAYESFAIR_HOST_DEVICES="100000")
    assert proc.returncode != 0  # -W error: the warning is raised
    assert f"BAYESFAIR_HOST_DEVICES=100000 is more than this machine's {CORES} cores: using {CORES}" in proc.stderr
    assert "JAX_NUM_CPU_DEVICES=100000" in proc.stderr and "set_host_devices(100000)" in proc.stderr
    warned = _run(code, strict=False, BAYESFAIR_HOST_DEVICES=str(CORES + 1))
    assert _devices(warned) == CORES and "RuntimeWarning" in warned.stderr
    # forcing more devices than cores is JAX's own setting, which bayesfair leaves as it is (no warning)
    assert _devices(_run(code, JAX_NUM_CPU_DEVICES=str(CORES + 1))) == CORES + 1


def test_set_host_devices_applies_before_the_backend_starts_and_reports_when_too_late():
    code = ("import jax, numpy, bayesfair; a = bayesfair.set_host_devices(numpy.int64(3)); "
            "n = jax.local_device_count(); b = bayesfair.set_host_devices(2); print(a, b); print(n)")
    proc = _run(code)
    assert _devices(proc) == 3
    assert proc.stdout.splitlines()[0] == "True False"


@pytest.mark.parametrize("bad", [0, -1, 2.0, "2", True])
def test_set_host_devices_rejects_a_count_that_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match=r"set_host_devices: n must be a positive integer, got"):
        bayesfair.set_host_devices(bad)


@pytest.mark.parametrize("raw", ["x", "0", "-2", "1.5", "abc"])
def test_a_bad_bayesfair_host_devices_value_is_named_at_import(raw):
    proc = _run("import bayesfair", BAYESFAIR_HOST_DEVICES=raw)
    assert proc.returncode != 0  # -W error::RuntimeWarning
    assert f"BAYESFAIR_HOST_DEVICES must be a positive integer (CPU devices to expose), got {raw!r}" in proc.stderr


def test_a_bad_bayesfair_host_devices_value_is_a_warning_not_a_traceback():
    """BAYESFAIR_HOST_DEVICES=abc made every `import bayesfair` (and `bayesfair --help`) a traceback:
    it is a speed setting, so the import warns and uses one device per core."""
    proc = _run("import bayesfair, jax; print(jax.local_device_count())", strict=False, BAYESFAIR_HOST_DEVICES="abc")
    assert _devices(proc) == CORES
    assert "Traceback" not in proc.stderr and "RuntimeWarning: BAYESFAIR_HOST_DEVICES must be a positive" in proc.stderr
    assert f"using one device per core ({CORES})" in proc.stderr
    cli = _run(["-m", "bayesfair", "--version"], strict=False, BAYESFAIR_HOST_DEVICES="abc")
    assert cli.returncode == 0 and "Traceback" not in cli.stderr
