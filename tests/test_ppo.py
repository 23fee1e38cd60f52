"""PPO trainer: GAE, the NEXT_STEP autoreset mask, exact episode counts, learning, determinism."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from xlvin.errors import UserError
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.transition import TransitionModel
from xlvin.process import seed_everything
from xlvin.ppo.advantages import compute_gae
from xlvin.ppo.collect import collect_episodes, collect_rollout, make_vector_env, reset_envs
from xlvin.ppo.evaluation import evaluate_policy
from xlvin.ppo.loop import train_ppo
from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update
from xlvin.ppo.storage import Rollout

torch.set_num_threads(1)  # small nets: one thread is fastest and keeps timings stable


class CounterEnv(gym.Env):
    """obs = [c]: reset to c = 1000 * k (k random), every step c += 1 and reward 1.

    A real transition always has next_obs == obs + 1; an autoreset pair never does. The episode
    terminates after `length` steps, or a random 1..`max_length` steps when `length` is None.
    """

    def __init__(self, length: int | None = 3, max_length: int = 6) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.length, self.max_length = length, max_length

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.counter = 1000.0 * int(self.np_random.integers(1, 10_000))
        self.steps = 0
        self.episode_length = self.length or int(self.np_random.integers(1, self.max_length + 1))
        return np.array([self.counter], dtype=np.float32), {}

    def step(self, action):
        self.counter += 1
        self.steps += 1
        obs = np.array([self.counter], dtype=np.float32)
        return obs, 1.0, self.steps >= self.episode_length, False, {}


FIXED = "XlvinTest/Counter3-v0"  # terminates after exactly 3 steps
TRUNCATED = "XlvinTest/CounterTrunc4-v0"  # never terminates, TimeLimit truncates after 4
RANDOM = "XlvinTest/CounterRandom-v0"  # terminates after 1..6 steps
for env_id, kwargs, limit in [
    (FIXED, {"length": 3}, None),
    (TRUNCATED, {"length": 10**9}, 4),
    (RANDOM, {"length": None}, None),
]:
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=CounterEnv, kwargs=kwargs, max_episode_steps=limit)


class RecordingAgent(ActorCritic):
    """Tiny linear actor-critic whose auxiliary loss records every batch it is given."""

    def __init__(self, num_actions: int = 2) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.actor = nn.Linear(1, num_actions)
        self.critic = nn.Linear(1, 1)
        self.batches: list[TransitionBatch] = []

    def forward(self, obs):
        x = obs.float() % 1000 / 10  # position inside the episode
        return self.actor(x), self.critic(x).squeeze(-1)

    def auxiliary_losses(self, batch):
        self.batches.append(batch)
        return {"probe": 0.0 * self.critic.weight.sum() + 0.5}


class BalancingPolicy(ActorCritic):
    """A parameter-free CartPole controller computed row by row, so batching cannot change it."""

    num_actions = 2

    def forward(self, obs):
        push = 10.0 * (obs[:, 2] + obs[:, 3])
        return torch.stack([-push, push], dim=-1), torch.zeros(obs.shape[0])


def collect(env_id: str, num_envs: int, steps: list[int], policy=None) -> list[Rollout]:
    """Consecutive rollouts of `steps[i]` steps on one vector env, seed 0."""
    envs = make_vector_env(env_id, num_envs)
    state = reset_envs(envs, seed=0)
    policy = policy or RecordingAgent()
    generator = torch.Generator().manual_seed(0)
    rollouts = [collect_rollout(envs, policy, t, state, generator) for t in steps]
    envs.close()
    return rollouts


# ---------------------------------------------------------------------------------------------
# GAE


def test_gae_matches_hand_computation_with_termination_truncation_and_autoreset():
    # One env, 7 steps: real, terminated | autoreset | real, truncated | autoreset | real.
    rewards = [1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 5.0]
    values = [0.5, 1.0, 9.0, 0.2, 0.3, 0.7, 0.1, 0.6]  # V(obs[t]); obs[2], obs[5]: final obs
    terminated = [False, True, False, False, False, False, False]
    truncated = [False, False, False, False, True, False, False]
    valid = [True, True, False, True, True, False, True]
    column = lambda xs, dtype: torch.tensor(xs, dtype=dtype).unsqueeze(1)
    rollout = Rollout(
        obs=torch.zeros(8, 1, 1),
        actions=torch.zeros(7, 1, dtype=torch.long),
        logprobs=torch.zeros(7, 1),
        values=column(values, torch.float32),
        rewards=column(rewards, torch.float32),
        terminated=column(terminated, torch.bool),
        truncated=column(truncated, torch.bool),
        valid=column(valid, torch.bool),
    )
    g, lam = 0.9, 0.8
    a6 = 5 + g * 0.6 - 0.1  # runs into the rollout end: bootstrap from values[T]
    a4 = 4 + g * 0.7 - 0.3  # truncated: bootstrap from V(final obs), trace cut
    a3 = (3 + g * 0.3 - 0.2) + g * lam * a4
    a1 = 2 - 1.0  # terminated: no bootstrap (the 9.0 of the final obs is ignored)
    a0 = (1 + g * 1.0 - 0.5) + g * lam * a1
    expected = torch.tensor([a0, a1, 0.0, a3, a4, 0.0, a6]).unsqueeze(1)

    advantages, returns = compute_gae(rollout, g, lam)

    torch.testing.assert_close(advantages, expected)
    expected_returns = (expected + column(values[:-1], torch.float32)) * column(valid, torch.bool)
    torch.testing.assert_close(returns, expected_returns)


# ---------------------------------------------------------------------------------------------
# Rollouts with NEXT_STEP autoreset


def test_valid_mask_is_false_exactly_on_autoreset_steps():
    (rollout,) = collect(FIXED, num_envs=2, steps=[10])
    # Episodes of 3 steps: steps 0-2 real (2 terminates), 3 autoreset, 4-6 real, 7 autoreset, ...
    expected_valid = torch.tensor([t not in (3, 7) for t in range(10)]).unsqueeze(1).expand(10, 2)
    assert torch.equal(rollout.valid, expected_valid)
    expected_done = torch.tensor([t in (2, 6) for t in range(10)]).unsqueeze(1).expand(10, 2)
    assert torch.equal(rollout.terminated, expected_done)
    assert not rollout.truncated.any()
    assert torch.all(rollout.rewards[~rollout.valid] == 0)
    # obs[t + 1] after a done is the true final observation (start + 3), the reset comes after.
    start = rollout.obs[0, :, 0]
    torch.testing.assert_close(rollout.obs[3, :, 0], start + 3)
    assert torch.all(rollout.obs[4, :, 0] % 1000 == 0)
    assert rollout.episode_returns == [3.0] * 4 and rollout.episode_lengths == [3] * 4


def test_truncation_is_recorded_and_masks_the_next_step():
    (rollout,) = collect(TRUNCATED, num_envs=1, steps=[7])
    assert rollout.truncated[:, 0].tolist() == [t == 3 for t in range(7)]
    assert not rollout.terminated.any()
    assert rollout.valid[:, 0].tolist() == [t != 4 for t in range(7)]
    torch.testing.assert_close(rollout.obs[4, 0, 0], rollout.obs[0, 0, 0] + 4)  # final obs


def test_autoreset_step_masked_across_rollout_boundary():
    first, second = collect(FIXED, num_envs=2, steps=[3, 3])
    assert first.terminated[-1].all() and first.valid.all()
    assert second.valid[:, 0].tolist() == [False, True, True]
    torch.testing.assert_close(second.obs[0], first.obs[-1])  # continues where it stopped


def test_auxiliary_losses_get_only_real_transitions_and_are_logged():
    seed_everything(0)
    policy = RecordingAgent()
    (rollout,) = collect(RANDOM, num_envs=3, steps=[40], policy=policy)
    assert (~rollout.valid).sum() > 5  # plenty of autoreset steps to leak
    cfg = PPOConfig(num_envs=3, num_steps=40, update_epochs=2, num_minibatches=3)
    optimizer = make_optimizer(policy, cfg)

    metrics = ppo_update(policy, optimizer, rollout, cfg, torch.Generator().manual_seed(0))

    assert len(policy.batches) == 2 * 3
    seen = torch.cat([b.obs for b in policy.batches])
    assert seen.shape[0] == 2 * int(rollout.valid.sum())  # every real step once per epoch
    for batch in policy.batches:
        torch.testing.assert_close(batch.next_obs, batch.obs + 1)
        assert batch.rewards is not None and torch.all(batch.rewards == 1)  # autoreset has 0
    assert metrics["losses/probe"] == pytest.approx(0.5)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac"):
        assert math.isfinite(metrics[f"losses/{key}"])


@pytest.mark.parametrize("chunk_steps", [2, 128])
@pytest.mark.parametrize("num_envs,num_episodes", [(3, 7), (4, 1), (1, 5)])
def test_collect_episodes_gathers_exactly_n_complete_episodes(chunk_steps, num_envs, num_episodes):
    rollout = collect_episodes(
        RANDOM, RecordingAgent(), num_episodes, seed=0, num_envs=num_envs, chunk_steps=chunk_steps
    )
    done = rollout.terminated | rollout.truncated
    valid = rollout.valid
    assert len(rollout.episode_returns) == num_episodes
    assert int((done & valid).sum()) == num_episodes
    assert int(valid.sum()) == sum(rollout.episode_lengths)
    assert rollout.episode_returns == [float(n) for n in rollout.episode_lengths]  # reward 1/step
    # Each env's valid steps form whole episodes: start at a reset obs, end at a done.
    for j in range(rollout.num_envs):
        steps = torch.nonzero(valid[:, j]).flatten().tolist()
        for t in steps:
            first = t == 0 or not valid[t - 1, j]
            assert not first or rollout.obs[t, j, 0] % 1000 == 0
            last = t + 1 == rollout.num_steps or not valid[t + 1, j]
            assert not last or done[t, j]
        real = rollout.obs[1:, j][valid[:, j]] == rollout.obs[:-1, j][valid[:, j]] + 1
        assert real.all()


def test_collect_episodes_masks_episodes_beyond_the_count():
    rollout = collect_episodes(RANDOM, RecordingAgent(), 2, seed=3, num_envs=4)
    # Only 2 envs are used for 2 episodes (the first two to start: envs 0 and 1, at step 0).
    assert rollout.num_envs == 2
    assert rollout.valid.sum(0).tolist() == rollout.episode_lengths
    # 4 envs, 5 episodes of 3 steps: all 4 start at step 0, all end at step 2, step 3 is the
    # autoreset, and 4 new episodes start at step 4: only env 0's (first by env index) counts.
    rollout = collect_episodes(FIXED, RecordingAgent(), 5, seed=3, num_envs=4)
    assert rollout.num_steps == 7
    expected = torch.zeros(7, 4, dtype=torch.bool)
    expected[0:3] = True
    expected[4:7, 0] = True
    assert torch.equal(rollout.valid, expected)
    assert rollout.episode_lengths == [3] * 5


# ---------------------------------------------------------------------------------------------
# Evaluation


def test_collection_and_evaluation_act_alike_accelerated_and_readable():
    """The NumPy acting snapshot (`accelerate=True`) samples the same actions as the torch
    forward for the same seed, with log pi_old and V_old equal up to float rounding."""
    torch.manual_seed(0)
    policy = PPOAgent(MLPEncoder(4, 16, 8), 8, 2)
    rollouts, evaluations = [], []
    for accelerate in (True, False):
        envs = make_vector_env("CartPole-v1", 2)
        rollouts.append(collect_rollout(envs, policy, 64, reset_envs(envs, 3),
                                        torch.Generator().manual_seed(3), accelerate))
        envs.close()
        evaluations.append(evaluate_policy(policy, "CartPole-v1", 3, seed=5, deterministic=False,
                                           accelerate=accelerate))
    numpy_path, torch_path = rollouts
    assert torch.equal(numpy_path.actions, torch_path.actions)
    torch.testing.assert_close(numpy_path.logprobs, torch_path.logprobs, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(numpy_path.values, torch_path.values, rtol=1e-5, atol=1e-6)
    assert evaluations[0]["returns"] == evaluations[1]["returns"]


class AnglePolicy(ActorCritic):
    """A parameter-free CartPole controller pushing towards the pole's lean alone: it falls
    after 30 to 60 steps, when depends on the episode's start (unlike `BalancingPolicy`)."""

    num_actions = 2

    def forward(self, obs):
        return torch.stack([-obs[:, 2], obs[:, 2]], dim=-1), torch.zeros(obs.shape[0])


@pytest.mark.parametrize("accelerate", [True, False])
def test_evaluate_counts_episodes_and_seeds_each_episode(accelerate: bool):
    policy = AnglePolicy()
    one = evaluate_policy(policy, "CartPole-v1", episodes=5, seed=10, num_envs=1,
                          accelerate=accelerate)
    many = evaluate_policy(policy, "CartPole-v1", episodes=5, seed=10, num_envs=3,
                           accelerate=accelerate)
    assert len(one["returns"]) == len(one["lengths"]) == 5
    # episode i is seeded with 10 + i, whatever the batch: as an evaluation of it alone
    alone = [evaluate_policy(policy, "CartPole-v1", episodes=1, seed=10 + i,
                             accelerate=accelerate)["returns"][0] for i in range(5)]
    assert one["returns"] == many["returns"] == alone
    assert len(set(alone)) == 5  # the seeds are what made them differ
    prefix = evaluate_policy(policy, "CartPole-v1", episodes=2, seed=10, num_envs=2)
    assert prefix["returns"] == one["returns"][:2]
    assert one["mean"] == pytest.approx(np.mean(one["returns"]))

    stochastic = [
        evaluate_policy(policy, "CartPole-v1", 4, seed=0, deterministic=False, num_envs=n)
        for n in (1, 4)
    ]
    assert stochastic[0]["returns"] == stochastic[1]["returns"]


# ---------------------------------------------------------------------------------------------
# Config and the online loop


def test_config_rejects_bad_values_with_one_line():
    with pytest.raises(UserError, match="lr must be > 0") as err:
        PPOConfig(lr=0.0)
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="gamma"):
        PPOConfig(gamma=1.5)
    with pytest.raises(UserError, match="num_minibatches"):
        PPOConfig(num_minibatches=0)


def test_unknown_env_is_a_user_error():
    with pytest.raises(UserError, match="NoSuchEnv"):
        make_vector_env("NoSuchEnv-v0", 2)


def _run(seed: int, total_steps: int) -> tuple[list[tuple[int, dict[str, float]]], ActorCritic]:
    seed_everything(seed)
    policy = PPOAgent(MLPEncoder(4, 64, 50), 50, 2)
    history: list[tuple[int, dict[str, float]]] = []
    cfg = PPOConfig(total_steps=total_steps, num_steps=64)
    train_ppo(policy, "CartPole-v1", cfg, seed, log=lambda s, m: history.append((s, m)),
              progress=False)
    return history, policy


def test_same_seed_gives_identical_metrics_and_weights():
    (first, policy_a), (second, policy_b) = _run(7, 4 * 64 * 3), _run(7, 4 * 64 * 3)
    assert [s for s, _ in first] == [256, 512, 768]
    strip = lambda m: {k: v for k, v in m.items() if k != "charts/sps"}
    assert [strip(m) for _, m in first] == [strip(m) for _, m in second]
    for a, b in zip(policy_a.state_dict().values(), policy_b.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    keys = set(first[-1][1])
    assert {"losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
            "losses/clipfrac", "losses/explained_variance", "charts/learning_rate",
            "charts/sps"} <= keys
    lrs = [m["charts/learning_rate"] for _, m in first]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] == pytest.approx(2.5e-4)
    (third, _) = _run(8, 4 * 64 * 3)
    assert [strip(m) for _, m in third] != [strip(m) for _, m in first]


@pytest.mark.slow
def test_ppo_baseline_learns_cartpole():
    seed_everything(0)
    policy = PPOAgent(MLPEncoder(4, 64, 50), 50, 2)
    random_return = 22.0
    cfg = PPOConfig(total_steps=40_000, lr=1e-3)
    result = train_ppo(policy, "CartPole-v1", cfg, seed=0, progress=False)
    evaluation = evaluate_policy(policy, "CartPole-v1", episodes=10, seed=10_000)
    assert result.env_steps == 40_000 - 40_000 % cfg.batch_size
    assert evaluation["mean"] > 150, (evaluation, random_return)


def test_extreme_policy_change_gives_a_finite_loss_and_nan_stops_training() -> None:
    """A ratio that would overflow float32 is bounded; a NaN loss raises before any step."""
    from xlvin.errors import TrainingDiverged

    class Fixed(ActorCritic):
        def __init__(self, scale: float) -> None:
            super().__init__()
            self.num_actions = 2
            self.w = torch.nn.Parameter(torch.tensor([scale, -scale]))

        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.w.expand(obs.shape[0], 2), obs.sum(-1) * 0 + self.w.sum() * 0

    T = 8
    rollout = Rollout(
        obs=torch.zeros(T + 1, 1, 3), actions=torch.ones(T, 1, dtype=torch.long),
        logprobs=torch.full((T, 1), -200.0), values=torch.zeros(T + 1, 1),
        rewards=torch.linspace(-1, 1, T).view(T, 1), terminated=torch.zeros(T, 1, dtype=torch.bool),
        truncated=torch.zeros(T, 1, dtype=torch.bool), valid=torch.ones(T, 1, dtype=torch.bool),
    )
    policy = Fixed(0.0)
    metrics = ppo_update(policy, make_optimizer(policy, PPOConfig()), rollout, PPOConfig(), torch.Generator().manual_seed(0))
    assert all(math.isfinite(v) for k, v in metrics.items() if k != "losses/explained_variance")
    broken = Fixed(float("nan"))
    with pytest.raises(TrainingDiverged, match="non-finite PPO loss"):
        ppo_update(broken, make_optimizer(broken, PPOConfig()), rollout, PPOConfig(), torch.Generator().manual_seed(0))


def test_minibatches_cover_every_real_transition_once_per_epoch():
    (rollout,) = collect(RANDOM, num_envs=3, steps=[40])
    advantages, returns = compute_gae(rollout, 0.99, 0.95)
    minibatches = list(rollout.minibatches(advantages, returns, 4, torch.Generator().manual_seed(1)))
    n = int(rollout.valid.sum())
    assert len(minibatches) == 4 and sum(len(mb.obs) for mb in minibatches) == n
    assert max(len(mb.obs) for mb in minibatches) - min(len(mb.obs) for mb in minibatches) <= 1
    seen = torch.cat([mb.obs[:, 0] for mb in minibatches]).sort().values
    assert torch.equal(seen, rollout.transitions().obs[:, 0].sort().values)
    for mb in minibatches:  # next observations, targets and old values belong to the same rows
        torch.testing.assert_close(mb.next_obs, mb.obs + 1)
        assert torch.all(mb.rewards == 1)
    by_obs = {float(o): (float(a), float(r)) for o, a, r in zip(
        rollout.obs[:-1][rollout.valid][:, 0], advantages[rollout.valid], returns[rollout.valid])}
    for mb in minibatches:
        for o, a, r in zip(mb.obs[:, 0], mb.advantages, mb.returns):
            assert by_obs[float(o)] == (float(a), float(r))


def make_agent(agent: str) -> ActorCritic:
    """PPO (on the counter env's one number), PPO with a transition model trained by the TransE
    term (on CartPole's four: the counter's huge numbers saturate the encoder), or the
    recording agent."""
    if agent == "recording":
        return RecordingAgent()
    if agent == "ppo-transe":
        return PPOAgent(MLPEncoder(4, 8, 4), 4, 2, TransitionModel(4, 2, 8), transe_weight=0.1)
    return PPOAgent(MLPEncoder(1, 8, 4), 4, 2)


@pytest.mark.parametrize("agent", ["ppo", "ppo-transe", "recording"])
def test_accelerated_update_equals_the_readable_one(agent):
    """Fused loss + flat Adam (accelerate) and ppo_loss + torch.optim.Adam give the same weights
    after an update, up to float rounding; with the TransE term too (its transition model and
    the encoder it shapes)."""
    if agent == "ppo-transe":  # CartPole, played by the untrained agent
        (rollout,) = collect("CartPole-v1", num_envs=3, steps=[40], policy=make_agent(agent))
    else:
        (rollout,) = collect(RANDOM, num_envs=3, steps=[40])
    weights = []
    for accelerate in (True, False):
        torch.manual_seed(0)
        policy = make_agent(agent)
        cfg = PPOConfig(num_envs=3, num_steps=40, update_epochs=2, accelerate=accelerate)
        optimizer = make_optimizer(policy, cfg)
        ppo_update(policy, optimizer, rollout, cfg, torch.Generator().manual_seed(0))
        weights.append([p.detach().clone() for p in policy.parameters()])
    for fast, readable in zip(*weights, strict=True):
        torch.testing.assert_close(fast, readable, rtol=1e-4, atol=1e-5)
    if agent == "ppo-transe":  # the TransE term trained the transition model (no other loss does)
        torch.manual_seed(0)
        initial = make_agent(agent).transition.state_dict()
        moved = policy.transition.state_dict()
        assert all((initial[k] - moved[k]).abs().max() > 1e-4 for k in initial if k.endswith("weight"))
