"""The VAE world-model variant of XLVIN (the paper's appendix figure 10, `--transition-loss vae`):
decoder shapes, its loss, an agent trained through the PPO trainer, the option in configs, and the
experiment's analysis and results."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.errors import UserError
from xlvin.experiments import atari, atari_vae, atari_vae_report
from xlvin.io.run_dir import read_metrics
from xlvin.nn.encoders import NatureCNN
from xlvin.nn.vae import FrameDecoder, VAEWorldModel, kl_to_standard_normal
from xlvin.run.agents import build_agent
from xlvin.ppo.update import PPOConfig
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.run.saved import saved_config
from xlvin.run.training import load_run, train_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_run, validate


def test_decoder_mirrors_the_nature_cnn_back_to_the_frames_shape() -> None:
    assert FrameDecoder(4, 512, 84)(torch.zeros(2, 512)).shape == (2, 4, 84, 84)
    assert FrameDecoder(3, 16, (60, 50))(torch.zeros(5, 16)).shape == (5, 3, 60, 50)


def test_kl_is_zero_for_a_standard_normal_posterior_and_positive_otherwise() -> None:
    zeros = torch.zeros(3, 8)
    assert torch.equal(kl_to_standard_normal(zeros, zeros), torch.zeros(3))
    assert (kl_to_standard_normal(zeros + 0.5, zeros) > 0).all()
    assert (kl_to_standard_normal(zeros, zeros - 1.0) > 0).all()


def test_vae_loss_decreases_over_a_few_adam_steps_on_a_tiny_batch() -> None:
    torch.manual_seed(0)
    encoder, model = NatureCNN(4, 16, size=44), VAEWorldModel(16, 4, 44)
    frames = torch.full((4, 4, 44, 44), 40, dtype=torch.uint8)  # a dark background
    frames[torch.arange(4), :, 10:20, 5 + 8 * torch.arange(4)] = 220  # a bright car, moving
    optimizer = torch.optim.Adam([*encoder.parameters(), *model.parameters()], lr=3e-3)
    losses = []
    for _ in range(20):
        reconstruction, kl = model(encoder(frames), frames)
        loss = reconstruction + kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert kl.item() >= 0.5 * 16 - 1e-4  # the free-nats floor: 0.5 per dimension and sample
    assert losses[-1] < 0.5 * losses[0]


def tiny(transition_loss: str, executor: Path) -> RunConfig:
    """One update of 2 envs x 16 steps of XLVIN on Freeway pixels."""
    return RunConfig(
        train=TrainConfig(env="xlvin/FreewayTrain-v4", agent="xlvin", depth=1, seed=3,
                          pretrain_transe=False, executor=str(executor),
                          transition_loss=transition_loss),
        ppo=PPOConfig(**{**atari.ATARI_PPO, "num_envs": 2, "num_steps": 16, "total_steps": 32}),
    )


def test_a_vae_agent_trains_one_update_through_the_ppo_trainer(
    tmp_path: Path, executor_path: Path
) -> None:
    """Its three terms are logged, its decoder saved and loaded back; a TransE agent has no
    world-model weights."""
    agent, _ = train_run(tiny("vae", executor_path), tmp_path / "vae", progress=False)
    row = read_metrics(tmp_path / "vae")[-1]
    for term in ("vae_reconstruction", "vae_kl", "transition"):
        assert np.isfinite(row[f"losses/{term}"])
    assert "losses/transe" not in row
    loaded, cfg = load_run(tmp_path / "vae")
    assert cfg.train.transition_loss == "vae"
    assert any(k.startswith("world_model.decoder") for k in loaded.state_dict())
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in agent.state_dict().items())
    (tmp_path / "vae" / "model.safetensors").rename(tmp_path / "model.safetensors")
    from_checkpoint = atari_vae.load_policy(tmp_path / "vae")  # as a run stopped at a deadline
    assert from_checkpoint.state_dict().keys() == agent.state_dict().keys()
    transe_cfg = tiny("transe", executor_path)
    spaces, arch = check_run(transe_cfg)
    processor, _ = load_executor_processor(executor_file(str(executor_path), transe_cfg.train))
    assert not any("world_model" in k for k in build_agent(arch, spaces, processor).state_dict())


def test_the_option_round_trips_and_an_old_config_reads_as_transe() -> None:
    cfg = RunConfig(train=TrainConfig(agent="xlvin", transition_loss="vae", pretrain_transe=False))
    data = json.loads(json.dumps(cfg.to_json()))
    assert data["train"]["transition_loss"] == "vae"
    assert RunConfig.from_json(data, "test") == cfg
    default = RunConfig().to_json()
    assert "transition_loss" not in default["train"]  # a TransE run writes what it wrote before
    assert RunConfig.from_json(default, "old").train.transition_loss == "transe"
    assert saved_config(default) == RunConfig().to_json()  # an old run still resumes


@pytest.mark.parametrize("train, message", [
    ({"transition_loss": "vae", "pretrain_transe": True}, "--pretrain-transe true"),
    ({"transition_loss": "vae", "pretrain_transe": False, "agent": "ppo"}, "--agent xlvin"),
    ({"transition_loss": "vea"}, "transition_loss"),
])
def test_bad_uses_of_the_option_are_one_error(train: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        validate(RunConfig.from_json({"train": train}, "test").train)


def test_the_vae_needs_images() -> None:
    cfg = RunConfig(train=TrainConfig(env="CartPole-v1", transition_loss="vae",
                                      pretrain_transe=False))
    with pytest.raises(UserError, match="reconstructs images"):
        check_run(cfg)


def test_vae_cells_are_xlvin_r_with_the_vae_loss(tmp_path: Path) -> None:
    vae, transe = atari_vae.cells([0], list(atari_vae.AGENTS))
    assert vae.config().train.transition_loss == "vae"
    assert transe.config() == atari.Cell("Freeway", "xlvin_r", 0, 100_000).config()
    assert vae.config().ppo == transe.config().ppo and vae.config().train.depth == 2
    assert vae.run_dir(tmp_path) == tmp_path / "t100000" / "Freeway" / "xlvin_r_vae" / "seed0"


def test_embedding_spread_is_zero_for_a_fixed_point_and_full_for_isotropic_noise() -> None:
    fixed = atari_vae.embedding_spread(np.ones((50, 8)))
    assert fixed["participation_ratio"] == 0 and fixed["relative_spread"] == 0
    assert fixed["low_variance_fraction"] == 1 and fixed["dead_fraction"] == 0
    noise = atari_vae.embedding_spread(np.random.default_rng(0).normal(size=(4000, 8)))
    assert noise["participation_ratio"] == pytest.approx(8, rel=0.05)
    assert noise["relative_spread"] == pytest.approx(1, rel=0.05)


def test_analysis_measures_spread_and_reconstructions_of_a_vae_agent() -> None:
    torch.manual_seed(0)

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.world_model = NatureCNN(4, 8), VAEWorldModel(8, 4, 84)

    frames = np.random.default_rng(0).integers(0, 256, (900, 4, 84, 84), dtype=np.uint8)
    result, images = atari_vae.analyse(Tiny(), frames, batch=300)  # type: ignore[arg-type]
    assert result["frames"] == 900 and result["spread"]["dims"] == 8
    assert set(result["reconstruction"]) >= {"foreground_error", "foreground_error_ratio"}
    assert images["originals"].shape == images["reconstructions"].shape == (4, 84, 84)
    assert images["reconstructions"].dtype == np.uint8


class Indexing(torch.nn.Module):
    """An encoder whose embedding of the i-th frame it sees is (i, i), batch after batch."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.arange(self.seen, self.seen + len(x), dtype=torch.float32)[:, None].repeat(1, 2)
        self.seen += len(x)
        return h


class Drawing(torch.nn.Module):
    """A world model that "reconstructs" frame i as `draw(frame i)` (i from `Indexing`)."""

    def __init__(self, frames: np.ndarray, draw) -> None:
        super().__init__()
        self.frames, self.draw = frames, draw

    def reconstruct(self, h: torch.Tensor) -> torch.Tensor:
        last = self.frames[h[:, 0].long().numpy(), -1].astype(np.float64) / 255.0
        return torch.from_numpy(np.array(self.draw(last))).float()[:, None].repeat(1, 4, 1, 1)


@pytest.mark.parametrize("name, expected", [("perfect", 0.0), ("halfway", 0.25),
                                            ("background", 1.0)])
def test_the_foreground_error_ratio_is_the_error_over_the_median_backgrounds(
    name: str, expected: float
) -> None:
    """foreground_error_ratio: the reconstruction's squared error on the foreground pixels over
    that of the frames' per-pixel median (the background): 0 for a model that draws every frame,
    1 for one that draws the background alone, 1/4 for one halfway between them."""
    rng = np.random.default_rng(0)
    frames = np.repeat(rng.integers(0, 60, (1, 4, 84, 84)), 900, axis=0).astype(np.uint8)
    for i in range(900):  # a car: a bright square somewhere on the background
        y, x = rng.integers(0, 76, 2)
        frames[i, :, y:y + 8, x:x + 8] = 250
    background = np.median(frames[:, -1].astype(np.float64) / 255.0, axis=0)
    draw = {"perfect": lambda last: last, "background": lambda last: np.broadcast_to(
        background, last.shape), "halfway": lambda last: (last + background) / 2}[name]

    class Agent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.world_model = Indexing(), Drawing(frames, draw)

    result, _ = atari_vae.analyse(Agent(), frames, batch=300)  # type: ignore[arg-type]
    reconstruction = result["reconstruction"]
    assert 0.005 < reconstruction["foreground_pixel_fraction"] < 0.02  # the cars, not the road
    assert reconstruction["foreground_error_ratio"] == pytest.approx(expected, abs=1e-6)


def fake_record(agent: str, seed: int, ratio: float) -> dict:
    """A record as `run_vae_cell` returns it, with made-up numbers."""
    spread = {"mean_variance": 0.01 * ratio, "total_variance": ratio, "participation_ratio": ratio,
              "relative_spread": ratio / 100, "low_variance_fraction": 0.5, "dead_fraction": 0.1,
              "mean_norm": 1.0, "dims": 512}
    embedding = {"frames": 1000, "spread": spread, "transitions": 4096}
    if agent == atari_vae.VAE:
        embedding["reconstruction"] = {"foreground_error_ratio": 0.98}
    return {"game": "Freeway", "agent": agent, "seed": seed, "transitions": 4096, "device": "cpu",
            "transitions_reached": 4096, "finished": True, "curve": [(2048, 0.0), (4096, 1.0)],
            "auc": 0.5, "first_score_at": None, "games": 2, "steps_per_second": 50.0,
            "final_eval": {"mean": 0.0, "std": 0.0, "returns": [0.0] * 2, "lengths": [9] * 2,
                           "transitions": 4096, "max_steps": 4500, "machine": "CPU machine"},
            "embedding": embedding}


def test_results_writer_gives_the_collapse_test_and_the_committed_numbers(tmp_path: Path) -> None:
    records = [fake_record(atari_vae.VAE, s, 1.5) for s in (0, 1)] + \
        [fake_record(atari_vae.XLVIN_R, s, 9.0) for s in (0, 1)]
    committed = tmp_path / "committed.json"
    row = {"game": "Freeway", "agent": "xlvin_r", "label": "XLVIN-R", "seeds": [0, 1],
           "budget": 100_000, "transitions_reached": 99_280,
           "auc": {"iqm": 7.5, "iqm_low": 1.7, "iqm_high": 13.5, "mean": 7.5, "n": 7},
           "final_eval": {"iqm": 17.4, "iqm_low": 8.6, "iqm_high": 21.7, "mean": 15.5, "n": 7}}
    committed.write_text(json.dumps({"rows": [row]}))
    images = {s: {"originals": np.zeros((4, 84, 84), np.uint8),
                  "reconstructions": np.full((4, 84, 84), 128, np.uint8)} for s in (0, 1)}
    text = atari_vae_report.write_results(records, tmp_path / "out", committed, images)
    data = json.loads((tmp_path / "out" / "atari_vae.json").read_text())
    assert {"note", "rows", "collapse_test", "committed_reference", "cells", "frames",
            "frames_seed"} <= set(data)
    assert data["collapse_test"]["holds"] is True and len(data["collapse_test"]["pairs"]) == 2
    assert [r["agent"] for r in data["rows"]] == [atari_vae.VAE, atari_vae.XLVIN_R]
    assert data["rows"][0]["foreground_error_ratio"] == pytest.approx(0.98)
    assert data["committed_reference"][0]["auc"]["iqm"] == 7.5
    assert "**holds**" in text and "committed study" in text
    assert (tmp_path / "out" / "atari_vae.md").read_text().strip() == text.strip()
    assert (tmp_path / "out" / "atari_vae.png").stat().st_size > 10_000
