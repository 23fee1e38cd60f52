"""What a model holds is what trains: `model.policy` exists from construction and `learn` trains
that object in place (weights set before `learn` included), the env instance passed (an attribute
changed on it included) is the env that trains and evaluates, and a `learn` stopped by Ctrl-C
leaves the policy of its last update boundary, which saves, loads and continues."""

import json
import os
import signal

import gymnasium as gym
import numpy as np
import pytest
import torch

from xlvin import PPO, XLVIN
from xlvin.callbacks import Callback
from xlvin.nn.policy import ActorCritic

TINY = dict(num_envs=2, num_steps=16, hidden=16, update_epochs=1, num_minibatches=1)
ROLLOUT = 32


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.policy.state_dict().items()}


def test_the_policy_exists_before_learn_and_learn_trains_that_object() -> None:
    model = PPO("CartPole-v1", seed=0, **TINY)
    policy = model.policy
    assert isinstance(policy, ActorCritic)
    before = weights(model)
    model.learn(2 * ROLLOUT, progress=False)
    assert model.policy is policy
    assert any(not torch.equal(before[k], v) for k, v in policy.state_dict().items())


def test_weights_set_before_learn_are_the_weights_that_train(tmp_path) -> None:
    """SB3's fine-tuning habit: set_parameters (or any edit of model.policy), then learn; the
    run starts from those weights (and, for XLVIN, skips the TransE pre-training that would
    initialise its encoder and transition)."""
    model = PPO("CartPole-v1", seed=0, **TINY)
    model.set_parameters({"policy": {k: torch.full_like(v, 0.123)
                                     for k, v in model.policy.state_dict().items()}})
    model.learn(ROLLOUT, progress=False)
    moved = [float((v - 0.123).abs().mean()) for v in model.policy.state_dict().values()]
    assert max(moved) < 0.01, moved  # one small update away from 0.123, not a new network

    xlvin = XLVIN("CartPole-v1", seed=0, depth=1, transe_epochs=1, **TINY)
    with torch.no_grad():
        xlvin.policy.encoder.net[0].weight.fill_(0.05)
    xlvin.learn(ROLLOUT, progress=False)
    assert xlvin.summary.get("initialised") is True and "transe" not in xlvin.summary
    assert float((xlvin.policy.encoder.net[0].weight.detach() - 0.05).abs().max()) < 0.01


def test_a_plain_env_changed_after_make_trains_and_evaluates_as_changed() -> None:
    env = gym.make("CartPole-v1")
    env.unwrapped.theta_threshold_radians = 0.005  # the pole falls at once
    model = PPO(env, seed=0, **TINY)
    model.learn(4 * ROLLOUT, progress=False)
    rows = [json.loads(line) for line in open(model.run_dir / "metrics.jsonl")]
    assert max(r["charts/episodic_length"] for r in rows if "charts/episodic_length" in r) < 3
    vec = model.get_env()
    assert [e.unwrapped.theta_threshold_radians for e in vec.unwrapped.envs] == [0.005, 0.005]
    assert model.evaluate(episodes=5, env=env)["mean"] < 3
    plain = PPO(gym.make("CartPole-v1"), seed=0, **TINY)
    assert plain.config.train.env == "CartPole-v1"  # unchanged: its id, remade anywhere


class Interrupt(Callback):
    """Ctrl-C (a real SIGINT to this process) after update `at`."""

    def __init__(self, at: int) -> None:
        self.at, self.updates = at, 0

    def on_update(self, model, metrics) -> bool:
        self.updates += 1
        if self.updates == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        return True


def test_ctrl_c_leaves_the_last_update_which_saves_loads_and_continues_exactly(tmp_path) -> None:
    options = dict(seed=3, anneal_lr=False, **TINY)
    whole = PPO("CartPole-v1", **options).learn(8 * ROLLOUT, progress=False)

    model = PPO("CartPole-v1", **options)
    with pytest.raises(KeyboardInterrupt):
        model.learn(8 * ROLLOUT, progress=False, callback=Interrupt(3))
    assert model.num_timesteps == 3 * ROLLOUT
    held = weights(model)
    stopped = PPO.load(model.run_dir)  # the run's checkpoint, read as a stopped run
    assert stopped.num_timesteps == 3 * ROLLOUT
    assert all(torch.equal(held[k], v) for k, v in weights(stopped).items())
    untrained = PPO("CartPole-v1", **options)
    obs = np.zeros(4, dtype=np.float32)
    assert model.predict_values(obs) != untrained.predict_values(obs)
    loaded = PPO.load(model.save(tmp_path / "stopped"))
    assert loaded.num_timesteps == 3 * ROLLOUT
    assert all(torch.equal(held[k], v) for k, v in loaded.policy.state_dict().items())
    model.learn(5 * ROLLOUT, progress=False)  # one call continues it, exactly
    assert model.num_timesteps == 8 * ROLLOUT
    assert all(torch.equal(whole.policy.state_dict()[k], v)
               for k, v in model.policy.state_dict().items())


def test_learn_on_a_loaded_saved_policy_trains_its_weights(tmp_path) -> None:
    """A saved policy (a callback's best model) has no checkpoint: learn starts a new run from
    its weights (it was refused as 'a different run')."""
    model = PPO("CartPole-v1", seed=0, **TINY).learn(2 * ROLLOUT, progress=False)
    model.save_policy(tmp_path / "best")
    loaded = PPO.load(tmp_path / "best")
    before = weights(loaded)
    loaded.learn(ROLLOUT, progress=False)
    moved = [float((v - before[k]).abs().max()) for k, v in loaded.policy.state_dict().items()]
    assert 0 < max(moved) < 0.01


class SharedCounter(gym.Env):
    """An env whose copies share one counter (a module-level state): reset with one seed, two
    copies start in different states."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    resets = [0]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets[0] += 1
        return np.array([self.resets[0]], dtype=np.float32), {}

    def step(self, action):
        return np.zeros(1, dtype=np.float32), 0.0, True, False, {}


def test_an_instance_whose_copies_differ_is_refused_in_one_line() -> None:
    with pytest.raises(Exception, match="copies of the SharedCounter instance reset with one "
                       "seed give other first observations"):
        PPO(SharedCounter(), num_envs=2)


def test_the_policy_is_built_as_its_run_builds_it_whatever_the_threads_now() -> None:
    """The orthogonal initialisation's QR rounds otherwise on other torch thread counts: a
    model's policy is built on its run's threads (one by default), so `learn` trains the weights
    a run of the same seed starts from, in a notebook on 8 threads too."""
    from xlvin.process import seed_everything, torch_threads
    from xlvin.run.agents import build_agent

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = PPO("CartPole-v1", seed=0)
        held = weights(model)
    finally:
        torch.set_num_threads(before)
    with torch_threads(model.config.ppo.torch_threads):
        seed_everything(0)
        built = build_agent(model.architecture, model.spaces, None).state_dict()
    assert all(torch.equal(held[k], built[k]) for k in held)
