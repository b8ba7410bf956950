"""The share of rounds on which a policy played the best arm: a copyable skeleton of a metric.

Copy this file into ``bayesfair/simulation/`` (or any importable package) and replace ``specs``
and ``update``. The ``@declare("metric")`` decorator registers it: a study config records it with
``metrics = ["conventional", "best_arm"]`` and ``bayesfair list metrics`` shows it. A component
accumulates its values online inside the simulator's scan; what ``specs`` declares is recorded at
every checkpoint (``SUM``: summed over rounds; ``"last"``: the latest value).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from bayesfair.core.declare import declare
from bayesfair.simulation.metric_parts import Metric
from bayesfair.simulation.metrics import SUM, MetricSpec

__all__ = ["best_arm"]


class BestArmShare(Metric):
    """Rounds on which the played arm had the highest mean, and pi_t of that arm summed over rounds."""

    name = "best_arm"

    def specs(self, ctx):
        return (MetricSpec("best_arm_plays", (), (), np.float32, SUM, "rounds playing the best arm"),
                MetricSpec("best_arm_probability", (), (), np.float32, SUM, "sum over rounds of pi_t(best arm)"))

    def update(self, state, rnd):
        best = jnp.argmax(rnd.mean)
        return state, {"best_arm_plays": (rnd.action == best).astype(jnp.float32),
                       "best_arm_probability": rnd.probs[best].astype(jnp.float32)}


@declare("metric", name="best_arm")
def best_arm() -> Metric:
    """Plays of the best arm and its summed selection probability."""
    return BestArmShare()
