"""Per-round logs: one row per policy x run x round x candidate, consistent with the results."""

import copy

import numpy as np
import pytest

from bayesfair.workflow.config import parse_config
from bayesfair.workflow.logs import LOG_COLUMNS, RoundLog, parquet_available, read_log, write_log
from bayesfair.workflow.persist import StudyInterrupted

T, R, K = 30, 2, 4
STUDY = {
    "name": "logged", "seed": 2, "runs": R, "horizon": T, "chunk_size": 8, "checkpoints": [10, T],
    "merit": {"name": "exponential", "c": 2.0},
    "environment": {"name": "bernoulli_arms", "means": [0.3, 0.4, 0.6, 0.7], "groups": [0, 1, 0, 1],
                    "group_names": ["a", "b"]},
    "policies": {"EG": {"name": "epsilon_greedy", "epsilon": 0.3}},
    "log": {"enabled": True, "format": "csv"},
    "resume": {"every_chunks": 1},
}


@pytest.fixture(scope="module")
def logged():
    study = parse_config(copy.deepcopy(STUDY))
    log = study.make_log()
    ds = study.run(round_log=log)
    return study, ds, log.to_frame()


def test_log_columns_and_consistency_with_results(logged):
    _, ds, df = logged
    assert tuple(df.columns[: len(LOG_COLUMNS)]) == LOG_COLUMNS
    assert len(df) == R * T * K
    # only the rewards of candidates the policy did not choose are missing: it observed nothing there
    np.testing.assert_array_equal(df["observed_reward"].isna().to_numpy(), ~df["selected"].to_numpy())
    assert not df.drop(columns="observed_reward").isna().any().any()
    assert list(df["group"].cat.categories) == ["a", "b"] and list(df["policy"].cat.categories) == ["EG"]
    per_round = df.groupby(["run", "round"])
    assert (per_round["selected"].sum() == 1).all()
    np.testing.assert_allclose(per_round["propensity"].sum(), 1.0, rtol=1e-6)
    last = ds.sel(policy="EG").isel(checkpoint=-1)
    pulls = df[df["selected"]].groupby(["run", "candidate"]).size().unstack(fill_value=0).reindex(
        columns=range(K), fill_value=0)
    np.testing.assert_array_equal(pulls.to_numpy(), last["pulls"].values)
    exposure = df.groupby(["run", "candidate"])["propensity"].sum().unstack().to_numpy()
    np.testing.assert_allclose(exposure, last["exposure"].values, rtol=1e-5)
    reward = df[df["selected"]].groupby("run")["observed_reward"].sum().to_numpy()
    np.testing.assert_allclose(reward, last["reward"].values)
    # no biased feedback here: the true reward is the observed one where there is one
    chosen = df[df["selected"]]
    np.testing.assert_array_equal(chosen["true_reward"], chosen["observed_reward"])
    assert df["true_reward"].notna().all() and set(np.unique(df["true_reward"])) <= {0.0, 1.0}
    assert set(df["expected_reward"]) == {np.float32(v).item() for v in (0.3, 0.4, 0.6, 0.7)}


def test_log_has_what_fairlearn_metricframe_needs(logged, tmp_path):
    """MetricFrame(metrics, y_true=..., y_pred=..., sensitive_features=...) takes 1-d columns of one length."""
    _, _, df = logged
    sub = df[df["policy"] == "EG"]
    y_true, y_pred, sensitive = sub["true_reward"], sub["selected"], sub["group"]
    assert len(y_true) == len(y_pred) == len(sensitive) == R * T * K
    assert y_pred.dtype == bool and set(np.unique(y_true)) <= {0.0, 1.0}
    assert sensitive.dtype == "category" and sensitive.notna().all()
    # what MetricFrame computes per group for selection_rate is this groupby
    rate = sub.groupby("group", observed=True)["selected"].mean()
    assert rate.index.tolist() == ["a", "b"] and np.isclose(rate.mean(), 1 / K)
    # files: CSV always; parquet only with pyarrow
    path = write_log(df, tmp_path / "log", "csv")
    assert path.name == "log.csv"
    back = read_log(path)
    assert back.shape == df.shape and back["group"].dtype == "category"
    if not parquet_available():
        with pytest.raises(ImportError, match="pyarrow"):
            write_log(df, tmp_path / "log", "parquet")
        assert write_log(df, tmp_path / "auto").suffix == ".csv"


def test_log_survives_interrupt_and_resume(logged, tmp_path):
    study, _, df = logged
    with pytest.raises(StudyInterrupted):
        study.execute(tmp_path, stop_after_chunks=2)
    res = study.execute(tmp_path, resume=True)
    assert res.resumed and res.log.name == "logged.log.csv"
    back = read_log(res.log)
    np.testing.assert_array_equal(back["selected"].to_numpy(), df["selected"].to_numpy())
    np.testing.assert_allclose(back["propensity"].to_numpy(), df["propensity"].to_numpy(), rtol=1e-7)


def test_row_guard():
    with pytest.raises(ValueError, match="more than max_rows"):
        RoundLog(10**6, 100, 50, ["g"], max_rows=1000)


def test_log_settings_that_cannot_work_are_config_errors_before_the_run():
    """A misspelt true_reward made the log's true_reward column the observed (biased) reward; a
    parquet log without pyarrow failed only after the whole study had run."""
    from bayesfair.workflow.registry import ConfigError

    biased = {**copy.deepcopy(STUDY), "environment": {"name": "synthetic_biased"},
              "policies": {"U": {"name": "uniform"}}}
    biased["log"] = {"enabled": True, "format": "csv", "true_reward": "treu"}
    with pytest.raises(ConfigError, match=r"log.true_reward: environment synthetic_biased reports no 'treu' .*'true'"):
        parse_config(biased)
    biased["log"]["true_reward"] = "true"
    assert parse_config(biased).make_log().true_reward == "true"
    plain = copy.deepcopy(STUDY)
    plain["log"]["true_reward"] = "unbiased"  # the Bernoulli arms report no extra entry at all
    with pytest.raises(ConfigError, match=r"reports no 'unbiased' .*none"):
        parse_config(plain)
    parquet = copy.deepcopy(STUDY)
    parquet["log"]["format"] = "parquet"
    study = parse_config(parquet)
    if parquet_available():
        assert study.make_log() is not None
    else:
        with pytest.raises(ConfigError, match="log.format: 'parquet' needs pyarrow"):
            study.make_log()
