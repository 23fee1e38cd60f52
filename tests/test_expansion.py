"""XLVIN over binned and sampled actions: the bin -> env action mapping, joint actions as
concatenated one-hots, what each expansion method draws, tree shapes, seeding, one clear error
per bad combination, and learning on a 1-D toy task with binned actions."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.actor_check import assert_actor_matches
from xlvin import XLVIN, UserError
from xlvin.accel.numpy_actor import make_actor
from xlvin.accel.numpy_sampling import env_actions
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.distributions import BinnedCategorical
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.executor import MessagePassing
from xlvin.nn.expansion import Expansion, expand_sampled_tree
from xlvin.nn.transition import TransitionModel, joint_actions, one_hots
from xlvin.pretrain.random_data import random_transitions
from xlvin.ppo.evaluation import evaluate_policy
from xlvin.ppo.loop import OnlineData, train
from xlvin.ppo.session import Session
from xlvin.ppo.update import PPOConfig
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_run

TOL = dict(rtol=1e-5, atol=1e-5)


class Target(gym.Env):
    """1-D toy task: observe x ~ U(-1, 1), act a in [-2, 2], reward -(a - x)^2; 8 steps. Every
    action any instance received is appended to `received`."""

    received: list[float] = []
    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Box(-2, 2, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.x = self.np_random.uniform(-1, 1, 1).astype(np.float32)
        return self.x.copy(), {}

    def step(self, action):
        Target.received.append(float(np.asarray(action)[0]))
        reward = -float((np.asarray(action)[0] - self.x[0]) ** 2)
        self.t += 1
        self.x = self.np_random.uniform(-1, 1, 1).astype(np.float32)
        return self.x.copy(), reward, False, self.t >= 8, {}


class Arm(gym.Env):
    """Six Box action dimensions (only their number matters here)."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (6,), np.float32)


TARGET, ARM = "xlvin-test/BinTarget-v0", "xlvin-test/Arm-v0"
gym.register(TARGET, entry_point=Target)
gym.register(ARM, entry_point=Arm)


def test_bins_map_to_evenly_spaced_centres_from_low_to_high() -> None:
    dist = BinnedCategorical((-2.0, 0.0), (2.0, 1.0), 5)
    actions = np.array([[0, 0], [1, 2], [4, 4]])
    expected = np.array([[-2.0, 0.0], [-1.0, 0.5], [2.0, 1.0]], np.float32)
    np.testing.assert_allclose(env_actions(dist, actions), expected, **TOL)
    assert env_actions(dist, actions).dtype == np.float32
    assert dist.nvec == (5, 5) and dist.num_params == 10 and dist.action_shape == (2,)


def test_a_joint_action_is_its_factors_one_hots() -> None:
    """T(h, a) reads [h, one-hot(a_1), .., one-hot(a_d)]; successors enumerates the joint
    actions in `joint_actions` order; one factor of B is Discrete(B) with the same weights."""
    torch.manual_seed(0)
    model = TransitionModel(4, (3, 2), 8)
    h = torch.randn(5, 4)
    a = torch.tensor([[2, 1], [0, 0], [1, 1], [2, 0], [0, 1]])
    inputs = torch.cat([h, one_hots(a, (3, 2))], -1)
    assert inputs[0, 4:].tolist() == [0, 0, 1, 0, 1]
    torch.testing.assert_close(model(h, a), model.rest(model.first(inputs)))
    table = joint_actions((3, 2))
    assert table.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]
    expected = torch.stack([model.next_embedding(h, row.expand(5, 2)) for row in table], 1)
    torch.testing.assert_close(model.successors(h), expected, **TOL)
    single, discrete = TransitionModel(4, (5,), 8), TransitionModel(4, 5, 8)
    discrete.load_state_dict(single.state_dict())
    b = torch.tensor([0, 3, 4, 1, 2])
    torch.testing.assert_close(single(h, b[:, None]), discrete(h, b))


def fixed_policy(logits: torch.Tensor):
    """A rollout policy that gives node i the logits row i, whatever its embedding."""
    return lambda nodes: logits[: len(nodes)]


def test_uniform_expansion_covers_every_bin_evenly() -> None:
    torch.manual_seed(0)
    actions = Expansion("uniform", 3000, (5, 3)).choose(torch.zeros(2, 4), None)
    assert actions.shape == (6000, 2) and actions.dtype == torch.long
    for j, n in enumerate((5, 3)):
        freq = torch.bincount(actions[:, j], minlength=n).float() / len(actions)
        assert len(freq) == n
        torch.testing.assert_close(freq, torch.full((n,), 1 / n), atol=0.02, rtol=0)


def test_gaussian_expansion_is_centred_at_the_greedy_bins() -> None:
    """Node i's draws have their median at its greedy bin per dimension, spread over s = B / 4
    bins, all inside [0, B - 1]."""
    torch.manual_seed(0)
    logits = torch.full((2, 22), -5.0)
    centres = [(3, 8), (10, 5)]
    for i, (c1, c2) in enumerate(centres):
        logits[i, c1], logits[i, 11 + c2] = 5.0, 5.0
    actions = Expansion("gaussian", 4000, (11, 11)).choose(torch.zeros(2, 4),
                                                          fixed_policy(logits))
    draws = actions.view(2, 4000, 2)
    assert draws.min() >= 0 and draws.max() <= 10
    assert draws.median(dim=1).values.tolist() == [list(c) for c in centres]
    assert (draws.float().std(dim=1) > 1.5).all()


def test_policy_expansion_follows_the_rollout_policys_probabilities() -> None:
    torch.manual_seed(0)
    probs = torch.tensor([[0.7, 0.2, 0.1, 0.0, 0.7, 0.3]])  # factors of 4 and 2
    logits = torch.log(probs)
    actions = Expansion("policy", 6000, (4, 2)).choose(torch.zeros(1, 4), fixed_policy(logits))
    first = torch.bincount(actions[:, 0], minlength=4).float() / 6000
    second = torch.bincount(actions[:, 1], minlength=2).float() / 6000
    torch.testing.assert_close(first, probs[0, :4], atol=0.02, rtol=0)
    torch.testing.assert_close(second, probs[0, 4:], atol=0.02, rtol=0)
    assert first[3] == 0  # a bin of probability 0 is never drawn


def binned_agent(method: str = "uniform", samples: int = 3, depth: int = 2,
                 nvec: tuple[int, ...] = (5, 4)) -> XLVINAgent:
    torch.manual_seed(0)
    return XLVINAgent(MLPEncoder(3, 16, 8), 8, sum(nvec), TransitionModel(8, nvec, 16),
                      MessagePassing(8), depth=depth,
                      distribution=BinnedCategorical((-1.0,) * len(nvec), (1.0,) * len(nvec),
                                                     nvec[0]),
                      expansion=Expansion(method, samples, nvec))


def test_sampled_tree_shapes_and_children() -> None:
    """Every node has N children, h' = h + T(h, a) for its drawn joint action; the agent's
    parameters are the d factors' logits."""
    agent = binned_agent(nvec=(5, 5))
    h = agent.encoder(torch.randn(4, 3))
    torch.manual_seed(1)
    levels, actions = expand_sampled_tree(h, agent.transition, agent.expansion, None, 2)
    assert [tuple(level.shape) for level in levels] == [(4, 8), (12, 8), (36, 8)]
    assert [tuple(a.shape) for a in actions] == [(12, 2), (36, 2)]
    for parents, children, taken in zip(levels, levels[1:], actions):
        expected = agent.transition.next_embedding(parents.repeat_interleave(3, 0), taken)
        torch.testing.assert_close(children, expected)
    params, values = agent(torch.randn(4, 3))
    assert params.shape == (4, 10) and values.shape == (4,)


@pytest.mark.parametrize("method", ["uniform", "gaussian", "policy"])
def test_same_seed_same_tree_and_every_pass_draws_afresh(method: str) -> None:
    """The draws come from torch's global generator: reseeded, a forward pass repeats exactly;
    two passes in a row (acting, then the update) grow different trees."""
    agent, obs = binned_agent(method), torch.randn(6, 3)
    torch.manual_seed(3)
    first = agent(obs)[0]
    second = agent(obs)[0]
    torch.manual_seed(3)
    assert torch.equal(agent(obs)[0], first)
    assert not torch.equal(first, second)
    if method != "uniform":  # the learned methods read a distilled rollout policy
        assert agent.rollout_policy is not None


def test_large_discrete_action_spaces_expand_sampled_actions() -> None:
    """Discrete(18) at depth 2: 4 of the 18 actions per node, not 18^2 leaves."""
    torch.manual_seed(0)
    agent = XLVINAgent(MLPEncoder(3, 16, 8), 8, 18, TransitionModel(8, 18, 16),
                       MessagePassing(8), depth=2, expansion=Expansion("policy", 4, (18,)))
    h = agent.encoder(torch.randn(2, 3))
    levels, actions = expand_sampled_tree(h, agent.transition, agent.expansion,
                                          agent.rollout_policy, 2)
    assert [len(level) for level in levels] == [2, 8, 32]
    assert actions[1].shape == (32, 1) and actions[1].max() < 18
    assert agent(torch.randn(2, 3))[0].shape == (2, 18)


def run_config(**train: object) -> RunConfig:
    return RunConfig(train=TrainConfig(**train))  # type: ignore[arg-type]


def test_xlvin_on_box_actions_bins_them_by_default() -> None:
    """Pendulum: 11 bins, every one expanded; a 6-dim Box: 11^6 joint actions, so 8 sampled
    uniformly per node; Discrete actions keep the full tree unless asked; PPO keeps its
    Gaussian unless asked for bins."""
    model = XLVIN("Pendulum-v1")
    actions, _ = model.predict(np.zeros(3, np.float32), deterministic=True)
    assert actions.shape == (1,) and -2 <= actions[0] <= 2
    policy = model.policy
    assert isinstance(policy.distribution, BinnedCategorical) and policy.distribution.bins == 11
    assert policy.expansion is None and policy.transition.nvec == (11,)
    _, arch = check_run(run_config(env=ARM, agent="xlvin-r"))
    assert (arch.action_bins, arch.expansion, arch.expand) == (11, "uniform", 8)
    _, arch = check_run(run_config(env="CartPole-v1"))
    assert (arch.action_bins, arch.expansion, arch.expand, arch.tree_nodes) == (0, "all", 0, 7)
    _, arch = check_run(run_config(env="CartPole-v1", expansion="policy", expand=1, depth=3))
    assert (arch.expansion, arch.expand, arch.tree_nodes) == ("policy", 1, 4)
    _, arch = check_run(run_config(env="Pendulum-v1", agent="ppo"))
    assert arch.action_bins == 0
    _, arch = check_run(run_config(env="Pendulum-v1", agent="ppo", action_bins=7))
    assert arch.action_bins == 7


ERRORS = {
    "one bin": (dict(env="Pendulum-v1", action_bins=1),
                "--action-bins must be >= 2 (or 0: the preset), got 1"),
    "bins of a Discrete env": (dict(env="CartPole-v1", action_bins=5),
                               "--action-bins 5 bins Box actions; CartPole-v1 has discrete actions"),
    "more samples than joint actions": (
        dict(env="Pendulum-v1", action_bins=5, expand=6),
        "--expand 6 is more than the 5 bins ^ 1 dimensions = 5 joint actions of Pendulum-v1"),
    "too many joint actions to expand all": (
        dict(env=ARM, action_bins=40, expansion="all"),
        "--depth 2 with 4096000000 (40 bins ^ 6 dimensions, all expanded: sample some with "
        "--expand N) actions builds more than"),
    "gaussian on Discrete actions": (
        dict(env="CartPole-v1", expansion="gaussian"),
        "--expansion gaussian draws around ordered bins of Box actions; CartPole-v1 has discrete "
        "actions: use uniform or policy"),
    "samples with all": (dict(env="Pendulum-v1", expansion="all", expand=4),
                         "--expand 4 draws actions for a sampled --expansion"),
    "expansion of ppo": (dict(env="Pendulum-v1", agent="ppo", expand=4),
                         "--expand and --expansion apply to --agent xlvin only"),
    "prune and a sampled expansion": (dict(env="CartPole-v1", prune=1, expansion="uniform"),
                                      "--prune and --expansion uniform both choose"),
    "atreec on Box actions": (dict(env="Pendulum-v1", agent="atreec"),
                              "--agent atreec needs Discrete actions (use --agent ppo or xlvin)"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_bad_combinations_are_one_line_errors(case: str) -> None:
    train, message = ERRORS[case]
    with pytest.raises(UserError) as caught:
        check_run(run_config(**train))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_xlvin_with_binned_actions_learns_the_toy_task() -> None:
    """XLVIN over 9 bins, expanding 3 sampled per node at depth 1, beats the uniformly random
    policy (return about -16) by far within 2,048 steps: its greedy return nears the best the
    bins allow (about -0.2)."""
    torch.manual_seed(0)
    agent = XLVINAgent(MLPEncoder(1, 16, 16), 16, 9, TransitionModel(16, (9,), 16),
                       MessagePassing(16), depth=1,
                       distribution=BinnedCategorical((-2.0,), (2.0,), 9),
                       expansion=Expansion("uniform", 3, (9,)))
    cfg = PPOConfig(num_envs=4, num_steps=64, total_steps=2048, lr=3e-3, ent_coef=0.0)
    before = evaluate_policy(agent, TARGET, 20, 1000, deterministic=False)["mean"]
    train(agent, OnlineData(TARGET, cfg, 0), cfg, 0, Session(progress=False))
    after = evaluate_policy(agent, TARGET, 20, 1000, deterministic=False)["mean"]
    greedy = evaluate_policy(agent, TARGET, 20, 1000)["mean"]
    assert before < -12 and after > -8 and greedy > -1.5, (before, after, greedy)


def test_continuing_a_run_that_draws_its_trees_is_exact(tmp_path) -> None:
    """learn(64) twice gives the weights of learn(128): the draws come from the generator the
    run's checkpoint saves and restores."""
    kw = dict(num_envs=2, num_steps=32, anneal_lr=False, pretrain_transe=False,
              expansion="policy", expand=3)
    whole = XLVIN("Pendulum-v1", total_steps=128, **kw)
    whole.learn(out=tmp_path / "whole")
    halves = XLVIN("Pendulum-v1", total_steps=64, **kw)
    halves.learn(out=tmp_path / "halves")
    halves.learn(64)
    expected = whole.policy.state_dict()
    for name, tensor in halves.policy.state_dict().items():
        assert torch.equal(tensor, expected[name]), name


def test_numpy_actor_matches_a_full_tree_over_joint_actions() -> None:
    """Every one of 3 x 2 joint actions expanded at depth 2: the NumPy actor's parameters and
    values equal the policy's up to float rounding."""
    torch.manual_seed(0)
    policy = XLVINAgent(MLPEncoder(3, 16, 8), 8, 5, TransitionModel(8, (3, 2), 16),
                        MessagePassing(8), depth=2)
    assert policy.edge_input.shape == (6, 6)
    assert_actor_matches(policy, np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32),
                         **TOL)
    assert make_actor(binned_agent()) is None  # sampled trees act in torch


def test_transe_random_data_draws_bins_and_steps_with_their_centres() -> None:
    """With bins, TransE's random data holds bin indices [N, d] drawn uniformly; the env
    receives their centres."""
    Target.received.clear()
    data = random_transitions(TARGET, 40, seed=0, action_bins=5)
    assert data.actions.dtype == torch.long and data.actions.shape == (320, 1)
    counts = torch.bincount(data.actions[:, 0], minlength=5)
    assert len(counts) == 5 and counts.min() > 40
    np.testing.assert_allclose(Target.received, (data.actions[:, 0] - 2).tolist(), **TOL)
