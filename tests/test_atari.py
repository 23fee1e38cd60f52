"""The paper's Atari experiment: its environments (episodic life, clipped rewards, whole-game
scores), the emulator's state across a checkpoint, exact resume of a tiny pixel run, training
stopped at a deadline, and the cells' curves, areas and options."""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.experiments import atari, atari_report, registry
from xlvin.experiments.protocol import run_cells
from xlvin.io import run_dir as run_dir_module
from xlvin.io.digests import sealed
from xlvin.io.run_dir import read_metrics
from xlvin.stats import iqm
from xlvin.ppo.collect import make_vector_env, reset_envs
from xlvin.envs.env_state import env_state, restorable, restore_env_state
from xlvin.ppo.update import PPOConfig
from xlvin.run.training import train_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_device


def test_training_env_ends_episodes_on_lives_and_reports_whole_unclipped_games() -> None:
    """Alien (3 lives) with random actions: rewards clipped to {-1, 0, 1}, an episode per life,
    and at a game's end its unclipped score (a multiple of 10: Alien's points) in info."""
    envs = make_vector_env("xlvin/AlienTrain-v4", 2)
    reset_envs(envs, 0)
    rng = np.random.default_rng(0)
    dones, clipped, scores = 0, 0.0, []
    for _ in range(1_600):
        _, reward, terminated, truncated, info = envs.step(rng.integers(0, 18, 2))
        assert set(np.unique(reward)) <= {0.0, 1.0}
        clipped += reward.sum()
        dones += int((terminated | truncated).sum())
        if "episode" in info:
            scores += info["episode"]["r"][info["_episode"]].tolist()
    assert scores and all(s > 0 and s % 10 == 0 for s in scores)
    assert dones >= 3 * len(scores)  # every life lost ends an episode; only game overs report
    assert sum(scores) > clipped / 2  # the scores are not the clipped rewards


def test_atari_env_state_restored_into_a_fresh_env_steps_identically() -> None:
    """The emulator (cloneState with its RNG), frame buffers, frame stack, lives and game
    statistics cross a JSON checkpoint: a fresh env then steps exactly as the original."""
    rng = np.random.default_rng(1)
    original = make_vector_env("xlvin/AlienTrain-v4", 2)
    reset_envs(original, 3)
    for _ in range(200):
        original.step(rng.integers(0, 18, 2))
    state = json.loads(json.dumps(env_state(original)))
    copy = make_vector_env("xlvin/AlienTrain-v4", 2)
    reset_envs(copy, 99)
    restore_env_state(copy, state)
    assert restorable(original)
    dones = 0
    for _ in range(500):  # lives lost and episodic-life resets included
        actions = rng.integers(0, 18, 2)
        a, b = original.step(actions), copy.step(actions)
        for x, y in zip(a[:4], b[:4]):
            np.testing.assert_array_equal(x, y)
        dones += int((a[2] | a[3]).sum())
    assert dones > 0


def tiny(agent: str, updates: int = 4) -> RunConfig:
    """A pixel run of `updates` updates of 2 envs x 16 steps on Freeway, checkpoint every 2."""
    return RunConfig(
        train=TrainConfig(env="xlvin/FreewayTrain-v4", agent=agent, depth=1, seed=3,
                          pretrain_transe=False, checkpoint_every=2),
        ppo=PPOConfig(**{**atari.ATARI_PPO, "num_envs": 2, "num_steps": 16,
                         "total_steps": 32 * updates}),
    )


def outcome(run: Path) -> tuple[dict[str, torch.Tensor], list[dict[str, float]]]:
    rows = [{k: v for k, v in r.items() if k != "charts/sps"} for r in read_metrics(run)]
    return load_file(str(run / "model.safetensors")), rows


@pytest.mark.parametrize("agent", ["ppo", "xlvin"])
def test_atari_run_stopped_at_a_deadline_resumes_to_the_same_result(
    agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor_path: Path
) -> None:
    """4 updates straight, against: stopped by a deadline after 2 (checkpointed there, the run
    left unfinished), then resumed: the same weights and metrics."""
    cfg = tiny(agent)
    cfg.train.executor = str(executor_path)
    train_run(cfg, tmp_path / "full", progress=False)

    rows, real_time = {"n": 0}, time.time
    log_row = run_dir_module.MetricsLogger.__call__

    def count_rows(self: run_dir_module.MetricsLogger, step: int, metrics: dict) -> None:
        log_row(self, step, metrics)
        rows["n"] += 1

    with monkeypatch.context() as patch:  # the clock jumps a day once 2 updates are logged
        patch.setattr(run_dir_module.MetricsLogger, "__call__", count_rows)
        patch.setattr(time, "time", lambda: real_time() + 86_400 * (rows["n"] >= 2))
        _, summary = train_run(cfg, tmp_path / "cut", progress=False, deadline=real_time() + 3_600)
    assert summary["stopped_at_deadline"] and summary["ppo"]["updates"] == 2
    assert not (tmp_path / "cut" / "summary.json").exists()
    train_run(cfg, tmp_path / "cut", progress=False, resume=True)
    (weights_a, rows_a), (weights_b, rows_b) = outcome(tmp_path / "full"), outcome(tmp_path / "cut")
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)
    assert rows_a == rows_b and len(rows_a) == 4


def test_training_curve_weighs_every_game_once_and_its_area_is_the_mean_score() -> None:
    rows = [{"charts/transitions": 1024 * (i + 1), "charts/episodes": e, **r}
            for i, (e, r) in enumerate([(0, {}), (2, {"charts/episodic_return": 3.0}),
                                        (3, {"charts/episodic_return": 6.0}), (3, {})])]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(atari, "WINDOW_UPDATES", 2)
        curve = atari.training_curve(rows)
    assert curve == [(2048, 3.0), (3072 + 1024, 6.0)]
    assert atari.area_under_curve(curve, 4096) == pytest.approx((2048 * 3 + 2048 * 6) / 4096)
    assert np.isnan(atari.area_under_curve([], 4096))


def test_cells_follow_the_paper_and_bad_options_are_one_error() -> None:
    args = argparse.Namespace(games="Freeway,Alien", agents="paper",
                              transitions="Freeway=2048,Alien=1024", device="cpu")
    cells = atari.cells_from_options(2, args)
    assert [(c.game, c.agent) for c in cells[::2]] == [
        ("Freeway", "ppo"), ("Freeway", "xlvin-r"), ("Freeway", "xlvin-cp"), ("Freeway", "atreec"),
        ("Alien", "ppo"), ("Alien", "xlvin-r"), ("Alien", "atreec")]
    alien = cells[-1].config()
    assert (alien.train.depth, alien.train.env, alien.ppo.total_steps) == (1, "xlvin/AlienTrain-v4", 1024)
    assert (alien.ppo.clip_coef, alien.ppo.num_envs, alien.ppo.num_steps, alien.ppo.lr) == (0.1, 8, 128, 2.5e-4)
    for bad in ({"transitions": "Freeway=2048"}, {"transitions": "100"}, {"transitions": "x"},
                {"games": "Pong"}, {"agents": "dqn"}, {"device": "cuda:99"}):
        with pytest.raises(UserError):
            atari.cells_from_options(1, argparse.Namespace(**{**vars(args), **bad}))


def test_device_must_be_cpu_or_an_available_gpu() -> None:
    check_device("cpu")
    for bad in ("gpu", "cuda:x", f"cuda:{torch.cuda.device_count()}"):
        with pytest.raises(UserError):
            check_device(bad)


@pytest.mark.parametrize("args, message", [
    (["--transitions", "Freeway=2048"], "names no budget for Alien"),
    (["--games", "Pong"], "unknown game 'Pong'"),
    (["--device", "cuda:99"], "CUDA GPU(s)"),
    (["--deadline-minutes", "0"], "--deadline-minutes must be a finite number > 0"),
    (["--eval-games", "0"], "--eval-games must be >= 1"),
])
def test_reproduce_atari_rejects_bad_input_before_creating_anything(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["reproduce", "atari", *args, "--runs", str(tmp_path / "runs"),
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code != 0 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_first_score_is_the_first_update_a_training_game_scored() -> None:
    rows = [{"charts/transitions": 1024}, {"charts/transitions": 2048, "charts/episodic_return": 0.0},
            {"charts/transitions": 3072, "charts/episodic_return": 2.0},
            {"charts/transitions": 4096, "charts/episodic_return": 5.0}]
    assert atari.first_score_at(rows) == 3072
    assert atari.first_score_at(rows[:2]) is None


def fake_record(agent: str, seed: int, auc: float, greedy: float, first: int | None) -> dict:
    """A cell record as `cell_record` writes it, with a made-up two-point curve."""
    return {"game": "Freeway", "agent": agent, "seed": seed, "transitions": 4096, "device": "cpu",
            "transitions_reached": 4096, "finished": True, "curve": [(2048, 0.0), (4096, auc)],
            "auc": auc, "first_score_at": first, "games": 4, "steps_per_second": 100.0 + seed,
            "final_eval": {"mean": greedy, "std": 0.0, "returns": [greedy] * 3, "lengths": [9] * 3,
                           "transitions": 4096, "max_steps": 4500, "machine": "CPU machine"}}


def test_results_give_each_agent_its_iqm_interval_and_the_seeds_that_scored(tmp_path: Path) -> None:
    """Over seeds: the AUC's and the greedy score's IQM inside its 95 % bootstrap interval, the
    probability that an agent's AUC beats PPO's, how many seeds ever scored; each seed in its
    own row of atari.md; the figure written."""
    aucs = {"ppo": [0.0, 0.0, 9.0, 12.0, 15.0], "xlvin-r": [0.0, 0.0, 0.0, 0.0, 3.0]}
    records = [fake_record(agent, seed, auc, 2 * auc, None if auc == 0 else 1024 * (seed + 1))
               for agent, values in aucs.items() for seed, auc in enumerate(values)]
    text = atari_report.write_results(records, tmp_path)
    rows = {r["agent"]: r for r in json.loads((tmp_path / "atari.json").read_text())["rows"]}
    for agent, values in aucs.items():
        auc = rows[agent]["auc"]
        assert auc["iqm"] == pytest.approx(iqm(np.array(values)[:, None]))
        assert auc["iqm_low"] <= auc["iqm"] <= auc["iqm_high"]
        assert auc["mean"] == pytest.approx(np.mean(values))
        assert rows[agent]["final_eval"]["iqm"] == pytest.approx(2 * auc["iqm"])
    assert (rows["ppo"]["seeds_scored"], rows["xlvin-r"]["seeds_scored"]) == (3, 1)
    # of the 25 pairs, XLVIN-R's 3.0 beats PPO's two zeros, its four zeros tie them: (2 + 4 x 2 x 0.5) / 25
    over = rows["xlvin-r"]["auc_over_ppo"]
    assert rows["ppo"]["auc_over_ppo"] is None and over["p"] == pytest.approx(6 / 25)
    assert over["low"] <= over["p"] <= over["high"]
    assert rows["ppo"]["steps_per_second"] == pytest.approx(102.0)
    md = (tmp_path / "atari.md").read_text()
    assert md.strip() == text.strip()
    assert "| Freeway | PPO | 5 | 4,096 (4,096) | 7.00 [" in md and "| 3 of 5 |" in md
    assert "| Freeway | XLVIN-R | 4,096 | 4 | 4,096 | 5,120 | 3.00 | 6.0 | CPU machine |" in md
    assert md.count("| never |") == 6
    assert (tmp_path / "atari_Freeway.png").stat().st_size > 10_000


def test_records_of_cells_not_given_are_kept_so_machines_add_up(tmp_path: Path) -> None:
    """Results written from seeds 0 and 1 (one machine), then from seeds 1 and 2 (another):
    seed 0's record is kept, in its agent's current spelling, and named on the last line;
    seed 1's is the newer one; a results file that is not the code's JSON is one error."""
    first = [fake_record("ppo", 0, 1.0, 2.0, 1024), fake_record("xlvin-r", 0, 5.0, 6.0, 2048),
             fake_record("ppo", 1, 3.0, 4.0, 1024)]
    atari_report.write_results(first, tmp_path)
    path = tmp_path / "atari.json"  # as older versions spelled XLVIN-R's records
    path.write_text(path.read_text().replace('"xlvin-r"', '"xlvin_r"'))
    text = atari_report.write_results([fake_record("ppo", 1, 7.0, 8.0, None),
                                       fake_record("ppo", 2, 9.0, 9.0, 3072)], tmp_path)
    cells = json.loads((tmp_path / "atari.json").read_text())["cells"]
    assert [(c["agent"], c["seed"], c["auc"]) for c in cells] == [
        ("ppo", 0, 1.0), ("ppo", 1, 7.0), ("ppo", 2, 9.0), ("xlvin-r", 0, 5.0)]
    assert text.splitlines()[-1] == (
        f"kept from {tmp_path / 'atari.json'} the records of 2 cells not given here: "
        "Freeway PPO seed 0 (4,096), Freeway XLVIN-R seed 0 (4,096)")
    md = (tmp_path / "atari.md").read_text()
    assert "| Freeway | PPO | 3 | 4,096 (4,096) |" in md and "kept from" not in md
    (tmp_path / "atari.json").write_text('{"cells": [{"game": "Freeway"}]}')
    with pytest.raises(UserError, match="corrupt results in .*atari.json"):
        atari_report.write_results([fake_record("ppo", 3, 1.0, 1.0, None)], tmp_path)


def test_the_figure_is_the_same_whichever_cells_were_kept_and_which_given(tmp_path: Path) -> None:
    """Seeds 0-1 written first and 2-3 given later draw the same PNG bytes as seeds 2-3 first
    and 0-1 later, and as all four at once: a figure is re-drawn from its atari.json alone
    (tests/test_committed_results.py), so it must not depend on which machine ran which seed."""
    records = [fake_record("ppo", seed, auc, auc, 1024) for seed, auc in
               enumerate((0.1, 3.3, 7.7, 9.1))]
    pngs = []
    for name, batches in (("a", (records[:2], records[2:])), ("b", (records[2:], records[:2])),
                          ("c", (records,))):
        for batch in batches:
            atari_report.write_results([dict(r) for r in batch], tmp_path / name)
        pngs.append((tmp_path / name / "atari_Freeway.png").read_bytes())
    assert pngs[0] == pngs[1] == pngs[2]


def test_the_note_counts_every_run_stopped_at_the_deadline_not_every_row() -> None:
    """Two PPO seeds and one XLVIN-R seed cut by the deadline make three runs stopped, in two
    rows; the shortest is the least reached of them."""
    records = [fake_record(agent, seed, 1.0, 1.0, None) for agent in ("ppo", "xlvin-r")
               for seed in range(3)]
    for r, reached in zip(records[:2] + records[3:4], (1500, 2500, 3000)):
        r.update(finished=False, transitions_reached=reached)
    note = atari_report.budget_note(atari_report.aggregate(records))
    assert note.endswith("budget 4,096 transitions (3 runs stopped at the deadline, "
                         "the shortest at 1,500)")
    one = atari_report.budget_note(atari_report.aggregate(records[2:4]))
    assert "(1 run stopped at the deadline, the shortest at 3,000)" in one


def evaluated_cell(cell: atari.Cell, root: Path, returns: dict[int, float],
                   evaluated_at: int) -> Path:
    """The run directory of `cell` as training and a greedy evaluation leave it: metrics rows
    {transitions: training score}, chained as the logger seals them, and the evaluation (mean
    4.0) at `evaluated_at` transitions, sealed as `run_cell` writes it."""
    run_dir = cell.run_dir(root)
    run_dir.mkdir(parents=True)
    (run_dir / run_dir_module.CONFIG).write_text(json.dumps(cell.config().to_json()))
    rows, previous = [], ""
    for t, score in returns.items():
        rows.append(sealed({"step": t, "charts/transitions": t, "charts/episodes": 1.0,
                            "charts/sps": 90.0, "charts/episodic_return": score}, previous))
        previous = rows[-1]["sha256"]
    (run_dir / run_dir_module.METRICS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    atari.write_evaluation(run_dir, {"mean": 4.0, "std": 0.0, "returns": [4.0], "lengths": [9],
                                     "transitions": evaluated_at, "max_steps": 4500,
                                     "machine": "CPU machine"})
    return run_dir


def test_a_cell_resumed_since_its_evaluation_is_reported_where_it_was_evaluated(
    tmp_path: Path
) -> None:
    """Another call resumed the cell after its greedy evaluation at 2,048 transitions: its
    record (what `--finished-only` reports) stops there, so its curve, area, first score and
    greedy score are of one policy's run, not the evaluation of one point beside the curve of a
    later one."""
    cell = atari.Cell("Freeway", "ppo", 0, 8192)
    evaluated_cell(cell, tmp_path, {1024: 0.0, 2048: 0.0, 3072: 6.0, 4096: 8.0}, evaluated_at=2048)
    record = atari.cell_record(cell, cell.run_dir(tmp_path))
    assert record["transitions_reached"] == 2048 == record["final_eval"]["transitions"]
    assert record["first_score_at"] is None and record["auc"] == 0.0
    assert max(t for t, _ in record["curve"]) <= 2048


@pytest.mark.parametrize("change", ["a digit", "the metrics row it is tied to"])
def test_a_changed_final_eval_never_reaches_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture, change: str
) -> None:
    """final_eval.json is sealed like eval.json: a changed digit (or a changed training log up
    to the transitions it evaluated) is refused in one line naming the file, and no table is
    written."""
    cell = atari.Cell("Freeway", "ppo", 0, 2048)
    run_dir = evaluated_cell(cell, tmp_path / "runs", {1024: 3.0, 2048: 3.0}, evaluated_at=2048)
    (run_dir / run_dir_module.SUMMARY).write_text("{}")
    args = ["reproduce", "atari", "--games", "Freeway", "--agents", "ppo", "--seeds", "1",
            "--transitions", "2048", "--finished-only", "--runs", str(tmp_path / "runs")]
    assert main([*args, "--results", str(tmp_path / "whole")]) == 0
    assert '"mean": 4.0' in (tmp_path / "whole" / "atari.json").read_text()
    if change == "a digit":
        path = run_dir / atari.EVAL_FILE
        text = path.read_text()
        path.write_text(text.replace('"mean": 4.0', '"mean": 14.0'))
    else:
        path = run_dir / run_dir_module.METRICS
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        rows[0]["charts/episodic_return"] = 30.0  # and every digest after it, as a forger would
        previous = ""
        for row in rows:
            row.update(sealed({k: v for k, v in row.items() if k != "sha256"}, previous))
            previous = row["sha256"]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main([*args, "--results", str(tmp_path / "changed")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"xlvin: error: {run_dir / atari.EVAL_FILE}: its numbers do not match its "
                   "SHA-256 (tied to the run's metrics.jsonl at the transitions it evaluated): "
                   "changed after it was written; move it away and run again to produce it anew")
    assert not (tmp_path / "changed").exists()


def test_cells_whose_turn_comes_after_the_deadline_are_not_started(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A queue cut by the deadline: a cell not yet started is skipped (no run directory, no greedy
    evaluation of an untrained policy), a cell with a record is returned as it is, untouched; a
    call in which no cell started is one error line, not an empty table."""
    past = time.time() - 1
    fresh, done = atari.Cell("Freeway", "ppo", 0, 2048), atari.Cell("Freeway", "ppo", 1, 2048)
    assert atari.run_cell(fresh, tmp_path, past) is None
    assert not fresh.run_dir(tmp_path).exists()
    run_dir = evaluated_cell(done, tmp_path, {1024: 3.0, 2048: 3.0}, evaluated_at=2048)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    records, _ = run_cells(registry.ATARI, [fresh, done], tmp_path, 1, "cells", deadline=past)
    assert [r["seed"] for r in records] == [1]
    assert records[0]["transitions_reached"] == 2048 and records[0]["final_eval"]["mean"] == 4.0
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    assert not fresh.run_dir(tmp_path).exists()

    runs, results = tmp_path / "cli-runs", tmp_path / "cli-results"
    code = main(["reproduce", "atari", "--games", "Freeway", "--agents", "ppo", "--seeds", "1",
                 "--transitions", "1024", "--deadline-minutes", "1e-9", "--runs", str(runs),
                 "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and err.splitlines()[-1] == (
        "xlvin: error: the deadline passed before any of the 1 cells started; nothing to report")
    assert not runs.exists() and not results.exists()
