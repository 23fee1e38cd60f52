"""The VAE world-model experiment's results (`xlvin.experiments.atari_vae`'s records): per
agent the training curve's area and greedy score over seeds and the embedding's spread, the
collapse test seed by seed, the committed XLVIN-R / PPO study beside them, and figure 10 (the
held-out frames, the VAE's reconstructions, the spreads and the training curves)."""

from pathlib import Path
from typing import Any

import numpy as np

from xlvin.errors import UserError
from xlvin.experiments.atari_report import over_seeds
from xlvin.experiments.atari_vae import (
    AGENTS,
    COMMITTED,
    FOREGROUND,
    FRAMES,
    FRAMES_SEED,
    GAME,
    LABELS,
    LOW_VARIANCE,
    RECONSTRUCTIONS_FILE,
    SHOWN,
    VAE,
    XLVIN_R,
    VAECell,
)
from xlvin.experiments.figures import pyplot
from xlvin.experiments.results import write_files
from xlvin.io.files import atomic_savefig, read_json
from xlvin.io.run_dir import reading_results


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
            "auc": over_seeds([r["auc"] for r in group]),
            "final_eval": over_seeds([r["final_eval"]["mean"] for r in group]),
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
    reached = sorted({r["transitions_reached"] for r in records})
    note = (f"Freeway, budget {max(r['transitions'] for r in records):,} transitions; reached "
            + ", ".join(f"{t:,}" for t in reached) + "; trained on: "
            + ", ".join(sorted({r["final_eval"]["machine"] for r in records})))
    text = markdown(rows, test, reference, records) + f"\n\n{note}"
    write_files(results, "atari_vae", text + "\n", {
        "note": note, "frames": FRAMES, "frames_seed": FRAMES_SEED, "shown": list(SHOWN),
        "low_variance": LOW_VARIANCE, "foreground": FOREGROUND, "rows": rows,
        "collapse_test": test, "committed_reference": reference,
        "cells": sorted(records, key=lambda r: (r["agent"], r["seed"])),
    })
    plot(records, note, results / "atari_vae.png", images, committed_curves(committed))
    return text


def plot(records: list[dict[str, Any]], note: str, path: Path,
         images: dict[int, dict[str, np.ndarray]] | None = None,
         reference_curves: list[tuple[str, tuple[list[float], list[float]]]] | None = None) -> None:
    """Figure 10 (held-out frames above, each VAE seed's reconstructions below), the spread of
    each seed's embedding, and the training curves (with `reference_curves`: (label, (x, y)),
    the committed study's mean curves). `images`: seed -> the VAE cell's saved reconstructions
    (`saved_images`)."""
    plt = pyplot()

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


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks of README.md and docs/atari.md (`xlvin.experiments.pages`): the VAE's
    relative spread against XLVIN-R's (TransE), seed by seed, from atari_vae.json."""
    test = read_json(results / "atari_vae.json")["collapse_test"]
    pairs = sorted(test["pairs"], key=lambda p: p["seed"])
    vae = [p["vae"]["relative_spread"] for p in pairs]
    transe = [p["transe"]["relative_spread"] for p in pairs]
    ratios = [t / v for t, v in zip(transe, vae)]
    seeds = ", ".join(str(p["seed"]) for p in pairs)
    holds = "holds" if test["holds"] else "does not hold"
    data = read_json(results / "atari_vae.json")
    cells = {(c["agent"], c["seed"]): c["embedding"]["spread"] for c in data["cells"]}
    seed_ids = sorted({s for _, s in cells})

    def per_seed(agent: str, key: str, digits: int) -> str:
        return ", ".join(f"{cells[agent, s][key]:.{digits}f}" for s in seed_ids)

    vae_row = next(r for r in data["rows"] if r["agent"] == VAE)
    trained = data["cells"]
    scored = sum(c["first_score_at"] is not None for c in trained)
    reference = {r["agent"]: r for r in data["committed_reference"]}
    seven = reference["xlvin_r"]
    return {
        "atari-vae-details": (
            f"- The VAE's embedding is the larger (mean norm, seeds "
            f"{', '.join(map(str, seed_ids))}: "
            f"{per_seed(VAE, 'mean_norm', 1)} against {per_seed(XLVIN_R, 'mean_norm', 1)}; "
            f"the KL floor per dimension lets the mean grow before the KL pushes back). The "
            f"participation ratio is not lower ({per_seed(VAE, 'participation_ratio', 0)} "
            f"against {per_seed(XLVIN_R, 'participation_ratio', 0)}): what little variation is "
            f"left is jitter spread over many directions.\n"
            f"- Reconstructions ignore the foreground: every held-out frame decodes to the same "
            f"picture, the road, lane marks and score area without a car or the chicken; on the "
            f"foreground pixels (those {data['foreground']} away from the frames' median) the "
            f"error is {vae_row['foreground_error_ratio']:.2f} of the error of the frames' median "
            f"background itself.\n"
            f"- Cells that scored in training: {scored} of {len(trained)}, so this study says "
            f"nothing about \"not useful\" for the policy. In the committed seven-seed study "
            f"({seven['source']}, same configuration, default kernels) XLVIN-R's area IQM is "
            f"{seven['auc']['iqm']:.2f} [{seven['auc']['iqm_low']:.2f}, "
            f"{seven['auc']['iqm_high']:.2f}], greedy {seven['final_eval']['iqm']:.1f} "
            f"[{seven['final_eval']['iqm_low']:.1f}, {seven['final_eval']['iqm_high']:.1f}]."),
        "atari-vae-spread": (
            f"- Fixed point: over the held-out frames the VAE encoder's relative spread is "
            + ", ".join(f"{v:.1e}" for v in vae) + f" (seeds {seeds}) against XLVIN-R's "
            + ", ".join(f"{t:.1e}" for t in transe) + ": "
            + ", ".join(f"{r:.0f}" for r in ratios) + f" times smaller. The collapse test "
            f"{holds} on all {len(pairs)} seeds."),
        "atari-vae-headline": (
            f"{'Agrees' if test['holds'] else 'Disagrees'} with the paper on {len(pairs)} Freeway "
            f"seeds: the encodings collapse (relative spread {min(ratios):.0f}-{max(ratios):.0f}x "
            f"below TransE's) and the reconstructions show only the background"),
    }
