"""Atari environments (xlvin.envs) and the Nature CNN encoder."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import xlvin.envs
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MLPEncoder, NatureCNN


def test_nature_cnn_shapes_and_uint8_input() -> None:
    torch.manual_seed(0)
    encoder = NatureCNN(in_channels=4, embedding_dim=32)
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    h = encoder(frames)
    assert h.shape == (3, 32) and h.dtype == torch.float32
    torch.testing.assert_close(h, encoder(frames.float()))  # /255 inside, either dtype
    logits, values = PPOAgent(encoder, 32, 5)(frames)
    assert logits.shape == (3, 5) and values.shape == (3,)


def test_mlp_encoder_flattens_and_casts_observations() -> None:
    """Observations of any shape and dtype are flattened to float32 rows: [5, 2, 3] -> [5, 8]."""
    torch.manual_seed(0)
    encoder = MLPEncoder(6, 16, 8)
    obs = torch.randint(0, 5, (5, 2, 3), dtype=torch.uint8)
    h = encoder(obs)
    assert h.shape == (5, 8) and h.dtype == torch.float32
    assert torch.equal(h, encoder.net(obs.reshape(5, 6).float()))
    assert torch.equal(encoder(obs.double()), h)


def test_atari_ids_are_registered_without_ale() -> None:
    for game in xlvin.envs.ATARI_GAMES:
        assert xlvin.envs.atari_env_id(game) in gym.registry


def test_freeway_preprocessing_and_check_env() -> None:
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    from gymnasium.utils.env_checker import check_env

    env = gym.make("xlvin/Freeway-v5")
    try:
        assert env.observation_space.shape == (4, 84, 84)
        assert env.observation_space.dtype == np.uint8
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        obs, _, terminated, truncated, _ = env.step(0)
        assert obs.shape == (4, 84, 84) and not terminated and not truncated
        with warnings.catch_warnings():  # "different from the unwrapped version": intended
            warnings.simplefilter("ignore")
            check_env(env, skip_render_check=True)
    finally:
        env.close()
    # The preprocessed env is deterministic for a seed (what side-by-side benchmarks rely on).
    a, b = gym.make("xlvin/Freeway-v5"), gym.make("xlvin/Freeway-v5")
    oa, _ = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    for _ in range(5):
        oa = a.step(1)[0]
        ob = b.step(1)[0]
    assert np.array_equal(oa, ob)
