"""Environments: synthetic and dataset-driven, all with counterfactual rewards per round."""

from bayesfair.environments.arms import UniformMeans, bernoulli_arms, gaussian_arms
from bayesfair.environments.base import Environment

__all__ = ["Environment", "UniformMeans", "bernoulli_arms", "gaussian_arms"]
