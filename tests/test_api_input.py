"""What the Python API refuses of its input, in one `UserError` line before anything runs: a
model made without an env (never a default env in its place), and an observation holding NaN or
inf given to `predict` (never an action chosen from it)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin import PPO, XLVIN, Model, UserError
from xlvin.run.config import RunConfig, TrainConfig


@pytest.mark.parametrize("make", [
    lambda: PPO(None), lambda: PPO(), lambda: PPO("MlpPolicy"), lambda: XLVIN(None, seed=3),
    lambda: Model(agent="ppo"), lambda: PPO(env_kwargs={"render_mode": None}),
])
def test_a_model_without_an_env_is_refused_not_given_a_default(make) -> None:
    with pytest.raises(UserError) as err:
        make()
    message = str(err.value)
    assert "no env given" in message and "\n" not in message, message


def test_a_config_naming_the_env_stands_for_it(tmp_path: Path) -> None:
    cfg = RunConfig(train=TrainConfig(agent="ppo", env="Acrobot-v1"))
    assert PPO(config=cfg).config.train.env == "Acrobot-v1"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_predict_refuses_an_observation_holding_nan_or_inf(bad: float) -> None:
    model = PPO("CartPole-v1", seed=0)
    with pytest.raises(UserError, match=r"^predict: the observation holds NaN or inf"):
        model.predict(np.full(4, bad, dtype=np.float32))
    batch = np.zeros((5, 4), dtype=np.float32)
    batch[3, 1] = bad
    with pytest.raises(UserError, match=r"^predict: observation 3 of the batch holds NaN or inf"):
        model.predict(batch)
    with pytest.raises(UserError, match=r"^predict_values: observation 3 of the batch"):
        model.predict_values(torch.from_numpy(batch))
    actions, _ = model.predict(np.zeros((5, 4), dtype=np.float32))  # finite: acted on
    assert actions.shape == (5,)
