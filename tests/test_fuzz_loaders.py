"""Property-based fuzzing of the loaders of untrusted JSON: config files and run configs
(`RunConfig.from_json` and the checks a run makes before it starts) and weights headers
(`load_run`). Any JSON in: a valid config (or policy), or one UserError line; never another
exception, never an import."""

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from xlvin.errors import UserError
from xlvin.io.run_dir import CONFIG, MODEL
from xlvin.io.weights import digest
from xlvin.nn.policy import ActorCritic
from xlvin.run.training import load_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.run.checks import check_run
from xlvin.envs.spaces import Spaces

FUZZ = settings(max_examples=120, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

scalars = (st.none() | st.booleans() | st.integers() | st.integers(-(2**80), 2**80)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["CartPole-v1", "Acrobot-v1", "os:system", "xlvin_fuzz:Env", "ppo",
                              "xlvin", "atreec", "low_data", "online", "bogus", "random"]))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=12,
)


@st.composite
def mutated_configs(draw) -> dict:
    """A valid config (PPO, small) with a few fields, or whole sections, replaced by any JSON."""
    config = RunConfig(train=TrainConfig(agent="ppo", env="CartPole-v1")).to_json()
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from([*config, "extra"]))
        if draw(st.booleans()) or not isinstance(config.get(section), dict):
            config[section] = draw(json_values)
        else:
            key = draw(st.sampled_from([*config[section], "unknown"]))
            config[section][key] = draw(json_values)
    return config


configs = json_values | mutated_configs()


def assert_one_line(err: UserError) -> None:
    assert str(err) and "\n" not in str(err)


@FUZZ
@given(data=configs)
def test_any_json_is_a_checked_config_or_one_line(data) -> None:
    try:
        check_run(RunConfig.from_json(data, "fuzz.json"))
    except UserError as err:
        assert_one_line(err)
    assert "xlvin_fuzz" not in sys.modules


@pytest.fixture(scope="module")
def ppo_weights() -> dict:
    cfg = RunConfig(train=TrainConfig(agent="ppo", env="CartPole-v1"))
    agent: ActorCritic = agent_of(cfg, Spaces((4,), "flat", 2))
    return {k: v.clone() for k, v in agent.state_dict().items()}


headers = (st.text(max_size=40) | json_values.map(json.dumps)
           | st.builds(lambda c, e: json.dumps({"config": c, "executor": e}), configs, json_values))


@FUZZ
@given(metadata=headers)
def test_any_weights_header_is_a_policy_or_one_line(metadata: str, ppo_weights: dict,
                                                    tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    try:  # config.json says the run the header says (`check_same_run`): the header is fuzzed
        config = json.loads(metadata).get("config", {})
    except (ValueError, AttributeError):
        config = {}
    (run / CONFIG).write_text(json.dumps(config))
    save_file(ppo_weights, str(run / MODEL),  # sealed: what the header says is fuzzed
              metadata={"xlvin": metadata, "xlvin-sha256": digest(metadata, ppo_weights)})
    try:
        load_run(run)
    except UserError as err:
        assert_one_line(err)
    assert "xlvin_fuzz" not in sys.modules
