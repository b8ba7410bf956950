"""A design matrix whose two-valued columns are stored as sparse indicators.

A z-scored one-hot column takes two values, ``lo`` (most rows) and ``lo + step``. Writing each such
column j as ``lo_j + step_j 1[row has the rarer value]``,

    X @ W = D @ W[dense_cols] + lo @ W + S @ (step * W)

with D the other (dense) columns and S the 0/1 matrix of the rarer values, kept as its nonzero
(row, column) pairs. The product reads the nonzeros instead of every entry: on the family-income
design (41,544 rows, 192 of 234 columns one-hot, 6.3 nonzeros per row) one value-and-gradient of
a loss of ``X @ W`` takes a quarter of the dense product's time (docs/mcmc.md). The result is the
dense product up to the rounding of a different summation order.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["IndicatorMatrix", "indicator_matrix"]


class IndicatorMatrix(NamedTuple):
    """``[N, D]`` matrix of the module docstring, a pytree of arrays; ``X @ W`` as for the dense one."""

    dense: Any        # [N, Dd] the columns that are not two-valued
    dense_cols: Any   # [Dd] their indices in X
    lo: Any           # [D] the common value of each two-valued column (0 for dense columns)
    step: Any         # [D] rarer value - common value (0 for dense columns)
    nz_rows: Any      # [nnz] row of each rarer value, ascending
    nz_cols: Any      # [nnz] its column

    @property
    def shape(self) -> tuple[int, int]:
        return (self.dense.shape[0], self.lo.shape[0])

    @property
    def dtype(self) -> Any:
        return self.dense.dtype

    def __matmul__(self, w: Any) -> Any:
        vector = jnp.ndim(w) == 1
        w2 = w[:, None] if vector else w
        sparse = jax.ops.segment_sum((self.step[:, None] * w2)[self.nz_cols], self.nz_rows,
                                     num_segments=self.shape[0], indices_are_sorted=True)
        out = self.dense @ w2[self.dense_cols] + (self.lo @ w2)[None, :] + sparse
        return out[:, 0] if vector else out


def indicator_matrix(X: Any, *, max_fraction: float = 0.5) -> Any:
    """``X`` as an :class:`IndicatorMatrix` if that reads at most ``max_fraction`` of its entries
    (dense columns plus nonzeros), else ``X`` itself (a NumPy array)."""
    X = np.asarray(X)
    n, d = X.shape
    if n == 0 or d == 0:
        return X
    two = np.zeros(d, bool)
    lo = np.zeros(d)
    hi = np.zeros(d)
    for j in range(d):
        v, c = np.unique(X[:, j], return_counts=True)
        if v.size == 2:
            two[j] = True
            common = int(np.argmax(c))  # ties: the first value is common
            lo[j], hi[j] = v[common], v[1 - common]
    rare = np.zeros((n, d), bool)
    rare[:, two] = X[:, two] == hi[two]
    rows, cols = np.nonzero(rare)  # row-major: rows ascending
    if rows.size + n * int((~two).sum()) > max_fraction * n * d:
        return X
    dense_cols = np.flatnonzero(~two)
    return IndicatorMatrix(X[:, dense_cols], dense_cols.astype(np.int32), np.where(two, lo, 0.0).astype(X.dtype),
                           np.where(two, hi - lo, 0.0).astype(X.dtype), rows.astype(np.int32), cols.astype(np.int32))
