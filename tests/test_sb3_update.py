"""Our Atari PPO update against Stable-Baselines3's on the same data and weights.

tests/fixtures/sb3/atari_update.json holds what SB3 2.9.2's PPO computed on the inputs of
`benchmarks.parity.atari_update.update_inputs` (written by that module with SB3 installed); these
tests rebuild the inputs and run our `ppo_update` without SB3. A match here covers the
orthogonal gains, Adam's eps, GAE, per-minibatch advantage normalisation, the clipped surrogate,
the entropy bonus, the value loss (ours 1/2 MSE at vf_coef 0.5 = SB3's MSE at 0.25), the
gradient-norm clip and the frames' /255, within float rounding of two code paths.
"""

import dataclasses
import json

import pytest
import torch

from benchmarks.parity.atari import SB3_NAMES, LinearToZero, ours_from_sb3, rows_per_update
from benchmarks.parity.atari_update import (
    FIXTURE,
    ORDER_SEED,
    PPO_SETTINGS,
    singular_values,
    update_inputs,
)
from xlvin.experiments.atari import ATARI_PPO
from xlvin.ppo.update import PPOConfig, estimate_advantages, make_optimizer, ppo_update

TOL = 1e-5


@pytest.fixture(scope="module")
def sb3() -> dict:
    return json.loads(FIXTURE.read_text())


def test_the_comparison_runs_our_atari_settings(sb3) -> None:
    """The compared settings are the Atari experiment's, but for the rollout's size, the epochs
    (2 of 4: a short test), the lr decay and the value clipping (SB3 has no clip of ours' form);
    SB3 used Adam eps 1e-5."""
    differ = {"num_envs", "num_steps", "update_epochs", "anneal_lr", "clip_value_loss", "norm_adv"}
    for key, value in PPO_SETTINGS.items():
        if key not in differ:
            assert ATARI_PPO[key] == value, key
    assert sb3["adam"] == {"eps": ATARI_PPO["adam_eps"], "lr": ATARI_PPO["lr"]}


def test_initial_gains_match_sb3s() -> None:
    """Orthogonal init with SB3's gains: every singular value sqrt(2) in the CNN, 0.01 in the
    actor, 1 in the critic; zero biases."""
    agent, _ = update_inputs()
    ours = singular_values(agent.state_dict())
    theirs = json.loads(FIXTURE.read_text())["initial_singular_values"]
    assert ours.keys() == theirs.keys()
    for name, values in theirs.items():
        assert ours[name] == pytest.approx(values, rel=1e-5, abs=1e-7), name


#: (weight sums: absolute, |weight| sums: relative, first values: absolute) per path. Seen: the
#: readable path within 3e-6, 6e-8 and 4e-9 of SB3; the accelerated one (flat Adam, fused loss,
#: channels-last convolutions) within 1.2e-3 (a conv weight's sum, of -29), 9e-5 (a conv bias)
#: and 8e-7.
WEIGHT_TOL = {False: (1e-5, 1e-6, 1e-6), True: (5e-3, 5e-4, 1e-5)}


@pytest.mark.parametrize("accelerate", [False, True])
def test_one_update_matches_sb3s_on_the_same_data(sb3, accelerate: bool, monkeypatch) -> None:
    """Advantages and returns, each minibatch's gradient norm, the mean losses and every weight
    after 2 epochs x 4 minibatches (the same order as SB3's)."""
    agent, rollout = update_inputs()
    cfg = PPOConfig(**PPO_SETTINGS, accelerate=accelerate)
    advantages, returns = estimate_advantages(rollout, cfg)
    assert torch.allclose(advantages, torch.tensor(sb3["advantages"]), atol=TOL)
    assert torch.allclose(returns, torch.tensor(sb3["returns"]), atol=TOL)

    norms: list[float] = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_",
                        lambda params, max_norm: norms.append(float(clip(params, max_norm))))
    generator = torch.Generator().manual_seed(ORDER_SEED)  # SB3 took these orders (epoch_orders)
    metrics = ppo_update(agent, make_optimizer(agent, cfg), rollout, cfg, generator)
    if not accelerate:  # the flat Adam clips its own flat gradient
        assert norms == pytest.approx(sb3["grad_norms"], rel=1e-4)
    assert metrics["losses/policy_loss"] == pytest.approx(sb3["policy_loss"], abs=TOL)
    assert metrics["losses/value_loss"] == pytest.approx(sb3["value_mse"] / 2, rel=TOL)
    assert metrics["losses/entropy"] == pytest.approx(sb3["entropy"], abs=TOL)
    total, size, head = WEIGHT_TOL[accelerate]
    for name, value in agent.state_dict().items():
        want = sb3["after"][name]
        assert value.double().sum().item() == pytest.approx(want["sum"], rel=0, abs=total), name
        assert value.double().abs().sum().item() == pytest.approx(want["abs_sum"], rel=size), name
        assert value.flatten()[:len(want["head"])].tolist() == pytest.approx(
            want["head"], abs=head), name


def test_sb3_schedule_is_ours() -> None:
    """SB3 calls its schedule before update u of N with progress 1 - (u + 1) / N; `LinearToZero`
    gives our lr (1 - u / N) there, as `xlvin.ppo.loop` sets it."""
    n = 7
    schedule = LinearToZero(2.5e-4, n)
    assert [schedule(1 - (u + 1) / n) for u in range(n)] == pytest.approx(
        [2.5e-4 * (1 - u / n) for u in range(n)], rel=1e-12)


def test_sb3_games_land_in_the_update_they_ended_in() -> None:
    """A game that ended at SB3's timestep t counts in the update whose rollout holds t."""
    rows = rows_per_update([[100, 0.0], [1024, 2.0], [1025, 4.0], [3000, 6.0]], 3072, 1024)
    assert [r["charts/transitions"] for r in rows] == [1024, 2048, 3072]
    assert [r["charts/episodes"] for r in rows] == [2, 3, 4]
    assert [r.get("charts/episodic_return") for r in rows] == [1.0, 4.0, 6.0]


def test_weight_names_cover_our_network() -> None:
    """Every tensor of our PPO network has its SB3 name, and back: a round trip is the identity."""
    agent, _ = update_inputs()
    ours = agent.state_dict()
    theirs = {f"{SB3_NAMES[name.rsplit('.', 1)[0]]}.{name.rsplit('.', 1)[1]}": value
              for name, value in ours.items()}
    assert ours_from_sb3(theirs).keys() == ours.keys()
    assert all(ours_from_sb3(theirs)[k] is v for k, v in ours.items())


def test_an_unfinished_sb3_seed_is_read_from_its_last_checkpoints_log(tmp_path) -> None:
    """The parity report lists a seed still training as its log has it: the transitions of the
    last rollout saved, its first scoring game, the mean of its last two rounds of games."""
    from benchmarks.parity.atari import GAME_TRANSITIONS, running_seed

    games = [[GAME_TRANSITIONS - 8, 0.0], [GAME_TRANSITIONS, 0.0],
             [2 * GAME_TRANSITIONS - 8, 1.0], [2 * GAME_TRANSITIONS, 3.0],
             [3 * GAME_TRANSITIONS, 5.0]]
    entropy = [[1024 * u, 1.09] for u in range(1, 49)]  # 48 updates: 49,152 transitions
    (tmp_path / "log.json").write_text(json.dumps({"games": games, "entropy": entropy}))
    partial = running_seed(4, tmp_path)
    assert partial["seed"] == 4 and partial["transitions_reached"] == 49_152
    assert partial["first_score_at"] == 2 * GAME_TRANSITIONS
    assert partial["recent_mean"] == pytest.approx(3.0)  # the games after 49,152 - 32,768
    (tmp_path / "result.json").write_text("{}")
    assert running_seed(4, tmp_path) is None


def test_a_resumed_sb3_seed_counts_the_seconds_before_its_checkpoint(tmp_path) -> None:
    """Training seconds live in the checkpoint's log, so a seed killed and resumed reports its
    whole training, not the last process's share; a log from before they were kept says the
    time is unknown (None) rather than a wrong number. Needs SB3 (not in CI): one update of
    1,024 transitions, then a resume to 2,048."""
    from benchmarks.parity.atari import read_log, train

    (tmp_path / "log.json").write_text(json.dumps({"games": [], "entropy": []}))
    assert read_log(tmp_path, 0)["cpu_seconds"] is None
    (tmp_path / "log.json").unlink()
    assert read_log(tmp_path, 0)["cpu_seconds"] == 0.0
    pytest.importorskip("stable_baselines3")
    torch.set_num_threads(1)
    first = read_log(tmp_path, train(0, 1024, tmp_path, 1).num_timesteps)
    second = read_log(tmp_path, train(0, 2048, tmp_path, 1).num_timesteps)
    assert 0 < first["cpu_seconds"] < second["cpu_seconds"]
    assert 0 < first["seconds"] < second["seconds"]
    assert second["cpu_seconds"] > 1.5 * first["cpu_seconds"]  # two updates' worth, not one


def test_the_report_sets_sb3_beside_our_seeds_of_the_same_budget(tmp_path) -> None:
    """At 100,000 transitions the report reads our committed seven-seed study (seeds 3 and 5
    learned: last windows 21.9 and 21.4 a game); SB3's seeds that learned are counted the same
    way and the two counts compared by Fisher's exact test (3 of 3 against 2 of 7: p = 42/252).
    A budget with no seeds of ours on file says so instead of comparing."""
    from benchmarks.parity.atari import report

    def sb3_seed(seed: int, last: float) -> dict:
        return {"lib": "sb3", "seed": seed, "transitions_reached": 99_328, "auc": last / 2,
                "curve": [[49_152, 0.0], [99_328, last]], "first_score_at": 16_384,
                "final_eval": {"mean": 21.7}}

    report([sb3_seed(s, 20.0) for s in range(3)], tmp_path, "cmd", 3, 100_000, [])
    summary = json.loads((tmp_path / "atari.json").read_text())
    assert summary["rows"]["xlvin PPO"]["seeds"] == list(range(7))
    assert summary["rows"]["xlvin PPO"]["seeds_learned"] == 2
    assert summary["rows"]["SB3 PPO"]["seeds_learned"] == 3
    assert summary["fisher_learned_p"] == pytest.approx(42 / 252)
    assert "| SB3 PPO | 3 |" in (tmp_path / "atari.md").read_text()

    report([sb3_seed(0, 5.0)], tmp_path, "cmd", 1, 20_480, [])
    summary = json.loads((tmp_path / "atari.json").read_text())
    assert summary["ours"] == [] and summary["fisher_learned_p"] is None
    assert "No seeds of our PPO at 20,480 transitions" in (tmp_path / "atari.md").read_text()


def test_the_1m_comparison_counts_only_fresh_seeds_that_trained_the_whole_budget(tmp_path) -> None:
    """Fresh seeds 3 and 4 finished (3 learned: last window 21), seed 5 stopped at a deadline
    with a last window of 22: seed 5 is listed as stopped and counted nowhere, so SB3's 3 of 3
    face our 1 of 2 (Fisher p = 0.4), and pooled with seed 0 (learned) 2 of 3 (p = 1)."""
    from benchmarks.parity import freeway_1m

    def cell(seed: int, last: float, finished: bool = True) -> dict:
        return {"game": "Freeway", "agent": "ppo", "transitions": 1_000_000, "seed": seed,
                "finished": finished, "transitions_reached": 1_000_000 if finished else 300_000,
                "curve": [[500_000, 0.0], [1_000_000, last]], "auc": last / 2,
                "first_score_at": 16_384 if last else None, "final_eval": {"mean": last}}

    files = {}
    for name, cells in (("fresh", [cell(3, 21.0), cell(4, 0.0), cell(5, 22.0, False)]),
                        ("earlier", [cell(0, 21.0)])):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"cells": cells}))
    files["sb3"] = tmp_path / "sb3.json"
    files["sb3"].write_text(json.dumps({"sb3": [cell(s, 20.0) for s in range(3)]}))
    summary = freeway_1m.write(tmp_path / "out", files["fresh"], files["earlier"], files["sb3"])
    assert summary["rows"]["xlvin PPO, fresh seeds 3-7"]["seeds"] == [3, 4]
    assert summary["sb3_vs_fresh"]["learned"] == [3, 3, 1, 2]
    assert summary["sb3_vs_fresh"]["fisher_p"] == pytest.approx(0.4)
    assert summary["sb3_vs_all_ours"]["learned"] == [3, 3, 2, 3]
    assert summary["sb3_vs_all_ours"]["fisher_p"] == pytest.approx(1.0)
    assert [r["seed"] for r in summary["still_training"]] == [5]
    md = (tmp_path / "out" / "freeway-1m.md").read_text()
    assert "| 5 | 300,000 | 16,384 | 22.0 |" in md and "2 of the 5 fresh seeds" in md


def test_the_unclipped_variant_is_our_atari_ppo_cell_with_sb3s_value_loss(tmp_path) -> None:
    """The third row of the parity report trains `xlvin reproduce atari`'s PPO cell with one
    setting changed, the value-loss clipping, in a run directory of its own."""
    from benchmarks.studies.atari_cells import VariantCell
    from benchmarks.parity.atari import GAME, UNCLIPPED
    from xlvin.experiments.atari import Cell

    cell = VariantCell(GAME, "ppo", 3, 100_000, name=UNCLIPPED, ppo=(("clip_value_loss", False),))
    ours, base = cell.config(), Cell(GAME, "ppo", 3, 100_000).config()
    assert ours.ppo == dataclasses.replace(base.ppo, clip_value_loss=False)
    assert base.ppo.clip_value_loss and ours.train == base.train
    assert cell.run_dir(tmp_path) == tmp_path / "ours-unclipped-value" / "seed3"


def test_a_branch_starts_our_ppo_from_sb3s_weights_and_adam_moments(tmp_path) -> None:
    """`benchmarks.parity.atari_branch` continues an SB3 checkpoint with our update: SB3's
    weights and Adam moments (step count included) in our network and FlatAdam, so that one
    Adam step on the same gradient moves both to the same weights. Needs SB3 (not in CI): one
    update of 1,024 transitions."""
    pytest.importorskip("stable_baselines3")
    from benchmarks.parity.atari import atari_ppo, ours_from_sb3, our_network, train
    from benchmarks.parity.atari_branch import load_sb3, our_state
    from xlvin.ppo.update import PPOConfig, make_optimizer, set_learning_rate

    torch.set_num_threads(1)
    train(0, 1024, tmp_path, 1)
    start = tmp_path / "checkpoint.zip"
    weights, adam, done = our_state(start)
    assert done == 1 and adam["state"][0]["step"] == 16  # 4 epochs x 4 minibatches
    policy = load_sb3(start, 0).policy
    agent = our_network()
    agent.load_state_dict(weights)
    optimizer = make_optimizer(agent, PPOConfig(**atari_ppo()))
    optimizer.load_state_dict(adam)

    g = torch.Generator().manual_seed(0)
    grads = {n: torch.randn(p.shape, generator=g) * 1e-3 for n, p in policy.named_parameters()}
    for name, p in policy.named_parameters():
        p.grad = grads[name].clone()
    for group in policy.optimizer.param_groups:
        group["lr"] = 1e-4
    policy.optimizer.step()
    optimizer.zero_grad()
    for name, p in agent.named_parameters():
        p.grad.copy_(ours_from_sb3(grads)[name])
    set_learning_rate(optimizer, 1e-4)
    optimizer.step()
    theirs = ours_from_sb3(policy.state_dict())
    for name, p in agent.named_parameters():
        assert (theirs[name] - weights[name]).abs().max() > 1e-6, name  # the step moved it
        assert torch.allclose(p.detach(), theirs[name], atol=1e-7), name


def test_a_second_process_on_an_sb3_seed_is_refused_before_any_work(tmp_path) -> None:
    """Two workers on one seed would train into one checkpoint: the second is one UserError
    while the first holds the run directory, and nothing in it is touched."""
    import subprocess
    import sys

    from benchmarks.parity.atari import worker
    from xlvin.errors import UserError

    run = tmp_path / "seed0"
    run.mkdir()
    (run / "log.json").write_text("{}")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; "
         f"fd = os.open({str(run / '.lock')!r}, os.O_RDONLY | os.O_CREAT); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match="in use by another"):
            worker(0, 1024, run, 1)
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in run.iterdir()) == [".lock", "log.json"]
    assert (run / "log.json").read_text() == "{}"
