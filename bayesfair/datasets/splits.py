"""Random validation/test splits of a dataset's rows (FairX paper, Section 5.1: 20% validation)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from bayesfair.core._validate import float_in, positive_int

__all__ = ["Split", "validation_split"]


class Split(NamedTuple):
    """A random validation/test split of a dataset (rows keep their original order)."""

    val_features: np.ndarray
    val_labels: np.ndarray
    test_features: np.ndarray
    test_labels: np.ndarray
    val_index: np.ndarray
    test_index: np.ndarray


def validation_split(features: Any, labels: Any, fraction: float = 0.2, seed: int = 0) -> Split:
    """Split the rows at random: ``round(fraction * n)`` for validation, the rest for testing.

    Parameters
    ----------
    features, labels : array-like with the same number of rows
        E.g. ``[n, d]`` features and ``[n, K]`` labels (any row-indexable arrays).
    fraction : float in (0, 1)
        Share of the rows for validation (the paper: 0.2).
    seed : int
        Seed of the permutation (numpy ``default_rng``).

    Returns
    -------
    Split
        ``(val_features, val_labels, test_features, test_labels, val_index, test_index)``.
    """
    x = np.asarray(features)
    y = np.asarray(labels)
    if x.ndim < 1 or y.ndim < 1:
        raise ValueError("features and labels must be arrays with one row per example")
    n = x.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"features and labels must have the same number of rows, got {n} and {y.shape[0]}")
    fraction = float_in("fraction", fraction, 0.0, 1.0, low_open=True, high_open=True)
    seed = positive_int("seed", seed, minimum=0)
    n_val = int(round(fraction * n))
    if n_val < 1 or n_val > n - 1:
        raise ValueError(f"fraction={fraction} of {n} rows leaves an empty validation or test part")
    perm = np.random.default_rng(seed).permutation(n)
    val, test = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    return Split(x[val], y[val], x[test], y[test], val, test)
