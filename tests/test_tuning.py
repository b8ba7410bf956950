"""Validation split and grid search (FairX Section 5.1's hyper-parameter selection)."""

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.environments import multilabel_bandit
from bayesfair.workflow.tuning import grid_points, grid_search, validation_split


def _data(n=50, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = (rng.random((n, 4)) < [0.1, 0.3, 0.6, 0.9]).astype(int)
    return x, y


def test_validation_split_partitions_the_rows():
    x, y = _data()
    s = validation_split(x, y, fraction=0.2, seed=1)
    assert s.val_features.shape == (10, 3) and s.test_labels.shape == (40, 4)
    assert np.array_equal(np.sort(np.concatenate([s.val_index, s.test_index])), np.arange(50))
    np.testing.assert_array_equal(s.val_features, x[s.val_index])
    np.testing.assert_array_equal(s.test_labels, y[s.test_index])
    again = validation_split(x, y, fraction=0.2, seed=1)
    np.testing.assert_array_equal(again.val_index, s.val_index)
    assert not np.array_equal(validation_split(x, y, 0.2, seed=2).val_index, s.val_index)


@pytest.mark.parametrize(
    "args,err,match",
    [
        ({"fraction": 0.0}, ValueError, "fraction"),
        ({"fraction": 1.0}, ValueError, "fraction"),
        ({"fraction": 0.001}, ValueError, "empty validation"),
        ({"labels": np.zeros((49, 4))}, ValueError, "same number of rows"),
        ({"seed": -1}, ValueError, "seed"),
    ],
)
def test_validation_split_rejects_bad_arguments(args, err, match):
    x, y = _data()
    kw = {"features": x, "labels": y, **args}
    with pytest.raises(err, match=match):
        validation_split(**kw)


def test_grid_search_picks_the_argmin():
    x, y = _data()
    split = validation_split(x, y, seed=0)
    merit = bf.merit.exponential(4.0)
    res = grid_search(lambda: multilabel_bandit(split.val_features, split.val_labels),
                      lambda epsilon: bf.fairx_eg(merit, epsilon=epsilon),
                      {"epsilon": [0.02, 0.5, 1.0]}, horizon=300, runs=2, seed=0, merit=merit)
    table = res.scores
    assert list(table.columns[:2]) == ["epsilon", "policy"] and len(table) == 3
    i = int(table["score"].idxmin())
    assert res.best == {"epsilon": table["epsilon"][i]} and res.best_score == table["score"][i]
    assert table["rank"][i] == 1 and sorted(table["rank"]) == [1, 2, 3]
    # epsilon = 1 is the uniform policy: far from pi* = softmax(4 mu) on these spread-out means
    assert res.best["epsilon"] != 1.0
    fr = res.results["fairness_regret"].isel(checkpoint=-1).mean("run").values
    np.testing.assert_allclose(table["score"].to_numpy(), fr)
    # a callable metric on one policy's results, maximized
    res2 = grid_search(multilabel_bandit(split.val_features, split.val_labels),
                       lambda epsilon: bf.fairx_eg(merit, epsilon=epsilon), {"epsilon": [0.02, 1.0]},
                       metric=lambda ds: float(ds["fairness_regret"].isel(checkpoint=-1).mean()),
                       minimize=False, horizon=100, runs=1, seed=0, merit=merit)
    assert res2.best == {"epsilon": 1.0}


def test_grid_points_is_the_cartesian_product():
    pts = grid_points({"a": [1, 2], "b": np.array([0.5, 1.5, 2.5])})
    assert len(pts) == 6 and pts[0] == {"a": 1, "b": 0.5} and pts[-1] == {"a": 2, "b": 2.5}
    assert isinstance(pts[0]["b"], float)


@pytest.mark.parametrize(
    "grid,err,match",
    [
        ([0.1, 0.2], TypeError, "grid must be a mapping"),
        ({}, ValueError, "at least one parameter"),
        ({"epsilon": []}, ValueError, r"grid\['epsilon'\] must have at least one value"),
        ({"epsilon": 0.1}, TypeError, "must be a list"),
        ({"epsilon": "0.1"}, TypeError, "must be a list"),
        ({"epsilon": [0.1, 0.1]}, ValueError, "repeated"),
        ({1: [0.1]}, TypeError, "identifier"),
        ({"eps": [0.1]}, TypeError, "make_policy failed on grid point"),
        ({"epsilon": [2.0]}, ValueError, r"make_policy failed on grid point \{'epsilon': 2.0\}"),
    ],
)
def test_bad_grids_raise(grid, err, match):
    x, y = _data()
    merit = bf.merit.exponential(4.0)
    with pytest.raises(err, match=match):
        grid_search(multilabel_bandit(x, y), lambda epsilon: bf.fairx_eg(merit, epsilon=epsilon), grid,
                    horizon=10, runs=1, merit=merit)


def test_grid_search_validates_the_rest():
    x, y = _data()
    merit = bf.merit.exponential(4.0)
    env = multilabel_bandit(x, y)
    mk = lambda epsilon: bf.fairx_eg(merit, epsilon=epsilon)  # noqa: E731
    g = {"epsilon": [0.1]}
    with pytest.raises(ValueError, match="metric must be one of"):
        grid_search(env, mk, g, metric="fairness", horizon=10, runs=1, merit=merit)
    with pytest.raises(TypeError, match="make_env"):
        grid_search(lambda: 3, mk, g, horizon=10, runs=1, merit=merit)
    with pytest.raises(TypeError, match="must return a bayesfair Policy"):
        grid_search(env, lambda epsilon: None, g, horizon=10, runs=1, merit=merit)
    with pytest.raises(ValueError, match="horizon"):
        grid_search(env, mk, g, horizon=0, runs=1, merit=merit)
