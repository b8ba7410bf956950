"""The Jones-Faddy skew-t distribution as a NumPyro distribution.

Jones, M. C. and Faddy, M. J. (2003), "A skew extension of the t-distribution, with
applications", J. R. Statist. Soc. B 65(1), 159-174, Eq. (1): for a, b > 0 and nu = a + b,

    f(t; a, b) = C^{-1} (1 + t / sqrt(nu + t^2))^(a + 1/2) (1 - t / sqrt(nu + t^2))^(b + 1/2),
    C = 2^(nu - 1) B(a, b) sqrt(nu).

a = b is Student's t with nu = 2a degrees of freedom; a > b skews it to the right, a < b to the
left: the right tail decays as t^(-2b-1) and the left as |t|^(-2a-1). If B ~ Beta(a, b),
then T = sqrt(nu) (2B - 1) / (2 sqrt(B (1 - B))) has this density (the paper's Section 2), which
is how :meth:`JonesFaddySkewT.sample` draws. The mean (a, b > 1/2) is

    E[T] = (a - b) sqrt(nu) / 2 * Gamma(a - 1/2) Gamma(b - 1/2) / (Gamma(a) Gamma(b)).

Here it is parametrized as the GLM uses it: location ``loc``, scale ``scale``, tail weight
``nu = a + b`` and skew weight ``w = a / nu`` in (0, 1) (``w = 1/2``: Student's t), so that
``y = loc + scale * T``. ``tests/test_skew_t.py`` checks the density against SciPy's
``jf_skew_t`` and the sampler and mean against the density.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numpyro.distributions import constraints
from numpyro.distributions.util import promote_shapes

__all__ = ["JonesFaddySkewT", "jf_skew_t_mean"]


def jf_skew_t_mean(nu, w):
    """E[T] of the standard (loc 0, scale 1) Jones-Faddy skew-t with ``a = w nu``, ``b = (1 - w) nu``;
    finite for a, b > 1/2 (``nan`` otherwise)."""
    a, b = w * nu, (1.0 - w) * nu
    log_ratio = gammaln(a - 0.5) + gammaln(b - 0.5) - gammaln(a) - gammaln(b)
    m = (a - b) * jnp.sqrt(nu) / 2.0 * jnp.exp(log_ratio)
    return jnp.where((a > 0.5) & (b > 0.5), m, jnp.nan)


def _log_beta(a, b):
    # from log-gammas: jax.scipy.special.betaln is off by up to ~3e-7 at a, b ~ 5-30 in float64
    return gammaln(a) + gammaln(b) - gammaln(a + b)


class JonesFaddySkewT(dist.Distribution):
    """``loc + scale * T`` with T Jones-Faddy skew-t (a = ``w nu``, b = ``(1 - w) nu``; module docstring)."""

    arg_constraints = {"nu": constraints.positive, "w": constraints.open_interval(0.0, 1.0),
                       "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    reparametrized_params = ["loc", "scale"]

    def __init__(self, nu, w, loc=0.0, scale=1.0, *, validate_args=None):
        self.nu, self.w, self.loc, self.scale = promote_shapes(nu, w, loc, scale)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(nu), jnp.shape(w), jnp.shape(loc), jnp.shape(scale))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        a, b = self.w * self.nu, (1.0 - self.w) * self.nu
        shape = sample_shape + self.batch_shape
        x = jax.random.beta(key, a, b, shape)
        x = jnp.clip(x, jnp.finfo(x.dtype).tiny, 1.0 - jnp.finfo(x.dtype).eps)
        t = jnp.sqrt(self.nu) * (2.0 * x - 1.0) / (2.0 * jnp.sqrt(x * (1.0 - x)))
        return self.loc + self.scale * t

    def log_prob(self, value):
        nu, a = self.nu, self.w * self.nu
        b = nu - a
        t = (value - self.loc) / self.scale
        s = jnp.sqrt(nu + t * t)
        # log(s + |t|) is exact; the other factor uses (s - |t|)(s + |t|) = nu (no cancellation).
        big = jnp.log(s + jnp.abs(t))
        small = jnp.log(nu) - big
        log_plus = jnp.where(t >= 0, big, small)  # log(s + t)
        log_minus = jnp.where(t >= 0, small, big)  # log(s - t)
        log_s = jnp.log(s)
        return ((a + 0.5) * (log_plus - log_s) + (b + 0.5) * (log_minus - log_s)
                - (nu - 1.0) * jnp.log(2.0) - _log_beta(a, b) - 0.5 * jnp.log(nu) - jnp.log(self.scale))

    @property
    def mean(self):
        return self.loc + self.scale * jf_skew_t_mean(self.nu, self.w)
