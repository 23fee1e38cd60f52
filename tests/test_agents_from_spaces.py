"""`xlvin train` builds the agent from the environment's observation space (flat -> MLP encoder,
image -> Nature CNN, small image -> small CNN), and XLVIN learns on a small case."""

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.bright_channel import BrightChannel
from xlvin.cli import main
from xlvin.io.executor_file import load_executor
from xlvin.nn.encoders import MLPEncoder, NatureCNN, SmallCNN
from xlvin.process import seed_everything
from xlvin.ppo.evaluation import evaluate_policy
from xlvin.ppo.loop import train_ppo
from xlvin.ppo.update import PPOConfig
from xlvin.run.training import load_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.envs.spaces import Spaces


class ImageEnv(BrightChannel):
    """uint8 images [2, S, S]; the reward is 1 when the action names the brighter channel."""

    def __init__(self, size: int = 36) -> None:
        self.observation_space = gym.spaces.Box(0, 255, shape=(2, size, size), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(3)


for env_id, size in (("XlvinTest/Image36-v0", 36), ("XlvinTest/Image8-v0", 8),
                      ("XlvinTest/Image3-v0", 3)):
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=ImageEnv, kwargs={"size": size})


def test_build_agent_picks_the_encoder_from_the_observation_space(executor_path: Path) -> None:
    processor = load_executor(executor_path).processor
    flat = agent_of(RunConfig(train=TrainConfig(agent="xlvin")), Spaces((4,), "flat", 2), processor)
    assert isinstance(flat.encoder, MLPEncoder) and flat.encoder.embedding_dim == 50
    image = agent_of(RunConfig(train=TrainConfig(agent="xlvin")), Spaces((2, 36, 36), "image", 3),
                     processor)
    assert isinstance(image.encoder, NatureCNN) and image.encoder.embedding_dim == 512
    frames = torch.randint(0, 256, (5, 2, 36, 36), dtype=torch.uint8)
    logits, values = image(frames)
    assert logits.shape == (5, 3) and values.shape == (5,)


@pytest.mark.parametrize("agent", ["xlvin", "ppo"])
def test_xlvin_train_runs_a_pixel_agent_and_loads_it_back(
    agent: str, tmp_path: Path, executor_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / agent
    code = main(["train", "--env", "XlvinTest/Image36-v0", "--agent", agent,
                 "--executor", str(executor_path), "--depth", "2", "--num-envs", "2",
                 "--num-steps", "16", "--total-steps", "64", "--transe-episodes", "4",
                 "--transe-epochs", "1", "--quiet", "--out", str(run)])
    assert code == 0, capsys.readouterr().err
    loaded, cfg = load_run(run)
    assert isinstance(loaded.encoder, NatureCNN)
    assert json.loads((run / "summary.json").read_text())["ppo"]["updates"] == 2
    result = evaluate_policy(loaded, cfg.train.env, episodes=2, seed=0)
    assert len(result["returns"]) == 2


def test_small_images_get_the_small_cnn_and_it_learns(tmp_path: Path) -> None:
    """8x8 images (under the Nature CNN's 36x36) are read by the small CNN, chosen from the
    spaces alone; PPO learns to name the brighter channel: a random policy's return is 8/3.
    These are pixels (200 in the bright channel), so the run divides by 255, not the default 10
    of symbolic grids."""
    run = tmp_path / "r"
    code = main(["train", "--env", "XlvinTest/Image8-v0", "--agent", "ppo", "--num-envs", "4",
                 "--num-steps", "32", "--total-steps", "1536", "--lr", "1e-3", "--quiet",
                 "--small-image-divisor", "255", "--out", str(run)])
    assert code == 0
    loaded, cfg = load_run(run)
    assert isinstance(loaded.encoder, SmallCNN) and loaded.encoder.embedding_dim == 128
    assert loaded.encoder.divisor == 255
    result = evaluate_policy(loaded, cfg.train.env, episodes=10, seed=0)
    assert result["mean"] >= 7.5, result["returns"]  # random: 8/3; greedy and right: 8


def test_images_under_4x4_are_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["train", "--env", "XlvinTest/Image3-v0", "--agent", "ppo", "--quiet",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "small CNN needs at least 4x4" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_xlvin_learns_cartpole_online(executor_path: Path) -> None:
    """XLVIN (depth 2, an untrained executor: the agent learns around it) on CartPole-v1 for
    12,288 online steps: its greedy return is far above a random policy's ~22."""
    seed_everything(0)
    processor = load_executor(executor_path).processor
    agent = agent_of(RunConfig(train=TrainConfig(agent="xlvin", hidden=64)), Spaces((4,), "flat", 2),
                     processor)
    train_ppo(agent, "CartPole-v1", PPOConfig(total_steps=12_288, lr=1e-3), seed=0, progress=False)
    score = evaluate_policy(agent, "CartPole-v1", episodes=10, seed=10_000)["mean"]
    assert score > 100, score
