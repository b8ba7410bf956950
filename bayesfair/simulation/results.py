"""Results as xarray Datasets: construction, atomic netCDF files, and a tidy pandas view.

xarray (and pandas, through it) is imported lazily here so ``import bayesfair`` stays light.

Integrity of results files
--------------------------
:func:`write_results` stamps every Dataset it writes with two attributes: ``bayesfair_schema``
(:data:`RESULTS_SCHEMA`, the layout version) and ``bayesfair_checksum`` (``"sha256:<hex>"``, see
:func:`results_checksum`: every variable, coordinate and attribute, normalized so that it survives
the netCDF round trip). :func:`read_results` checks both and raises :class:`ResultsFileError` (a
``ValueError``) for a file that h5netcdf cannot open, a netCDF file that is not bayesfair's, a
schema newer than this bayesfair supports, or a checksum mismatch (damaged data), instead of
returning wrong numbers.

A file without both attributes (written before these checks, or with its attributes stripped) cannot
be verified and is refused too; ``read_results(path, allow_unverified=True)`` (CLI ``--unverified``)
reads it anyway, with a ``UserWarning``, if it holds the variables ``checkpoint``,
``fairness_regret`` and ``exposure`` and a ``versions`` attribute (JSON) naming bayesfair (a
*legacy* file); any other file without ``bayesfair_schema`` is refused as foreign. Writing a legacy
file again with :func:`write_results` adds the checksum.

Writing
-------
:func:`write_results` assembles the netCDF file in memory and writes its bytes with plain file I/O
(:func:`bayesfair.core._atomic.atomic_write`: temp file, fsync, rename), so HDF5 never writes to the
disk itself. When HDF5 writes a file and its close fails on a full disk (``ENOSPC`` while
flushing), h5netcdf keeps the file marked open and closes it again when the object is garbage
collected, on an HDF5 file the failed close half tore down: the process crashes (SIGSEGV). Written
as bytes, a full disk or a read-only folder is an ordinary
:class:`bayesfair.core._atomic.WriteError` naming the file and the free space, and the previous
file stays as it was.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import subprocess
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bayesfair.core._atomic import atomic_write
from bayesfair.simulation.metric_parts import ResultContext

__all__ = [
    "to_dataset", "write_results", "write_text", "read_results", "tidy", "versions", "git_revision",
    "summary_table", "exposure_table", "ResultsFileError", "RESULTS_SCHEMA", "results_checksum", "json_default",
    "canonical_json", "arrays_checksum",
]

SCALAR_METRICS = ("fairness_regret", "reward_regret", "regret", "reward")

#: Layout version of results files written by :func:`write_results` (attribute ``bayesfair_schema``).
#: :func:`read_results` refuses files with a larger number. Raise it when the layout changes in a way
#: an older reader would misread.
RESULTS_SCHEMA = 1
SCHEMA_ATTR = "bayesfair_schema"
CHECKSUM_ATTR = "bayesfair_checksum"
#: Variables that mark a file written before the integrity checks as bayesfair's (legacy rule).
LEGACY_VARIABLES = ("checkpoint", "fairness_regret", "exposure")
_CHECKSUM_PREFIX = "sha256:"
_CHECKSUM_TAG = b"bayesfair results checksum 1\n"  # changes with the normalization below
_BLOCK = 1 << 20  # elements hashed at a time (bounds the temporary copies)


class ResultsFileError(ValueError):
    """A results file that cannot be trusted: unreadable, damaged (checksum mismatch), not a
    bayesfair results file, or written by a newer bayesfair (schema). The message names the file."""


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


def to_dataset(outputs, *, grid, env, policies, metrics, means, key, horizon, runs, config, merit=None,
               record_metrics=False):
    """Assemble simulator outputs into an xarray Dataset.

    Variables: every metric the components recorded (see :mod:`bayesfair.simulation.metric_parts` and
    :mod:`bayesfair.simulation.metrics`) with dims ``[policy, run, checkpoint, ...]`` (a tracked quantity
    is NaN for a policy that does not report it); ``mean`` ``[run, arm]`` (the environment draw
    per run); the variables the components' ``finalize`` adds (by default ``pi_star`` and
    ``pi_star_within`` ``[run, arm]`` with a merit; ``group_floor`` ``[group]`` and the
    ``bf_regret`` terms ``[policy, run, checkpoint]`` with floors); ``seconds`` ``[policy]``.
    Attributes: the configuration (JSON; ``merit`` is null without one, ``metrics`` lists the
    components when ``record_metrics``), key, versions, git revision.
    """
    import xarray as xr

    names = list(outputs)
    groups = env.groups
    data: dict[str, Any] = {}
    specs: dict[str, Any] = {}
    for n in names:
        for spec in outputs[n].specs:
            specs.setdefault(spec.name, spec)
    values = {}
    for name, spec in specs.items():
        arrays = []
        for n in names:
            if name in outputs[n].values:
                arrays.append(outputs[n].values[name])
            else:  # a tracked quantity this policy does not report
                arrays.append(np.full((runs, len(grid), *spec.shape), np.nan))
        arr = np.stack(arrays)
        if spec.combine == "min":
            arr = arr.astype(np.int64)
        values[name] = arr
        data[name] = (("policy", "run", "checkpoint", *spec.dims), arr, {"long_name": spec.long_name})
    data["mean"] = (("run", "arm"), means, {"long_name": "expected reward of each arm in each run"})
    res = ResultContext(env, means, np.asarray(grid), values)
    for part in metrics:
        for name, var in part.finalize(res).items():
            if name in data:
                raise ValueError(f"metrics: component {part.name!r} adds {name!r}, which is already recorded")
            data[name] = var
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
        "environment": {"name": env.name, "label": env.label, "params": env.params},
        "policies": {n: {"name": p.name, "label": p.label, "params": p.params} for n, p in policies.items()},
        "merit": None if merit is None else merit.describe(),
        "horizon": horizon,
        "runs": runs,
        **({"metrics": [part.describe() for part in metrics]} if record_metrics else {}),
        **config,
    }
    attrs = {
        "config": json.dumps(full_config, default=json_default),
        "key": json.dumps(np.asarray(jax.random.key_data(key)).tolist()),
        "versions": json.dumps(versions()),
        "git_revision": git_revision(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def json_default(obj: Any) -> Any:
    """``default`` for :func:`json.dumps` of configs: numpy arrays as lists, numpy scalars as
    Python numbers, anything else as its ``repr``."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return repr(obj)


def canonical_json(obj: Any) -> str:
    """Canonical JSON text of a config (sorted keys, :func:`json_default`): what fingerprints hash."""
    return json.dumps(obj, sort_keys=True, default=json_default)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a text file (UTF-8) atomically (:func:`bayesfair.core._atomic.atomic_write`: temp file in
    the same folder, fsync, rename); the folder is created if needed. Used for reports, summaries
    and JSON."""
    path = Path(path)
    with atomic_write(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# checksums


def _feed(h: Any, data: bytes) -> None:
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)


def _json_item(x: Any) -> Any:
    if isinstance(x, str):
        return x
    if isinstance(x, bytes):
        return x.decode("utf-8", "surrogateescape")
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, (bool, int, float)) or x is None:
        return x
    return str(x)


def _kind(arr: np.ndarray) -> str:
    k = arr.dtype.kind
    if k in "biu":
        return "int64"
    if k == "f":
        return "float64"
    if k == "c":
        return "complex128"
    if k in "Mm":
        return f"{arr.dtype.str[1:].split('[')[0]}[ns]"
    if k in "USO":
        return "str"
    return "raw " + arr.dtype.str


def _feed_values(h: Any, arr: np.ndarray, kind: str) -> None:
    """Hash ``arr`` (flattened, C order) as ``kind``, in blocks, length-prefixed."""
    flat = arr.reshape(-1)
    if kind == "str":
        _feed(h, json.dumps([_json_item(x) for x in flat.tolist()], ensure_ascii=False,
                            separators=(",", ":")).encode("utf-8", "surrogateescape"))
        return
    target = {"int64": "<i8", "float64": "<f8", "complex128": "<c16"}.get(kind)
    if target is None and kind.endswith("[ns]"):
        target = kind[:-4] + "[ns]"
    itemsize = np.dtype(target).itemsize if target is not None else arr.dtype.itemsize
    h.update((flat.size * itemsize).to_bytes(8, "little"))
    for start in range(0, flat.size, _BLOCK):
        blk = flat[start:start + _BLOCK]
        if target is None:  # an unusual dtype: its bytes as they are
            h.update(np.ascontiguousarray(blk).tobytes())
            continue
        if kind.endswith("[ns]"):
            blk = blk.astype(target).view("<i8")
        else:
            blk = blk.astype(target, copy=True)
            if kind == "float64":
                blk[np.isnan(blk)] = np.nan  # one NaN bit pattern
            elif kind == "complex128":
                parts = blk.view("<f8")
                parts[np.isnan(parts)] = np.nan
        h.update(np.ascontiguousarray(blk).tobytes())


def _feed_attrs(h: Any, attrs: Any, skip: tuple[str, ...] = ()) -> None:
    """Attributes in name order; a scalar and a one-element list hash alike (netCDF does not keep
    the difference), strings as a JSON list, numbers as int64/float64."""
    names = sorted(str(k) for k in attrs if str(k) not in skip)
    by_name = {str(k): v for k, v in attrs.items()}
    _feed(h, json.dumps(names).encode())
    for name in names:
        value = by_name[name]
        if isinstance(value, (str, bytes)):
            value = [value]
        try:
            arr = np.atleast_1d(np.asarray(value))
        except (TypeError, ValueError):
            arr = np.array([str(value)], dtype=object)
        if arr.dtype.kind == "O" or arr.ndim != 1:
            arr = arr.reshape(-1)
        kind = _kind(arr)
        _feed(h, json.dumps(["attr", name, kind, int(arr.size)]).encode())
        _feed_values(h, arr, kind)


def results_checksum(ds) -> str:
    """The checksum :func:`write_results` stores in ``bayesfair_checksum``: ``"sha256:<hex>"``.

    Covers, in a canonical order, every coordinate and data variable (by name): its name, dims,
    shape, normalized dtype, values and attributes; then every Dataset attribute except
    ``bayesfair_checksum`` itself. Whether a variable is a coordinate or a data variable is not
    covered: netCDF keeps that in ``coordinates`` attributes which xarray rewrites from the
    variables' encodings (a non-index coordinate can come back as either).

    Values are normalized so the hash survives the netCDF round trip (which may change dtypes):
    booleans and integers as int64, floats as float64 with one NaN bit pattern, datetimes as
    int64 nanoseconds, strings (and object arrays) as a JSON list of str. Data are hashed in
    blocks, so no full normalized copy is made.
    """
    h = hashlib.sha256()
    h.update(_CHECKSUM_TAG)
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        arr = np.asarray(var.values)
        kind = _kind(arr)
        _feed(h, json.dumps([name, [str(d) for d in var.dims], [int(n) for n in arr.shape], kind]).encode())
        _feed_values(h, arr, kind)
        _feed_attrs(h, var.attrs)
    _feed(h, b"dataset attributes")
    _feed_attrs(h, ds.attrs, skip=(CHECKSUM_ATTR,))
    return _CHECKSUM_PREFIX + h.hexdigest()


def arrays_checksum(arrays: Any, tag: bytes) -> str:
    """``"sha256:<hex>"`` of named arrays (a mapping), in name order: each array's name, exact dtype
    and shape, then its values as :func:`results_checksum` hashes them (in blocks). ``tag`` names
    the kind of file, so a checksum of one kind never verifies another. Used for resume and
    saved-policy files (:mod:`bayesfair.workflow.persist`), whose header is one of the arrays."""
    h = hashlib.sha256()
    h.update(tag)
    for name in sorted(arrays):
        arr = np.asarray(arrays[name])
        kind = _kind(arr)
        _feed(h, json.dumps([str(name), arr.dtype.str, [int(n) for n in arr.shape], kind]).encode())
        _feed_values(h, arr, kind)
    return _CHECKSUM_PREFIX + h.hexdigest()


def _stamped(ds):
    """A shallow copy of ``ds`` with ``bayesfair_schema`` and a fresh ``bayesfair_checksum``.

    A float variable that carries an integer on-disk dtype in its encoding (inherited from a file
    it was read from, e.g. points combined with NaN padding) would be cast on write, NaN to a
    garbage integer; that dtype is dropped so the values are written as they are."""
    out = ds.copy(deep=False)
    for var in out.variables.values():
        enc = var.encoding
        if (var.dtype.kind == "f" and "dtype" in enc and np.dtype(enc["dtype"]).kind in "biu"
                and "scale_factor" not in enc and "add_offset" not in enc):
            var.encoding = {k: v for k, v in enc.items() if k not in ("dtype", "_FillValue", "missing_value")}
    attrs = {k: v for k, v in ds.attrs.items() if k not in (SCHEMA_ATTR, CHECKSUM_ATTR)}
    attrs[SCHEMA_ATTR] = np.int64(RESULTS_SCHEMA)
    out.attrs = attrs
    out.attrs[CHECKSUM_ATTR] = results_checksum(out)
    return out


def write_results(ds, path: str | os.PathLike) -> Path:
    """Write a Dataset to netCDF (h5netcdf) atomically: a temp file in the same folder, then a rename.

    An interrupted write leaves the previous file (or none), never a truncated one. The file gets
    the attributes ``bayesfair_schema`` (:data:`RESULTS_SCHEMA`) and ``bayesfair_checksum``
    (:func:`results_checksum` of what is written), which :func:`read_results` verifies; stale
    values of both (a Dataset read from a file and changed) are replaced. ``ds`` itself is not
    modified. Any other object whose ``to_netcdf`` returns the file's bytes when given no path (an
    xarray ``DataTree``, as ArviZ makes) is written as it is, without schema or checksum.

    The file is assembled in memory (about its size on top of ``ds``) and its bytes written with
    plain file I/O, so that HDF5 never writes to the disk itself (see the module docstring).

    Raises
    ------
    bayesfair.core._atomic.WriteError
        (an ``OSError``) The file could not be written (disk full, read-only folder, ...): the
        message names it and the free space; the previous file is intact.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import bayesfair as bf
    >>> ds = bf.simulate(0, bf.bernoulli_arms([0.3, 0.7]), {"uniform": bf.uniform()}, horizon=50, runs=2,
    ...                  merit=bf.merit.exponential(1.0), checkpoints=[50])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = bf.write_results(ds, Path(folder) / "study.nc")
    ...     back = bf.read_results(path)                 # checksum verified
    ...     print(path.name, bool((back["regret"] == ds["regret"]).all()))
    study.nc True
    """
    import xarray as xr

    if isinstance(ds, xr.Dataset):
        ds = _stamped(ds)
    elif not callable(getattr(ds, "to_netcdf", None)):
        raise TypeError(f"write_results: expected an xarray.Dataset of results (from bayesfair.simulate, "
                        f"Study.run or read_results), got {_what(ds)}; a dict of arrays becomes one with "
                        "xarray.Dataset(...)")
    data = ds.to_netcdf(engine="h5netcdf")  # no path: the whole file, in memory
    if not isinstance(data, (bytes, memoryview)):
        raise TypeError(f"write_results: {type(ds).__name__}.to_netcdf() returned {type(data).__name__}, not the "
                        "file's bytes; give an xarray Dataset or DataTree")
    path = Path(path)
    try:
        with atomic_write(path) as tmp:
            _write_bytes(tmp, data)
    finally:
        if isinstance(data, memoryview):  # a view of xarray's buffer: let it go now, not when a traceback does
            data.release()
    return path


def _write_bytes(path: str, data: Any) -> None:
    """Write ``data`` (bytes-like) to ``path`` with plain file I/O (OSError on a full disk)."""
    with open(path, "wb") as f:
        f.write(data)


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _open_failure(path: Path, exc: BaseException) -> ResultsFileError:
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        head = b""
    if head[:3] == b"CDF":
        what = "is a netCDF-3 (classic) file, not a bayesfair results file (those are netCDF-4/HDF5)"
    elif not head:
        what = "is empty, not a bayesfair results file"
    else:
        import h5py

        try:
            hdf5 = h5py.is_hdf5(str(path))
        except Exception:  # noqa: BLE001 - only to word the message
            hdf5 = head == _HDF5_SIGNATURE
        if not hdf5:
            what = ("is not a netCDF-4/HDF5 file (no HDF5 signature): it is damaged or not a bayesfair "
                    "results file")
        else:
            what = "cannot be read by h5netcdf: the file is damaged or not a bayesfair results file"
    return ResultsFileError(f"{path} {what} ({type(exc).__name__}: {exc})")


def _preflight(path: Path) -> None:
    """Open the file with h5py and read the root attributes first: when they are damaged,
    h5netcdf fails half-way through opening it and then prints an ignored exception from its
    destructor; this fails cleanly instead (the caller turns it into a ResultsFileError)."""
    import h5py

    with h5py.File(path, "r") as f:
        f.attrs.get("_nc3_strict")
        dict(f.attrs)


def _listing(names: Any, limit: int = 12) -> str:
    names = sorted(map(str, names))
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _names_bayesfair(versions_attr: Any) -> bool:
    try:
        return "bayesfair" in json.loads(str(versions_attr))
    except (json.JSONDecodeError, TypeError):
        return False


#: How to read a file that cannot be verified anyway (said in every such refusal).
UNVERIFIED_HINT = ("to read it anyway, unverified, pass allow_unverified=True to read_results (bayesfair plot and "
                   "report: --unverified); write it again with bayesfair.write_results to add them")


def _verify(ds, path: Path, allow_unverified: bool = False) -> None:
    """Check schema and checksum of a loaded results Dataset (rules: module docstring)."""
    attrs = ds.attrs
    if SCHEMA_ATTR not in attrs:
        if CHECKSUM_ATTR in attrs:
            raise ResultsFileError(f"{path} is damaged: it has a {CHECKSUM_ATTR} but no {SCHEMA_ATTR} attribute")
        if all(v in ds.variables for v in LEGACY_VARIABLES) and _names_bayesfair(attrs.get("versions")):
            if not allow_unverified:
                raise ResultsFileError(
                    f"{path} cannot be verified: it has no {SCHEMA_ATTR} and no {CHECKSUM_ATTR} attribute (written "
                    f"before integrity checks, or its attributes were stripped); {UNVERIFIED_HINT}")
            warnings.warn(f"{path} was written before integrity checks; cannot verify its data (no {SCHEMA_ATTR}, "
                          f"no {CHECKSUM_ATTR}). Write it again with bayesfair.write_results to add them.",
                          UserWarning, stacklevel=3)
            return
        raise ResultsFileError(
            f"{path} is not a bayesfair results file: it has no {SCHEMA_ATTR} attribute (variables: "
            f"{_listing(ds.variables)}; attributes: {_listing(attrs)})")
    schema = attrs[SCHEMA_ATTR]
    if isinstance(schema, np.ndarray) and schema.size == 1:
        schema = schema.reshape(-1)[0]
    if not isinstance(schema, numbers.Integral) or isinstance(schema, (bool, np.bool_)):
        raise ResultsFileError(f"{path} is damaged or not a bayesfair results file: {SCHEMA_ATTR} is {schema!r}, "
                               "not an integer")
    schema = int(schema)
    if schema > RESULTS_SCHEMA:
        raise ResultsFileError(
            f"{path} has results schema {schema}, newer than the schema {RESULTS_SCHEMA} this bayesfair "
            f"({versions()['bayesfair']}) supports: upgrade bayesfair to read it")
    if schema < 1:
        raise ResultsFileError(f"{path} is damaged or not a bayesfair results file: {SCHEMA_ATTR} is {schema}")
    stored = attrs.get(CHECKSUM_ATTR)
    if stored is None:
        raise ResultsFileError(f"{path} is damaged: it has {SCHEMA_ATTR} = {schema} but no {CHECKSUM_ATTR}")
    if not isinstance(stored, str) or not stored.startswith(_CHECKSUM_PREFIX):
        raise ResultsFileError(f"{path} is damaged: {CHECKSUM_ATTR} is {stored!r}, not 'sha256:<hex>'")
    actual = results_checksum(ds)
    if actual != stored:
        raise ResultsFileError(
            f"{path} is damaged: checksum mismatch (stored {stored}, the data give {actual}); its numbers "
            "cannot be trusted: write it again from the source (or read it with verify=False at your own risk)")


def read_results(path: str | os.PathLike, *, verify: bool = True, allow_unverified: bool = False):
    """Load a results file written by :func:`write_results`, fully into memory, and verify it.

    Parameters
    ----------
    path : str or PathLike
        The ``.nc`` file.
    verify : bool
        Check ``bayesfair_schema`` and ``bayesfair_checksum`` (default). ``False`` skips both
        (and the legacy warning) and returns whatever netCDF Dataset the file holds.
    allow_unverified : bool
        Read a bayesfair results file that has neither attribute (written before the checks, or
        stripped: a *legacy* file, see the module docstring), with a ``UserWarning``; without
        it such a file is refused. A file that has them is verified either way.

    Returns
    -------
    xarray.Dataset
        Loaded (no file handle stays open), with the attributes as stored, including
        ``bayesfair_schema`` and ``bayesfair_checksum``.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ResultsFileError
        (a ``ValueError``) The file cannot be opened or loaded by h5netcdf; with ``verify``, also:
        it is not a bayesfair results file (no ``bayesfair_schema``, and not legacy); it is a legacy
        file and ``allow_unverified`` is not set; its schema is newer than :data:`RESULTS_SCHEMA`; or it
        is damaged (checksum missing or mismatched).

    Warns
    -----
    UserWarning
        A legacy file (rule: module docstring) read with ``allow_unverified``: read but not verified.
    """
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}")
    with open(path, "rb"):  # permission problems surface as themselves, not as a damaged file
        pass
    opened = False
    try:
        _preflight(path)
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            opened = True
            ds = ds.load()
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - h5py/h5netcdf/xarray raise many types on a bad file
        if opened:
            raise ResultsFileError(f"{path} is damaged: reading its data failed ({type(exc).__name__}: {exc})") from exc
        raise _open_failure(path, exc) from exc
    if verify:
        _verify(ds, path, allow_unverified)
    return ds


def _what(obj: Any) -> str:
    """``obj`` named for an error message: its type and, if short, its value."""
    text = repr(obj)
    return f"a {type(obj).__name__}" + (f" ({text})" if len(text) <= 60 else "")


def tidy(ds):
    """One row per policy x run x checkpoint with the scalar metrics: a pandas DataFrame.

    Columns: ``policy, run, checkpoint`` and every scalar metric recorded, i.e. every numeric
    variable of dims ``(policy, run, checkpoint)`` (the FairX regrets only when the simulation had
    a merit; ``bf_regret`` and its parts with floors; ``fair_regret`` for Fair-Greedy studies);
    drops straight into seaborn. Sweep results (:mod:`bayesfair.workflow.sweep`) have one more
    column per swept key, first; the rows a point does not have (NaN padding where points differ
    in runs or checkpoints) are left out.

    Examples
    --------
    >>> import bayesfair as bf
    >>> ds = bf.simulate(0, bf.bernoulli_arms([0.3, 0.7]), {"uniform": bf.uniform()}, horizon=50, runs=2,
    ...                  merit=bf.merit.exponential(1.0), checkpoints=[25, 50])
    >>> frame = bf.tidy(ds)
    >>> len(frame), list(frame.columns[:4])
    (4, ['policy', 'run', 'checkpoint', 'fairness_regret'])
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"tidy: expected an xarray.Dataset of results (from bayesfair.simulate, Study.run or "
                        f"read_results), got {_what(ds)}")
    sweep = _sweep_dims(ds)
    names = _scalars(ds, sweep)
    if not names:
        raise ValueError(f"tidy: the Dataset has no scalar metric of dims {(*sweep, 'policy', 'run', 'checkpoint')} "
                         f"(its variables: {_listing(ds.data_vars)}): is it bayesfair results (bayesfair.simulate, "
                         "read_results)?")
    df = ds[names].to_dataframe().reset_index()
    if sweep:
        df = df.dropna(how="all", subset=names).reset_index(drop=True)
    return df


def _sweep_dims(ds) -> tuple[str, ...]:
    """The swept keys of sweep results (the dims before ``policy`` of their metrics), else ``()``."""
    for da in ds.data_vars.values():
        dims = tuple(map(str, da.dims))
        if dims[-3:] == ("policy", "run", "checkpoint") and len(dims) > 3:
            return dims[:-3]
    return ()


def _scalars(ds, sweep: tuple[str, ...] = ()) -> list[str]:
    """The recorded scalar metrics: every numeric variable of dims ``(*sweep, policy, run, checkpoint)``,
    the FairX and conventional ones (:data:`SCALAR_METRICS`) first, then the others in the
    Dataset's order (e.g. ``bf_regret`` with floors, ``fair_regret`` of Fair-Greedy studies)."""
    dims = (*sweep, "policy", "run", "checkpoint")
    per_checkpoint = [str(v) for v, da in ds.data_vars.items()
                      if da.dims == dims and np.issubdtype(da.dtype, np.number)]
    return [m for m in SCALAR_METRICS if m in per_checkpoint] + [m for m in per_checkpoint if m not in SCALAR_METRICS]


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
        for m in _scalars(ds):
            vals = sel[m].sel(policy=name).values
            row[m] = vals.mean()
            row[f"{m}_se"] = vals.std(ddof=1) / np.sqrt(runs) if runs > 1 else float("nan")
        rows[str(name)] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def exposure_table(ds, checkpoint: int = -1):
    """Average exposure share per arm (rows) for every policy (columns), next to pi* (if recorded) and mu."""
    import pandas as pd

    t = int(ds["checkpoint"].values[checkpoint])
    share = (ds["exposure"].isel(checkpoint=checkpoint) / t).mean("run")
    df = pd.DataFrame({str(p): share.sel(policy=p).values for p in ds["policy"].values},
                      index=pd.Index(ds["arm"].values, name="arm"))
    if "pi_star" in ds.data_vars:
        df.insert(0, "pi_star", ds["pi_star"].mean("run").values)
    df.insert(0, "mean", ds["mean"].mean("run").values)
    return df
