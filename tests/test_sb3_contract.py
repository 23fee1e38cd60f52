"""Stable-Baselines3's contract, tested the way its own documented examples use it (issue 73):
the README quickstart loop over `get_env()`, the save/load round trip, `BaseCallback`
subclasses, `EvalCallback`, `CheckpointCallback`, `StopTrainingOnRewardThreshold`,
`evaluate_policy` and PPO's hyperparameter names. Each call works as in SB3 with only the import
changed (`from xlvin import ...`), or is refused when it is made, in one line saying what to write
instead. Names are read from `xlvin` inside the tests, so that each fails on its own where the
name is missing."""

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import xlvin
from xlvin import PPO, UserError

TINY = {"num_envs": 2, "num_steps": 16, "hidden": 16, "update_epochs": 1}
ROLLOUT = 32  # env steps per update under TINY
CALLS = 16  # calls of _on_step per rollout under TINY: one per vector step


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and isinstance(err.value, UserError)
    return message


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# --- the README quickstart and the VecEnv API ----------------------------------------------

def test_the_readme_quickstart_loop_over_get_env() -> None:
    """`vec_env = model.get_env(); obs = vec_env.reset(); model.predict(obs); obs, rewards,
    dones, info = vec_env.step(action); vec_env.render()`: SB3's VecEnv, with autoreset in the
    step that ends an episode and the last observation in `info[i]["terminal_observation"]`."""
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    model = PPO("MlpPolicy", env, verbose=0, seed=0, **TINY)
    model.learn(total_timesteps=ROLLOUT)

    vec_env = model.get_env()
    obs = vec_env.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (2, 4)
    assert vec_env.num_envs == 2 and vec_env.observation_space.shape == (4,)
    assert vec_env.action_space.n == 2
    ended = 0
    for i in range(200):
        action, _states = model.predict(obs, deterministic=True)
        obs, rewards, dones, info = vec_env.step(action)
        if i < 2:
            frame = vec_env.render()
            assert frame.shape == (800, 600, 3)  # the two envs' frames, one above the other
        assert rewards.dtype == np.float32 and rewards.shape == (2,) and dones.dtype == bool
        assert isinstance(info, list) and len(info) == 2 and _states is None
        for k in np.flatnonzero(dones):
            ended += 1
            last = info[k]["terminal_observation"]
            assert abs(last[0]) > 2.4 or abs(last[2]) > 12 * 2 * np.pi / 360  # CartPole's end
            assert np.all(np.abs(obs[k]) <= 0.05)  # the next episode's first observation
            assert info[k]["TimeLimit.truncated"] is False and info[k]["episode"]["l"] > 0
    assert ended > 0
    vec_env.close()
    env.close()


def test_vec_env_seed_options_and_reset_infos_are_sb3s() -> None:
    model = PPO("CartPole-v1", **TINY)
    vec_env = model.get_env()
    assert model.env is vec_env
    assert vec_env.seed(7) == [7, 8]
    obs = vec_env.reset()
    for k, seed in enumerate((7, 8)):
        np.testing.assert_array_equal(obs[k], gym.make("CartPole-v1").reset(seed=seed)[0])
    assert vec_env.reset_infos == [{}, {}]
    assert not np.array_equal(vec_env.reset(), obs)  # seeds are used once, as SB3's
    assert vec_env.get_attr("spec")[0].id == "CartPole-v1"
    assert vec_env.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
    assert vec_env.unwrapped is vec_env and len(vec_env.envs) == 2  # as SB3's DummyVecEnv
    with pytest.warns(UserWarning, match="no render_mode"):
        assert vec_env.render() is None  # as SB3's: a warning, nothing drawn


def test_step_before_reset_is_one_line() -> None:
    vec_env = PPO("CartPole-v1", **TINY).get_env()
    with pytest.raises(UserError) as err:
        vec_env.step(np.zeros(2, dtype=np.int64))
    assert "obs = vec_env.reset()" in one_line(err)


# --- save, load, evaluate_policy, as SB3's "basic usage" ------------------------------------

def test_save_load_round_trip_then_evaluate_policy_and_enjoy(tmp_path: Path) -> None:
    env = gym.make("CartPole-v1")
    model = PPO("MlpPolicy", env, verbose=0, seed=1, **TINY)
    model.learn(total_timesteps=ROLLOUT, progress_bar=False)
    path = tmp_path / "ppo_cartpole"
    model.save(path)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    expected = model.predict(obs, deterministic=True)[0]
    del model
    model = PPO.load(path, env=env)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], expected)
    assert model.num_timesteps == ROLLOUT

    mean_reward, std_reward = xlvin.evaluate_policy(model, model.get_env(), n_eval_episodes=10)
    assert isinstance(mean_reward, float) and isinstance(std_reward, float)
    vec_env = model.get_env()
    obs = vec_env.reset()
    for _ in range(20):
        action, _states = model.predict(obs, deterministic=True)
        obs, rewards, dones, info = vec_env.step(action)
    assert obs.shape == (2, 4)


def greedy_episodes(model, env: gym.Env, episodes: int) -> tuple[list[float], list[int]]:
    """Returns and lengths of `episodes` greedy episodes on `env`, by hand."""
    returns, lengths = [], []
    for _ in range(episodes):
        obs, _ = env.reset()
        done, total, steps = False, 0.0, 0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(
                model.predict(obs, deterministic=True)[0])
            total, steps, done = total + reward, steps + 1, terminated or truncated
        returns.append(total)
        lengths.append(steps)
    return returns, lengths


def test_evaluate_policy_plays_the_env_it_is_given() -> None:
    """`evaluate_policy(model, env, n_eval_episodes, deterministic, render, callback,
    reward_threshold, return_episode_rewards, warn)` on the env object given (a modified one
    stays modified), its episodes shared among a vector env's envs as SB3 shares them."""
    model = PPO("CartPole-v1", seed=0, **TINY)
    env = gym.make("CartPole-v1", max_episode_steps=7)
    env.reset(seed=3)
    seen = []
    returns, lengths = xlvin.evaluate_policy(
        model, env, n_eval_episodes=4, deterministic=True, render=False,
        callback=lambda locals_, globals_: seen.append(locals_["done"]),
        return_episode_rewards=True, warn=False)
    by_hand = gym.make("CartPole-v1", max_episode_steps=7)
    by_hand.reset(seed=3)
    assert (returns, lengths) == greedy_episodes(model, by_hand, 4)
    assert max(lengths) <= 7 and len(seen) == sum(lengths) and sum(seen) == 4
    mean, std = xlvin.evaluate_policy(model, model.get_env(), n_eval_episodes=5)
    assert np.isfinite(mean) and std >= 0
    with pytest.raises(UserError) as err:
        xlvin.evaluate_policy(model, env, n_eval_episodes=2, reward_threshold=10_000)
    assert "reward_threshold" in one_line(err)
    with pytest.raises(UserError) as err:
        xlvin.evaluate_policy(model, "CartPole-v1")
    assert "gym.make" in one_line(err)


# --- callbacks: BaseCallback subclasses -----------------------------------------------------

def sb3_custom_callback(base: type) -> type:
    """SB3's custom callback template on `base`: records its events; `_on_step` returns False
    at its 20th call."""

    class CustomCallback(base):
        def __init__(self, verbose: int = 0) -> None:
            super().__init__(verbose)
            self.events: list[tuple] = []

        def _on_training_start(self) -> None:
            self.events.append(("training_start", self.num_timesteps))
            self.env_size = self.training_env.num_envs
            self.same_logger = self.logger is self.model.logger

        def _on_rollout_start(self) -> None:
            self.events.append(("rollout_start", self.n_calls))

        def _on_step(self) -> bool:
            assert self.locals["self"] is self.model
            self.events.append(("step", self.n_calls, self.num_timesteps,
                                self.model.num_timesteps))
            return self.n_calls < 20

        def _on_rollout_end(self) -> None:
            self.events.append(("rollout_end", self.n_calls, self.num_timesteps))

    return CustomCallback


@pytest.mark.parametrize("base", ["BaseCallback", "Callback"])
def test_a_base_callback_subclass_gets_sb3s_events_and_stops_the_run(base: str) -> None:
    """SB3's hooks and attributes; `_on_step` is called once per vector step (with the
    num_timesteps of that step) after each rollout is collected; False stops the run, at the
    end of that rollout's update."""
    callback = sb3_custom_callback(getattr(xlvin, base))(verbose=1)
    assert callback.verbose == 1 and callback.n_calls == 0 and callback.model is None
    model = PPO("CartPole-v1", seed=0, **TINY)
    model.learn(16 * ROLLOUT, callback=callback, progress_bar=False)
    assert model.num_timesteps == 2 * ROLLOUT and model.summary["ppo"]["stopped_by_hooks"]
    events = callback.events
    assert events[0] == ("training_start", 0) and callback.env_size == 2 and callback.same_logger
    assert events[1] == ("rollout_start", 0)
    steps = [e for e in events if e[0] == "step"]
    assert [e[1] for e in steps] == list(range(1, 21))
    assert [e[2] for e in steps] == [2 * n for n in range(1, 21)]
    assert all(e[2] == e[3] for e in steps)
    assert ("rollout_end", CALLS, ROLLOUT) in events and events[-1] == ("step", 20, 40, 40)
    assert [e[0] for e in events].count("rollout_end") == 1  # not after the stopping step
    assert callback.model is model and callback.num_timesteps == 40


def test_locals_sb3_keeps_per_step_are_refused_in_one_line() -> None:
    class ReadsInfos(xlvin.BaseCallback):
        def _on_step(self) -> bool:
            return not any(self.locals["dones"])

    with pytest.raises(UserError) as err:
        PPO("CartPole-v1", **TINY).learn(ROLLOUT, callback=ReadsInfos(), progress_bar=False)
    assert "self.locals['dones']" in one_line(err) and "env_wrappers=" in str(err.value)


def test_on_training_end_is_refused_before_training(tmp_path: Path) -> None:
    class AtTheEnd(xlvin.BaseCallback):
        def _on_training_end(self) -> None:
            pass

    with pytest.raises(UserError) as err:
        PPO("CartPole-v1", **TINY).learn(ROLLOUT, out=tmp_path / "run", callback=AtTheEnd())
    assert "after model.learn(" in one_line(err)
    assert not (tmp_path / "run").exists()


def test_step_hooks_on_the_low_data_protocol_are_refused() -> None:
    low = PPO("CartPole-v1", protocol="low_data", low_data_episodes=2, low_data_updates=10,
              low_data_eval_episodes=2, low_data_num_envs=2)
    with pytest.raises(UserError) as err:
        low.learn(callback=sb3_custom_callback(xlvin.BaseCallback)())
    assert "protocol" in one_line(err)


# --- EvalCallback, StopTrainingOnRewardThreshold, CheckpointCallback ------------------------

def test_eval_callback_with_sb3s_arguments(tmp_path: Path, capsys) -> None:
    """`EvalCallback(eval_env, callback_on_new_best, callback_after_eval, n_eval_episodes,
    eval_freq, log_path, best_model_save_path, deterministic, render, verbose, warn)`: every
    eval_freq calls of _on_step (eval_freq x num_envs env steps), evaluations.npz in log_path,
    best_model in best_model_save_path, the children called as SB3 calls them."""

    class CountsCalls(xlvin.BaseCallback):
        def _on_step(self) -> bool:
            assert self.parent is evaluation
            return True

    after = CountsCalls()
    evaluation = xlvin.EvalCallback(
        gym.make("CartPole-v1"), callback_on_new_best=None, callback_after_eval=after,
        n_eval_episodes=2, eval_freq=8, log_path=tmp_path / "logs",
        best_model_save_path=tmp_path / "logs", deterministic=True, render=False, verbose=1,
        warn=True)
    model = PPO("CartPole-v1", seed=0, **TINY)
    model.learn(2 * ROLLOUT, out=tmp_path / "run", callback=evaluation, progress_bar=False)
    timesteps = [16, 32, 48, 64]
    assert [e["num_timesteps"] for e in evaluation.evaluations] == timesteps
    assert after.n_calls == 4 and "new best" in capsys.readouterr().out
    logged = np.load(tmp_path / "logs" / "evaluations.npz")
    assert logged["timesteps"].tolist() == timesteps and logged["results"].shape == (4, 2)
    assert logged["ep_lengths"].shape == (4, 2)
    best = max(evaluation.evaluations, key=lambda e: e["mean"])
    assert evaluation.best_mean_reward == best["mean"]
    assert evaluation.last_mean_reward == evaluation.evaluations[-1]["mean"]
    assert PPO.load(tmp_path / "logs" / "best_model").num_timesteps == best["num_timesteps"]
    assert "eval/mean_reward" in rows(tmp_path / "run")[-1]


def test_stop_training_on_reward_threshold_inside_eval_callback() -> None:
    """SB3's early stop: `EvalCallback(eval_env, callback_on_new_best=
    StopTrainingOnRewardThreshold(reward_threshold=..., verbose=1), eval_freq=...)`."""
    stop = xlvin.StopTrainingOnRewardThreshold(reward_threshold=0.0, verbose=1)
    evaluation = xlvin.EvalCallback(gym.make("CartPole-v1"), callback_on_new_best=stop,
                                    eval_freq=8, n_eval_episodes=2)
    model = PPO("CartPole-v1", seed=0, **TINY)
    model.learn(16 * ROLLOUT, callback=evaluation, progress_bar=False)
    assert len(evaluation.evaluations) == 1 and stop.n_calls == 1
    assert model.num_timesteps == ROLLOUT and model.summary["ppo"]["stopped_by_hooks"]
    alone = xlvin.StopTrainingOnRewardThreshold(reward_threshold=0.0)
    with pytest.raises(UserError) as err:
        PPO("CartPole-v1", **TINY).learn(ROLLOUT, callback=alone, progress_bar=False)
    assert "callback_on_new_best=" in one_line(err)


def test_checkpoint_callback_with_sb3s_arguments(tmp_path: Path) -> None:
    """`CheckpointCallback(save_freq, save_path, name_prefix, save_replay_buffer,
    save_vecnormalize, verbose)`: every save_freq calls of _on_step, the policy that collects
    the rollout, as save_path/<name_prefix>_<num_timesteps>_steps, which `load` reads."""
    saves = xlvin.CheckpointCallback(save_freq=8, save_path=tmp_path / "logs",
                                     name_prefix="rl_model", save_replay_buffer=True,
                                     save_vecnormalize=True, verbose=2)
    model = PPO("CartPole-v1", seed=0, **TINY)
    initial = model.get_parameters()
    model.learn(2 * ROLLOUT, callback=saves, progress_bar=False)
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == [f"rl_model_{n}_steps" for n in (16, 32, 48, 64)]
    first = PPO.load(tmp_path / "logs" / "rl_model_16_steps")
    assert first.num_timesteps == 16
    for name, value in initial["policy"].items():  # the policy that collected rollout 1
        assert first.get_parameters()["policy"][name].equal(value), name


def test_sb3s_callbacks_example_runs_twice(tmp_path: Path) -> None:
    """The callbacks guide's CallbackList example, twice in the same folders: each callback
    replaces its own earlier saves and leaves the others'."""
    for _ in range(2):
        checkpoint_callback = xlvin.CheckpointCallback(save_freq=16, save_path=tmp_path / "logs")
        eval_callback = xlvin.EvalCallback(
            gym.make("CartPole-v1"), best_model_save_path=tmp_path / "logs" / "best_model",
            log_path=tmp_path / "logs" / "results", eval_freq=16, n_eval_episodes=2)
        callback = xlvin.CallbackList([checkpoint_callback, eval_callback])
        PPO("CartPole-v1", **TINY).learn(ROLLOUT, callback=callback, progress_bar=False)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "best_model", "results", "rl_model_32_steps"]


@pytest.mark.parametrize("make, message", [
    (lambda x: x.CheckpointCallback(1000, "./logs/"), "save_freq="),
    (lambda x: x.EvalCallback(gym.make("CartPole-v1"), None, None, 5), "by keyword"),
    (lambda x: x.EvalCallback(eval_freq=10, every=10), "give one"),
    (lambda x: x.EvalCallback(render=True), "render"),
    (lambda x: x.CheckpointCallback(save_freq=0, save_path="logs"), "save_freq"),
])
def test_sb3_callback_arguments_refused_when_made_in_one_line(make, message) -> None:
    with pytest.raises(UserError) as err:
        make(xlvin)
    assert message in one_line(err)


def test_the_sb3_names_are_exported() -> None:
    from xlvin import (  # noqa: F401
        BaseCallback,
        CallbackList,
        CheckpointCallback,
        EvalCallback,
        StopTrainingOnRewardThreshold,
        evaluate_policy,
    )


# --- PPO's hyperparameter names ------------------------------------------------------------

def test_sb3_hyperparameters_are_taken_as_sb3_means_them() -> None:
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=8, n_epochs=3,
                gae_lambda=0.9, clip_range=0.1, clip_range_vf=None, normalize_advantage=False,
                ent_coef=0.02, max_grad_norm=0.7, target_kl=None, num_envs=2)
    ppo = model.config.ppo
    assert (ppo.num_steps, ppo.num_minibatches, ppo.minibatch_size) == (16, 4, 0)
    assert (ppo.update_epochs, ppo.gae_lambda, ppo.clip_coef) == (3, 0.9, 0.1)
    assert ppo.clip_reward == 10.0 and ppo.clip_value_loss is False and ppo.norm_adv is False
    assert (ppo.ent_coef, ppo.max_grad_norm, ppo.target_kl) == (0.02, 0.7, 0.0)
    # a vector env gives num_envs: batch_size divides n_steps x its size
    vec = PPO(gym.make_vec("CartPole-v1", 4), n_steps=8, batch_size=16).config.ppo
    assert (vec.num_envs, vec.num_steps, vec.num_minibatches) == (4, 8, 2)


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 5, "n_steps": 16, "num_envs": 2}, "num_minibatches="),
    ({"batch_size": 8, "num_minibatches": 2}, "give one"),
    ({"clip_range_vf": 0.5}, "clip_value_loss="),
    ({"clip_range": lambda progress: 0.1}, "a schedule is not taken"),
    ({"target_kl": 0.01}, "protocol"),
    ({"n_steps": 16, "num_steps": 8}, "give one"),
])
def test_sb3_hyperparameters_refused_naming_ours(options, message) -> None:
    with pytest.raises(UserError) as err:
        PPO("CartPole-v1", **options)
    assert message in one_line(err) and "did you mean" not in str(err.value)


#: Every argument of SB3's PPO, but for the policy and the env.
SB3_PPO = {"learning_rate": 1e-3, "n_steps": 16, "batch_size": 8, "n_epochs": 2, "gamma": 0.98,
           "gae_lambda": 0.9, "clip_range": 0.1, "clip_range_vf": None,
           "normalize_advantage": True, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
           "use_sde": False, "sde_sample_freq": -1, "rollout_buffer_class": None,
           "rollout_buffer_kwargs": None, "target_kl": None, "stats_window_size": 100,
           "tensorboard_log": "tb", "policy_kwargs": {}, "verbose": 0, "seed": 0,
           "device": "auto", "_init_setup_model": True}


@pytest.mark.parametrize("name", sorted(SB3_PPO))
def test_no_sb3_ppo_argument_gets_a_hint_to_another_option(name: str) -> None:
    try:
        PPO("CartPole-v1", **{name: SB3_PPO[name]})
    except UserError as err:
        assert "did you mean" not in str(err) and "\n" not in str(err)


@pytest.mark.parametrize("typo, right", [("clip_rang", "clip_range"), ("n_epoch", "n_epochs"),
                                         ("normalize_advantages", "normalize_advantage")])
def test_a_typo_of_an_sb3_name_is_told_its_sb3_name(typo: str, right: str) -> None:
    with pytest.raises(UserError, match=rf"did you mean {right}\?"):
        PPO("CartPole-v1", **{typo: 1})


# --- predict: bad input is one clear error --------------------------------------------------

class Rooms(gym.Env):
    """A Dict observation with a Discrete part."""

    observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,), np.float32),
                                         "room": gym.spaces.Discrete(3)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"pos": np.zeros(2, np.float32), "room": 0}, {}

    def step(self, action):
        return {"pos": np.zeros(2, np.float32), "room": 1}, 1.0, True, False, {}


@pytest.mark.parametrize("kind, message", [
    ("reset tuple", "pass the observation alone"),
    ("string", "numbers"),
    ("strings", "numbers"),
])
def test_predict_refuses_what_is_not_an_observation(kind: str, message: str) -> None:
    model = PPO("CartPole-v1", **TINY)
    obs, info = gym.make("CartPole-v1").reset(seed=0)
    given = {"reset tuple": (obs, info), "string": "abc", "strings": ["a", "b", "c", "d"]}
    with pytest.raises(UserError) as err:
        model.predict(given[kind])
    assert message in one_line(err) and "[4]" in str(err.value)


def test_predict_refuses_a_discrete_value_out_of_its_range() -> None:
    rooms = PPO(Rooms, **TINY)
    ok = rooms.predict({"pos": np.zeros(2, np.float32), "room": 2})[0]
    assert int(ok) in (0, 1)
    with pytest.raises(UserError) as err:
        rooms.predict({"pos": np.zeros(2, np.float32), "room": 3})
    assert "room" in one_line(err) and "Discrete(3)" in str(err.value)
    lake = PPO("FrozenLake-v1", **TINY)
    with pytest.raises(UserError) as err:
        lake.predict(np.array([3, 16]))
    assert "Discrete(16)" in one_line(err)
    with pytest.raises(UserError) as err:
        lake.predict(1.5)
    assert "Discrete(16)" in one_line(err)
