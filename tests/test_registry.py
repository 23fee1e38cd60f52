"""One place builds every agent: the registry (`xlvin.run.agents`), the architecture derived
once from the config (`xlvin.run.architecture.architecture`), and the discount reaching every
agent that uses it."""

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from xlvin import PPO, Model, UserError, build_encoder, register_agent
from xlvin.cli import build_parser, main
from xlvin.commands.train import run_config
from xlvin.io.weights import read_metadata as load_file_metadata
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic
from xlvin.run.agents import AGENTS, BUILT_IN_ENCODERS, ENCODERS, register_encoder
from xlvin.run.training import load_run


def cli_model(*flags: str) -> Model:
    """The model `xlvin train FLAGS` trains (built, not trained)."""
    args = build_parser().parse_args(["train", "--out", "unused", *flags])
    return Model.from_config(run_config(args))


@pytest.mark.parametrize("gamma", [0.9, 0.5])
def test_gamma_reaches_the_xlvin_edge_features(gamma: float, executor_path: Path) -> None:
    """XLVIN's edge feature of action a is Linear([one-hot(a), gamma]) (paper 3.2): --gamma
    changes it, and only through its gamma column."""
    flags = ["--agent", "xlvin", "--executor", str(executor_path), "--seed", "0"]
    default, changed = cli_model(*flags), cli_model(*flags, "--gamma", str(gamma))
    assert changed.architecture.gamma == gamma and default.architecture.gamma == 0.99
    a, b = default._policy(), changed._policy()
    assert torch.equal(a.edge_input[:, :-1], b.edge_input[:, :-1])
    assert torch.all(b.edge_input[:, -1] == gamma) and torch.all(a.edge_input[:, -1] == 0.99)
    b.load_state_dict(a.state_dict())  # the same weights: only gamma differs
    with torch.no_grad():
        delta = b.edge_features() - a.edge_features()  # [A, H]
        expected = (gamma - 0.99) * b.edge_projection.weight[:, -1]  # the gamma column's share
        torch.testing.assert_close(delta, expected.expand_as(delta), rtol=1e-5, atol=1e-6)
        obs = torch.randn(8, 4)
        assert not torch.allclose(a(obs)[0], b(obs)[0])


def test_gamma_reaches_the_atreec_backup() -> None:
    """ATreeC at depth 1: Q(x, a) = r(x, a) + gamma V(x'_a) (TreeQN eq. 5), with --gamma's
    gamma."""
    default = cli_model("--agent", "atreec", "--depth", "1")
    changed = cli_model("--agent", "atreec", "--depth", "1", "--gamma", "0.9")
    a, b = default._policy(), changed._policy()
    assert (a.gamma, b.gamma) == (0.99, 0.9)
    b.load_state_dict(a.state_dict())
    x = nn.functional.normalize(torch.randn(6, a.value.in_features), dim=-1)
    with torch.no_grad():
        reward = a.reward(x)  # [B, A]
        ratio = (b.q_values(x) - reward) / (a.q_values(x) - reward)
    torch.testing.assert_close(ratio, torch.full_like(ratio, 0.9 / 0.99))


class LinearAgent(ActorCritic):
    """A user's agent: the registered encoder, then the actor and critic heads."""

    def __init__(self, encoder: nn.Module, k: int, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.encoder = encoder
        self.heads = ActorCriticHeads(k, num_actions)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.heads(self.encoder(obs))


def build_encoder_a(arch, spaces):
    return BUILT_IN_ENCODERS["flat"](arch, spaces)


def build_encoder_b(arch, spaces):
    return BUILT_IN_ENCODERS["flat"](arch, spaces)


def build_linear(arch, spaces, processor) -> ActorCritic:
    return LinearAgent(build_encoder(arch, spaces), arch.embedding_dim, spaces.num_actions)


def test_a_registered_agent_trains_from_python_and_the_command_line(tmp_path: Path) -> None:
    register_agent("linear-test", build_linear)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register_agent("linear-test", build_linear)  # the same builder again: a no-op
    other = lambda a, s, p: build_linear(a, s, p)  # noqa: E731 - a notebook cell run again
    with pytest.warns(UserWarning, match="agent 'linear-test' was registered already; replaced"):
        register_agent("linear-test", other)
    assert AGENTS["linear-test"].builder is other
    with pytest.raises(UserError, match="names the built-in agent"):
        register_agent("ppo", build_linear)
    with pytest.warns(UserWarning, match="an encoder for flat observations was registered "
                      "already; replaced"):
        register_encoder("flat", build_encoder_a)
        register_encoder("flat", build_encoder_b)
    register_encoder("flat", BUILT_IN_ENCODERS["flat"])
    model = Model("CartPole-v1", agent="linear-test", hidden=16, num_envs=2, num_steps=16)
    assert model.architecture.hidden == 16
    model.learn(total_steps=32, out=tmp_path / "api", progress=False)
    assert isinstance(model.policy, LinearAgent)
    assert main(["train", "--agent", "linear-test", "--hidden", "16", "--num-envs", "2",
                 "--num-steps", "16", "--total-steps", "32", "--quiet",
                 "--out", str(tmp_path / "cli")]) == 0
    agent, cfg = load_run(tmp_path / "cli")
    assert isinstance(agent, LinearAgent) and cfg.train.agent == "linear-test"
    assert type(Model.load(tmp_path / "cli")) is Model
    AGENTS.pop("linear-test")


def test_built_in_agents_are_registered_with_what_runs_check() -> None:
    assert list(AGENTS)[:3] == ["xlvin", "ppo", "atreec"]
    assert AGENTS["xlvin"].executor and AGENTS["xlvin"].transe and AGENTS["xlvin"].prune
    assert AGENTS["atreec"].min_depth == 1 and AGENTS["vin"].maze_only
    with pytest.raises(UserError, match="needs depth >= 1"):
        Model("CartPole-v1", agent="atreec", depth=0)


def test_architecture_is_derived_once_and_frozen() -> None:
    arch = PPO("Acrobot-v1").architecture
    assert (arch.hidden, arch.embedding_dim, arch.gamma, arch.tree_nodes) == (32, 50, 0.99, 1)
    tree = Model("CartPole-v1", agent="atreec", depth=3).architecture
    assert tree.tree_nodes == 1 + 2 + 4 + 8
    with pytest.raises(AttributeError):
        arch.hidden = 8  # type: ignore[misc]


def test_a_registered_encoder_replaces_the_built_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENCODERS, "flat", ENCODERS["flat"])  # the built-in one comes back after
    register_encoder("flat", lambda a, s: nn.Linear(s.flat_size, a.embedding_dim))
    model = PPO("CartPole-v1", embedding_dim=7)
    assert model.predict(torch.zeros(3, 4), deterministic=True)[0].shape == (3,)
    assert isinstance(model.policy.encoder, nn.Linear) and model.policy.encoder.out_features == 7
    with pytest.raises(UserError, match="unknown observation kind 'graph'"):
        register_encoder("graph", lambda a, s: nn.Identity())


def linear_encoder(arch, spaces) -> nn.Module:
    return nn.Linear(spaces.flat_size, arch.embedding_dim)


def test_a_run_records_its_registered_encoder_and_loading_asks_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run trained with an encoder from register_encoder names it in its weights; loading it
    where that encoder is not registered is one line saying what to register (the file's name is
    compared, never imported), not a raw state_dict error; registered again, it loads."""
    monkeypatch.setitem(ENCODERS, "flat", ENCODERS["flat"])
    register_encoder("flat", linear_encoder)
    model = PPO("CartPole-v1", num_envs=2, num_steps=16)
    model.learn(32, out=tmp_path / "run", progress=False)
    assert load_file_metadata(tmp_path / "run" / "model.safetensors")["encoder"] == (
        f"{__name__}.linear_encoder")
    register_encoder("flat", BUILT_IN_ENCODERS["flat"])
    with pytest.raises(UserError, match=r"encoded by .*linear_encoder \(added with "
                       r"register_encoder\), and this process has the built-in one: "
                       r"register_encoder\('flat', \.\.\.\)"):
        PPO.load(tmp_path / "run")
    register_encoder("flat", linear_encoder)
    loaded = PPO.load(tmp_path / "run")
    assert isinstance(loaded.policy.encoder, nn.Linear)
    np.testing.assert_array_equal(loaded.predict(np.zeros((2, 4), np.float32), deterministic=True)[0],
                                  model.predict(np.zeros((2, 4), np.float32), deterministic=True)[0])


def test_the_planner_of_docs_architecture_plans_and_trains(executor_path: Path) -> None:
    """docs/architecture.md's "A planner": its FarthestTree is the planner that runs (in
    training and in acting: the NumPy actor, which plans the full tree, leaves it alone), keeps
    branching actions below the roots, and a model with it learns."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    code = page.split("### A planner", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    definitions = code.split("model = Model(", 1)[0]  # the example's run is a longer one
    namespace: dict = {}
    exec(compile(definitions, "architecture.md", "exec"), namespace)
    try:
        model = Model("Acrobot-v1", agent="xlvin-farthest", depth=2, num_envs=2, num_steps=16,
                      pretrain_transe=False, seed=3, executor=str(executor_path))
        model.learn(32, progress=False)
        policy = model.policy
        assert type(policy.planner).__name__ == "FarthestTree"
        from xlvin.accel.numpy_actor import make_actor
        from xlvin.nn.planners import FullTree

        assert make_actor(policy) is None
        with torch.no_grad():
            h = policy.encoder(torch.randn(5, 6))  # Acrobot's 6 observations -> h_s [5, k]
            chi = policy.planner.plan(policy, h)
            full = FullTree(2).plan(policy, h)
        assert chi.shape == full.shape and torch.isfinite(chi).all()
        assert not torch.equal(chi, full)  # 3 actions below the roots become 1: another tree
        policy.planner = FullTree(2)
        assert make_actor(policy) is not None  # the paper's planner keeps its accelerator
    finally:
        AGENTS.pop("xlvin-farthest", None)
