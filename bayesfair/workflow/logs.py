"""Per-round logs: every round's candidates, the policy's choice and selection probabilities.

A :class:`RoundLog` is passed to :func:`bayesfair.simulate` (``round_log=``); after the run,
:meth:`RoundLog.to_frame` gives a tidy pandas DataFrame with one row per policy x run x round x
candidate:

========================  =========================================================================
column                    meaning
========================  =========================================================================
``policy``                the policy's name in the study (categorical)
``run``                   run index
``round``                 round t (1-based)
``candidate``             candidate (arm) index a
``group``                 the candidate's group name (categorical; per round when the environment
                          draws groups per round)
``selected``              whether the policy played this candidate (bool; one per round)
``propensity``            pi_t(a), the policy's selection probability (the logging propensity)
``observed_reward``       the reward the policy observed: the chosen candidate's reward (the feedback
                          it sees); NaN for the candidates it did not choose (nothing observed)
``true_reward``           the unbiased reward of every candidate: the environment's
                          ``Round.extra["true"]`` under biased feedback (the biased-feedback
                          environments record the noise-free true reward beta_i . x there), else the
                          reward the simulator drew for it (equal to ``observed_reward`` for the
                          chosen candidate; the unseen counterfactual for the others)
``expected_reward``       the candidate's expected reward mu_t,a this round
``<extra>``               every other per-candidate value the environment reports (``Round.extra``)
========================  =========================================================================

The frame plugs into fairlearn's ``MetricFrame`` as ``y_true``/``y_pred``/``sensitive_features``
(see ``docs/fairlearn.md``). :func:`write_log` writes it as parquet when pyarrow is installed and
as CSV otherwise. Logs cost O(policies x runs x T x K) memory: they are meant for small studies;
``max_rows`` guards against asking for billions of rows by mistake.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bayesfair.core._atomic import atomic_write
from bayesfair.core._validate import positive_int

__all__ = ["RoundLog", "write_log", "read_log", "parquet_available", "LOG_COLUMNS", "DEFAULT_MAX_ROWS"]

DEFAULT_MAX_ROWS = 5_000_000
LOG_COLUMNS = ("policy", "run", "round", "candidate", "group", "selected", "propensity", "observed_reward",
               "true_reward", "expected_reward")
_SEP = "::"


class RoundLog:
    """Collects per-round records from the simulator (a ``round_log`` callback).

    Parameters
    ----------
    horizon, runs, n_arms : int
        The study's T, R and K (arrays are allocated per policy as ``[R, T, K]``).
    group_names : sequence of str
        Names of the groups (index -> name), e.g. ``env.groups.names``.
    n_policies : int
        Number of policies the study runs (for the row-count guard).
    max_rows : int
        Refuse a log of more rows than this (``ValueError`` naming the count).
    true_reward : str
        Name of the environment's ``Round.extra`` entry holding the unbiased reward (default
        ``"true"``, the biased-feedback environments' name).
    """

    def __init__(self, horizon: int, runs: int, n_arms: int, group_names: Sequence[str], *, n_policies: int = 1,
                 max_rows: int = DEFAULT_MAX_ROWS, true_reward: str = "true"):
        self.horizon = positive_int("horizon", horizon)
        self.runs = positive_int("runs", runs)
        self.n_arms = positive_int("n_arms", n_arms)
        self.group_names = [str(g) for g in group_names]
        self.true_reward = true_reward
        rows = n_policies * self.runs * self.horizon * self.n_arms
        if rows > max_rows:
            raise ValueError(f"a per-round log of {n_policies} policies x {runs} runs x {horizon} rounds x "
                             f"{n_arms} candidates has {rows:,} rows, more than max_rows = {max_rows:,}; "
                             "log a smaller study or raise max_rows")
        self.data: dict[str, dict[str, np.ndarray]] = {}
        self.filled: dict[str, int] = {}  # policy -> rounds recorded

    @classmethod
    def for_study(cls, env: Any, horizon: int, runs: int, n_policies: int, **kw: Any) -> RoundLog:
        """A log sized for ``env`` (its arms and group names)."""
        return cls(horizon, runs, env.spec.n_arms, env.groups.names, n_policies=n_policies, **kw)

    def __call__(self, name: str, first: int, last: int, records: Mapping[str, Any]) -> None:
        """Store rounds ``first..last`` of policy ``name`` (``records``: ``[R, chunk, ...]`` arrays)."""
        n = last - first + 1
        flat = {k: v for k, v in records.items() if k != "extra"}
        for k, v in (records.get("extra") or {}).items():
            flat[f"extra_{k}"] = v
        store = self.data.setdefault(name, {})
        for k, v in flat.items():
            v = np.asarray(v)
            if k not in store:
                store[k] = np.zeros((v.shape[0], self.horizon, *v.shape[2:]), v.dtype)
            store[k][:, first - 1:last] = v[:, :n]
        self.filled[name] = max(self.filled.get(name, 0), last)

    # -- resume support (bayesfair.workflow.persist.ResumeStore saves these with the run state) ----------

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything recorded so far, as named arrays."""
        out = {f"{name}{_SEP}{k}": v for name, store in self.data.items() for k, v in store.items()}
        for name, t in self.filled.items():
            out[f"{name}{_SEP}__filled__"] = np.asarray(t, np.int64)
        return out

    def restore_arrays(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Inverse of :meth:`state_arrays`."""
        self.data, self.filled = {}, {}
        for key, v in arrays.items():
            name, _, k = key.rpartition(_SEP)
            if k == "__filled__":
                self.filled[name] = int(v)
            else:
                self.data.setdefault(name, {})[k] = np.array(v)

    # -- output -------------------------------------------------------------------------------

    def to_frame(self, policies: Sequence[str] | None = None):
        """The tidy DataFrame described in the module docstring (rows ordered policy, run, round, candidate)."""
        import pandas as pd

        names = list(self.data) if policies is None else list(policies)
        frames = []
        for name in names:
            if name not in self.data:
                raise KeyError(f"no log for policy {name!r}; logged: {list(self.data)}")
            d = self.data[name]
            t = self.filled[name]
            r, k = self.runs, self.n_arms
            action = d["action"][:, :t]
            reward = d["reward"][:, :t].astype(np.float64)
            true = d.get(f"extra_{self.true_reward}")
            if true is None and self.true_reward != "true":  # a named entry the environment never reported
                reported = sorted(k[len("extra_"):] for k in d if k.startswith("extra_")) or "none"
                raise ValueError(f"true_reward = {self.true_reward!r}: the environment reported no such entry (it "
                                 f"reported {reported})")
            selected = action[:, :, None] == np.arange(k)  # [R, t, K]
            cols: dict[str, Any] = {
                "policy": np.full(r * t * k, name, dtype=object),
                "run": np.repeat(np.arange(r), t * k),
                "round": np.tile(np.repeat(np.arange(1, t + 1), k), r),
                "candidate": np.tile(np.arange(k), r * t),
                "group": np.asarray(self.group_names, dtype=object)[d["group"][:, :t].reshape(-1)],
                "selected": selected.reshape(-1),
                "propensity": d["probs"][:, :t].astype(np.float64).reshape(-1),
                "observed_reward": np.where(selected, reward, np.nan).reshape(-1),
                "true_reward": (reward if true is None else true[:, :t].astype(np.float64)).reshape(-1),
                "expected_reward": d["mean"][:, :t].astype(np.float64).reshape(-1),
            }
            for key, v in d.items():
                if key.startswith("extra_") and key != f"extra_{self.true_reward}" and v.ndim == 3:
                    cols[key[len("extra_"):]] = v[:, :t].astype(np.float64).reshape(-1)
            frames.append(pd.DataFrame(cols))
        if not frames:
            return pd.DataFrame({c: [] for c in LOG_COLUMNS})
        df = pd.concat(frames, ignore_index=True)
        df["policy"] = pd.Categorical(df["policy"], categories=names)
        df["group"] = pd.Categorical(df["group"], categories=self.group_names)
        return df


def parquet_available() -> bool:
    """Whether pandas can write parquet here (pyarrow installed)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_log(df: Any, path: str | os.PathLike, format: str = "auto") -> Path:
    """Write a per-round log atomically: parquet (needs pyarrow) or CSV.

    Parameters
    ----------
    df : pandas.DataFrame
        From :meth:`RoundLog.to_frame`.
    path : path-like
        Target path; a ``.parquet``/``.csv`` suffix is replaced to match ``format``, any other
        name gets ``.parquet``/``.csv`` appended.
    format : {"auto", "parquet", "csv"}
        ``"auto"``: parquet when pyarrow is installed, else CSV.

    Returns
    -------
    Path
        The file written.
    """
    if format not in ("auto", "parquet", "csv"):
        raise ValueError(f"format must be 'auto', 'parquet' or 'csv', got {format!r}")
    if format == "auto":
        format = "parquet" if parquet_available() else "csv"
    if format == "parquet" and not parquet_available():
        raise ImportError("writing parquet needs pyarrow (pip install pyarrow); use format='csv'")
    path = Path(path)
    path = path.with_suffix(f".{format}") if path.suffix in (".parquet", ".csv") else \
        path.with_name(f"{path.name}.{format}")
    with atomic_write(path) as tmp:
        if format == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
    return path


def read_log(path: str | os.PathLike):
    """Read a log written by :func:`write_log` (categorical ``policy``/``group`` restored for CSV)."""
    import pandas as pd

    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    df = pd.read_csv(path)
    for col in ("policy", "group"):
        if col in df:
            df[col] = df[col].astype("category")
    return df
