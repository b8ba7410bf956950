"""Group labels: a label per arm may be a group index or a group name, wherever ``groups`` is taken.

Names are numbered 0..m-1 in the order they first appear and kept as the groups' names, so a
problem given by names and the same problem given by indices (and those names) are one problem.
"""

from __future__ import annotations

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.core._validate import group_labels
from bayesfair.core.groups import Groups
from bayesfair.workflow.config import ConfigError, parse_config


def _random_names(rng: np.random.Generator) -> list[str]:
    pool = [f"group-{c}" for c in "abcdefgh"]
    m = int(rng.integers(1, len(pool) + 1))
    chosen = list(rng.choice(pool, size=m, replace=False))
    labels = chosen + list(rng.choice(chosen, size=int(rng.integers(0, 20))))  # every chosen name used
    rng.shuffle(labels)
    return [str(x) for x in labels]


@pytest.mark.parametrize("seed", range(50))
def test_names_are_numbered_in_first_appearance_order(seed):
    rng = np.random.default_rng(seed)
    labels = _random_names(rng)
    first = list(dict.fromkeys(labels))
    for given in (labels, tuple(labels), np.array(labels), np.array(labels, dtype=object)):
        g = Groups.from_labels(given)
        assert g.names == tuple(first)
        assert [g.names[c] for c in g.labels] == labels  # names[code] recovers every label
        assert g.labels.dtype == np.int32 and g.n_arms == len(labels) and g.n_groups == len(first)
        assert g.sizes.tolist() == [labels.count(n) for n in first]
        # the same partition given by indices and names
        same = Groups.from_labels(g.labels, names=g.names)
        assert same.describe() == g.describe()
    # names may be repeated explicitly when they are the labels' names in the same order
    assert Groups.from_labels(labels, names=first).names == tuple(first)


@pytest.mark.parametrize("seed", range(20))
def test_integer_labels_are_unchanged(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 6))
    labels = np.concatenate([np.arange(m), rng.integers(0, m, size=int(rng.integers(0, 10)))])
    rng.shuffle(labels)
    codes, names = group_labels("groups", labels)
    assert names is None and codes.tolist() == labels.tolist()
    assert Groups.from_labels(labels).labels.tolist() == labels.tolist()
    assert Groups.from_labels(labels.astype(float)).labels.tolist() == labels.tolist()


def test_bad_labels_name_the_field():
    with pytest.raises(TypeError, match="all integers .* or all strings"):
        Groups.from_labels(["a", 1, "a"])
    with pytest.raises(TypeError, match="a label per item, got the string"):
        Groups.from_labels("aab")
    with pytest.raises(TypeError, match="got booleans"):
        Groups.from_labels([True, False])
    with pytest.raises(TypeError, match="group names"):
        Groups.from_labels([0.5, 1.0])
    with pytest.raises(ValueError, match=">= 0"):
        Groups.from_labels([0, -1])
    with pytest.raises(ValueError, match="non-empty 1-d"):
        Groups.from_labels([["a", "b"]])
    with pytest.raises(ValueError, match="first-appearance order"):
        Groups.from_labels(["w", "m", "w"], names=["m", "w"])


def test_environments_take_names():
    env = bf.bernoulli_arms([0.2, 0.5, 0.7, 0.9], groups=["minority", "majority", "minority", "majority"])
    assert env.groups.names == ("minority", "majority")
    assert env.spec.group_of_arm.tolist() == [0, 1, 0, 1] and env.spec.n_groups == 2
    lin = bf.linear_bandit(n_arms=3, n_features=2, groups=["x", "y", "y"])
    assert lin.groups.names == ("x", "y") and lin.spec.group_of_arm.tolist() == [0, 1, 1]
    by_index = bf.gaussian_arms([0.1, 0.4, 0.6], groups=[1, 0, 1], )
    assert by_index.groups.names == ("g0", "g1")


def test_population_environment_takes_names():
    from bayesfair.environments.group_meritocratic import gmf_population

    rng = np.random.default_rng(0)
    groups = ["f", "m", "m", "f", "m", "f"]
    env = gmf_population(rng.normal(size=(6, 2)), rng.uniform(size=6), groups, n_candidates=3)
    assert env.groups.names == ("f", "m")
    named = gmf_population(rng.normal(size=(6, 2)), rng.uniform(size=6), groups, n_candidates=3,
                           group_names=["women", "men"])
    assert named.groups.names == ("women", "men")


def test_configs_take_names():
    raw = {"name": "t", "seed": 1, "runs": 2, "horizon": 20, "merit": {"name": "exponential", "c": 4.0},
           "environment": {"name": "bernoulli_arms", "means": [0.2, 0.5, 0.8], "groups": ["b", "a", "b"]},
           "policies": {"U": {"name": "uniform"}}}
    study = parse_config(raw)
    assert study.env.groups.names == ("b", "a") and study.env.spec.group_of_arm.tolist() == [0, 1, 0]
    raw["environment"]["groups"] = ["b", 1, "b"]
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert exc.value.path.startswith("environment.groups")
    raw["environment"]["groups"] = [0, -1, 0]
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert exc.value.path.startswith("environment.groups")


def test_biased_feedback_groups_are_indices():
    """The biased-feedback model's group_of_arm names its reference group by index: names are
    refused with a message saying so (indices keep working, integral floats too)."""
    from bayesfair.posteriors.group_bias import check_bias_groups

    labels, m, ref = check_bias_groups([1, 0, 1, 0.0])
    assert labels.tolist() == [1, 0, 1, 0] and m == 2 and ref == 0
    with pytest.raises(TypeError, match="integer group indices .* got the names"):
        check_bias_groups(["a", "a", "b", "b"])
