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
import json
import math
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
from xlvin.io.files import (
    atomic_savefig,
    atomic_write_text,
    check_regular,
    prepare_results,
    read_json,
)
from xlvin.io.run_dir import CONFIG, MODEL, read_json_object, reading_results, write_json
from xlvin.io.weights import load_state, load_weights
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import ActorCritic
from xlvin.stats import summarize
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


# --------------------------------------------------------------------------- results


def _summary(values: list[float]) -> dict[str, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return dict.fromkeys(("iqm", "iqm_low", "iqm_high", "mean", "std", "median"), math.nan)
    return summarize(finite)


SPREAD_KEYS = ("mean_variance", "participation_ratio", "relative_spread", "low_variance_fraction",
               "dead_fraction")


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per agent: seeds, transitions, AUC and greedy score over seeds, the mean over
    seeds of each spread measure (and of the VAE's foreground error ratio)."""
    rows = []
    for agent in AGENTS:
        group = [r for r in records if r["agent"] == agent]
        if not group:
            continue
        row = {
            "agent": agent, "label": LABELS[agent], "seeds": sorted(r["seed"] for r in group),
            "budget": max(r["transitions"] for r in group),
            "transitions_reached": sorted(r["transitions_reached"] for r in group),
            "finished": all(r["finished"] for r in group),
            "auc": _summary([r["auc"] for r in group]),
            "final_eval": _summary([r["final_eval"]["mean"] for r in group]),
            "spread": {k: float(np.mean([r["embedding"]["spread"][k] for r in group]))
                       for k in SPREAD_KEYS},
        }
        if agent == VAE:
            row["foreground_error_ratio"] = float(np.mean(
                [r["embedding"]["reconstruction"]["foreground_error_ratio"] for r in group]))
        rows.append(row)
    return rows


def collapse_test(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per seed with both agents: their spreads and whether the VAE's relative spread is below
    TransE's (`vae_lower`; and its participation ratio, `vae_lower_participation_ratio`, reported
    only); `holds` when it is on every such seed (None without one)."""
    by = {(r["agent"], r["seed"]): r for r in records}
    pairs = []
    for seed in sorted({s for a, s in by if a == VAE and (XLVIN_R, s) in by}):
        vae, transe = by[VAE, seed], by[XLVIN_R, seed]
        v, t = vae["embedding"]["spread"], transe["embedding"]["spread"]
        pairs.append({
            "seed": seed,
            "transitions": {"vae": vae["transitions_reached"], "transe": transe["transitions_reached"]},
            "vae": {k: v[k] for k in SPREAD_KEYS}, "transe": {k: t[k] for k in SPREAD_KEYS},
            "vae_lower": v["relative_spread"] < t["relative_spread"],
            "vae_lower_participation_ratio": v["participation_ratio"] < t["participation_ratio"],
        })
    return {
        "statement": "the VAE encoder's relative spread (total variance / mean squared norm of h_s "
        "over the held-out frames) is below the TransE (XLVIN-R) encoder's of the same seed, on "
        "every seed both have trained",
        "pairs": pairs, "holds": all(p["vae_lower"] for p in pairs) if pairs else None,
    }


def committed_curves(path: Path) -> list[tuple[str, tuple[list[float], list[float]]]]:
    """(label, mean training curve over its seeds) of each Freeway agent of the committed
    study, on the union of its seeds' points; [] when the file is missing."""
    if not path.is_file():
        return []
    with reading_results(path):
        data = read_json(path)
        labels = {r["agent"]: r["label"] for r in data["rows"] if r["game"] == GAME}
        out = []
        for agent, label in labels.items():
            group = [c["curve"] for c in data.get("cells", []) if c["game"] == GAME
                     and c["agent"] == agent and c["curve"]]
            if not group:
                continue
            grid = sorted({t for curve in group for t, _ in curve})
            ys = np.mean([np.interp(grid, *zip(*curve)) for curve in group], axis=0)
            out.append((f"{label}, committed study ({len(group)} seeds, mean)",
                        (grid, ys.tolist())))
        return out


def committed_reference(path: Path) -> list[dict[str, Any]]:
    """The Freeway rows of the committed XLVIN-R / PPO study (`COMMITTED`): label, seeds,
    transitions reached, AUC and greedy score over seeds; [] when the file is missing."""
    if not path.is_file():
        return []
    with reading_results(path):
        data = read_json(path)
        return [{"source": str(path), "agent": r["agent"], "label": r["label"],
                 "seeds": r["seeds"], "budget": r["budget"],
                 "transitions_reached": r["transitions_reached"], "auc": r["auc"],
                 "final_eval": r["final_eval"]}
                for r in data["rows"] if r["game"] == GAME]


def _number(summary: dict[str, float], digits: int) -> str:
    if summary.get("n", 1) == 1:
        return f"{summary['iqm']:.{digits}f}"
    return (f"{summary['iqm']:.{digits}f} [{summary['iqm_low']:.{digits}f}, "
            f"{summary['iqm_high']:.{digits}f}] (mean {summary['mean']:.{digits}f})")


def markdown(rows: list[dict[str, Any]], test: dict[str, Any], reference: list[dict[str, Any]],
             records: list[dict[str, Any]]) -> str:
    lines = ["# Figure 10: a VAE world model in place of TransE (Freeway)", "",
             ("| agent | seeds | transitions reached (budget) | AUC, IQM [95 % CI] (mean) | "
             "greedy score, IQM [95 % CI] (mean) |"), "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} (ours, this experiment) | {len(r['seeds'])} | "
                     f"{', '.join(f'{t:,}' for t in r['transitions_reached'])} ({r['budget']:,}) | "
                     f"{_number(r['auc'], 2)} | {_number(r['final_eval'], 1)} |")
    for r in reference:
        lines.append(f"| {r['label']} (committed study, {r['source']}) | {len(r['seeds'])} | "
                     f"{r['transitions_reached']:,} ({r['budget']:,}) | {_number(r['auc'], 2)} | "
                     f"{_number(r['final_eval'], 1)} |")
    lines += ["", (f"Embedding spread over {FRAMES:,} held-out frames (FreewayEval, seed "
              f"{FRAMES_SEED:,}, random policy), per seed:"), "",
              ("| seed | agent | transitions | mean variance | participation ratio | "
              "relative spread | dims var < 1e-4 | dead dims | foreground error / background's |"),
              "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r["seed"], AGENTS.index(r["agent"]))):
        s, rec = r["embedding"]["spread"], r["embedding"].get("reconstruction")
        ratio = "-" if rec is None else f"{rec['foreground_error_ratio']:.2f}"
        lines.append(f"| {r['seed']} | {LABELS[r['agent']]} | {r['transitions_reached']:,} | "
                     f"{s['mean_variance']:.3g} | {s['participation_ratio']:.2f} | "
                     f"{s['relative_spread']:.3g} | {s['low_variance_fraction']:.0%} | "
                     f"{s['dead_fraction']:.0%} | {ratio} |")
    verdict = {True: "holds", False: "fails", None: "untested (no seed has both agents)"}
    lower = sum(p["vae_lower_participation_ratio"] for p in test["pairs"])
    lines += ["", (f"Collapse test ({test['statement']}): **{verdict[test['holds']]}** on "
              f"{len(test['pairs'])} seed(s). The VAE's participation ratio is the lower on "
              f"{lower} of them (not part of the test).")]
    return "\n".join(lines)


def saved_images(cell_list: list[VAECell], root: Path) -> dict[int, dict[str, np.ndarray]]:
    """Seed -> the shown frames and reconstructions its VAE cell saved (`analysis_of`)."""
    images = {}
    for cell in cell_list:
        file = cell.run_dir(root) / RECONSTRUCTIONS_FILE
        if cell.agent == VAE and file.is_file():
            with np.load(file) as data:
                images[cell.seed] = {k: data[k] for k in data.files}
    return images


def write_results(records: list[dict[str, Any]], results: Path, committed: Path = COMMITTED,
                  images: dict[int, dict[str, np.ndarray]] | None = None) -> str:
    """results/atari_vae.json, .md and .png (`images`: `saved_images`); returns the
    markdown."""
    if not records:
        raise UserError("no cell of the VAE experiment has a record to write")
    rows, test = aggregate(records), collapse_test(records)
    reference = committed_reference(committed)
    prepare_results(results)
    reached = sorted({r["transitions_reached"] for r in records})
    note = (f"Freeway, budget {max(r['transitions'] for r in records):,} transitions; reached "
            + ", ".join(f"{t:,}" for t in reached) + "; trained on: "
            + ", ".join(sorted({r["final_eval"]["machine"] for r in records})))
    write_json(results / "atari_vae.json", {
        "note": note, "frames": FRAMES, "frames_seed": FRAMES_SEED, "shown": list(SHOWN),
        "low_variance": LOW_VARIANCE, "foreground": FOREGROUND, "rows": rows,
        "collapse_test": test, "committed_reference": reference,
        "cells": sorted(records, key=lambda r: (r["agent"], r["seed"])),
    })
    text = markdown(rows, test, reference, records) + f"\n\n{note}"
    atomic_write_text(results / "atari_vae.md", text + "\n")
    plot(records, note, results / "atari_vae.png", images, committed_curves(committed))
    return text


def plot(records: list[dict[str, Any]], note: str, path: Path,
         images: dict[int, dict[str, np.ndarray]] | None = None,
         reference_curves: list[tuple[str, tuple[list[float], list[float]]]] | None = None) -> None:
    """Figure 10 (held-out frames above, each VAE seed's reconstructions below), the spread of
    each seed's embedding, and the training curves (with `reference_curves`: (label, (x, y)),
    the committed study's mean curves). `images`: seed -> the VAE cell's saved reconstructions
    (`saved_images`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vae = sorted((r for r in records if r["agent"] == VAE), key=lambda r: r["seed"])
    images = images or {}
    shown = [images[r["seed"]] for r in vae if r["seed"] in images]
    image_rows = 1 + len(shown) if shown else 0
    fig = plt.figure(figsize=(9, 2.0 * image_rows + 3.6))
    grid = fig.add_gridspec(image_rows + 1, len(SHOWN) * 2,
                            height_ratios=[1] * image_rows + [1.8])
    for row, pictures in enumerate([shown[0]["originals"]] + [s["reconstructions"] for s in shown]
                                   if shown else []):
        for col in range(len(SHOWN)):
            ax = fig.add_subplot(grid[row, 2 * col:2 * col + 2])
            ax.imshow(pictures[col], cmap="gray", vmin=0, vmax=255)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                seed = [r["seed"] for r in vae if r["seed"] in images][row - 1] if row else None
                ax.set_ylabel("held-out" if row == 0 else f"VAE s{seed}", fontsize=8)
    bars = fig.add_subplot(grid[image_rows, :len(SHOWN)])
    seeds = sorted({r["seed"] for r in records})
    for i, agent in enumerate(AGENTS):
        by_seed = {r["seed"]: r["embedding"]["spread"]["relative_spread"]
                   for r in records if r["agent"] == agent}
        xs = [j + 0.4 * i for j, s in enumerate(seeds) if s in by_seed]
        bars.bar(xs, [by_seed[s] for s in seeds if s in by_seed], width=0.4,
                 label=LABELS[agent], color=f"C{i}")
    bars.set_xticks([j + 0.2 for j in range(len(seeds))], [f"seed {s}" for s in seeds])
    bars.set_yscale("log")
    bars.set_ylabel("relative spread of h_s (held-out frames)", fontsize=8)
    bars.legend(fontsize=7)
    curves = fig.add_subplot(grid[image_rows, len(SHOWN):])
    for i, agent in enumerate(AGENTS):
        for j, r in enumerate(r for r in records if r["agent"] == agent and r["curve"]):
            curves.plot(*zip(*r["curve"]), color=f"C{i}", linewidth=1,
                        label=LABELS[agent] if j == 0 else None)
    for j, (label, mean_curve) in enumerate(reference_curves or []):
        curves.plot(*mean_curve, color="grey", linestyle=("--", ":")[j % 2], linewidth=1,
                    label=label)
    curves.set_xlabel("transitions", fontsize=8)
    curves.set_ylabel("training game score", fontsize=8)
    if curves.get_legend_handles_labels()[0]:
        curves.legend(fontsize=7)
    fig.suptitle("VAE world model on Freeway (paper figure 10)\n" + note, fontsize=8)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


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
