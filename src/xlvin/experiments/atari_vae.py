"""The paper's appendix "world models" experiment (figure 10): XLVIN-R on Freeway with a VAE
world model in place of TransE.

The paper: "We attempt replacing our Atari transition model with a variant that learns
representations through pixel-based reconstructions (using a VAE objective, as done by Ha &
Schmidhuber 2018). We found that representations obtained in this way were not useful, we
observed that most of our state encodings converged to a fixed-point, and that the pixel-space
reconstructions completely ignored the foreground observations."

The VAE agent (`--transition-loss vae`, `xlvin.nn.vae`) is XLVIN-R as `xlvin reproduce atari`
trains it on Freeway (the same Atari PPO, K = 2, no pre-training, weight 0.001) with the TransE
term replaced by reconstruction + KL of the frame stack and the transition model fitted to the
next state's embedding. Its cells are those of `xlvin.experiments.atari` (`run_cell`: deadline,
checkpoint, resume, the greedy evaluation, the record), agent `xlvin_r_vae`, beside XLVIN-R cells
trained with the same budget and seeds (agent `xlvin_r`, the very cells of `reproduce atari`).

After training, every cell's encoder reads `FRAMES` held-out frames (`xlvin/FreewayEval-v4`,
seed `FRAMES_SEED`, a uniformly random policy: never a training frame), and we measure the
spread of the embedding h_s: per-dimension variance over the frames (its mean, the fraction of
dimensions below `LOW_VARIANCE`), the participation ratio of its covariance's eigenvalues
(effective rank: (sum l)^2 / sum l^2, from 1 to k) and the relative spread (total variance over
mean squared norm: 0 when every frame has the same embedding, scale-free). The collapse test:
the VAE's relative spread is below XLVIN-R's (TransE) on every seed both have trained. (We
first required the participation ratio to be lower too, and dropped that before the first VAE
run had finished: it measures how the variance is shared among directions, not how much of it
there is, so an embedding collapsed to a point up to small isotropic jitter has a high one. It
is still reported, with whether it is lower.) A VAE cell also decodes its embeddings (at the posterior mean): figure
10's frames and reconstructions, and, over all held-out frames, the reconstruction error on the
foreground (pixels more than `FOREGROUND` from the frames' per-pixel median: cars and chicken)
against the error of the median background itself there (1: the foreground ignored).
"""

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.config import csv_choices
from xlvin.envs.atari import atari_eval_id
from xlvin.errors import UserError
from xlvin.experiments import atari
from xlvin.io.checkpoint import CHECKPOINT, section
from xlvin.io.executor_file import executor_architecture
from xlvin.io.files import check_regular, read_json
from xlvin.io.run_dir import CONFIG, MODEL, read_json_object, reading_results, write_json
from xlvin.io.weights import load_state, load_weights
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import ActorCritic
from xlvin.run.agents import build_agent
from xlvin.ppo.collect import make_vector_env, reset_envs
from xlvin.run.training import load_run
from xlvin.run.config import RunConfig, on_cpu
from xlvin.run.checks import check_device, check_run

GAME = "Freeway"
#: The XLVIN-R agent of `xlvin.experiments.atari` and our VAE variant of it.
XLVIN_R = "xlvin-r"
VAE = "xlvin_r_vae"
AGENTS = (VAE, XLVIN_R)
LABELS = {VAE: "XLVIN-R, VAE world model", XLVIN_R: "XLVIN-R (TransE)"}
TRANSITIONS = 100_000
FRAMES = 1_000
FRAMES_SEED = 2_000_000
#: The held-out frames whose reconstructions the figure shows.
SHOWN = (100, 350, 600, 850)
LOW_VARIANCE = 1e-4
#: A pixel (grey level in [0, 1]) further than this from the frames' median is foreground.
FOREGROUND = 0.1
ANALYSIS_FILE = "embedding.json"
RECONSTRUCTIONS_FILE = "reconstructions.npz"
#: The committed 7-seed XLVIN-R / PPO study at 100,000 transitions.
COMMITTED = Path("results/atari-freeway-seeds/atari.json")


@dataclasses.dataclass(frozen=True)
class VAECell(atari.Cell):
    """A cell of `xlvin.experiments.atari` whose agent may also be `VAE`: XLVIN-R's config with
    `transition_loss = "vae"`."""

    def __post_init__(self) -> None:
        if self.agent != VAE:  # the VAE variant is this experiment's own name, not an agent's
            super().__post_init__()

    def config(self) -> RunConfig:
        if self.agent != VAE:
            return super().config()
        cfg = dataclasses.replace(self, agent=XLVIN_R).config()
        cfg.train.transition_loss = "vae"
        return cfg


def cells(seeds: list[int], agents: list[str], transitions: int = TRANSITIONS,
          device: str = "cpu") -> list[VAECell]:
    """Seed by seed, each agent's cell: with two jobs a VAE cell trains beside XLVIN-R's of the
    same seed, so a deadline stops both at about the same transitions."""
    return [VAECell(GAME, agent, seed, transitions, device) for seed in seeds for agent in agents]


def held_out_frames(n: int = FRAMES, seed: int = FRAMES_SEED) -> np.ndarray:
    """n consecutive observations [n, 4, 84, 84] (uint8) of one Freeway evaluation game under a
    uniformly random policy (the action space seeded with `seed`)."""
    envs = make_vector_env(atari_eval_id(GAME), 1)
    try:
        obs = reset_envs(envs, seed).obs
        frames = []
        for _ in range(n):
            frames.append(obs[0].copy())
            obs, *_ = envs.step(envs.action_space.sample())
    finally:
        envs.close()
    return np.stack(frames)


def load_policy(run_dir: Path) -> ActorCritic:
    """The run's policy: its final model, or an unfinished run's latest checkpoint (stopped at a
    deadline), on the CPU in evaluation mode."""
    if (run_dir / MODEL).is_file():
        return load_run(run_dir)[0]
    cfg = RunConfig.from_saved(read_json_object(run_dir / CONFIG), str(run_dir / CONFIG))
    spaces, arch = check_run(on_cpu(cfg))
    source = run_dir / CHECKPOINT
    check_regular(source)  # a link out of the run is refused, as on resume
    tensors, meta = load_weights(source, what="checkpoint")
    extra = meta.get("extra") if isinstance(meta.get("extra"), dict) else {}
    processor = MessagePassing(**executor_architecture(extra.get("executor"), source))
    agent = build_agent(arch, spaces, processor)
    load_state(agent, section(tensors, "model/"), source)
    return agent.eval()


def embedding_spread(h: np.ndarray) -> dict[str, float]:
    """The spread of embeddings h [N, k] over N frames (see the module's docstring)."""
    h = h.astype(np.float64)
    variance = h.var(0)  # [k]
    total = float(variance.sum())
    eigenvalues = np.linalg.svd(h - h.mean(0), compute_uv=False) ** 2 / len(h)  # [min(N, k)]
    squares = float((eigenvalues**2).sum())
    norm = float((h**2).sum(1).mean())
    return {
        "mean_variance": float(variance.mean()),
        "total_variance": total,
        "participation_ratio": total**2 / squares if squares > 0 else 0.0,
        "relative_spread": total / norm if norm > 0 else 0.0,
        "low_variance_fraction": float((variance < LOW_VARIANCE).mean()),
        "dead_fraction": float((np.abs(h).max(0) == 0).mean()),
        "mean_norm": float(np.sqrt(norm)),
        "dims": int(h.shape[1]),
    }


@torch.no_grad()
def analyse(agent: ActorCritic, frames: np.ndarray, batch: int = 100) -> tuple[dict[str, Any],
                                                                              dict[str, np.ndarray]]:
    """The embedding's spread over `frames`, and for a VAE agent the reconstruction errors and
    the shown frames with their reconstructions (last frame of each stack, uint8)."""
    encoder = agent.encoder  # type: ignore[attr-defined]
    h = torch.cat([encoder(torch.from_numpy(frames[i:i + batch]))
                   for i in range(0, len(frames), batch)])  # [N, k]
    result: dict[str, Any] = {"frames": len(frames), "spread": embedding_spread(h.numpy())}
    world_model = getattr(agent, "world_model", None)
    if world_model is None:
        return result, {}
    recon = torch.cat([world_model.reconstruct(h[i:i + batch])[:, -1]
                       for i in range(0, len(h), batch)]).numpy()  # [N, 84, 84] in [0, 1]
    last = frames[:, -1].astype(np.float64) / 255.0  # [N, 84, 84]
    background = np.median(last, axis=0)  # [84, 84]
    foreground = np.abs(last - background) > FOREGROUND  # [N, 84, 84]
    error = (recon - last) ** 2
    baseline = (background - last) ** 2
    fg_error, bg_error = float(error[foreground].mean()), float(error[~foreground].mean())
    fg_baseline = float(baseline[foreground].mean())
    result["reconstruction"] = {
        "foreground_pixel_fraction": float(foreground.mean()),
        "foreground_error": fg_error, "background_error": bg_error,
        "median_background_foreground_error": fg_baseline,
        "foreground_error_ratio": fg_error / fg_baseline if fg_baseline > 0 else float("nan"),
        "reconstruction_variance": float(recon.var(0).mean()),
        "frame_variance": float(last.var(0).mean()),
    }
    shown = list(SHOWN)
    images = {"originals": frames[shown, -1],
              "reconstructions": np.round(recon[shown] * 255).astype(np.uint8)}
    return result, images


def analysis_of(cell: VAECell, root: Path, frames: np.ndarray | None = None) -> dict[str, Any]:
    """The cell's analysis at the transitions it has reached, from DIR/embedding.json, computed
    (and its reconstructions saved) when missing or older than the run."""
    run_dir = cell.run_dir(root)
    reached = atari.transitions_reached(run_dir)
    path = run_dir / ANALYSIS_FILE
    if path.is_file():
        with reading_results(run_dir):
            saved = read_json(path)
            if int(saved["transitions"]) == reached:
                return saved
    agent = load_policy(run_dir)
    result, images = analyse(agent, held_out_frames() if frames is None else frames)
    result.update(transitions=reached, frames_seed=FRAMES_SEED)
    if images:
        np.savez_compressed(run_dir / RECONSTRUCTIONS_FILE, **images)
    write_json(path, result)
    return result


def run_vae_cell(cell: VAECell, root: Path, deadline: float | None = None,
                 eval_games: int = atari.EVAL_GAMES) -> dict[str, Any] | None:
    """`xlvin.experiments.atari.run_cell` (train to the budget or the deadline, evaluate; a cell
    whose turn comes after the deadline is not started: its record so far, or None), then the
    embedding analysis; the record with it."""
    record = atari.run_cell(cell, root, deadline, eval_games)
    return None if record is None else {**record, "embedding": analysis_of(cell, root)}


def record_of(cell: VAECell, root: Path) -> dict[str, Any] | None:
    """The record of a cell trained and evaluated (finished or stopped at a deadline), its
    analysis computed if missing; None if it has no evaluation yet."""
    if not atari.has_record(cell, root):
        return None
    return {**atari.cell_record(cell, cell.run_dir(root)), "embedding": analysis_of(cell, root)}


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help=f"comma-separated agents of {', '.join(AGENTS)} (default both)")
    parser.add_argument("--transitions", type=int, default=TRANSITIONS,
                        help=f"training transitions per run (default {TRANSITIONS:,})")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N]")
    parser.add_argument("--committed", type=Path, default=COMMITTED,
                        help=f"the committed XLVIN-R / PPO study whose numbers are shown beside "
                        f"(default {COMMITTED})")


def cells_from_options(args: argparse.Namespace) -> list[VAECell]:
    agents = csv_choices(args.agents, AGENTS, "agent")
    rollout = atari.ATARI_PPO["num_envs"] * atari.ATARI_PPO["num_steps"]
    if args.transitions < rollout:
        raise UserError(f"--transitions must be >= one rollout ({rollout:,})")
    check_device(args.device)
    return cells(list(range(args.first_seed, args.first_seed + args.seeds)), agents,
                 args.transitions, args.device)
