"""Saved policies and study resume files: pytrees (with their PRNG keys) in versioned ``.npz`` files.

Both file types are NumPy ``.npz`` archives written atomically (a temp file in the same folder,
flushed to disk, then renamed over the target), so an interrupted write leaves the previous file
or none, never a damaged one. Each holds a JSON header (``__meta__``) with a format tag, a format
version, the bayesfair version that wrote it and a description of every leaf (its tree path,
shape, dtype and, for PRNG keys, the key implementation); the leaves are plain arrays. Typed
PRNG keys are stored as :func:`jax.random.key_data` and restored with
:func:`jax.random.wrap_key_data`, so a restored policy makes exactly the draws the original would
have made.

A checksum (``__checksum__``: sha256 of the header and every array, see
:func:`bayesfair.simulation.results.arrays_checksum`) is verified on every read, so a damaged or
hand-edited file (a running total, a round number, a state value) is refused with an error naming
it and what to do, never continued from; so is a header without one of its fields.

The tree *structure* is not pickled: loading needs a template with the same structure (for a
policy, ``policy.init`` traced with :func:`jax.eval_shape`; for a resume file, the simulator's
fresh run state), and every leaf's path, shape and dtype must match it. A file from another
format version, or for a different policy configuration, is refused with an error saying what
differs.

- :func:`save_policy` / :func:`load_policy`: a policy's state (and optionally the key the caller
  uses for the next rounds), the policy's configuration and, when known, the registry spec it can
  be rebuilt from.
- :class:`ResumeStore`: the simulator's hook (``simulate(..., checkpointer=...)``) that saves each
  policy's run state, running totals and recorded checkpoints at chunk boundaries and restores
  them, so an interrupted study continues with exactly the numbers of an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._atomic import atomic_write
from bayesfair.core.types import Spec
from bayesfair.core.version import __version__
from bayesfair.policies.base import Policy
from bayesfair.simulation.results import arrays_checksum, canonical_json
from bayesfair.workflow import registry

__all__ = [
    "FORMAT_VERSION",
    "PersistError",
    "IncompatibleFileError",
    "SavedPolicy",
    "save_policy",
    "load_policy",
    "ResumeStore",
    "StudyInterrupted",
]

FORMAT_VERSION = 2
POLICY_TAG = "bayesfair-policy"
RESUME_TAG = "bayesfair-resume"
CHECKSUM_KEY = "__checksum__"
_CHECKSUM_TAG = b"bayesfair npz checksum 1\n"
#: What to do about a resume or saved-policy file that fails its checks.
_REMEDY = {
    RESUME_TAG: "its saved progress cannot be trusted: restart the study (--restart; Python: restart=True) or "
                "restore the file from a backup",
    POLICY_TAG: "the saved policy cannot be trusted: restore the file from a backup or save the policy again "
                "(load_policy(..., verify=False) skips the check at your own risk)",
}
#: Header fields every file of a kind has (checked after the checksum, so a missing one is named).
_POLICY_FIELDS = ("policy", "spec", "state_leaves", "batch", "key")
_POLICY_RECORD_FIELDS = ("name", "label", "params")
_SPEC_FIELDS = ("n_arms", "group_of_arm", "n_groups", "n_features")
_RESUME_FIELDS = ("fingerprint", "policies")
_RESUME_POLICY_FIELDS = ("index", "carry", "next_round", "next_checkpoint", "seconds")
_LEAF_FIELDS = ("path", "key_impl", "shape", "dtype")


class PersistError(ValueError):
    """A saved file cannot be read or does not fit what it is loaded into."""


class IncompatibleFileError(PersistError):
    """A saved file was written in another format version (or is another kind of file)."""


class StudyInterrupted(Exception):
    """Raised by :class:`ResumeStore` after ``stop_after_chunks`` chunks (a test/debug hook)."""


def _version() -> str:
    return __version__


def _path_str(path: tuple) -> str:
    return jax.tree_util.keystr(path)


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def flatten(tree: Any, prefix: str = "") -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """Leaves of ``tree`` as host arrays plus a JSON description of each (path, shape, dtype, key impl)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    arrays: dict[str, np.ndarray] = {}
    meta: list[dict[str, Any]] = []
    for i, (path, leaf) in enumerate(leaves):
        name = f"{prefix}{i}"
        if _is_key(leaf):
            impl = str(jax.random.key_impl(leaf))
            data = np.asarray(jax.device_get(jax.random.key_data(leaf)))
            meta.append({"path": _path_str(path), "key_impl": impl, "shape": list(np.shape(leaf)),
                         "dtype": "key"})
        else:
            data = np.asarray(jax.device_get(leaf))
            meta.append({"path": _path_str(path), "key_impl": None, "shape": list(data.shape),
                         "dtype": str(data.dtype)})
        arrays[name] = data
    return arrays, meta


def require_fields(entry: Any, fields: tuple[str, ...], what: str) -> None:
    """Raise PersistError naming ``what`` and the first of ``fields`` that ``entry`` (a header table) lacks."""
    if not isinstance(entry, Mapping):
        raise PersistError(f"{what} is {type(entry).__name__}, not a table: the file was not written by bayesfair "
                           "or was edited")
    missing = [f for f in fields if f not in entry]
    if missing:
        raise PersistError(f"{what} has no field {missing[0]!r}" + (f" (nor {', '.join(map(repr, missing[1:]))})"
                                                                    if missing[1:] else "")
                           + ": the file was not written by this bayesfair or was edited")


def unflatten(template: Any, arrays: Mapping[str, np.ndarray], meta: list[dict[str, Any]], prefix: str = "",
              *, what: str = "state") -> Any:
    """Rebuild a pytree with ``template``'s structure from :func:`flatten`'s output (checked leaf by leaf)."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    if not isinstance(meta, list):
        raise PersistError(f"{what}: the header's list of arrays is {type(meta).__name__}, not a list")
    for i, m in enumerate(meta):
        require_fields(m, _LEAF_FIELDS, f"{what}: the header entry of array {i}")
        if f"{prefix}{i}" not in arrays:
            raise PersistError(f"{what}: array {prefix}{i} ({m['path']}) is missing from the file")
    if len(leaves) != len(meta):
        raise PersistError(f"{what}: the file has {len(meta)} arrays but the expected structure has {len(leaves)}; "
                           "it was saved for a different policy or configuration, or by another bayesfair development "
                           "version whose run state differs")
    out = []
    for i, ((path, leaf), m) in enumerate(zip(leaves, meta, strict=True)):
        where = _path_str(path)
        if m["path"] != where:
            raise PersistError(f"{what}: leaf {i} is {m['path']!r} in the file but {where!r} here; "
                               "it was saved for a different policy or configuration, or by another bayesfair "
                               "development version whose run state differs")
        data = np.asarray(arrays[f"{prefix}{i}"])
        want_shape = tuple(np.shape(leaf))
        if tuple(m["shape"]) != want_shape:
            raise PersistError(f"{what}: {where} has shape {tuple(m['shape'])} in the file but {want_shape} here")
        if _is_key(leaf):
            if m["key_impl"] is None:
                raise PersistError(f"{what}: {where} is a PRNG key here but a plain array in the file")
            out.append(jax.random.wrap_key_data(jnp.asarray(data), impl=m["key_impl"]))
        else:
            if m["key_impl"] is not None:
                raise PersistError(f"{what}: {where} is a PRNG key in the file but a plain array here")
            want_dtype = np.dtype(getattr(leaf, "dtype", np.asarray(leaf).dtype))
            if data.dtype != want_dtype:
                raise PersistError(f"{what}: {where} has dtype {data.dtype} in the file but {want_dtype} here")
            out.append(data)
    return jax.tree_util.tree_unflatten(treedef, [x for x in out])


def npz_checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """The checksum :func:`write_npz` stores in ``__checksum__``: of every other array, the header included."""
    return arrays_checksum({k: v for k, v in arrays.items() if k != CHECKSUM_KEY}, _CHECKSUM_TAG)


def write_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Write arrays, a JSON header and their checksum to ``path`` atomically (temp file, fsync,
    rename); a failed write raises :class:`bayesfair.core._atomic.WriteError` and keeps the previous file."""
    path = Path(path)
    if "__meta__" in arrays or CHECKSUM_KEY in arrays:
        raise ValueError(f"array names __meta__ and {CHECKSUM_KEY} are reserved")
    contents = {"__meta__": np.array(json.dumps(meta)), **{k: np.asarray(v) for k, v in arrays.items()}}
    contents[CHECKSUM_KEY] = np.array(npz_checksum(contents))
    with atomic_write(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **contents)
    return path


def _check_sum(path: Path, arrays: Mapping[str, np.ndarray], tag: str) -> None:
    """Raise PersistError (naming ``path`` and what to do) unless the stored checksum matches."""
    remedy = _REMEDY.get(tag, "the file cannot be trusted")
    if CHECKSUM_KEY not in arrays:
        raise PersistError(f"{path} has no checksum ({CHECKSUM_KEY}): it was written by a bayesfair without "
                           f"checksums, or altered; {remedy}")
    stored = str(arrays[CHECKSUM_KEY][()])
    actual = npz_checksum(arrays)
    if stored != actual:
        raise PersistError(f"{path} is damaged or was edited: checksum mismatch (stored {stored}, its contents give "
                           f"{actual}); {remedy}")


def read_npz(path: str | os.PathLike, tag: str, *, verify: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read a file written by :func:`write_npz`, checking its format tag and version and (unless
    ``verify=False``) its checksum. Returns ``(header, arrays)`` without the header and checksum arrays."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise PersistError(f"cannot read {path}: damaged or not a bayesfair file ({exc})") from None
    if "__meta__" not in arrays:
        raise IncompatibleFileError(f"{path} is not a bayesfair {tag} file (no header)")
    header = arrays.pop("__meta__")
    try:
        meta = json.loads(str(header[()]))
    except json.JSONDecodeError as exc:
        raise PersistError(f"cannot read {path}: damaged header ({exc})") from None
    if not isinstance(meta, dict):
        raise PersistError(f"cannot read {path}: its header is {type(meta).__name__}, not a table")
    if meta.get("format") != tag:
        raise IncompatibleFileError(f"{path} is a {meta.get('format')!r} file, expected a {tag!r} file")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise IncompatibleFileError(
            f"{path} has format version {version} (written by bayesfair {meta.get('bayesfair', '?')}); "
            f"this bayesfair ({_version()}) reads format version {FORMAT_VERSION} only. "
            "Load it with the bayesfair version that wrote it, or run the study again.")
    if verify:
        _check_sum(path, {"__meta__": header, **arrays}, tag)
    arrays.pop(CHECKSUM_KEY, None)
    return meta, arrays


# ---------------------------------------------------------------------------------------------
# saved policies


class SavedPolicy(NamedTuple):
    """What :func:`load_policy` returns."""

    policy: Any  # bayesfair Policy
    state: Any  # the policy state pytree
    key: jax.Array | None  # the PRNG key saved with it (None if none was)
    spec: Any  # bayesfair.core.types.Spec
    meta: dict[str, Any]  # header: policy (name, label, params), spec, step, extra, versions


def _spec_json(spec: Any) -> dict[str, Any]:
    return {"n_arms": int(spec.n_arms), "group_of_arm": np.asarray(spec.group_of_arm).tolist(),
            "n_groups": int(spec.n_groups), "n_features": int(spec.n_features),
            "reward_range": None if spec.reward_range is None else [float(v) for v in spec.reward_range],
            "rewards": spec.rewards}


def _spec_from_json(d: Mapping[str, Any]) -> Any:
    rr = d.get("reward_range")
    return Spec(int(d["n_arms"]), np.asarray(d["group_of_arm"], np.int32), int(d["n_groups"]),
                int(d["n_features"]), None if rr is None else (float(rr[0]), float(rr[1])), d.get("rewards"))


def _policy_record(policy: Any) -> dict[str, Any]:
    """What a saved-policy file records of its policy: ``name``, ``label`` and ``params`` (JSON)."""
    return {"name": policy.name, "label": policy.label, "params": json.loads(canonical_json(policy.params))}


def save_policy(path: str | os.PathLike, policy: Any, state: Any, spec: Any, *, key: jax.Array | None = None,
                step: int | None = None, extra: Mapping[str, Any] | None = None) -> Path:
    """Save a policy's state (and the PRNG key its next rounds use) to a versioned file.

    Parameters
    ----------
    path : path-like
        Target file (``.npz`` recommended); written atomically.
    policy : Policy
        The policy the state belongs to; its ``name``, ``label`` and ``params`` are stored and
        checked on load. A policy built by a declared constructor (``name`` set) is rebuilt from
        them by :func:`load_policy` without being passed.
    state : pytree
        The policy state (``policy.init`` / ``policy.update`` output), with or without a leading
        run axis.
    spec : Spec
        The problem the policy was initialized for (``env.spec``).
    key : jax key, optional
        The key the caller will use for the next rounds (e.g. the per-run policy key of the
        simulator); restored bit for bit. A typed key (``jax.random.key``), not a raw ``uint32``
        one (``jax.random.PRNGKey``), which could not be restored as the key it stands for.
    step : int, optional
        Rounds played so far (stored for the caller).
    extra : mapping, optional
        Any JSON-able metadata.

    Raises
    ------
    PersistError
        ``state`` is not a state of ``policy``: its tree structure, a leaf's dtype (a typed PRNG
        key where ``policy.init`` makes one included) or its shapes (with or without a leading
        run axis) differ from ``policy.init``'s. Checked here, so that no file is written that
        :func:`load_policy` cannot restore.
    TypeError
        ``policy`` is not a Policy, or ``key`` is not a typed PRNG key.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import jax
    >>> import bayesfair as bf
    >>> env = bf.bernoulli_arms([0.2, 0.8])
    >>> policy = bf.thompson(bf.beta_bernoulli())
    >>> state = policy.init(jax.random.key(0), env.spec)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = bf.save_policy(Path(folder) / "ts.npz", policy, state, env.spec, key=jax.random.key(1), step=0)
    ...     saved = bf.load_policy(path)                 # rebuilt from its name and params
    >>> saved.policy.label, saved.meta["step"]
    ('TS', 0)
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a bayesfair Policy, got {type(policy).__name__}")
    if key is not None and not _is_key(key):
        raise TypeError(f"key must be a typed PRNG key (jax.random.key(seed), or split from one), got "
                        f"{type(key).__name__} of dtype {getattr(key, 'dtype', '?')} and shape {np.shape(key)}: a raw "
                        "uint32 key (jax.random.PRNGKey) is not restored as a key; convert it with "
                        "jax.random.wrap_key_data(key)")
    batch = _batch_size(policy, spec, state)
    arrays, leaves = flatten(state, "state/")
    meta: dict[str, Any] = {
        "format": POLICY_TAG, "format_version": FORMAT_VERSION, "bayesfair": _version(),
        "jax": jax.__version__, "policy": _policy_record(policy), "spec": _spec_json(spec),
        "state_leaves": leaves, "batch": batch, "key": None, "step": step, "extra": dict(extra or {}),
        "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if key is not None:
        karr, kmeta = flatten(key, "key/")
        arrays.update(karr)
        meta["key"] = kmeta
    return write_npz(path, arrays, meta)


def load_policy(path: str | os.PathLike, policy: Any = None, *, verify: bool = True) -> SavedPolicy:
    """Load a file written by :func:`save_policy`.

    Parameters
    ----------
    path : path-like
    policy : Policy, optional
        The policy to load the state into; its ``name``, ``label`` and ``params`` must equal the
        saved ones. If omitted, the policy is rebuilt from the saved ``name`` and ``params`` (an
        error for a policy assembled by hand, which has no registry name).
    verify : bool
        Check the file's checksum (default). ``False`` loads a file without one, or one that
        fails it, at your own risk (its structure, shapes and dtypes are still checked).

    Returns
    -------
    SavedPolicy
        ``(policy, state, key, spec, meta)``; continuing with ``policy.select``/``update`` from
        ``state`` and the saved ``key`` reproduces the uninterrupted run exactly.

    Raises
    ------
    IncompatibleFileError
        The file has another format version or is not a saved policy.
    PersistError
        The file is damaged or was edited (checksum), its header lacks a field, or the policy's
        configuration or state structure differs. The message names the file.

    Examples
    --------
    Loading into the policy it was saved from checks that the configuration is the same:

    >>> import tempfile
    >>> from pathlib import Path
    >>> import jax
    >>> import numpy as np
    >>> import bayesfair as bf
    >>> env = bf.bernoulli_arms([0.2, 0.8])
    >>> policy = bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(4.0))
    >>> state = policy.init(jax.random.key(0), env.spec)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = bf.save_policy(Path(folder) / "fx.npz", policy, state, env.spec)
    ...     saved = bf.load_policy(path, policy)
    >>> all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(saved.state), jax.tree.leaves(state)))
    True
    """
    meta, arrays = read_npz(path, POLICY_TAG, verify=verify)
    require_fields(meta, _POLICY_FIELDS, f"{path}: the saved-policy header")
    require_fields(meta["spec"], _SPEC_FIELDS, f"{path}: the saved-policy header's spec")
    spec = _spec_from_json(meta["spec"])
    saved = meta["policy"]
    require_fields(saved, _POLICY_RECORD_FIELDS, f"{path}: the saved-policy header's policy")
    if policy is None:
        if saved["name"] is None:
            raise PersistError(f"{path} was saved from a policy assembled by hand ({saved['label']}, no registry "
                               "name to rebuild it from); pass the policy: load_policy(path, policy)")
        try:
            _, norm = registry.check_params("policy", {"name": saved["name"], **saved["params"]}, "policy")
            policy = registry.build("policy", norm, "policy")
        except registry.ConfigError as exc:
            raise PersistError(f"{path}: cannot rebuild the policy from its name and params: {exc}") from None
    here = _policy_record(policy)
    if here != saved:
        diff = [k for k in ("name", "label") if here[k] != saved[k]]
        diff += sorted(f"params.{k}" for k in set(saved["params"]) | set(here["params"])
                       if saved["params"].get(k) != here["params"].get(k))
        raise PersistError(f"{path} was saved for policy {saved['label']} ({saved['name']}) with a different "
                           f"configuration than {policy.label} ({policy.name}) (differs in: {', '.join(diff)})")
    state = unflatten(_state_template(policy, spec, meta.get("batch")), arrays, meta["state_leaves"], "state/",
                      what=f"{path}: policy state")
    state = jax.tree.map(lambda x: jnp.asarray(x) if isinstance(x, np.ndarray) else x, state)
    key = None
    if meta["key"] is not None:
        if not isinstance(meta["key"], list) or len(meta["key"]) != 1:
            raise PersistError(f"{path}: the saved-policy header's key is not one array entry: the file was not "
                               "written by this bayesfair or was edited")
        require_fields(meta["key"][0], _LEAF_FIELDS, f"{path}: the saved-policy header's key")
        shape = tuple(meta["key"][0]["shape"])
        template = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), int(np.prod(shape))).reshape(shape))
        key = unflatten(template, arrays, meta["key"], "key/", what=f"{path}: key")
    return SavedPolicy(policy, state, key, spec, meta)


def _state_template(policy: Any, spec: Any, batch: int | None) -> Any:
    """Shapes of ``policy.init`` (with a leading run axis of ``batch`` when given), without compute."""
    if batch is None:
        return jax.eval_shape(lambda k: policy.init(k, spec), jax.random.key(0))
    return jax.eval_shape(jax.vmap(lambda k: policy.init(k, spec)), jax.random.split(jax.random.key(0), batch))


def _batch_size(policy: Any, spec: Any, state: Any) -> int | None:
    """None for a single state, n for states with a leading run axis of n; an error (PersistError)
    when ``state`` is not one of ``policy.init``'s: another tree structure, a leaf of another dtype
    (a raw uint32 key where init makes a typed key), or other shapes."""
    template = _state_template(policy, spec, None)
    want_leaves = jax.tree_util.tree_flatten_with_path(template)[0]
    have_leaves = jax.tree.leaves(state)
    if len(want_leaves) != len(have_leaves):
        raise PersistError(f"state has {len(have_leaves)} arrays but {policy.label}.init makes {len(want_leaves)}: "
                           "not a state of this policy")
    if jax.tree.structure(state) != jax.tree.structure(template):
        raise PersistError(f"state has the tree structure {jax.tree.structure(state)} but {policy.label}.init makes "
                           f"{jax.tree.structure(template)}: not a state of this policy")
    for (where, w), h in zip(want_leaves, have_leaves, strict=True):
        _check_leaf_dtype(policy, _path_str(where), w, h)
    want = [tuple(np.shape(x)) for _, x in want_leaves]
    have = [tuple(np.shape(x)) for x in have_leaves]
    if have == want:
        return None
    if have and all(len(h) == len(w) + 1 and h[1:] == w for h, w in zip(have, want, strict=True)) and \
            len({h[0] for h in have}) == 1:
        return have[0][0]
    raise PersistError(f"state shapes {have} do not match {policy.label}.init's {want} (with or without a run axis)")


def _check_leaf_dtype(policy: Any, where: str, want: Any, have: Any) -> None:
    """A state leaf has the dtype ``policy.init`` gives it (typed keys where init makes keys)."""
    if _is_key(want) != _is_key(have):
        what = "a typed PRNG key" if _is_key(want) else "a plain array"
        got = "a typed PRNG key" if _is_key(have) else f"a {np.asarray(have).dtype} array"
        hint = " (a raw uint32 key? use jax.random.key, or wrap it with jax.random.wrap_key_data)" \
            if _is_key(want) else ""
        raise PersistError(f"state{where} is {got} but {policy.label}.init makes {what} there{hint}: not a state "
                           "of this policy")
    if _is_key(want):
        return
    want_dtype, have_dtype = np.dtype(want.dtype), np.dtype(getattr(have, "dtype", np.asarray(have).dtype))
    if want_dtype != have_dtype:
        raise PersistError(f"state{where} has dtype {have_dtype} but {policy.label}.init makes {want_dtype}: not a "
                           "state of this policy")


# ---------------------------------------------------------------------------------------------
# study resume files


class ResumeStore:
    """Save and restore a running study at chunk boundaries (the ``checkpointer`` of ``simulate``).

    The file holds, for every policy started so far, the run state (``RunCarry``, including the
    environment and policy keys), the float64 running totals, the values recorded at the
    checkpoints passed, the next round to play and the seconds spent. A policy that finished is
    stored with ``next_round = horizon + 1`` and is not run again on resume.

    Parameters
    ----------
    path : path-like
        The resume file (written atomically).
    fingerprint : str
        Identifies the study configuration; a resume file with another fingerprint is refused.
    resume : bool
        Load ``path`` (if it exists) and continue from it; otherwise start over (the file is
        overwritten at the first save).
    every_chunks : int, optional
        Save after this many chunks (default: only by time, and when a policy finishes).
    every_seconds : float, optional
        Save when this many seconds passed since the last save (default 30).
    stop_after_chunks : int, optional
        Test hook: save and raise :class:`StudyInterrupted` after this many chunks in this process.
    extra : object, optional
        Something with ``state_arrays() -> dict`` and ``restore_arrays(dict)`` saved along (the
        per-round log, :class:`bayesfair.workflow.logs.RoundLog`).
    study : dict, optional
        The normalized study config, stored in the file so that a refused resume can say which
        settings differ (:func:`describe_resume`).
    """

    def __init__(self, path: str | os.PathLike, fingerprint: str, *, resume: bool = False,
                 every_chunks: int | None = None, every_seconds: float | None = 30.0,
                 stop_after_chunks: int | None = None, extra: Any = None, study: Any = None):
        self.path = Path(path)
        self.study = study
        self.fingerprint = fingerprint
        self.every_chunks = every_chunks
        self.every_seconds = every_seconds
        self.stop_after_chunks = stop_after_chunks
        self.extra = extra
        self.chunks = 0
        self.since_save = 0
        self.last_save = time.monotonic()
        self.latest: dict[str, dict[str, Any]] = {}  # policy -> latest boundary snapshot (in memory)
        self.saved: dict[str, Any] = {}  # file contents loaded on resume: policy -> (meta, arrays)
        self.restored_from: dict[str, int] = {}  # policy -> next round restored
        self._dirty = False
        if resume and self.path.is_file():
            meta, arrays = read_npz(self.path, RESUME_TAG)
            _check_resume_header(meta, self.path)
            if meta.get("fingerprint") != fingerprint:
                raise PersistError(f"{self.path} belongs to a different study configuration (or bayesfair "
                                   "version, or per-round log setting); delete it or run without --resume "
                                   "to start over")
            self.saved = {name: (pm, arrays) for name, pm in meta["policies"].items()}
            if extra is not None and meta.get("extra"):
                extra.restore_arrays({k[len("extra/"):]: v for k, v in arrays.items() if k.startswith("extra/")})

    # -- simulate hooks --------------------------------------------------------------------------

    def restore(self, name: str, carry: Any, values: dict, totals: dict):
        """Saved state of policy ``name`` shaped like ``carry``/``values``/``totals``, or None."""
        if name not in self.saved:
            return None
        pm, arrays = self.saved[name]
        idx = pm["index"]
        new_carry = unflatten(carry, arrays, pm["carry"], f"p{idx}/carry/", what=f"{self.path}: {name} run state")
        new_values, new_totals = {}, {}
        for kind, dest, ref in (("values", new_values, values), ("totals", new_totals, totals)):
            for metric, arr in ref.items():
                key = f"p{idx}/{kind}/{metric}"
                if key not in arrays or arrays[key].shape != arr.shape or arrays[key].dtype != arr.dtype:
                    raise PersistError(f"{self.path}: {name} {kind} {metric!r} missing or of another shape")
                dest[metric] = np.array(arrays[key])
        t0, ci, seconds = int(pm["next_round"]), int(pm["next_checkpoint"]), float(pm["seconds"])
        self._check_progress(name, t0, ci, values)
        self.restored_from[name] = t0
        self.latest[name] = {"carry": new_carry, "values": new_values, "totals": dict(new_totals), "t0": t0,
                             "ci": ci, "seconds": seconds, "index": idx}
        return new_carry, new_values, new_totals, t0, ci, seconds

    def _check_progress(self, name: str, t0: int, ci: int, values: dict) -> None:
        """The saved next round lies in [1, horizon + 1] and the next checkpoint in [0, checkpoints]."""
        horizon = self.study.get("horizon") if isinstance(self.study, Mapping) else None
        n_values = len(next(iter(values.values()))[0]) if values else 0
        if t0 < 1 or (horizon is not None and t0 > horizon + 1) or not 0 <= ci <= n_values:
            raise PersistError(f"{self.path}: {name} has next round {t0} and next checkpoint {ci}, outside the "
                               f"study (horizon {horizon}, {n_values} checkpoints); {_REMEDY[RESUME_TAG]}")

    def chunk_done(self, name: str, carry: Any, values: dict, totals: dict, t0: int, ci: int,
                   seconds: float, finished: bool | None = None) -> None:
        """Record the boundary state after a chunk; save to disk when due."""
        idx = self.latest[name]["index"] if name in self.latest else len(self.latest)
        # values are only written at checkpoints >= ci later on, so a reference is a snapshot;
        # totals are replaced (not mutated) per metric, so a shallow copy is one.
        self.latest[name] = {"carry": carry, "values": values, "totals": dict(totals), "t0": t0, "ci": ci,
                             "seconds": seconds, "index": idx}
        self._dirty = True
        self.chunks += 1
        self.since_save += 1
        n_values = len(next(iter(values.values()))[0]) if values else 0
        finished = ci >= n_values if finished is None else finished
        due = finished or (self.every_chunks is not None and self.since_save >= self.every_chunks) or \
            (self.every_seconds is not None and time.monotonic() - self.last_save >= self.every_seconds)
        stop = self.stop_after_chunks is not None and self.chunks >= self.stop_after_chunks
        if due or stop:
            self.save()
        if stop:
            raise StudyInterrupted(f"stopped after {self.chunks} chunks (state saved to {self.path})")

    # -- file ---------------------------------------------------------------------------------------

    def save(self) -> Path | None:
        """Write every policy's latest boundary state to the resume file (atomically)."""
        if not self._dirty:
            return None
        arrays: dict[str, np.ndarray] = {}
        policies: dict[str, Any] = {}
        for name, snap in self.latest.items():
            idx = snap["index"]
            carry_arrays, carry_meta = flatten(snap["carry"], f"p{idx}/carry/")
            arrays.update(carry_arrays)
            for metric, arr in snap["values"].items():
                arrays[f"p{idx}/values/{metric}"] = np.asarray(arr)
            for metric, arr in snap["totals"].items():
                arrays[f"p{idx}/totals/{metric}"] = np.asarray(arr)
            policies[name] = {"index": idx, "carry": carry_meta, "next_round": snap["t0"],
                              "next_checkpoint": snap["ci"], "seconds": snap["seconds"]}
        has_extra = self.extra is not None
        if has_extra:
            arrays.update({f"extra/{k}": np.asarray(v) for k, v in self.extra.state_arrays().items()})
        meta = {"format": RESUME_TAG, "format_version": FORMAT_VERSION, "bayesfair": _version(),
                "fingerprint": self.fingerprint, "policies": policies, "extra": has_extra,
                "study": None if self.study is None else json.loads(canonical_json(self.study)),
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        write_npz(self.path, arrays, meta)
        self.last_save = time.monotonic()
        self.since_save = 0
        self._dirty = False
        return self.path

    def remove(self) -> None:
        """Delete the resume file (after the results were written)."""
        self.path.unlink(missing_ok=True)


def _check_resume_header(meta: Mapping[str, Any], path: Any) -> None:
    """The fields every resume header has (PersistError naming the file and the field otherwise)."""
    require_fields(meta, _RESUME_FIELDS, f"{path}: the resume header")
    if not isinstance(meta["policies"], Mapping):
        raise PersistError(f"{path}: the resume header's policies are not a table; {_REMEDY[RESUME_TAG]}")
    for name, pm in meta["policies"].items():
        require_fields(pm, _RESUME_POLICY_FIELDS, f"{path}: the resume header of policy {name!r}")


def describe_resume(path: str | os.PathLike) -> tuple[str | None, dict[str, Any] | None, str]:
    """``(fingerprint, study config, progress text)`` of a resume file (for messages)."""
    meta, _ = read_npz(path, RESUME_TAG)
    _check_resume_header(meta, path)
    study = meta.get("study")
    horizon = study.get("horizon") if isinstance(study, dict) else None
    parts = []
    for name, pm in meta["policies"].items():
        done = int(pm["next_round"]) - 1
        parts.append(f"{name}: {done:,}" + (f" of {horizon:,} rounds" if horizon else " rounds"))
    text = ("saved " + str(meta.get("saved", "?")) + "; " + ", ".join(parts)) if parts else "no rounds saved"
    return meta.get("fingerprint"), study, text


def run_with_store(fn: Callable[[], Any], store: ResumeStore) -> Any:
    """Call ``fn()``; on Ctrl-C (KeyboardInterrupt) save the last chunk boundary before re-raising."""
    try:
        return fn()
    except KeyboardInterrupt:
        store.save()
        raise


__all__ += ["flatten", "unflatten", "write_npz", "read_npz", "npz_checksum", "require_fields", "run_with_store",
            "describe_resume"]
