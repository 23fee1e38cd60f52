"""End to end: `xlvin train` / `xlvin evaluate`, run directories, determinism, data budgets."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from xlvin.cli import main
from xlvin.io.executor_file import load_executor
from xlvin.io.run_dir import read_metrics
from xlvin.ppo.update import PPOConfig
from xlvin.ppo.low_data import LowDataConfig
from xlvin.run.training import load_run, train_run
from xlvin.run.config import RunConfig, TrainConfig


def tiny(agent: str, executor: Path, seed: int = 0, **train: object) -> RunConfig:
    cfg = RunConfig(
        train=TrainConfig(env="CartPole-v1", agent=agent, seed=seed, executor=str(executor), **train),
        ppo=PPOConfig(num_envs=2, num_steps=64, total_steps=512),
    )
    cfg.transe.episodes = 20
    cfg.transe.epochs = 1
    return cfg


def test_xlvin_trains_end_to_end_and_keeps_the_executor_frozen(tmp_path: Path, executor_path: Path) -> None:
    run = tmp_path / "run"
    code = main(["train", "--env", "CartPole-v1", "--agent", "xlvin", "--executor", str(executor_path),
                 "--num-envs", "2", "--num-steps", "64", "--total-steps", "512",
                 "--transe-episodes", "20", "--transe-epochs", "1", "--quiet", "--out", str(run)])
    assert code == 0
    for name in ("config.json", "model.safetensors", "metrics.jsonl", "summary.json"):
        assert (run / name).is_file(), name
    assert list((run / "tb").glob("events.out.tfevents.*"))
    rows = read_metrics(run)
    assert len(rows) == 4 and rows[-1]["step"] == 512
    # TensorBoard holds every metric of every row, at its step, with its value (float32)
    board = EventAccumulator(str(run / "tb"))
    board.Reload()
    tags = board.Tags()["scalars"]
    assert set(tags) == {k for r in rows for k in r if k != "step"}
    for tag in tags:
        assert [(e.step, e.value) for e in board.Scalars(tag)] == [
            (r["step"], pytest.approx(r[tag], rel=1e-6, abs=1e-30)) for r in rows if tag in r]
    assert all("losses/transe" in r and "losses/policy_loss" in r for r in rows)
    saved = load_file(str(run / "model.safetensors"))
    original = load_executor(executor_path).processor.state_dict()
    for name, tensor in original.items():
        assert torch.equal(saved[f"processor.{name}"], tensor), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["transe_transitions"] > 0 and summary["transe"]["after/hits_at_1"] > 0


def test_save_load_evaluate_round_trip_gives_the_same_actions(tmp_path: Path, executor_path: Path) -> None:
    for agent in ("xlvin", "ppo", "atreec"):
        trained, _ = train_run(tiny(agent, executor_path), tmp_path / agent, progress=False)
        loaded, cfg = load_run(tmp_path / agent)
        assert cfg.train.agent == agent
        obs = torch.randn(64, 4)
        trained.eval()
        with torch.no_grad():
            torch.testing.assert_close(loaded(obs)[0], trained(obs)[0], rtol=0, atol=0)
            torch.testing.assert_close(loaded(obs)[1], trained(obs)[1], rtol=0, atol=0)


def test_evaluate_command_prints_json(tmp_path: Path, executor_path: Path, capsys: pytest.CaptureFixture) -> None:
    train_run(tiny("ppo", executor_path), tmp_path / "r", progress=False)
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "r"), "--episodes", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 5 and len(result["returns"]) == 5
    assert 5 <= result["mean"] <= 500


def test_same_seed_gives_identical_metrics(tmp_path: Path, executor_path: Path) -> None:
    def metrics(name: str, seed: int) -> list[dict]:
        train_run(tiny("xlvin", executor_path, seed=seed), tmp_path / name, progress=False)
        return [{k: v for k, v in r.items() if k != "charts/sps"} for r in read_metrics(tmp_path / name)]

    first, second, other = metrics("a", 3), metrics("b", 3), metrics("c", 4)
    assert first == second
    assert first != other


@pytest.mark.parametrize("strict", [False, True])
def test_low_data_protocol_respects_the_cartpole_budget(tmp_path: Path, executor_path: Path, strict: bool) -> None:
    """CartPole: exactly 10 episodes, learned from 100 times; strict TransE adds no data."""
    cfg = tiny("xlvin", executor_path, protocol="low_data")
    cfg.train.env = "CartPole-v0"
    cfg.low_data = LowDataConfig(rounds=1, episodes=10, updates=3, strict_transe=strict, eval_points=1, eval_episodes=2)
    _, summary = train_run(cfg, tmp_path / "r", progress=False)
    assert summary["ppo_episodes"] == 10
    assert summary["ppo"]["updates"] == 3
    assert summary["ppo_transitions"] == summary["ppo"]["transitions"] >= 10 * 8
    expected_transe = 0 if strict else summary["transe"]["transitions"]
    assert summary["transe_transitions"] == expected_transe
    if not strict:
        assert expected_transe > 0


def test_low_data_protocol_respects_the_acrobot_budget(tmp_path: Path, executor_path: Path) -> None:
    """Acrobot-style: rounds x episodes complete episodes, one update per round."""
    cfg = tiny("ppo", executor_path, protocol="low_data")
    cfg.train.env = "MountainCar-v0"
    cfg.low_data = LowDataConfig(rounds=3, episodes=2, updates=1, eval_points=1, eval_episodes=1)
    _, summary = train_run(cfg, tmp_path / "r", progress=False)
    assert summary["ppo_episodes"] == 6
    assert summary["ppo"]["updates"] == 3
    # A random policy never reaches the flag in 200 steps: every episode is truncated at 200.
    assert summary["ppo_transitions"] == 6 * 200
    assert summary["transe_transitions"] == 0
