"""Exact exposure floors floor(beta * s) at any horizon, in int32 fixed point.

``beta * s`` is not computed in float32: at s ~ 1e7 its rounding error reaches ~0.25, enough to
miss a floor. Instead ``floor(beta s)`` is kept as an int32 together with the fractional part of
``beta s`` as two 30-bit int32 limbs, and advanced by beta (in the same 60-bit fixed point) once
per round. The representation is exact when beta >= 2^-8 (a float64 in [2^-8, 1) has no bits
below 2^-60); smaller values are rounded to the nearest 2^-60. Used by the bi-level policies
(Algorithm 1's UFG test) and by the simulator's anytime group-exposure check.
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

LIMB = 30  # bits per limb
MASK = (1 << LIMB) - 1

__all__ = ["LIMB", "MASK", "to_fixed", "advance"]


def to_fixed(beta: np.ndarray) -> np.ndarray:
    """beta (float64 [m], each in (0, 1)) as ``[2, m]`` int32 limbs (high 30 bits, low 30 bits)."""
    beta = np.asarray(beta, np.float64).reshape(-1)
    limbs = np.zeros((2, beta.size), np.int32)
    for g, b in enumerate(beta):
        fx = min(max(round(Fraction(float(b)) * (1 << (2 * LIMB))), 1), (1 << (2 * LIMB)) - 1)
        limbs[0, g], limbs[1, g] = fx >> LIMB, fx & MASK
    return limbs


def advance(quota: jax.Array, frac: jax.Array, beta_fx: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(floor(beta s), frac(beta s)) -> the same for s + 1, exactly (no limb sum exceeds 2^31 - 1)."""
    lo = frac[1] + beta_fx[1]
    hi = frac[0] + beta_fx[0] + jnp.right_shift(lo, LIMB)
    return quota + jnp.right_shift(hi, LIMB), jnp.stack([hi & MASK, lo & MASK])
