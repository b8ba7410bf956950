"""Multi-label data bandits (fairness_of_exposure_fairx_icml2021, Section 5.1).

A multi-label dataset (e.g. yeast: 2,417 examples, 103 features, 14 labels) becomes a bandit:
the labels are the arms, each round draws one example uniformly at random (with replacement),
and the reward of arm a is the example's label a (0 or 1).

- ``mode="mab"``: no contexts. The mean reward of arm a is its empirical label frequency over
  the dataset, constant over rounds; the paper uses it as mu for the optimal fair policy pi*.
- ``mode="linear"``: the context of arm a is a ``n_rff``-dimensional random Fourier feature
  (Rahimi & Recht, 2007) vector of the outer product of the example's features and the one-hot
  vector of arm a, i.e. of ``vec(x e_a')``: ``x`` placed in block a of a ``d K`` vector, zeros
  elsewhere. The map is ``z -> sqrt(2 / D) cos(W z + b)`` with ``W ~ N(0, 1 / sigma^2)`` entrywise
  (the RBF kernel exp(-||z - z'||^2 / (2 sigma^2))) and ``b ~ U[0, 2 pi]``, drawn once from an
  explicit key. Because z is zero outside block a, ``W z = W[:, block a] @ x``, so the whole
  ``[n, K, D]`` context table is precomputed at construction and a round is an index lookup.
  The mean used for pi*_t is the paper's choice: a linear least-squares fit of the labels on
  the contexts over all examples x arms (Section 5.1, "we fit a linear least square model that
  maps the context vector of each arm to its reward"). The linearity need not hold, so the
  fitted means can leave [0, 1]; that is the misspecification the paper discusses in 5.4.

The paper is silent on feature scaling and on the kernel bandwidth sigma. Here features are
z-scored per column by default (``standardize=True``; yeast's rows are already unit-norm, so this
only evens out the column scales) and sigma defaults to the median heuristic: the median distance
between two distinct points z of the lifted data set {vec(x_i e_a')} (computed exactly from the
block structure over up to 1,000 evenly spaced rows, see :func:`median_bandwidth`). Pass
``rff_scale=<float>`` to override.

Note on the literal construction: with centred features and no constant feature, the lifted
points of different arms are about as far apart as those of one arm, so the contexts hardly
identify the arm, and the least-squares fit cannot express the per-arm label frequencies (on
yeast, with the median bandwidth, the per-arm averages of the fitted means lie within 0.27-0.33
while the label frequencies range from 0.014 to 0.75). ``bias=s > 0`` appends a constant
feature ``s`` to every example before the outer product, so ``vec(x e_a')`` carries an
arm-specific offset (s around 3 sqrt(d) makes the fit track the label frequencies); the default
0 is the paper's literal construction.

The data tables are closed over by ``step`` as constants (not per-run parameters), so they are
not replicated across runs; ``reset`` returns the ``[K]`` arm means recorded in results.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._validate import as_key, finite_array, finite_float, positive_int
from bayesfair.core.declare import Cap, Count, Index, Labels, NonNegative, OpenUnit, declare
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.datasets import load_yeast
from bayesfair.datasets.splits import validation_split
from bayesfair.environments.base import Environment

__all__ = [
    "MultilabelTables",
    "multilabel_bandit",
    "multilabel_tables",
    "yeast_bandit",
    "yeast_bandit_config",
    "rff_params",
    "rff_contexts",
    "median_bandwidth",
    "least_squares_means",
    "draw_example",
]

_MODES = ("mab", "linear")
_MEDIAN_ROWS = 1000  # rows used by the median heuristic (evenly spaced, deterministic)


class MultilabelTables(NamedTuple):
    """Everything a multi-label bandit precomputes (numpy arrays).

    Attributes
    ----------
    labels : numpy.ndarray
        float32 ``[n, K]`` rewards (0/1) of every example and arm.
    label_means : numpy.ndarray
        float64 ``[K]`` empirical label frequencies (the MAB means).
    contexts : numpy.ndarray or None
        float32 ``[n, K, D]`` random Fourier feature contexts (linear mode only).
    fitted_means : numpy.ndarray or None
        float64 ``[n, K]`` least-squares fitted means ``contexts @ theta`` (linear mode only).
    theta : numpy.ndarray or None
        float64 ``[D]`` least-squares coefficients (linear mode only).
    bandwidth : float or None
        The kernel bandwidth sigma used for ``W`` (linear mode only).
    """

    labels: np.ndarray
    label_means: np.ndarray
    contexts: np.ndarray | None
    fitted_means: np.ndarray | None
    theta: np.ndarray | None
    bandwidth: float | None


def draw_example(key: jax.Array, n_examples: int) -> jax.Array:
    """The example index a round uses: uniform on ``0..n-1`` from the round's key.

    ``step`` calls exactly this, so tests and diagnostics can recover which example a round drew.
    """
    return jax.random.randint(key, (), 0, n_examples)


# ---------------------------------------------------------------------------------------------
# validation


def _check_labels(labels: Any, n_rows: int | None) -> np.ndarray:
    try:
        arr = np.asarray(labels, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"labels must be a 2-d array of 0/1 values, got {type(labels).__name__}") from None
    if arr.ndim != 2:
        raise ValueError(f"labels must be 2-dimensional [n_examples, n_labels], got shape {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError("labels must have at least one row (example)")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise ValueError(f"labels must have one row per example: features has {n_rows} rows, labels {arr.shape[0]}")
    if arr.shape[1] < 2:
        raise ValueError(f"labels must have at least 2 columns (arms), got {arr.shape[1]}")
    bad = ~((arr == 0) | (arr == 1))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"labels must be 0 or 1; labels[{i}, {j}] = {arr[i, j]}")
    return arr


def _check_features(features: Any) -> np.ndarray:
    arr = finite_array("features", features, ndim=2)
    if arr.shape[1] < 1:
        raise ValueError(f"features must have at least one column, got shape {arr.shape}")
    return arr


def _check_scale(rff_scale: Any) -> float | None:
    if isinstance(rff_scale, str):
        if rff_scale != "median":
            raise ValueError(f"rff_scale must be 'median' or a positive number, got {rff_scale!r}")
        return None
    scale = finite_float("rff_scale", rff_scale)
    if scale <= 0:
        raise ValueError(f"rff_scale must be > 0 (the RBF kernel bandwidth), got {scale}")
    return scale


def standardize_columns(x: np.ndarray) -> np.ndarray:
    """Z-score each column; constant columns are centred only (divided by 1)."""
    std = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)


# ---------------------------------------------------------------------------------------------
# random Fourier features of vec(x e_a')


def median_bandwidth(features: np.ndarray, n_arms: int) -> float:
    """Median heuristic for the RBF bandwidth on the lifted points z = vec(x_i e_a').

    Two lifted points of the same arm are ``||x_i - x_j||`` apart; of different arms
    ``sqrt(||x_i||^2 + ||x_j||^2)`` apart. The median runs over all unordered pairs of distinct
    points (i, a) != (j, b), weighted by how many such pairs each value stands for (same arm,
    i < j: K pairs; different arms, i < j: K (K - 1); different arms, i = j: K (K - 1) / 2).
    At most 1,000 evenly spaced rows are used, so the value is deterministic.
    """
    x = np.asarray(features, np.float64)
    n_arms = positive_int("n_arms", n_arms)
    if x.shape[0] > _MEDIAN_ROWS:
        x = x[np.linspace(0, x.shape[0] - 1, _MEDIAN_ROWS).round().astype(np.int64)]
    n = x.shape[0]
    sq = np.einsum("nd,nd->n", x, x)
    iu, ju = np.triu_indices(n, k=1)
    gram = x @ x.T
    same = np.sqrt(np.maximum(sq[iu] + sq[ju] - 2.0 * gram[iu, ju], 0.0))
    diff = np.sqrt(sq[iu] + sq[ju])
    diag = np.sqrt(2.0 * sq)
    values = np.concatenate([same, diff, diag])
    weights = np.concatenate([
        np.full(same.size, float(n_arms)),
        np.full(diff.size, float(n_arms * (n_arms - 1))),
        np.full(diag.size, n_arms * (n_arms - 1) / 2.0),
    ])
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    med = float(values[order][np.searchsorted(cum, 0.5 * cum[-1])])
    if not med > 0:
        raise ValueError("features give a zero median distance (constant rows?); pass rff_scale explicitly")
    return med


def rff_params(key: Any, in_dim: int, n_rff: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Draw the random Fourier map: ``W [D, in_dim] ~ N(0, 1/scale^2)``, ``b [D] ~ U[0, 2 pi]``.

    Deterministic given ``key`` (an int seed or a jax key); float64 numpy arrays.
    """
    key = as_key(key, "key")
    in_dim = positive_int("in_dim", in_dim)
    n_rff = positive_int("n_rff", n_rff)
    scale = finite_float("scale", scale)
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    k_w, k_b = jax.random.split(key)
    w = np.asarray(jax.random.normal(k_w, (n_rff, in_dim), jnp.float32), np.float64) / scale
    b = np.asarray(jax.random.uniform(k_b, (n_rff,), jnp.float32, 0.0, 2.0 * math.pi), np.float64)
    return w, b


def rff_contexts(features: np.ndarray, w: np.ndarray, b: np.ndarray, n_arms: int) -> np.ndarray:
    """Contexts ``[n, K, D]`` = sqrt(2/D) cos(W vec(x_i e_a') + b), via the block structure.

    ``w`` is ``[D, d K]`` with block a = columns ``a d .. (a + 1) d - 1`` (so vec(x e_a') stacks
    the columns of the d x K outer product). Returned as float64.
    """
    x = np.asarray(features, np.float64)
    n, d = x.shape
    n_rff = w.shape[0]
    if w.shape[1] != d * n_arms:
        raise ValueError(f"w must have d * K = {d * n_arms} columns, got {w.shape[1]}")
    blocks = w.reshape(n_rff, n_arms, d)  # blocks[:, a, :] = W[:, block a]
    proj = np.einsum("nd,Dkd->nkD", x, blocks)
    return math.sqrt(2.0 / n_rff) * np.cos(proj + b)


def least_squares_means(contexts: np.ndarray, targets: np.ndarray, ridge: float = 1e-6
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares fit of ``targets [n, K]`` on ``contexts [n, K, D]`` over all rows x arms.

    Solves ``(X'X + lam I) theta = X'y`` in float64 with ``lam = ridge * trace(X'X) / D`` (a
    relative ridge, only for numerical stability). Returns ``(theta [D], fitted [n, K])``.
    """
    ridge = finite_float("ridge", ridge)
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    ctx = np.asarray(contexts, np.float64)
    y = np.asarray(targets, np.float64)
    x = ctx.reshape(-1, ctx.shape[-1])
    gram = x.T @ x
    lam = ridge * np.trace(gram) / gram.shape[0]
    theta = np.linalg.solve(gram + lam * np.eye(gram.shape[0]), x.T @ y.reshape(-1))
    return theta, ctx @ theta


# ---------------------------------------------------------------------------------------------
# tables and the environment


def multilabel_tables(
    features: Any,
    labels: Any,
    *,
    mode: str = "mab",
    n_rff: int = 50,
    rff_scale: float | str = "median",
    key: Any = 0,
    standardize: bool = True,
    bias: float = 0.0,
    ridge: float = 1e-6,
) -> MultilabelTables:
    """Validate the data and precompute the tables of :func:`multilabel_bandit` (numpy).

    See :func:`multilabel_bandit` for the parameters.
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    x = _check_features(features)
    y = _check_labels(labels, x.shape[0])
    n_rff = positive_int("n_rff", n_rff)
    scale = _check_scale(rff_scale)
    rff_key = as_key(key, "key")
    if not isinstance(standardize, (bool, np.bool_)):
        raise TypeError(f"standardize must be True or False, got {standardize!r}")
    bias = finite_float("bias", bias)
    if bias < 0:
        raise ValueError(f"bias must be >= 0 (0 = no constant feature), got {bias}")
    ridge = finite_float("ridge", ridge)
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    label_means = y.mean(axis=0)
    if mode == "mab":
        return MultilabelTables(y.astype(np.float32), label_means, None, None, None, None)
    if standardize:
        x = standardize_columns(x)
    if bias > 0:
        x = np.hstack([x, np.full((x.shape[0], 1), bias)])
    k = y.shape[1]
    bandwidth = median_bandwidth(x, k) if scale is None else scale
    w, b = rff_params(rff_key, x.shape[1] * k, n_rff, bandwidth)
    ctx = rff_contexts(x, w, b, k).astype(np.float32)
    theta, fitted = least_squares_means(ctx, y, ridge)
    return MultilabelTables(y.astype(np.float32), label_means, ctx, fitted, theta, float(bandwidth))


def multilabel_bandit(
    features: Any,
    labels: Any,
    *,
    mode: str = "mab",
    n_rff: int = 50,
    rff_scale: float | str = "median",
    key: Any = 0,
    standardize: bool = True,
    bias: float = 0.0,
    ridge: float = 1e-6,
    groups: Any = None,
    name: str | None = None,
) -> Environment:
    """The multi-label data bandit of FairX Section 5.1 (MAB or linear version).

    Each round draws one example i uniformly with replacement (:func:`draw_example` on the
    round's key, so every compared policy sees the same examples); the arms are the labels and
    the reward of arm a is ``labels[i, a]``.

    Parameters
    ----------
    features : array-like [n, d]
        Finite example features (used by ``mode="linear"`` only, but always validated).
    labels : array-like [n, K]
        0/1 labels; K >= 2 arms.
    mode : {"mab", "linear"}
        ``"mab"``: no contexts; ``Round.mean`` is the constant vector of empirical label means
        (the paper's mu for pi* in the MAB experiments). ``"linear"``: ``obs.contexts`` is the
        ``[K, n_rff]`` random-Fourier-feature context of (x_i, a) and ``Round.mean`` is the
        least-squares fitted mean ``theta . context`` of each arm for this example (the paper's
        choice for the linear experiments), so pi*_t changes with the example.
    n_rff : int
        Random Fourier feature dimension D (the paper: 50).
    rff_scale : float or "median"
        RBF kernel bandwidth sigma (``W ~ N(0, 1/sigma^2)``); ``"median"`` (default) uses
        :func:`median_bandwidth` on the (standardized) features. The paper does not state it.
    key : int or jax key
        Seed/key of the random Fourier map (W, b), drawn once at construction; keep it fixed
        across runs and across the validation and test environments.
    standardize : bool
        Z-score the feature columns before the random features (the paper does not say; this
        is the default here). Statistics are those of the data given.
    bias : float
        If > 0, a constant feature of this value is appended to every (standardized) example
        before the outer product, so the contexts identify the arm (see the module notes);
        0 (default) is the paper's literal construction.
    ridge : float
        Relative ridge of the least-squares fit (see :func:`least_squares_means`).
    groups : Groups or int sequence [K], optional
        Group of each arm (one group if omitted).
    name : str, optional
        Environment name (default ``"multilabel_mab"`` / ``"multilabel_linear"``).

    Returns
    -------
    Environment
        ``reset`` returns the ``[K]`` arm means recorded in results: the label means (MAB) or the
        average fitted mean over the examples (linear; the per-round pi*_t uses the per-example
        fitted means, so the recorded ``pi_star`` is then only a summary).
    """
    tables = multilabel_tables(features, labels, mode=mode, n_rff=n_rff, rff_scale=rff_scale, key=key,
                               standardize=standardize, bias=bias, ridge=ridge)
    n, k = tables.labels.shape
    if groups is None:
        grp = Groups.single(k)
    else:
        grp = groups if isinstance(groups, Groups) else Groups.from_labels(groups)
        if grp.n_arms != k:
            raise ValueError(f"groups has {grp.n_arms} arms but labels has {k} columns")
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    labels_j = jnp.asarray(tables.labels, jnp.float32)
    if mode == "mab":
        arm_mean = np.asarray(tables.label_means, np.float32)
        mean_j = jnp.asarray(arm_mean)

        def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
            i = draw_example(key, n)
            return Round(Observation(t=t), labels_j[i], params)

        n_features = 0
    else:
        ctx_j = jnp.asarray(tables.contexts, jnp.float32)
        fitted_j = jnp.asarray(tables.fitted_means, jnp.float32)
        arm_mean = np.asarray(tables.fitted_means.mean(axis=0), np.float32)
        mean_j = jnp.asarray(arm_mean)

        def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
            i = draw_example(key, n)
            return Round(Observation(t=t, contexts=ctx_j[i]), labels_j[i], fitted_j[i])

        n_features = int(tables.contexts.shape[-1])

    def reset(key: jax.Array) -> jax.Array:
        return mean_j

    spec = Spec(n_arms=k, group_of_arm=grp.labels, n_groups=grp.n_groups, n_features=n_features,
                reward_range=(0.0, 1.0), rewards="binary")
    cfg: dict[str, Any] = {
        "kind": "multilabel", "mode": mode, "n_examples": n, "n_arms": k,
        "n_input_features": int(np.shape(features)[1]),
        "label_means": tables.label_means.tolist(), "groups": grp.describe(),
    }
    if mode == "linear":
        fitted = tables.fitted_means
        resid = tables.labels - fitted
        cfg.update({
            "n_rff": n_features, "rff_scale": tables.bandwidth,
            "rff_scale_rule": "median" if isinstance(rff_scale, str) else "given",
            "rff_key": np.asarray(jax.random.key_data(as_key(key, "key"))).tolist(),
            "standardize": bool(standardize), "bias": float(bias), "ridge": ridge,
            "fit_r2": float(1.0 - (resid**2).sum() / ((tables.labels - tables.label_means) ** 2).sum()),
            "fitted_mean_range": [float(fitted.min()), float(fitted.max())],
        })
    return Environment(spec, grp, reset, step, lambda p: p, name or f"multilabel_{mode}", cfg)


def yeast_bandit(mode: str = "mab", split: str = "all", **kw: Any) -> Environment:
    """The yeast multi-label bandit (14 arms; FairX Section 5.1).

    Loads the data with :func:`bayesfair.datasets.load_yeast` (imported here, lazily; it reads
    ``$BAYESFAIR_DATA/yeast``) and calls :func:`multilabel_bandit` with the 103 features and 14
    labels. ``kw`` is passed on (``n_rff``, ``rff_scale``, ``key``, ``standardize``, ...).
    """
    df = load_yeast(split=split)
    features = df[list(df.attrs["features"])].to_numpy(np.float64)
    labels = df[list(df.attrs["labels"])].to_numpy(np.float64)
    kw.setdefault("name", f"yeast_{mode}" + ("" if split == "all" else f"_{split}"))
    return multilabel_bandit(features, labels, mode=mode, **kw)


@declare("environment", "yeast_bandit")
def yeast_bandit_config(mode: Literal["mab", "linear"] = "mab", split: Literal["all", "train", "test"] = "all",
                        part: Literal["all", "validation", "test"] = "all", validation_fraction: OpenUnit = 0.2,
                        split_seed: Index = 0, n_rff: Annotated[Count, Cap(1000)] = 50,
                        rff_scale: float | str = "median", key: Index = 0, standardize: bool = True,
                        bias: NonNegative = 0.0, ridge: NonNegative = 1e-6,
                        groups: Labels | None = None) -> Environment:
    """The yeast multi-label bandit (14 arms; FairX Section 5.1); needs the yeast dataset.

    ``split`` picks MULAN's files (``all``/``train``/``test``); ``part`` then keeps all those rows,
    or the ``validation`` (``validation_fraction`` of them) or ``test`` part (the rest) of the
    random split :func:`bayesfair.workflow.tuning.validation_split` with ``split_seed`` -- Section 5.1's
    20% / 80% split, the one ``experiments/fairx_yeast/run.py --seed S`` uses (``split_seed = S``).
    A linear ``validation`` part with ``rff_scale = "median"`` takes the bandwidth of the ``test``
    part, so both parts share one random Fourier map, as in that script.
    """
    kw = {"mode": mode, "n_rff": n_rff, "rff_scale": rff_scale, "key": key, "standardize": standardize,
          "bias": bias, "ridge": ridge, "groups": groups}
    if part == "all":
        return yeast_bandit(split=split, **kw)
    df = load_yeast(split=split)
    s = validation_split(df[list(df.attrs["features"])].to_numpy(np.float64),
                         df[list(df.attrs["labels"])].to_numpy(np.float64), fraction=validation_fraction,
                         seed=split_seed)
    if part == "validation" and mode == "linear" and rff_scale == "median":
        kw["rff_scale"] = multilabel_bandit(s.test_features, s.test_labels, **kw).params["rff_scale"]
    x, y = (s.val_features, s.val_labels) if part == "validation" else (s.test_features, s.test_labels)
    prefix = "yeast" if split == "all" else f"yeast_{split}"
    return multilabel_bandit(x, y, name=f"{prefix}_{mode}_{'val' if part == 'validation' else part}", **kw)

