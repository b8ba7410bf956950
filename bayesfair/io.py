"""Results as xarray Datasets: construction, atomic netCDF files, and a tidy pandas view.

xarray (and pandas, through it) is imported lazily here so ``import bayesfair`` stays light.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bayesfair.metrics import ARM_METRICS, SCALAR_METRICS, group_sums

__all__ = [
    "to_dataset", "write_results", "read_results", "tidy", "versions", "git_revision",
    "summary_table", "exposure_table",
]

_LONG_NAMES = {
    "fairness_regret": "cumulative fairness regret sum_t ||pi*_t - pi_t||_1",
    "reward_regret": "cumulative reward regret sum_t (pi*_t - pi_t) . mu_t",
    "regret": "cumulative conventional regret sum_t (max mu_t - pi_t . mu_t)",
    "reward": "cumulative realized reward",
    "exposure": "cumulative exposure sum_t pi_t(a)",
    "pulls": "cumulative pull count",
}


def versions() -> dict[str, str]:
    """Versions of the packages that determine the numbers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("bayesfair", "jax", "jaxlib", "numpyro", "numpy", "xarray", "arviz"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_revision() -> str:
    """The git revision of the bayesfair checkout, if it is one ('unknown' otherwise)."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def to_dataset(outputs, *, grid, env, policies, merit, means, pi_star, key, horizon, runs, config):
    """Assemble simulator outputs into an xarray Dataset.

    Variables: the scalar metrics ``[policy, run, checkpoint]``; ``exposure`` and ``pulls``
    ``[policy, run, checkpoint, arm]``; their group sums ``group_exposure``/``group_pulls``
    ``[..., group]``; ``mean`` and ``pi_star`` ``[run, arm]`` (the environment draw per run);
    ``seconds`` ``[policy]``. Attributes: the configuration (JSON), key, versions, git revision.
    """
    import xarray as xr

    names = list(outputs)
    groups = env.groups
    data: dict[str, Any] = {}
    for m in SCALAR_METRICS:
        data[m] = (("policy", "run", "checkpoint"), np.stack([outputs[n].scalars[m] for n in names]),
                   {"long_name": _LONG_NAMES[m]})
    for m in ARM_METRICS:
        arr = np.stack([outputs[n].arms[m] for n in names])
        data[m] = (("policy", "run", "checkpoint", "arm"), arr, {"long_name": _LONG_NAMES[m]})
        data[f"group_{m}"] = (("policy", "run", "checkpoint", "group"),
                              group_sums(arr, groups.labels, groups.n_groups),
                              {"long_name": _LONG_NAMES[m] + ", summed over the arms of each group"})
    data["mean"] = (("run", "arm"), means, {"long_name": "expected reward of each arm in each run"})
    data["pi_star"] = (("run", "arm"), pi_star, {"long_name": "optimal fair policy f(mu)/sum f(mu)"})
    data["seconds"] = (("policy",), np.array([outputs[n].seconds for n in names]),
                       {"long_name": "wall-clock seconds of the simulation (including compilation)"})
    coords = {
        "policy": names,
        "run": np.arange(runs),
        "checkpoint": np.asarray(grid, np.int64),
        "arm": np.arange(env.spec.n_arms),
        "group": list(groups.names),
        "arm_group": ("arm", np.asarray(groups.labels)),
    }
    full_config = {
        "environment": {"name": env.name, **env.config},
        "policies": {n: {"name": p.name, **p.config} for n, p in policies.items()},
        "merit": merit.describe(),
        "horizon": horizon,
        "runs": runs,
        **config,
    }
    attrs = {
        "config": json.dumps(full_config, default=_json_default),
        "key": json.dumps(np.asarray(jax.random.key_data(key)).tolist()),
        "versions": json.dumps(versions()),
        "git_revision": git_revision(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return repr(obj)


def atomic_temp(path: Path) -> str:
    """A new temp file next to ``path`` (same filesystem, so ``os.replace`` is atomic), with the
    permissions a normal file would get (mkstemp creates it 0600)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


def write_results(ds, path: str | os.PathLike) -> Path:
    """Write a Dataset to netCDF atomically: a temp file in the same folder, then a rename.

    An interrupted write leaves the previous file (or none), never a truncated one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic_temp(path)
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_results(path: str | os.PathLike):
    """Load a results file written by :func:`write_results` (fully into memory)."""
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}")
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


def tidy(ds):
    """One row per policy x run x checkpoint with the scalar metrics: a pandas DataFrame.

    Columns: ``policy, run, checkpoint`` and every scalar metric; drops straight into seaborn.
    """
    return ds[list(SCALAR_METRICS)].to_dataframe().reset_index()


def summary_table(ds, checkpoint: int = -1):
    """Per-policy table at one checkpoint: mean +- standard error over runs of each regret.

    Returns a pandas DataFrame indexed by policy.
    """
    import pandas as pd

    sel = ds.isel(checkpoint=checkpoint)
    runs = ds.sizes["run"]
    rows = {}
    for name in ds["policy"].values:
        row = {}
        for m in SCALAR_METRICS:
            vals = sel[m].sel(policy=name).values
            row[m] = vals.mean()
            row[f"{m}_se"] = vals.std(ddof=1) / np.sqrt(runs) if runs > 1 else float("nan")
        rows[str(name)] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def exposure_table(ds, checkpoint: int = -1):
    """Average exposure share per arm (rows) for every policy (columns), next to pi* and mu."""
    import pandas as pd

    t = int(ds["checkpoint"].values[checkpoint])
    share = (ds["exposure"].isel(checkpoint=checkpoint) / t).mean("run")
    df = pd.DataFrame({str(p): share.sel(policy=p).values for p in ds["policy"].values},
                      index=pd.Index(ds["arm"].values, name="arm"))
    df.insert(0, "pi_star", ds["pi_star"].mean("run").values)
    df.insert(0, "mean", ds["mean"].mean("run").values)
    return df
