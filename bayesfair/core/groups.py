"""Arm -> group structure and its checks (used by group exposure metrics and bi-level fairness)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesfair.core._validate import finite_array, group_labels, positive_int

__all__ = ["Groups", "validate_exposure_floors"]


@dataclass(frozen=True, eq=False)
class Groups:
    """Partition of ``K`` arms into ``m`` non-empty groups.

    Attributes
    ----------
    labels : numpy.ndarray
        int array ``[K]``: the group index (0..m-1) of each arm.
    names : tuple of str
        One name per group.
    """

    labels: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def from_labels(cls, labels: Sequence[int] | Sequence[str] | np.ndarray,
                    names: Sequence[str] | None = None) -> Groups:
        """Build from a label per arm: group indices 0..m-1 (every index used: no empty group), or
        group names such as ``["a", "b", "a"]``, numbered in the order they first appear and kept
        as the groups' names (``names`` may then be omitted, or must list the same names)."""
        arr, found = group_labels("groups labels", labels)
        if found is not None:
            if names is not None and tuple(str(n) for n in names) != found:
                raise ValueError(f"groups names must be the labels' names in first-appearance order {list(found)} "
                                 f"when the labels are names, got {list(names)}")
            names = found
        m = int(arr.max()) + 1
        counts = np.bincount(arr, minlength=m)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ValueError(f"groups must be non-empty: group(s) {empty.tolist()} have no arm")
        if names is None:
            names = tuple(f"g{g}" for g in range(m))
        names = tuple(str(n) for n in names)
        if len(names) != m:
            raise ValueError(f"groups names must have one name per group ({m}), got {len(names)}")
        if len(set(names)) != m:
            raise ValueError(f"groups names must be distinct, got {names}")
        return cls(labels=arr.astype(np.int32), names=names)

    @classmethod
    def from_sizes(cls, sizes: Sequence[int], names: Sequence[str] | None = None) -> Groups:
        """Consecutive groups of the given sizes, e.g. ``(5, 10)`` for the BF low-arms setting."""
        sizes = [positive_int(f"groups sizes[{i}]", s) for i, s in enumerate(sizes)]
        if not sizes:
            raise ValueError("groups sizes must not be empty")
        return cls.from_labels(np.repeat(np.arange(len(sizes)), sizes), names)

    @classmethod
    def single(cls, n_arms: int) -> Groups:
        """All arms in one group."""
        return cls.from_labels(np.zeros(positive_int("n_arms", n_arms), dtype=np.int32), ("all",))

    @property
    def n_arms(self) -> int:
        return int(self.labels.size)

    @property
    def n_groups(self) -> int:
        return len(self.names)

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.n_groups)

    def membership(self) -> np.ndarray:
        """One-hot membership matrix ``[K, m]`` (float32), for per-group sums."""
        return np.eye(self.n_groups, dtype=np.float32)[self.labels]

    def describe(self) -> dict[str, Any]:
        return {"labels": self.labels.tolist(), "names": list(self.names)}


def validate_exposure_floors(beta: Any, n_groups: int) -> np.ndarray:
    """Check bi-level exposure floors: each beta_g in (0, 1/m] and sum(beta) < 1.

    (bilevel_fairness_bf_ucb_aamas2024, Section 3: the floors must be jointly feasible.)
    """
    arr = finite_array("beta", beta, ndim=1, size=n_groups)
    bad = np.flatnonzero((arr <= 0) | (arr > 1.0 / n_groups))
    if bad.size:
        raise ValueError(
            f"beta[{bad[0]}] must be in (0, 1/m] = (0, {1.0 / n_groups:g}], got {arr[bad[0]]:g}"
        )
    if arr.sum() >= 1.0:
        raise ValueError(f"sum(beta) must be < 1, got {arr.sum():g}")
    return arr
