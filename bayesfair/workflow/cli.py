"""The ``bayesfair`` command line.

Commands
--------
``bayesfair demo``
    The shipped config ``demo`` (the main job of ``make demo``): FairX-TS, FairX-UCB, FairX-EG, TS
    and UCB on a 10-arm Bernoulli problem with f(mu) = exp(4 mu); ``--runs``/``--horizon``/
    ``--seed``/``--c`` override it.
``bayesfair simulate CONFIG [--out DIR] [--resume] [--quiet] [--log] [--set KEY=VALUE ...]``
    Run the study (or sweep) of a TOML config (:mod:`bayesfair.workflow.config`) with a progress bar and
    write the results atomically; ``--resume`` continues an interrupted run from its last saved
    chunk boundary with exactly the numbers of an uninterrupted run. Sweeps run locally, or on
    Dask with ``--dask`` (a LocalCluster) or ``--scheduler ADDRESS``. CONFIG is a file path or the
    name of a shipped config (the rule, and the error when a bare name is also a file here:
    :func:`bayesfair.workflow.shipped.resolve_config`).
``bayesfair configs list | export NAME DIR [--force] | path NAME``
    The study configs shipped with the package (the demo and the paper studies): their names and
    descriptions; a copy of one into DIR to edit (an existing different file is replaced only with
    ``--force``; written atomically); the installed file's path.
``bayesfair plot RESULTS [--unverified]``
    Regret (mean over runs with a 10-90% band) and exposure figures, or the sweep figure.
``bayesfair report RESULTS [--unverified]``
    A markdown and an HTML summary (tables, configuration, figures embedded). Both verify the
    results file's schema and checksum; ``--unverified`` reads one without them (written before
    the checks, or stripped).
``bayesfair fit RECIPE [ARGS ...]``
    Run a model recipe shipped with the package (:mod:`bayesfair.workflow.recipes`), of a folder
    (``--models-dir DIR`` or ``$BAYESFAIR_MODELS``) or a ``.py`` path; ``bayesfair fit --list``
    lists them. Options of ``fit`` itself go before RECIPE; everything after it is the recipe's.
``bayesfair list``
    Registered policies, environments, posteriors, merit functions and datasets.

Options mean the same wherever they stand among a command's arguments (before or after its
positional arguments; ``fit`` hands the arguments after RECIPE to the recipe), and are spelled in
full (no abbreviations, so that an abbreviation never becomes another option's when options are
added). Options that would be ignored or contradict each other are errors (``simulate --workers``
without ``--dask``, ``--out`` with ``--set output=...``).

Exit codes (every command; the table is in docs/workflow.md)
-------------------------------------------------------------
0 success; 1 runtime failure (a policy produced invalid values, a write failed on a full disk or
a read-only folder, a bug; the message names it, and for a write the free space and the saved
progress kept);
2 bad input (bad arguments, invalid config, a policy that does not fit the environment, a
missing, damaged or foreign input file, an output folder that would lose results or progress);
130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: a study saves its last chunk boundary for
``--resume`` first; a second signal exits at once. Set ``BAYESFAIR_DEBUG=1`` for tracebacks of
runtime failures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from bayesfair.core import _memory
from bayesfair.core._atomic import WriteError
from bayesfair.core._memory import format_bytes
from bayesfair.core._signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Interrupts
from bayesfair.core.compat import IncompatibleError
from bayesfair.core.version import __version__
from bayesfair.datasets import DatasetError, cache_dir, list_datasets
from bayesfair.simulation import results as io
from bayesfair.simulation.results import ResultsFileError
from bayesfair.simulation.simulator import SimulationError, StudyMemoryError
from bayesfair.workflow import registry, shipped
from bayesfair.workflow.config import load_config, parse_override
from bayesfair.workflow.outputs import OutputError, check_writable
from bayesfair.workflow.persist import PersistError, StudyInterrupted
from bayesfair.workflow.recipes import RECIPES, describe, load
from bayesfair.workflow.registry import ConfigError
from bayesfair.workflow.report import (
    print_tables,
    prior_check_lines,
    study_prior_check,
    sweep_table,
    write_figures,
    write_report,
)
from bayesfair.workflow.sweep import CONNECT_TIMEOUT, Sweep, check_scheduler_address, close_dask, dask_client

__all__ = ["main", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
           "demo_config", "sweep_table", "write_figures", "write_report"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2  # EXIT_INTERRUPTED 130, EXIT_TERMINATED 143: _signals

_EPILOG = ("exit codes: 0 success, 1 runtime failure, 2 bad input (arguments, config, files, output "
           "folder), 130 interrupted by Ctrl-C, 143 by SIGTERM (the study's state is saved; continue with "
           "--resume; a second signal exits at once)")


_UNVERIFIED_HELP = ("read a results file that has no integrity attributes (bayesfair_schema, bayesfair_checksum: "
                    "written before the checks, or stripped) without verifying it (refused otherwise)")


class UsageError(Exception):
    """A command-line problem found after parsing (exit code 2)."""


def _number(kind: type, minimum: float, what: str, strict: bool = False):
    """An argparse ``type``: ``kind(text)`` at least ``minimum`` (above it when ``strict``)."""

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (v > minimum if strict else v >= minimum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    return parse


def _folder(text: str) -> Path:
    """An argparse ``type`` for an output folder: a non-empty name (``Path("")`` would be the current
    folder, taken without a word; the current folder is ``.``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a folder, got {text!r} (the current folder is '.')")
    return Path(text)


_positive_int = _number(int, 1, "a positive integer")
_nonneg_int = _number(int, 0, "a non-negative integer")
_positive_float = _number(float, 0.0, "a positive number", strict=True)


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(prog="bayesfair", description="Fair bandits, done the Bayesian way.",
                                epilog=_EPILOG, formatter_class=fmt, allow_abbrev=False)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("demo", help="run the shipped demo config (a FairX study), print a table, write figures",
                       description="FairX-TS, FairX-UCB, FairX-EG, TS and UCB on a 10-arm Bernoulli "
                                   "problem with f(mu) = exp(4 mu).", epilog=_EPILOG, allow_abbrev=False)
    d.add_argument("--runs", type=_positive_int, default=20, help="independent runs (default 20)")
    d.add_argument("--horizon", type=_positive_int, default=20_000, help="rounds per run (default 20000)")
    d.add_argument("--seed", type=_nonneg_int, default=0, help="integer seed (default 0)")
    d.add_argument("--c", type=float, default=4.0, help="merit steepness c in exp(c mu) (default 4)")
    d.add_argument("--out", type=_folder, default=Path("demo-output"), help="output folder (default demo-output)")
    d.add_argument("--no-progress", action="store_true", help="do not print a progress bar")
    d.add_argument("--overwrite", action="store_true",
                   help="replace a demo.nc of a demo run with other settings (refused otherwise)")

    s = sub.add_parser(
        "simulate", help="run the study (or sweep) of a TOML config", epilog=_EPILOG, formatter_class=fmt,
        allow_abbrev=False,
        description="Run a study config (a file, or the name of a shipped config: bayesfair configs list) "
                    "with a progress bar and write "
                    "<out>/<name>.nc atomically. The state is saved at chunk boundaries to "
                    "<out>/<name>.resume.npz, so an interrupted run continues with --resume and gives "
                    "exactly the numbers of an uninterrupted one. A config with a [sweep] table runs "
                    "every grid point and combines them into <out>/<name>.nc. CONFIG ending in .toml or "
                    "holding a '/' is a file; a bare name (demo) is the shipped config, and an error when "
                    "./NAME or ./NAME.toml with other content is here too.")
    s.add_argument("config", help="the study config: a TOML file, or a shipped config's name")
    s.add_argument("--out", type=_folder, help="output folder (default: the config's `output`)")
    s.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its resume file (or skip finished sweep points)")
    s.add_argument("--restart", action="store_true",
                   help="discard the saved progress of an interrupted run and start over (refused otherwise)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace results of a different study in the output folder, and their report and "
                        "figures (refused otherwise)")
    s.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary table")
    s.add_argument("--log", action="store_true",
                   help="also write the per-round log <out>/<name>.log.parquet (CSV without pyarrow)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value before validation, e.g. --set runs=5 "
                        "--set policies.FairX-EG.epsilon=0.1 (values are TOML; repeatable)")
    s.add_argument("--dry-run", action="store_true", help="validate the config, print the study and exit")
    s.add_argument("--dask", action="store_true", help="run the sweep points on a new Dask LocalCluster")
    s.add_argument("--scheduler", metavar="ADDRESS", help="run the sweep points on this Dask scheduler")
    s.add_argument("--connect-timeout", type=_positive_float, metavar="S",
                   help="seconds to wait for the --scheduler to answer (default 10)")
    s.add_argument("--workers", type=_positive_int, help="workers of the --dask LocalCluster (default 2)")
    s.add_argument("--processes", action="store_true",
                   help="--dask LocalCluster workers as processes (default: threads in this process)")
    s.add_argument("--save-every-chunks", type=_positive_int, metavar="N",
                   help="save the resume file every N chunks (default: the config's [resume])")
    s.add_argument("--save-every-seconds", type=_positive_float, metavar="S",
                   help="save the resume file every S seconds (default: the config's [resume], 30)")
    s.add_argument("--stop-after-chunks", type=_positive_int, help=argparse.SUPPRESS)  # test hook
    s.add_argument("--hold-in-xla", type=_positive_float, help=argparse.SUPPRESS)  # test hook: see _hold_in_xla

    pl = sub.add_parser("plot", help="regret and exposure figures of a results file", epilog=_EPILOG,
                        allow_abbrev=False,
                        description="Write regret.png (cumulative fairness and reward regret, and the bi-level "
                                    "regret when recorded: mean over runs with a 10-90%% band), exposure.png "
                                    "(exposure share per arm vs pi*) and, with groups or floors, groups.png "
                                    "(group exposure over rounds against the floors) next to the results, or "
                                    "sweep.png for a sweep.")
    pl.add_argument("results", type=Path, help="a results file (.nc) or a folder holding one")
    pl.add_argument("--out", type=_folder, help="folder for the figures (default: the results' folder)")
    pl.add_argument("--logx", action="store_true", help="logarithmic round axis")
    pl.add_argument("--unverified", action="store_true", help=_UNVERIFIED_HELP)

    r = sub.add_parser("report", help="markdown + HTML summary of a results file", epilog=_EPILOG,
                       allow_abbrev=False,
                       description="Write <name>.report.md and <name>.report.html: configuration, the "
                                   "final regret table (mean ± standard error over runs), the group table "
                                   "(with groups or floors), exposure shares and the figures (embedded in the "
                                   "HTML); and <name>.report.csv, the same numbers as a tidy table.")
    r.add_argument("results", type=Path, help="a results file (.nc) or a folder holding one")
    r.add_argument("--out", type=_folder, help="folder for the report (default: the results' folder)")
    r.add_argument("--unverified", action="store_true", help=_UNVERIFIED_HELP)

    f = sub.add_parser("fit", help="run a model recipe (bayesfair fit --list lists them)", epilog=_EPILOG,
                       description="Run a recipe's main(argv) with the arguments after RECIPE. RECIPE is the "
                                   "name of a recipe shipped with the package, of a *.py in --models-dir DIR "
                                   "(or $BAYESFAIR_MODELS; these take precedence), or a path to a .py file. "
                                   "fit's own options (--list, --models-dir) go before RECIPE. Without RECIPE, "
                                   "list the recipes.")
    f.add_argument("recipe", nargs="?", help="recipe name or path to a .py file")
    f.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the recipe's main()")
    f.add_argument("--list", action="store_true", help="list the recipes and exit")
    f.add_argument("--models-dir", type=Path,
                   help="a folder of extra recipes (*.py with main(argv)); default $BAYESFAIR_MODELS")

    li = sub.add_parser("list", help="registered policies, environments, posteriors, merits, metrics and datasets",
                        epilog=_EPILOG, allow_abbrev=False)
    li.add_argument("what", nargs="?",
                    choices=("policies", "environments", "posteriors", "merits", "metrics", "datasets"),
                    help="only this kind")
    li.add_argument("--json", action="store_true", help="machine-readable output")

    c = sub.add_parser("configs", help="the study configs shipped with the package: list, export, path",
                       epilog=_EPILOG, allow_abbrev=False,
                       description="The demo and the paper studies' configs, installed with the package. "
                                   "Run one with `bayesfair simulate NAME`; copy one to edit with "
                                   "`bayesfair configs export NAME DIR`.")
    csub = c.add_subparsers(dest="configs_command", metavar="ACTION", required=True)
    cl = csub.add_parser("list", help="names and descriptions", epilog=_EPILOG, allow_abbrev=False)
    cl.add_argument("--json", action="store_true", help="machine-readable output")
    ce = csub.add_parser("export", help="copy a shipped config into a folder (atomic; no overwrite without --force)",
                         epilog=_EPILOG, allow_abbrev=False,
                         description="Write DIR/NAME.toml, a copy of the shipped config NAME (DIR is created). "
                                     "An existing DIR/NAME.toml with the same content is left as it is; one "
                                     "with other content is replaced only with --force.")
    ce.add_argument("name", help="a shipped config (bayesfair configs list)")
    ce.add_argument("folder", type=_folder, metavar="DIR", help="the folder to write NAME.toml into")
    ce.add_argument("--force", action="store_true", help="replace a DIR/NAME.toml with other content")
    cp = csub.add_parser("path", help="print the installed file of a shipped config", epilog=_EPILOG,
                         allow_abbrev=False)
    cp.add_argument("name", help="a shipped config (bayesfair configs list)")
    return p


# ---------------------------------------------------------------------------------------------
# demo: the shipped demo config


def demo_config() -> Path:
    """The demo study's config: the shipped config ``demo``."""
    return shipped.config_path("demo")


def __getattr__(name: str) -> Any:
    if name == "DEMO_MEANS":  # the demo problem's arm means, as written in the demo config
        import tomllib

        with open(demo_config(), "rb") as f:
            return tuple(tomllib.load(f)["environment"]["means"])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_demo(args: argparse.Namespace) -> int:
    study = load_config(demo_config(), [f"runs={args.runs}", f"horizon={args.horizon}", f"seed={args.seed}",
                                        f"merit.c={float(args.c)!r}", f"output={json.dumps(str(args.out))}"])
    t0 = time.perf_counter()
    res = study.execute(progress=not args.no_progress, restart=True, overwrite=args.overwrite,
                        say=lambda m: print(m, file=sys.stderr))
    elapsed = time.perf_counter() - t0
    f1, f2 = write_figures(res.dataset, args.out)
    print(f"\nbayesfair demo: {study.env.spec.n_arms} Bernoulli arms, f(mu) = exp({args.c:g} mu), "
          f"{args.runs} runs x {args.horizon:,} rounds, seed {args.seed}")
    print_tables(res.dataset)
    print(f"\nsimulated in {elapsed:.1f} s; wrote {res.results}, {f1}, {f2}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# simulate


class _Bar:
    """Progress callback: rounds done, run-rounds/s and ETA on stderr (throttled)."""

    def __init__(self, label: str = ""):
        self.label = label
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, info: dict) -> None:
        now = time.monotonic()
        done, total = info["done"], max(info["total"], 1)
        finished = done >= total
        if not finished and now - self.last < (0.5 if self.tty else 10.0):
            return
        self.last = now
        frac = min(done / total, 1.0)
        bar = "#" * int(24 * frac)
        eta = info["eta"]
        eta_s = time.strftime("%H:%M:%S", time.gmtime(eta)) if eta == eta and eta < 8.64e6 else "--:--:--"
        line = (f"{self.label}[{bar:<24}] {done:,}/{total:,} run-rounds {100 * frac:5.1f}%  {info['policy']:<12} "
                f"{info['rate']:,.0f} run-rounds/s  ETA {eta_s}")
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if finished else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _memory_line(study: Any) -> str:
    est = study.memory_estimate()
    avail = _memory.available_memory()
    have = f"; {format_bytes(avail.bytes)} {avail.source}" if avail.bytes is not None else ""
    return f"  memory about {format_bytes(est.peak)} at its peak{have}"


def _describe_study(study: Any) -> str:
    c = study.config
    env = {k: v for k, v in c["environment"].items() if k != "name"}
    lines = [f"study {c['name']}: {c['runs']} runs x {c['horizon']:,} rounds, seed {c['seed']}, "
             f"{study.checkpoints.size} checkpoints, chunk_size {c['chunk_size']}",
             f"  environment {c['environment']['name']} {json.dumps(env)}",
             f"  merit {json.dumps(c['merit'])}"]
    if c["floors"] is not None:
        lines.append(f"  floors {c['floors']}")
    for label, spec in c["policies"].items():
        params = {k: v for k, v in spec.items() if k not in ("name", "merit") or (k == "merit" and v != c["merit"])}
        lines.append(f"  policy {label}: {spec['name']} {json.dumps(params)}")
    lines.append(f"  output {c['output']}")
    lines.append(_memory_line(study))
    return "\n".join(lines)


def _print_prior_check(study: Any, which: str = "") -> None:
    """--dry-run: the prior check simulate would record (``config["prior_check"]``), said plainly."""
    lines = prior_check_lines(study_prior_check(study))
    if lines and which:
        lines[0] = lines[0].replace("Prior check", f"Prior check {which}", 1)
    print("\n".join(lines or ["Prior check (Bayesian regret): no policy has a prior (nothing to check)."]))


def _hold_in_xla(seconds: float) -> None:
    """Test hook: keep the main thread inside one XLA computation for about ``seconds`` (as a long
    compilation does), where Python signal handlers cannot run."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    spin = jax.jit(lambda n: lax.fori_loop(0, n, lambda i, x: x * 1.0000001 + 1e-9, jnp.float32(1.0)))
    spin(1).block_until_ready()
    print("bayesfair: holding in XLA", file=sys.stderr, flush=True)
    spin(int(min(seconds, 10.0) * 2e8)).block_until_ready()


def _check_simulate_options(args: argparse.Namespace) -> None:
    """Options that contradict each other, or that would be ignored, are errors (never a silent
    choice between them); fills in the defaults of the Dask options."""
    if args.resume and args.restart:
        raise UsageError("--resume and --restart contradict each other: continue the saved progress or discard it")
    if args.dask and args.scheduler is not None:
        raise UsageError("--dask starts a LocalCluster and --scheduler uses a running scheduler: give one of them")
    if not args.dask and (args.workers is not None or args.processes):
        raise UsageError("--workers and --processes size the LocalCluster of --dask, which is not given "
                         "(a --scheduler's cluster has its own workers)")
    if args.scheduler is None and args.connect_timeout is not None:
        raise UsageError("--connect-timeout is the wait for a --scheduler, which is not given")
    keys = [parse_override(text)[0] for text in args.set]
    if args.out is not None and "output" in keys:
        raise UsageError("--out and --set output=... both set the output folder: give one of them")
    if args.log and "log.enabled" in keys:
        raise UsageError("--log and --set log.enabled=... both set the per-round log: give one of them")
    args.workers = 2 if args.workers is None else args.workers
    args.connect_timeout = CONNECT_TIMEOUT if args.connect_timeout is None else args.connect_timeout


def run_simulate(args: argparse.Namespace) -> int:
    if args.hold_in_xla:
        _hold_in_xla(args.hold_in_xla)
    _check_simulate_options(args)
    if args.scheduler is not None:
        try:
            check_scheduler_address(args.scheduler)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    overrides = list(args.set)  # --out and --log change the config itself: what is printed, hashed and stored
    if args.out is not None:
        overrides.append(f"output={json.dumps(str(args.out))}")
    if args.log:
        overrides.append("log.enabled=true")
    config, is_shipped = shipped.resolve_config(args.config)
    quiet = args.quiet
    say = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    if is_shipped:  # said, so that a bare name is never taken for a file without a word
        say(f"the shipped config {args.config} ({config})")
    # a sweep on a remote scheduler runs on its workers: their memory is checked there, not this machine's
    obj = load_config(config, overrides, check_memory=args.scheduler is None)
    if isinstance(obj, Sweep):
        if args.log:
            raise UsageError("--log is for single studies, not sweeps")
        if args.save_every_chunks is not None or args.save_every_seconds is not None:
            raise UsageError("--save-every-chunks/--save-every-seconds are for single studies, not sweeps (a sweep's "
                             "points save as the config's [resume] table says)")
        if args.dask and not args.scheduler:  # the LocalCluster's points run at once, on this machine
            obj.check_memory(concurrent=min(args.workers, len(obj.points)))
        if args.dry_run:
            print(f"sweep {obj.name}: {len(obj.points)} points over {', '.join(obj.keys)}")
            print(_describe_study(obj.points[0]))
            _print_prior_check(obj.points[0], "of the first point")
            return EXIT_OK
        client = None
        if args.dask or args.scheduler:
            try:
                client = dask_client(args.scheduler, n_workers=args.workers, processes=args.processes,
                                     timeout=args.connect_timeout)
            except (ImportError, ValueError, ConnectionError) as exc:
                raise UsageError(str(exc)) from None
            if not quiet:
                where = args.scheduler or f"a LocalCluster of {args.workers} workers"
                print(f"running {len(obj.points)} sweep points on Dask ({where})", file=sys.stderr)
        interrupted = False
        try:
            res = obj.execute(progress=False if quiet else _Bar(), resume=args.resume, restart=args.restart,
                              overwrite=args.overwrite, client=client, stop_after_chunks=args.stop_after_chunks,
                              report=None if quiet else say)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            if client is not None:
                close_dask(client, own_cluster=not args.scheduler, interrupted=interrupted)
        print(f"wrote {res.results} ({len(obj.points)} points)")
        return EXIT_OK
    if args.dask or args.scheduler:
        raise UsageError("--dask/--scheduler run the points of a [sweep] config; this config has no [sweep]")
    if args.dry_run:
        if obj.config["log"]["enabled"]:
            obj.make_log()  # the log's size and format are checked as the run would check them
        print(_describe_study(obj))
        _print_prior_check(obj)
        return EXIT_OK
    if not quiet:
        print(_describe_study(obj), file=sys.stderr)
    paths = obj.paths()
    if args.resume and paths["resume"].exists():
        say(f"resuming from {paths['resume']}")
    t0 = time.perf_counter()
    res = obj.execute(progress=False if quiet else _Bar(), resume=args.resume, restart=args.restart,
                      overwrite=args.overwrite, stop_after_chunks=args.stop_after_chunks,
                      every_chunks=args.save_every_chunks, every_seconds=args.save_every_seconds, say=say)
    if not quiet:
        print_tables(res.dataset)
        print(f"\nfinished in {time.perf_counter() - t0:.1f} s")
    print(f"wrote {res.results}" + (f" and {res.log}" if res.log else ""))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# plot and report


def _results_file(path: Path) -> Path:
    if path.is_dir():
        found = sorted(p for p in path.glob("*.nc") if not p.name.startswith("."))
        if len(found) != 1:
            raise UsageError(f"{path} holds {len(found)} results files (.nc); name one")
        return found[0]
    if not path.is_file():
        raise UsageError(f"no results file at {path}")
    return path


def _load_results(path: Path, unverified: bool = False) -> tuple[Path, Any]:
    import warnings

    path = _results_file(path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = io.read_results(path, allow_unverified=unverified)
        for w in caught:  # an unverified file read with --unverified: said as a line of its own
            if issubclass(w.category, UserWarning) and "cannot verify" in str(w.message):
                print(f"bayesfair: warning: {w.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return path, ds
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path} as bayesfair results: {exc}") from None


def _figure_folder(args: argparse.Namespace, path: Path) -> Path:
    """``--out`` (or the results' folder), checked writable before anything is drawn."""
    return check_writable(args.out or path.parent)


def run_plot(args: argparse.Namespace) -> int:
    path, ds = _load_results(args.results, args.unverified)
    folder = _figure_folder(args, path)
    for fig in write_figures(ds, folder, path.stem, logx=args.logx):
        print(f"wrote {fig}")
    return EXIT_OK


def run_report(args: argparse.Namespace) -> int:
    path, ds = _load_results(args.results, args.unverified)
    folder = _figure_folder(args, path)
    figures = write_figures(ds, folder, path.stem)
    md, page = write_report(ds, folder, path.stem, figures)
    print(f"wrote {md} and {page}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# fit and list


def models_dir(arg: Path | None = None) -> Path | None:
    """The folder of extra recipes: ``arg`` or ``$BAYESFAIR_MODELS`` (None: only the shipped ones)."""
    if arg is not None:
        return arg
    if os.environ.get("BAYESFAIR_MODELS"):
        return Path(os.environ["BAYESFAIR_MODELS"])
    return None


def recipes(folder: Path | None) -> dict[str, Path]:
    """``{name: path}`` of the recipes (``*.py`` not starting with ``_``) in ``folder``."""
    if folder is None or not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")}


#: fit's own options: after RECIPE they would be handed to the recipe instead.
_FIT_OPTIONS = ("--models-dir", "--list")


def _recipe_exit(call) -> int:
    try:
        rc = call()
    except SystemExit as exc:  # a recipe that exits by itself
        code = exc.code
        if code is None or isinstance(code, int):
            return EXIT_OK if code is None else code
        print(f"bayesfair: {code}", file=sys.stderr)  # SystemExit("message"): Python prints it, so do we
        return EXIT_FAILURE
    return int(rc or 0)


def run_fit(args: argparse.Namespace) -> int:
    folder = models_dir(args.models_dir)
    if args.models_dir is not None and not args.models_dir.is_dir():
        raise UsageError(f"--models-dir {args.models_dir} is not a folder")
    found = recipes(folder)
    rest = list(args.args)
    if rest[:1] == ["--"]:  # `fit RECIPE -- ARGS`: every argument is the recipe's
        rest = rest[1:]
    else:
        misplaced = [a for a in rest if a.split("=", 1)[0] in _FIT_OPTIONS]
        if misplaced:
            raise UsageError(f"{misplaced[0].split('=', 1)[0]} after the recipe name would be passed to the recipe; "
                             f"put it before RECIPE (bayesfair fit {misplaced[0].split('=', 1)[0]} ... RECIPE ARGS), "
                             "or pass the recipe's own flag after `--`")
    if args.list or not args.recipe:
        print("recipes shipped with bayesfair (bayesfair.workflow.recipes):")
        for name in RECIPES:
            shadow = " (shadowed by the folder's)" if name in found else ""
            print(f"  {name:<26} {describe(name)}{shadow}")
        if found:
            print(f"recipes in {folder}:")
            for name, p in found.items():
                print(f"  {name:<26} {_first_doc_line(p)}")
        elif folder is not None:
            print(f"no recipes in {folder} (a recipe is a <name>.py file with a main(argv) function)")
        return EXIT_OK
    rec = args.recipe
    if rec.endswith(".py") or os.sep in rec:
        path = Path(rec)
    elif rec in found:
        path = found[rec]
    elif rec in RECIPES:
        return _recipe_exit(lambda: load(rec).main(rest))
    else:
        avail = ", ".join([*RECIPES, *found])
        where = f" and in {folder}" if folder is not None else ""
        raise UsageError(f"no recipe {rec!r}; recipes in the package{where}: {avail} (bayesfair fit --list)")
    if not path.is_file():
        raise UsageError(f"no recipe file {path}; recipes: {', '.join([*RECIPES, *found])}")
    spec = importlib.util.spec_from_file_location(f"bayesfair_recipe_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main_fn = getattr(module, "main", None)
    if not callable(main_fn):
        raise UsageError(f"recipe {path} has no main(argv) function")
    return _recipe_exit(lambda: main_fn(rest))


def _first_doc_line(path: Path) -> str:
    import ast

    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except (SyntaxError, OSError, UnicodeDecodeError):
        return ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _print_wrapped(name: str, text: str, col: int, extra: str = "") -> None:
    """``name`` then ``text`` from column ``col``, wrapped at whole words to the terminal's width
    (nothing cut); ``extra`` on the lines after, indented."""
    width = max(60, min(shutil.get_terminal_size((110, 24)).columns, 140))
    lines = textwrap.wrap(text, width - col, break_on_hyphens=False, break_long_words=False) or [""]
    if extra:
        lines += textwrap.wrap(extra, width - col, initial_indent="  ", subsequent_indent="    ",
                               break_on_hyphens=False, break_long_words=False)
    print(f"  {name:<{col - 2}}{lines[0]}")
    for line in lines[1:]:
        print(f"{'':<{col}}{line}")


_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`~?([^`<]+?)(?:\s*<[^>]*>)?`")


def _plain(doc: str) -> str:
    """A docstring summary as terminal text: Sphinx roles (``:func:`bayesfair.fairx_ts```) as their
    target's name, double backquotes as single ones."""
    return _ROLE.sub(r"\1", doc).replace("``", "`")


def run_list(args: argparse.Namespace) -> int:
    rows = registry.table()
    kinds = {"policies": "policy", "environments": "environment", "posteriors": "posterior", "merits": "merit",
             "metrics": "metric"}
    datasets = []
    if args.what in (None, "datasets"):
        df = list_datasets()
        datasets = [{"name": n, "title": r["title"], "size_bytes": int(r["size_bytes"]), "loader": r["loader"]}
                    for n, r in df.iterrows()]
    if args.what is not None and args.what != "datasets":
        rows = [r for r in rows if r["kind"] == kinds[args.what]]
    elif args.what == "datasets":
        rows = []
    if args.json:
        print(json.dumps({"registry": rows, "datasets": datasets}, indent=1))
        return EXIT_OK
    for plural, kind in kinds.items():
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        print(f"{plural}:")
        col = max(len(r["name"]) for r in sel) + 4
        for r in sel:
            text = _plain(r["doc"]) if r["available"] else f"not available: {r['reason']}"
            _print_wrapped(r["name"], text, col, f"params: {r['params']}" if r["available"] and r["params"] else "")
        print()
    if datasets:
        print(f"datasets (bayesfair.datasets; data folder {cache_dir()}: BAYESFAIR_DATA, else ../shared/data "
              f"beside a source checkout, else the user cache; `python -m pydoc bayesfair.datasets` tells more):")
        for d in datasets:
            print(f"  {d['name']:<22} {d['title']} ({d['size_bytes'] / 1e6:.1f} MB; {d['loader']})")
    return EXIT_OK


def run_configs(args: argparse.Namespace) -> int:
    if args.configs_command == "list":
        rows = [{"name": n, "description": shipped.description(n), "path": str(shipped.config_path(n))}
                for n in shipped.names()]
        if args.json:
            print(json.dumps(rows, indent=1))
            return EXIT_OK
        print("shipped study configs (run one: bayesfair simulate NAME; copy one to edit: "
              "bayesfair configs export NAME DIR):")
        col = max(len(r["name"]) for r in rows) + 4
        for r in rows:
            _print_wrapped(r["name"], r["description"], col)
        return EXIT_OK
    if args.configs_command == "path":
        print(shipped.config_path(args.name))
        return EXIT_OK
    target = Path(args.folder) / f"{args.name}.toml"
    before = target.read_bytes() if target.is_file() else None
    try:
        out = shipped.export_config(args.name, args.folder, force=args.force)
    except WriteError:  # the disk: exit 1
        raise
    except OSError as exc:  # DIR/NAME.toml differs (no --force), is a folder, or DIR is a file: bad input
        raise UsageError(str(exc)) from None
    if before == shipped.config_path(args.name).read_bytes():
        print(f"{out} is already the shipped config {args.name} (left as it is)")
    else:
        print(f"wrote {out}" + (" (replaced the file that was there)" if before is not None else ""))
    return EXIT_OK


def _message(exc: BaseException) -> str:
    """The error's message and its notes (e.g. the sweep point it happened in), on one line."""
    notes = [str(n) for n in getattr(exc, "__notes__", ()) if str(n).strip()]
    return "; ".join([str(exc), *notes])


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse usage errors raise SystemExit(2))."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        print(__version__)
        return EXIT_OK
    handlers = {"demo": run_demo, "simulate": run_simulate, "plot": run_plot, "report": run_report,
                "fit": run_fit, "list": run_list, "configs": run_configs}
    if args.command not in handlers:
        parser.print_help()
        return EXIT_USAGE

    interrupts = Interrupts()
    interrupts.install()
    try:
        code = handlers[args.command](args)
        if interrupts.signum is not None:
            # the signal's KeyboardInterrupt was swallowed where Python drops exceptions (a __del__ or a
            # callback inside a library, e.g. during the final results write): the command finished,
            # but the user asked to stop, so the exit code says so
            sys.stderr.write("\nbayesfair: interrupted while finishing: the command completed and what it wrote is "
                             "complete\n")
            return interrupts.exit_code
        return code
    except ConfigError as exc:
        print(f"bayesfair: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, PersistError, OutputError, IncompatibleError, ResultsFileError, DatasetError,
            FileNotFoundError, StudyMemoryError) as exc:
        print(f"bayesfair: error: {_message(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (KeyboardInterrupt, StudyInterrupted) as exc:
        sys.stderr.write(f"\nbayesfair: interrupted{f' ({exc})' if str(exc) else ''}")
        sys.stderr.write("; continue with --resume\n" if args.command == "simulate" else "\n")
        return interrupts.exit_code
    except (SimulationError, WriteError) as exc:
        print(f"bayesfair: failed: {_message(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # the reader of stdout stopped early (`bayesfair list | head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit stays quiet
        return EXIT_FAILURE
    except Exception as exc:  # noqa: BLE001 - the documented exit code 1
        if os.environ.get("BAYESFAIR_DEBUG"):
            raise
        print(f"bayesfair: failed: {type(exc).__name__}: {_message(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        interrupts.restore()


if __name__ == "__main__":
    sys.exit(main())
