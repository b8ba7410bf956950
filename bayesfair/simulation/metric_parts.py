"""Metric components: what :func:`bayesfair.simulate` records, as pluggable parts.

A component (a :class:`Metric`) contributes

- ``specs(ctx)``: its accumulated quantities (:class:`bayesfair.simulation.metrics.MetricSpec`: a sum, a
  running minimum or a latest value), given the study's shapes (:class:`SpecContext`);
- ``init()`` and ``update(state, rnd)``: pure JAX, run inside the simulator's round loop and
  vmapped over runs. ``update`` receives the round (:class:`RoundData`) and the component's own
  carried state (``None`` for stateless components) and returns the new state and one term per
  spec; the simulator adds the terms to the accumulator (compensated float sums, exact integer
  sums for a spec of integer dtype: :func:`bayesfair.simulation.metrics.update_acc`), so results do not
  depend on the chunk size, and keeps the states in the run carry, so a resumed run equals an
  uninterrupted one;
- ``check(env, key, runs)``: host-side checks before any round (e.g. means in a merit's domain);
- ``finalize(res)``: host-side, after the runs: extra result variables computed from the
  recorded values and the runs' arm means (:class:`ResultContext`).

Components of today's studies (:func:`default_metrics` picks them):

========================  ========================================================================
:class:`FairXRegrets`     ``fairness_regret``, ``reward_regret``, ``group_fairness_regret``;
                          ``pi_star``, ``pi_star_within`` (needs a merit)
:class:`Conventional`     ``regret``, ``reward``, ``exposure``, ``pulls``, ``group_exposure``,
                          ``group_pulls``, ``group_offered``
:class:`ExtraRegrets`     ``<name>_regret`` for every entry of the environment's ``Round.extra``
:class:`Floors`           ``anytime_slack``, ``group_floor``; with a merit and fixed arm means
                          (no contexts) also ``bf_regret`` and its Theorem 4 terms
:class:`Tracked`          ``track_<name>`` for every entry of the policy's ``info["track"]``
========================  ========================================================================

``FairXRegrets(merit, only=[...])`` and ``Conventional(only=[...])`` record some of their variables
(the recorded ones are the full study's, number for number) and skip the per-round work of the
others. The definitions are in :mod:`bayesfair.simulation.metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import declare as _declare
from bayesfair.core._compile import TraceCache
from bayesfair.core.compat import check_merit_domain_blocks
from bayesfair.core.declare import declare
from bayesfair.core.groups import validate_exposure_floors
from bayesfair.core.merit import Merit, fair_policy, group_fair_policy, resolve_merit
from bayesfair.environments.base import run_means_blocks
from bayesfair.posteriors.mcmc import refresh_track
from bayesfair.simulation.metrics import (
    LAST,
    MIN,
    SUM,
    MetricSpec,
    advance_floors,
    bilevel_regret,
    fairness_regret_step,
    group_fairness_regret_step,
    init_floor_state,
    regret_step,
    reward_regret_step,
)

__all__ = ["METRIC_NAMES", "Metric", "SpecContext", "RoundData", "ResultContext", "FairXRegrets", "Conventional",
           "ExtraRegrets",
           "Floors", "Tracked", "default_metrics", "resolve_floors",
           "check_components", "collect_specs", "fair_policies", "policy_track"]

_F32 = np.float32


class SpecContext(NamedTuple):
    """Static shapes a component's specs may depend on (host side)."""

    n_arms: int
    n_groups: int
    extra: Mapping[str, Any]  # the environment's Round.extra: name -> shape struct ({} if none)
    track: Mapping[str, Any]  # the policy's info["track"]: name -> shape struct ({} if none)


class RoundData(NamedTuple):
    """One round as a component's ``update`` sees it (inside the round loop, one run)."""

    probs: jax.Array  # [K] float32, pi_t
    mean: jax.Array  # [K] float32, mu_t
    action: jax.Array  # int32, the pulled arm
    reward: jax.Array  # float32, its reward
    member: jax.Array  # [K, m] float32 one-hot group membership of the round's candidates
    extra: Mapping[str, jax.Array]  # Round.extra ({} if none)
    track: Mapping[str, jax.Array]  # the policy's info["track"] ({} if none)


class ResultContext(NamedTuple):
    """What ``finalize`` gets (host side, numpy)."""

    env: Any  # the Environment
    means: np.ndarray  # [R, K] float64 arm means of every run
    grid: np.ndarray  # [P] checkpoint rounds
    values: Mapping[str, np.ndarray]  # recorded metric -> [policy, R, P, ...] (float64)


class Metric:
    """Base class of metric components (see the module docstring); subclasses override what they use."""

    name = "metric"
    requires: tuple[str, ...] = ()  # recorded metrics ``finalize`` reads (from other components)

    def specs(self, ctx: SpecContext) -> tuple[MetricSpec, ...]:
        return ()

    def init(self) -> Any:
        return None

    def update(self, state: Any, rnd: RoundData) -> tuple[Any, dict[str, jax.Array]]:
        return state, {}

    def check(self, env: Any, key: Any, runs: int) -> None:
        return None

    def finalize(self, res: ResultContext) -> dict[str, tuple]:
        return {}

    def result_bytes(self, env: Any, runs: int, n_policies: int, n_checkpoints: int) -> int:
        """Bytes of the variables ``finalize`` adds to the results (for the study's memory estimate,
        :func:`bayesfair.simulation.simulator.estimate_memory`)."""
        return 0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


def _spec(name: str, dims: tuple[str, ...], shape: tuple[int, ...], long_name: str, combine: str = SUM,
          dtype: Any = _F32) -> MetricSpec:
    return MetricSpec(name, dims, shape, dtype, combine, long_name)


def _only(only: Any, variables: tuple[str, ...], component: str) -> tuple[str, ...] | None:
    """``only=`` of a component, checked: None (every variable) or a non-empty sequence of distinct
    names from ``variables``, returned in ``variables``' order."""
    if only is None:
        return None
    if isinstance(only, (str, bytes)) or not isinstance(only, Sequence):
        raise TypeError(f"{component}(only=...) must be a list of variable names from {', '.join(variables)}; "
                        f"got {only!r}")
    names = list(only)
    bad = [n for n in names if not isinstance(n, str) or n not in variables]
    if bad:
        raise ValueError(f"{component}(only=...): unknown variable(s) {', '.join(map(repr, bad))}; allowed: "
                         f"{', '.join(variables)}")
    if not names or len(set(names)) != len(names):
        raise ValueError(f"{component}(only=...) must name each variable at most once and at least one, got {names!r}")
    return tuple(v for v in variables if v in names)


class _Subset(Metric):
    """A component with ``only=[...]``: it records only the named ones of its ``VARIABLES``.
    ``update`` may compute every term; the dropped ones never reach the accumulator, so XLA
    removes their work from the compiled round."""

    VARIABLES: tuple[str, ...] = ()

    def __init__(self, only: Sequence[str] | None = None):
        self.only = _only(only, self.VARIABLES, type(self).__name__)

    def _keep(self, items: Any) -> Any:
        """The kept entries of a tuple of specs or of a dict of terms."""
        if isinstance(items, dict):
            return {name: v for name, v in items.items() if self.only is None or name in self.only}
        return tuple(s for s in items if self.only is None or s.name in self.only)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name} if self.only is None else {"name": self.name, "only": list(self.only)}


class FairXRegrets(_Subset):
    """FairX regrets against the optimal fair policy pi*_t = f(mu_t)/sum f(mu_t) of ``merit``
    (FairX Eqs. 1-2) and the meritocratic group fairness regret against the within-group fair
    policy (bi-level paper, Section 6.3.2). Finalize: ``pi_star`` and ``pi_star_within`` per run.

    ``only``: record only these of :attr:`VARIABLES` (default all); XLA drops the others' work
    (pi*_t without the first two, the within-group policy without the third).
    """

    name = "fairx"
    VARIABLES = ("fairness_regret", "reward_regret", "group_fairness_regret")

    def __init__(self, merit: Merit, only: Sequence[str] | None = None):
        super().__init__(only)
        self.merit = resolve_merit(merit)

    def specs(self, ctx: SpecContext) -> tuple[MetricSpec, ...]:
        m = ctx.n_groups
        specs = (
            _spec("fairness_regret", (), (), "cumulative fairness regret sum_t ||pi*_t - pi_t||_1"),
            _spec("reward_regret", (), (), "cumulative reward regret sum_t (pi*_t - pi_t) . mu_t"),
            _spec("group_fairness_regret", ("group",), (m,),
                  "meritocratic fairness regret sum_{t: g_t = g} ||pi*_g,t - pi^t_g||_1"),
        )
        return self._keep(specs)

    def update(self, state: Any, rnd: RoundData) -> tuple[Any, dict[str, jax.Array]]:
        pi_star = fair_policy(self.merit, rnd.mean)
        group = jnp.argmax(rnd.member[rnd.action])
        within = group_fair_policy(self.merit, rnd.mean, rnd.member)
        return state, self._keep({
            "fairness_regret": fairness_regret_step(pi_star, rnd.probs),
            "reward_regret": reward_regret_step(pi_star, rnd.probs, rnd.mean),
            "group_fairness_regret": group_fairness_regret_step(within, rnd.probs, rnd.member, group),
        })

    def check(self, env: Any, key: Any, runs: int) -> None:
        """Multi-armed environments (fixed means per run): every run's means lie in the merit's domain
        (checked block by block of runs: O(block) memory, not O(R K))."""
        if env.spec.n_features == 0:
            check_merit_domain_blocks(self.merit, run_means_blocks(env, key, runs), env.label)

    def finalize(self, res: ResultContext) -> dict[str, tuple]:
        pi_star, within = fair_policies(self.merit, res.means, res.env.groups)
        return {
            "pi_star": (("run", "arm"), pi_star, {"long_name": "optimal fair policy f(mu)/sum f(mu)"}),
            "pi_star_within": (("run", "arm"), within,
                               {"long_name": "within-group fair policy f(mu_i)/sum_{j in g(i)} f(mu_j)"}),
        }

    def result_bytes(self, env: Any, runs: int, n_policies: int, n_checkpoints: int) -> int:
        return 2 * runs * env.spec.n_arms * 8  # pi_star and pi_star_within, [R, K] float64

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "merit": self.merit.describe()}


_FAIR_POLICIES = TraceCache(maxsize=16)  # one jitted pi* / within-group function per merit, see fair_policies


def fair_policies(merit: Merit, means: np.ndarray, groups: Any) -> tuple[np.ndarray, np.ndarray]:
    """pi* and the within-group fair policy ``[R, K]`` of the runs' means, in float64 (host side).

    One jitted program per merit (kept in process, and in the persistent compilation cache): run
    op by op, the same arithmetic compiled ~20 one-operation programs, each too quick to compile
    for the persistent cache to keep, so every new process paid them again after its study."""

    def both(mu, member):
        within = jax.vmap(lambda m: group_fair_policy(merit, m, member))(mu)
        return fair_policy(merit, mu), within

    fn, _ = _FAIR_POLICIES.get(("fair_policies", merit), lambda: jax.jit(both))
    with jax.enable_x64(True):
        mu64 = jnp.asarray(means, jnp.float64)
        member = jnp.asarray(np.eye(groups.n_groups)[np.asarray(groups.labels)], jnp.float64)
        pi_star, within = fn(mu64, member)
        return np.asarray(pi_star, np.float64), np.asarray(within, np.float64)


class Conventional(_Subset):
    """Conventional pseudo-regret, realized reward, exposure and pulls per arm and per group, and
    the candidates offered per group.

    ``only``: record only these of :attr:`VARIABLES` (default all); XLA drops the others' work.
    """

    name = "conventional"
    VARIABLES = ("regret", "reward", "exposure", "pulls", "group_exposure", "group_pulls", "group_offered")

    def specs(self, ctx: SpecContext) -> tuple[MetricSpec, ...]:
        k, m = ctx.n_arms, ctx.n_groups
        return self._keep((
            _spec("regret", (), (), "cumulative conventional regret sum_t (max mu_t - pi_t . mu_t)"),
            _spec("reward", (), (), "cumulative realized reward"),
            _spec("exposure", ("arm",), (k,), "cumulative exposure sum_t pi_t(a)"),
            _spec("pulls", ("arm",), (k,), "cumulative pull count", dtype=np.int32),
            _spec("group_exposure", ("group",), (m,), "cumulative group exposure sum_t sum_{a in g} pi_t(a)"),
            _spec("group_pulls", ("group",), (m,), "cumulative pulls of the group's candidates",
                  dtype=np.int32),
            _spec("group_offered", ("group",), (m,), "cumulative number of candidates offered"),
        ))

    def update(self, state: Any, rnd: RoundData) -> tuple[Any, dict[str, jax.Array]]:
        # the counts are exact int32 sums (at most one per round: metrics.compensated); the offered
        # candidates (up to K per round) stay a compensated float sum
        hit = (jnp.arange(rnd.probs.shape[-1]) == rnd.action).astype(jnp.int32)
        return state, self._keep({
            "regret": regret_step(rnd.probs, rnd.mean),
            "reward": rnd.reward,
            "exposure": rnd.probs,
            "pulls": hit,
            "group_exposure": rnd.probs @ rnd.member,
            "group_pulls": rnd.member[rnd.action].astype(jnp.int32),
            "group_offered": jnp.sum(rnd.member, axis=0),
        })


class ExtraRegrets(Metric):
    """``<name>_regret`` = sum_t (max_a v_t,a - pi_t . v_t) for every entry of ``Round.extra`` (an
    environment's alternative per-candidate values, e.g. true rewards under biased feedback)."""

    name = "extra_regrets"

    def specs(self, ctx: SpecContext) -> tuple[MetricSpec, ...]:
        return tuple(_spec(f"{name}_regret", (), (), f"cumulative regret in {name!r}: sum_t (max_a v_t,a - pi_t . v_t)")
                     for name in ctx.extra)

    def update(self, state: Any, rnd: RoundData) -> tuple[Any, dict[str, jax.Array]]:
        return state, {f"{name}_regret": regret_step(rnd.probs, v.astype(jnp.float32)) for name, v in rnd.extra.items()}


def policy_track(info: Any, policy_state: Any) -> dict[str, Any]:
    """What :class:`Tracked` records for one round: the policy's ``info["track"]`` and, for a policy
    with an MCMC-fallback posterior, its refresh diagnostics (``mcmc_rhat``, ``mcmc_ess``,
    ``mcmc_divergences``, ``mcmc_bad_refreshes``, ``mcmc_first_bad_round``:
    :func:`bayesfair.posteriors.mcmc.refresh_track` of the state after the round's update)."""
    return {**((info or {}).get("track") or {}), **refresh_track(policy_state)}


class Tracked(Metric):
    """``track_<name>``: the latest value of every entry of a policy's ``info["track"]`` and of its MCMC
    refresh diagnostics (:func:`policy_track`; NaN in the results for a policy that does not report it)."""

    name = "tracked"

    def specs(self, ctx: SpecContext) -> tuple[MetricSpec, ...]:
        out = []
        for name, value in ctx.track.items():
            shape = tuple(np.shape(value))
            out.append(_spec(f"track_{name}", tuple(f"{name}_dim{i}" for i in range(len(shape))), shape,
                             f"latest value of the policy's tracked {name!r}", LAST))
        return tuple(out)

    def update(self, state: Any, rnd: RoundData) -> tuple[Any, dict[str, jax.Array]]:
        return state, {f"track_{name}": jnp.asarray(v, jnp.float32) for name, v in rnd.track.items()}


def resolve_floors(floors: Any, n_groups: int, what: str = "floors") -> np.ndarray:
    """Exposure floors beta_g as float64 ``[m]``, checked (each in (0, 1/m], sum < 1); errors name ``what``."""
    try:
        beta = np.asarray(floors, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a sequence of floats, got {floors!r}") from None
    try:
        return validate_exposure_floors(beta, n_groups)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


class Floors(Metric):
    """Exposure floors beta_g (bi-level paper): the exact anytime check ``anytime_slack`` =
    min_{s <= t} (N_g,s - floor(beta_g s)) per group (Definition 2 holds at every round iff it is
    >= 0, counted in integers in the carried state) and ``group_floor``; given a ``merit`` and an
    environment with fixed arm means per run (no contexts), also the bi-level regret against
    R*_beta(T) and its Theorem 4 terms (:func:`bayesfair.simulation.metrics.bilevel_regret`, from the
    recorded ``exposure``)."""

    name = "floors"

    def __init__(self, floors: Sequence[float] | np.ndarray, merit: Merit | None = None):
        try:
            arr = np.asarray(floors, np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise TypeError(f"floors must be a sequence of floats, got {floors!r}") from None
        self.floors = arr
        self.merit = None if merit is None else resolve_merit(merit)
        self.requires = ("exposure",) if self.merit is not None else ()

    def specs(self, ctx: SpecContext) -> tuple[MetricSpec, ...]:
        if self.floors.size != ctx.n_groups:
            raise ValueError(f"floors: one floor per group expected ({ctx.n_groups}), got {self.floors.size}")
        return (_spec("anytime_slack", ("group",), (ctx.n_groups,),
                      "min over rounds s <= t of N_g,s - floor(beta_g s) (>= 0: floors held)", MIN, np.int32),)

    def init(self) -> Any:
        return init_floor_state(self.floors)

    def update(self, state: Any, rnd: RoundData) -> tuple[Any, dict[str, jax.Array]]:
        state, slack = advance_floors(state, rnd.member[rnd.action])
        return state, {"anytime_slack": slack}

    def check(self, env: Any, key: Any, runs: int) -> None:
        resolve_floors(self.floors, env.groups.n_groups)

    def finalize(self, res: ResultContext) -> dict[str, tuple]:
        out = {"group_floor": (("group",), np.asarray(self.floors, np.float64),
                               {"long_name": "exposure floor beta_g (bi-level Definition 2)"})}
        if self.merit is None or res.env.spec.n_features != 0:  # R*_beta(T) needs fixed means per run
            return out
        _, within = fair_policies(self.merit, res.means, res.env.groups)
        terms = bilevel_regret(res.values["exposure"], res.means, within, res.env.groups.labels, self.floors, res.grid)
        long = {
            "bf_regret": "bi-level regret R*_beta(T) - sum_i E[N_i,T] mu_i (Eq. 1, Definition 5)",
            "bf_regret_groups": "Theorem 4 first term: sum_g (E[N_g,T] - floor(beta_g T)) Delta_g",
            "bf_regret_within": "Theorem 4 second term: sum_t Delta^t_{g_t}, within-group policy regret",
        }
        for name, arr in terms.items():
            out[name] = (("policy", "run", "checkpoint"), arr, {"long_name": long[name]})
        return out

    def result_bytes(self, env: Any, runs: int, n_policies: int, n_checkpoints: int) -> int:
        if self.merit is None or env.spec.n_features != 0:
            return 8 * self.floors.size
        within = runs * env.spec.n_arms * 8  # fair_policies' [R, K] float64 (pi* and the within-group policy)
        return 8 * self.floors.size + 2 * within + 3 * n_policies * runs * n_checkpoints * 8  # the bf_regret terms

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "floors": self.floors.tolist(),
                "merit": None if self.merit is None else self.merit.describe()}


def check_components(metrics: Any) -> list[Metric]:
    """``metrics`` as a list of :class:`Metric` components (TypeError naming the bad entry)."""
    if isinstance(metrics, (str, bytes, Metric)) or not isinstance(metrics, Sequence):
        raise TypeError(f"metrics must be a sequence of bayesfair.simulation.metric_parts.Metric's, got {metrics!r}")
    out = list(metrics)
    for i, part in enumerate(out):
        if not isinstance(part, Metric):
            raise TypeError(f"metrics[{i}] must be a bayesfair.simulation.metric_parts.Metric component, got {part!r}")
    return out


def collect_specs(metrics: Sequence[Metric], ctx: SpecContext) -> tuple[MetricSpec, ...]:
    """Every component's specs, in order; names must be distinct and every ``requires`` recorded."""
    specs: list[MetricSpec] = []
    owner: dict[str, str] = {}
    for part in metrics:
        for spec in part.specs(ctx):
            if spec.name in owner:
                raise ValueError(f"metrics: {spec.name!r} is recorded by both {owner[spec.name]!r} and {part.name!r}")
            owner[spec.name] = part.name
            specs.append(spec)
    for part in metrics:
        missing = [r for r in part.requires if r not in owner]
        if missing:
            raise ValueError(f"metrics: component {part.name!r} needs {', '.join(map(repr, missing))}, which no "
                             "component records (add metric_parts.Conventional(), or name it in its only=)")
    return tuple(specs)


def default_metrics(merit: Merit | None = None, floors: Any = None) -> list[Metric]:
    """Today's metric set: the FairX regrets (only with a ``merit``), the conventional metrics,
    the extra-value regrets, the floors (only with ``floors``; the bi-level regret with a merit)
    and the tracked values."""
    out: list[Metric] = [FairXRegrets(merit)] if merit is not None else []
    out += [Conventional(), ExtraRegrets()]
    if floors is not None:
        out.append(Floors(floors, merit))
    out.append(Tracked())
    return out


# ---------------------------------------------------------------------------------------------
# the components a study config names (``metrics = [...]``): declared like every other constructor,
# so `bayesfair list` shows them and a user module can add one (``name = "mymodule:my_metric"``)


@declare("metric", name="fairx", example={"merit": {"name": "identity"}})
def fairx_regrets(merit: Merit, only: list[Literal[FairXRegrets.VARIABLES]] | None = None) -> Metric:
    """FairX fairness and reward regrets, and the group fairness regret.

    The :class:`FairXRegrets` component.
    """
    return FairXRegrets(merit, only=only)


@declare("metric", name="conventional")
def conventional(only: list[Literal[Conventional.VARIABLES]] | None = None) -> Metric:
    """Standard regret, reward, exposure and pulls per arm and group.

    The :class:`Conventional` component.
    """
    return Conventional(only=only)


@declare("metric", name="extra_regrets")
def extra_regrets() -> Metric:
    """Regrets against the environment's extra values, e.g. true rewards of biased feedback.

    The :class:`ExtraRegrets` component.
    """
    return ExtraRegrets()


@declare("metric", name="floors", example={"floors": [0.2, 0.3, 0.25]})
def floor_metrics(floors: _declare.Floors, merit: Merit | None = None) -> Metric:
    """Anytime exposure-floor slack and, with a merit, the bi-level regret R*_beta.

    The :class:`Floors` component.
    """
    return Floors(floors, merit)


@declare("metric", name="tracked")
def tracked() -> Metric:
    """The latest values policies report (``track_*``, e.g. an MCMC refresh's R-hat).

    The :class:`Tracked` component.
    """
    return Tracked()


#: Display names of the recorded metrics (tables, figure labels).
METRIC_NAMES = {
    "fairness_regret": "fairness regret",
    "reward_regret": "reward regret",
    "regret": "standard regret",
    "reward": "total reward",
    "bf_regret": "bi-level regret R*_beta",
    "group_fairness_regret": "group fairness regret",
}
