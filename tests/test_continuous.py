"""PPO on Box and MultiDiscrete actions: the distributions against torch.distributions, clipping
at the env only, shapes, the running normalisation (math, save and load, frozen outside
training), the NumPy actor's equivalence, and learning on a 1-D toy task."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.actor_check import assert_actor_matches
from xlvin import PPO, XLVIN, UserError
from xlvin.accel.numpy_sampling import mode_actions, sample_actions
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.distributions import (
    Categorical,
    DiagGaussian,
    MultiCategorical,
    StateDependentGaussian,
    for_spaces,
)
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.normalization import RunningNorm
from xlvin.ppo.collect import collect_rollout, make_vector_env, reset_envs
from xlvin.ppo.evaluation import evaluate_policy
from xlvin.ppo.loop import OnlineData, scale_rewards, train
from xlvin.ppo.session import Session
from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update
from xlvin.envs.spaces import env_spaces, recorded_spaces, spaces_from_json, spaces_to_json

TOL = dict(rtol=1e-5, atol=1e-5)


class Target(gym.Env):
    """1-D toy task: observe x ~ U(-1, 1), act a in [-2, 2], reward -(a - x)^2; 8 steps. The
    actions the env received are kept in `received`."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Box(-2, 2, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.received = 0, []
        self.x = self.np_random.uniform(-1, 1, 1).astype(np.float32)
        return self.x.copy(), {}

    def step(self, action):
        self.received.append(np.asarray(action).copy())
        reward = -float((np.asarray(action)[0] - self.x[0]) ** 2)
        self.t += 1
        self.x = self.np_random.uniform(-1, 1, 1).astype(np.float32)
        return self.x.copy(), reward, False, self.t >= 8, {}


class Buttons(gym.Env):
    """MultiDiscrete([3, 2]) actions on a flat observation; reward 1 for (2, 1); 4 steps."""

    observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.ones(2, np.float32), float(tuple(action) == (2, 1)), False, self.t >= 4, {}


TARGET, BUTTONS = "xlvin-test/Target-v0", "xlvin-test/Buttons-v0"
gym.register(TARGET, entry_point=Target)
gym.register(BUTTONS, entry_point=Buttons)


def gaussian_policy(norm: bool = True, seed: int = 0) -> PPOAgent:
    torch.manual_seed(seed)
    encoder = MLPEncoder(1, 16, 16)
    return PPOAgent(torch.nn.Sequential(RunningNorm((1,)), encoder) if norm else encoder, 16, 1,
                    distribution=DiagGaussian((-2.0,), (2.0,)))


def test_gaussian_log_prob_and_entropy_match_torch() -> None:
    g = torch.Generator().manual_seed(0)
    mean, log_std = torch.randn(32, 3, generator=g), torch.randn(3, generator=g)
    actions = torch.randn(32, 3, generator=g) * 3
    params = torch.cat([mean, log_std.expand(32, 3)], 1)
    ref = torch.distributions.Normal(mean, log_std.exp())
    dist = DiagGaussian((-1.0,) * 3, (1.0,) * 3)
    torch.testing.assert_close(dist.log_prob(params, actions), ref.log_prob(actions).sum(-1), **TOL)
    torch.testing.assert_close(dist.entropy(params), ref.entropy().sum(-1), **TOL)


def test_multi_categorical_matches_independent_categoricals() -> None:
    g = torch.Generator().manual_seed(1)
    nvec = (3, 2, 4)
    logits = torch.randn(16, sum(nvec), generator=g)
    actions = torch.stack([torch.randint(n, (16,), generator=g) for n in nvec], 1)
    parts = [torch.distributions.Categorical(logits=p) for p in logits.split(nvec, 1)]
    dist = MultiCategorical(nvec)
    expected = sum(c.log_prob(actions[:, k]) for k, c in enumerate(parts))
    torch.testing.assert_close(dist.log_prob(logits, actions), expected, **TOL)
    torch.testing.assert_close(dist.entropy(logits), sum(c.entropy() for c in parts), **TOL)
    sampled = sample_actions(dist, logits.numpy(), dist.noise((16,), g))
    assert sampled.shape == (16, 3) and sampled.dtype == np.int64
    assert all((sampled[:, k] >= 0).all() and (sampled[:, k] < n).all() for k, n in enumerate(nvec))
    np.testing.assert_array_equal(mode_actions(dist, logits.numpy()),
                                  torch.stack([p.argmax(1) for p in logits.split(nvec, 1)], 1))


def test_gaussian_samples_have_the_distributions_moments() -> None:
    dist = DiagGaussian((-9.0, -9.0), (9.0, 9.0))
    params = np.array([[1.0, -2.0, np.log(0.5), np.log(2.0)]], np.float32).repeat(20000, 0)
    samples = sample_actions(dist, params, dist.noise((20000,), torch.Generator().manual_seed(0)))
    np.testing.assert_allclose(samples.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [0.5, 2.0], rtol=0.03)


def sde_policy(seed: int = 0, sample_freq: int = 4) -> PPOAgent:
    """A gSDE policy on Target with a separate tanh critic, as the Pendulum preset builds it."""
    torch.manual_seed(seed)
    return PPOAgent(MLPEncoder(1, 8, 16, "tanh"), 16, 1,
                    distribution=StateDependentGaussian((-2.0,), (2.0,), 16, sample_freq),
                    critic_encoder=MLPEncoder(1, 8, 16, "tanh"))


def test_sde_law_is_the_gaussian_that_log_prob_reads() -> None:
    """One step's gSDE action mu + sum_l z_l sigma_l eps_l is N(mu, sum_l z_l^2 sigma_l^2): the
    samples' moments are those of the Gaussian whose log-probability and entropy PPO uses."""
    policy = sde_policy()
    with torch.no_grad():
        policy.heads.log_std.copy_(torch.linspace(-2, 0.5, 16)[:, None])
        params, _ = policy(torch.full((20000, 1), 0.3))
        z = policy.encoder(torch.tensor([[0.3]]))
        expected_std = (z.square() @ policy.heads.log_std.exp().square() + 1e-6).sqrt()
    dist = policy.distribution
    mean, log_std = params[:, :1], params[:, 1:2]
    torch.testing.assert_close(log_std[:1].exp(), expected_std, **TOL)
    samples = sample_actions(dist, params.numpy(),
                             dist.noise((20000,), torch.Generator().manual_seed(0)))
    np.testing.assert_allclose(samples.mean(0), mean[0].numpy(), atol=0.03 * expected_std.item())
    np.testing.assert_allclose(samples.std(0), expected_std[0].numpy(), rtol=0.03)
    actions = torch.from_numpy(samples[:64])
    ref = torch.distributions.Normal(mean[:64], log_std[:64].exp())
    torch.testing.assert_close(dist.log_prob(params[:64], actions), ref.log_prob(actions).sum(-1),
                               **TOL)
    torch.testing.assert_close(dist.entropy(params[:64]), ref.entropy().sum(-1), **TOL)


def test_sde_noise_is_held_for_sample_freq_steps_and_drives_the_rollout() -> None:
    dist = StateDependentGaussian((-2.0,), (2.0,), 16, sample_freq=4)
    noise = dist.noise((10, 3), torch.Generator().manual_seed(0))  # [T, N, L, d]
    assert noise.shape == (10, 3, 16, 1)
    for start in (0, 4, 8):
        block = noise[start:start + 4]
        assert (block == block[:1]).all()  # held within a block
    assert not (noise[0] == noise[4]).all() and not (noise[0, 0] == noise[0, 1]).all()
    once = StateDependentGaussian((-2.0,), (2.0,), 16, sample_freq=-1)
    held = once.noise((10, 3), torch.Generator().manual_seed(1))
    assert (held == held[:1]).all()  # -1: one matrix per env for the whole rollout
    policy = sde_policy()
    envs = make_vector_env(TARGET, 2)
    rollout = collect_rollout(envs, policy, 8, reset_envs(envs, 0), torch.Generator().manual_seed(0))
    envs.close()
    with torch.no_grad():  # [T, N, P]: the parameters each action was drawn from
        params = policy(rollout.obs[:-1].flatten(0, 1))[0].view(8, 2, -1).numpy()
    assert params.shape == (8, 2, 2 + 16)
    redrawn = dist.noise((8, 2), torch.Generator().manual_seed(0))
    for t in range(8):
        np.testing.assert_allclose(rollout.actions[t].numpy(),
                                   sample_actions(dist, params[t], redrawn[t]), **TOL)


def test_separate_critic_keeps_the_value_loss_out_of_the_actor() -> None:
    """With a critic encoder of its own, the actor's encoder gets no gradient from V and the
    critic's none from pi; the NumPy actor computes the same (tanh, gSDE and all)."""
    policy = sde_policy()
    obs = torch.randn(32, 1)
    params, values = policy(obs)
    values.sum().backward()
    assert all(p.grad is None for p in policy.encoder.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0
               for p in policy.critic_encoder.parameters())
    policy.zero_grad(set_to_none=True)
    policy(obs)[0][:, 0].sum().backward()
    assert all(p.grad is None for p in policy.critic_encoder.parameters())
    assert_actor_matches(policy, obs.numpy(), **TOL)


def test_sde_options_reach_the_policy_and_are_checked(tmp_path: Path) -> None:
    model = PPO(TARGET, use_sde=True, sde_sample_freq=2, separate_critic=True, activation="tanh",
                num_envs=2, num_steps=16, seed=0)
    model.learn(64, out=tmp_path / "run", progress=False)
    policy = model.policy
    assert isinstance(policy.distribution, StateDependentGaussian)
    assert policy.distribution.sample_freq == 2 and policy.critic_encoder is not None
    assert isinstance(policy.encoder[1].net[1], torch.nn.Tanh)  # behind the default RunningNorm
    loaded = PPO.load(tmp_path / "run")
    assert isinstance(loaded.policy.distribution, StateDependentGaussian)
    with pytest.raises(UserError, match="use.sde explores Box actions; CartPole-v1 has discrete"):
        PPO("CartPole-v1", use_sde=True).learn(64, out=tmp_path / "bad", progress=False)
    with pytest.raises(UserError, match="sde_sample_freq"):
        PPO(TARGET, sde_sample_freq=0)
    with pytest.raises(UserError, match="separate.critic is an option of .*ppo"):
        XLVIN("CartPole-v1", separate_critic=True).learn(64, out=tmp_path / "bad2",
                                                          progress=False)


def test_box_actions_are_stored_unclipped_and_clipped_at_the_env() -> None:
    policy = gaussian_policy(norm=False)
    with torch.no_grad():
        policy.heads.log_std.fill_(2.0)  # sigma 7.4: most samples fall outside [-2, 2]
    envs = make_vector_env(TARGET, 2)
    rollout = collect_rollout(envs, policy, 8, reset_envs(envs, 0), torch.Generator().manual_seed(0))
    received = np.stack([np.stack(e.unwrapped.received) for e in envs.unwrapped.envs], 1)
    envs.close()
    stored = rollout.actions.numpy()  # [T, N, 1]
    assert stored.shape == (8, 2, 1) and np.abs(stored).max() > 2
    np.testing.assert_array_equal(received, np.clip(stored, -2, 2))
    with torch.no_grad():
        mean = policy(rollout.obs[:-1].flatten(0, 1))[0][:, :1]
    ref = torch.distributions.Normal(mean, np.exp(2.0)).log_prob(rollout.actions.flatten(0, 1))
    torch.testing.assert_close(rollout.logprobs.flatten(), ref.sum(-1), **TOL)  # unclipped


def test_multi_discrete_rollout_and_update_shapes() -> None:
    spaces = env_spaces(BUTTONS)
    assert (spaces.action_kind, spaces.num_actions, spaces.action_nvec) == ("multi_discrete", 5, (3, 2))
    assert spaces_from_json(spaces_to_json(spaces), "test") == spaces
    torch.manual_seed(0)
    policy = PPOAgent(MLPEncoder(2, 8, 8), 8, 5, distribution=for_spaces(spaces))
    cfg = PPOConfig(num_envs=2, num_steps=8, num_minibatches=2, update_epochs=1)
    envs = make_vector_env(BUTTONS, 2)
    rollout = collect_rollout(envs, policy, 8, reset_envs(envs, 0), torch.Generator().manual_seed(0))
    envs.close()
    assert rollout.actions.shape == (8, 2, 2) and rollout.logprobs.shape == (8, 2)
    metrics = ppo_update(policy, make_optimizer(policy, cfg), rollout, cfg)
    assert np.isfinite(metrics["losses/entropy"]) and metrics["losses/entropy"] > 0


def test_box_spaces_round_trip_and_are_checked() -> None:
    spaces = env_spaces("Pendulum-v1")
    assert (spaces.action_kind, spaces.num_actions) == ("box", 1)
    assert spaces.action_low == (-2.0,) and spaces.action_high == (2.0,)
    assert spaces_from_json(spaces_to_json(spaces), "test") == spaces
    bad = {**spaces_to_json(spaces), "action_low": [-2.0, 0.0]}
    with pytest.raises(UserError, match="spaces.action_kind must be"):
        spaces_from_json(bad, "test")
    assert "action_kind" not in spaces_to_json(env_spaces("CartPole-v1"))  # as before


def test_recorded_spaces_rebuild_every_action_space() -> None:
    """A loaded model whose env cannot be made shows the spaces its run recorded (MultiDiscrete
    ones were shown as an empty Box before)."""
    for env_id in ("CartPole-v1", BUTTONS, "Pendulum-v1"):
        env = gym.make(env_id)
        observation, action = recorded_spaces(env_spaces(env_id))
        assert action == env.action_space and observation.shape == env.observation_space.shape


def test_running_norm_merges_batches_like_the_whole() -> None:
    rng = np.random.default_rng(0)
    norm = RunningNorm((3,))
    batches = [rng.normal(2.0, 3.0, (n, 3)) for n in (5, 40, 1, 200)]
    for batch in batches:
        norm.update(torch.from_numpy(batch))
    whole = np.concatenate(batches)
    count = 1e-4 + len(whole)
    # the initial (mean 0, var 1, count 1e-4) is one more, tiny, sample of the merge
    mean = whole.sum(0) / count
    var = (whole.var(0) * len(whole) + 1e-4 + (whole.mean(0)) ** 2 * 1e-4 * len(whole) / count) / count
    np.testing.assert_allclose(norm.mean.numpy(), mean, rtol=1e-9)
    np.testing.assert_allclose(norm.var.numpy(), var, rtol=1e-9)
    x = torch.from_numpy(whole[:4])
    expected = np.clip((whole[:4] - mean) / np.sqrt(var + 1e-8), -10, 10)
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-5)
    clipped = RunningNorm((1,), clip=0.5)
    assert clipped(torch.tensor([[3.0], [-3.0]])).tolist() == [[0.5], [-0.5]]


def test_reward_scaling_follows_the_discounted_return() -> None:
    envs = make_vector_env(TARGET, 2)
    rollout = collect_rollout(envs, gaussian_policy(norm=False), 20, reset_envs(envs, 0),
                              torch.Generator().manual_seed(0))
    envs.close()
    raw = rollout.rewards.numpy().copy()
    valid = rollout.valid.numpy()
    done = (rollout.terminated | rollout.truncated).numpy()
    stats, returns = RunningNorm(()), np.zeros(2)
    scale_rewards(rollout, returns, stats, 0.9)
    ret, seen = np.zeros(2), []
    for t in range(20):  # the same by hand, in float64
        ret[valid[t]] = ret[valid[t]] * 0.9 + raw[t][valid[t]]
        seen += list(ret[valid[t]])
        count = 1e-4 + len(seen)
        var = (np.var(seen) * len(seen) + 1e-4 + np.mean(seen) ** 2 * 1e-4 * len(seen) / count) / count
        np.testing.assert_allclose(rollout.rewards.numpy()[t], raw[t] / np.sqrt(var + 1e-8), rtol=1e-5)
        ret[done[t]] = 0.0
    np.testing.assert_allclose(returns, ret)


def test_numpy_actor_matches_the_policy_with_normalisation_and_log_std() -> None:
    policy = gaussian_policy()
    policy.encoder[0].update(torch.randn(64, 1) * 3 + 1)
    with torch.no_grad():
        policy.heads.log_std.fill_(-0.7)
    assert_actor_matches(policy, np.random.default_rng(0).normal(size=(5, 1)).astype(np.float32),
                         **TOL)


def test_ppo_learns_the_toy_task() -> None:
    """2,048 steps take the greedy return from about -2.4 (the initial mean action 0) to near 0."""
    policy = gaussian_policy()
    cfg = PPOConfig(num_envs=4, num_steps=64, total_steps=2048, lr=3e-3, ent_coef=0.0)
    before = evaluate_policy(policy, TARGET, 20, 1000)["mean"]
    train(policy, OnlineData(TARGET, cfg, 0), cfg, 0, Session(progress=False))
    after = evaluate_policy(policy, TARGET, 20, 1000)["mean"]
    assert before < -1.5 and after > -0.6, (before, after)
    assert policy.encoder[0].count.item() > 1800  # every real transition's observation (8 of 9 steps)


def test_pendulum_from_the_api_saves_and_applies_frozen_statistics(tmp_path: Path) -> None:
    model = PPO("Pendulum-v1", seed=0, num_envs=2, num_steps=64)
    model.learn(256, out=tmp_path / "run", progress=False)
    norm = model.policy.encoder[0]
    assert isinstance(norm, RunningNorm) and norm.count.item() > 256  # on by default for Box
    obs = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, -8.0]], np.float32)
    actions, values = model.predict(obs, deterministic=True)[0], model.predict_values(obs)
    assert actions.shape == (2, 1) and (np.abs(actions) <= 2).all()
    loaded = PPO.load(tmp_path / "run")
    assert torch.equal(loaded.policy.encoder[0].mean, norm.mean)
    again, values_again = loaded.predict(obs, deterministic=True)[0], loaded.predict_values(obs)
    np.testing.assert_allclose(again, actions, **TOL)
    np.testing.assert_allclose(values_again, values, **TOL)
    count = norm.count.item()
    first = loaded.evaluate(episodes=2)
    assert loaded.policy.encoder[0].count.item() == count  # frozen outside training
    assert loaded.evaluate(episodes=2)["returns"] == first["returns"]


def test_ppo_transe_on_unbinned_box_actions_is_one_line() -> None:
    with pytest.raises(UserError, match="Box actions; ppo_transe needs them binned: add "
                                        "action_bins B"):
        PPO("Pendulum-v1", ppo_transe=True)
