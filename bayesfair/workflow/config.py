"""Study configs: a TOML file that describes a whole regret study, validated on load.

Example (the shipped config ``demo``; ``bayesfair configs export demo DIR`` copies it)::

    name = "demo"
    seed = 0
    runs = 20
    horizon = 20000
    output = "results/demo"

    [merit]
    name = "exponential"
    c = 4.0

    [environment]
    name = "bernoulli_arms"
    means = [0.10, 0.25, 0.35, 0.45, 0.50, 0.55, 0.62, 0.70, 0.78, 0.80]

    [policies.FairX-TS]
    name = "fairx_ts"
    posterior = { name = "beta_bernoulli" }

    [policies.UCB]
    name = "ucb1"

Top-level keys (anything else is an error):

=================  ==============================================================================
key                meaning
=================  ==============================================================================
``name``           study name (letters, digits, ``_ . -``); default: the file's stem; names files
                   (so at most the output folder's file-name limit less 30: 225 characters at 255)
``description``    free text
``seed``           integer >= 0 (default 0); the master key of :func:`bayesfair.simulate`
``runs``           integer >= 1 (required)
``horizon``        integer >= 1 (required)
``checkpoints``    integer n >= 1 (about n checkpoints, :func:`bayesfair.checkpoint_grid`; default
                   100), or a list of rounds in [1, horizon] (the horizon is always added)
``chunk_size``     rounds per jitted call, integer >= 1 (default 1024; fixes resume boundaries)
``devices``        shard runs over at most this many CPU devices (default: all)
``floors``         exposure floors beta_g, one per group, each in (0, 1/m], sum < 1 (optional);
                   also the default ``groups_beta`` of bi-level policies
``metrics``        metric components to record, a list of declared metric names (``bayesfair list``:
                   fairx, conventional, extra_regrets, floors, tracked; optional; default: every component that
                   applies, :func:`bayesfair.simulation.metric_parts.default_metrics`); ``fairx`` and
                   ``conventional`` may be tables ``{name = "conventional", only = ["reward",
                   "exposure"]}`` that record some of the component's variables
``output``         output folder (default ``results/<name>``), relative to the working directory
``[merit]``        registered merit + params, e.g. ``{name = "exponential", c = 4.0}`` (required)
``[environment]``  registered environment + params (required)
``[policies.X]``   one table per compared policy, X its label: registered policy + params;
                   ``merit`` defaults to the study's, ``posterior`` is a posterior table
``[sweep]``        ``"key.path" = [values...]``: a grid of studies (:mod:`bayesfair.workflow.sweep`)
``[log]``          per-round log: ``enabled`` (false), ``format`` (auto/parquet/csv),
                   ``max_rows`` (5e6), ``true_reward`` (the unbiased-reward extra, ``"true"``)
``[resume]``       resume-file cadence: ``every_chunks`` (off), ``every_seconds`` (30)
``[data]``         where the data sets are read: ``path`` (a data folder ``<path>/<dataset>/<file>``
                   for this study, on the client and every Dask worker; made absolute from the
                   working directory) and ``ship`` (``"auto"``/``"always"``/``"never"``: whether a
                   sweep on Dask sends them to its workers, :mod:`bayesfair.workflow.sweep`); not
                   part of the fingerprint
=================  ==============================================================================

Every error is a :class:`ConfigError` naming the key path, the value and what is allowed, e.g.
``policies.FairX-EG.epsilon: out of range: allowed a number in [0, 1], got 1.5``. Unknown keys are
errors (with a did-you-mean hint). Parameters of the named constructors come from
:mod:`bayesfair.workflow.registry`; the objects are built on load, so constructor checks (and the policy's
``init`` on the environment's spec, traced without compute) run before any simulation.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from bayesfair.workflow.registry import ConfigError
from bayesfair.workflow.study import (
    DATA_KEYS,
    LOG_KEYS,
    RESUME_KEYS,
    TOP_LEVEL,
    Study,
    StudyOutput,
    parse_config,
    set_path,
)
from bayesfair.workflow.sweep import Sweep

__all__ = ["ConfigError", "Study", "StudyOutput", "load_config", "parse_config", "set_path", "parse_override",
           "TOP_LEVEL", "LOG_KEYS", "RESUME_KEYS", "DATA_KEYS"]


_BOM = b"\xef\xbb\xbf"


def _read_toml(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError("", f"no config file at {path}")
    try:
        with open(path, "rb") as f:
            if f.read(len(_BOM)) == _BOM:
                raise ConfigError("", f"{path} starts with a UTF-8 byte-order mark (BOM, the bytes EF BB BF), which "
                                      "TOML does not allow: save it as plain UTF-8 without a BOM (editors call it "
                                      "'UTF-8', not 'UTF-8 with BOM')")
            f.seek(0)
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{path} is not a UTF-8 text file, so not a TOML config (byte {exc.start}: "
                              f"{exc.reason})") from None
    except OSError as exc:
        raise ConfigError("", f"cannot read the config {path}: {exc.strerror or exc}") from None


def parse_override(text: str) -> tuple[str, Any]:
    """``"key.path=value"`` -> (key path, value); the value is read as TOML (bare text -> string)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError("", f"an override must look like key.path=value, got {text!r}")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return key, parsed


def load_config(path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = (), *, check_memory: bool = True):
    """Read, validate and build a study config.

    Parameters
    ----------
    path : path-like
        A TOML file.
    overrides : list of str
        ``"key.path=value"`` settings applied before validation (the CLI's ``--set``).
    check_memory : bool
        Refuse a study (or sweep point) that cannot fit in this machine's memory (default; see
        :func:`bayesfair.workflow.study.parse_config`). ``False`` for one that runs elsewhere.

    Returns
    -------
    Study or Sweep
        A :class:`Study`, or a :class:`bayesfair.workflow.sweep.Sweep` when the file has a ``[sweep]`` table;
        both have ``.run(progress=...)`` and ``.execute(...)``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import bayesfair as bf
    >>> config = '''
    ... runs = 4
    ... horizon = 200
    ... [merit]
    ... name = "exponential"
    ... c = 4.0
    ... [environment]
    ... name = "bernoulli_arms"
    ... means = [0.2, 0.8]
    ... [policies.TS]
    ... name = "thompson"
    ... posterior = "beta_bernoulli"
    ... '''
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "tiny.toml"
    ...     _ = path.write_text(config)
    ...     study = bf.load_config(path, ["runs=2"])     # an override, as the CLI's --set
    >>> study.name, study.config["runs"], list(study.policies)
    ('tiny', 2, ['TS'])
    >>> ds = study.run()
    >>> ds.sizes["run"]
    2
    """
    raw = _read_toml(path)
    set_keys = []
    for text in overrides:
        key, value = parse_override(text)
        set_path(raw, key, value, where=f"--set {key}")
        set_keys.append(key)
    if "sweep" in raw:
        swept = raw["sweep"] if isinstance(raw["sweep"], dict) else {}
        for key in set_keys:  # each point sets its swept value: an override of one would be dropped silently
            hit = [k for k in swept if key == k or key.startswith(k + ".") or k.startswith(key + ".")]
            if hit and not key.startswith("sweep"):
                raise ConfigError(f"--set {key}", f"{hit[0]!r} is swept ([sweep] sets it at every point, so the "
                                  "override would be dropped); change its values in the config's [sweep] table")
        return Sweep.from_raw(raw, path, check_memory=check_memory)
    return parse_config(raw, path, check_memory=check_memory)
