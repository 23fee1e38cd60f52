"""The authors' protocol (`--protocol paper`): Monte Carlo returns, minibatches of 128 with the
last one dropped, advantages normalised over the batch, collection until N episodes have ended,
fixed targets across updates, exact budgets, and the architecture switches it needs."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.test_ppo import FIXED, RANDOM, RecordingAgent
from xlvin.experiments import table1, table1_report
from xlvin.io.executor_file import load_executor
from xlvin.nn.executor import MessagePassing
from xlvin.ppo import loop
from xlvin.ppo.advantages import compute_gae, monte_carlo_returns
from xlvin.ppo.collect import collect_until_episodes_end
from xlvin.ppo.update import estimate_advantages, normalise_over_batch
from xlvin.ppo.low_data import LowDataConfig
from xlvin.run.training import train_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.envs.spaces import Spaces
from xlvin.ppo.storage import Rollout


def one_env_rollout() -> Rollout:
    """One env, 7 steps: real, terminated | autoreset | real, truncated | autoreset | real."""
    column = lambda xs, dtype: torch.tensor(xs, dtype=dtype).unsqueeze(1)
    return Rollout(
        obs=torch.zeros(8, 1, 1), actions=torch.zeros(7, 1, dtype=torch.long),
        logprobs=torch.zeros(7, 1),
        values=column([0.5, 1.0, 9.0, 0.2, 0.3, 0.7, 0.1, 0.6], torch.float32),
        rewards=column([1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 5.0], torch.float32),
        terminated=column([False, True, False, False, False, False, False], torch.bool),
        truncated=column([False, False, False, False, True, False, False], torch.bool),
        valid=column([True, True, False, True, True, False, True], torch.bool),
    )


@pytest.mark.parametrize("time_limit_terminal", [True, False])
def test_monte_carlo_returns_by_hand(time_limit_terminal: bool) -> None:
    g = 0.9
    g6 = 5 + g * 0.6  # the data ends: bootstrap from V(obs[7])
    g4 = 4.0 if time_limit_terminal else 4 + g * 0.7  # truncated: terminal, or V(final obs)
    g3 = 3 + g * g4
    g1 = 2.0  # terminated
    g0 = 1 + g * g1
    expected = torch.tensor([g0, g1, 0.0, g3, g4, 0.0, g6]).unsqueeze(1)
    advantages, returns = monte_carlo_returns(one_env_rollout(), g, time_limit_terminal)
    torch.testing.assert_close(returns, expected)
    old = torch.tensor([0.5, 1.0, 0.0, 0.2, 0.3, 0.0, 0.1]).unsqueeze(1)
    torch.testing.assert_close(advantages, expected - old)


def test_gae_with_time_limits_as_terminations_stops_at_the_truncation() -> None:
    g, lam = 0.9, 0.8
    advantages, _ = compute_gae(one_env_rollout(), g, lam, time_limit_terminal=True)
    assert advantages[4, 0].item() == pytest.approx(4 - 0.3)  # no bootstrap from V(final obs)
    assert advantages[3, 0].item() == pytest.approx((3 + g * 0.3 - 0.2) + g * lam * (4 - 0.3))


def test_batch_normalisation_of_advantages_uses_the_real_transitions_only() -> None:
    advantages = torch.tensor([[1.0, 5.0], [3.0, 0.0]])
    valid = torch.tensor([[True, False], [True, True]])
    out = normalise_over_batch(advantages, valid)
    real = torch.tensor([1.0, 3.0, 0.0])
    expected = (real - real.mean()) / (real.std() + 1e-5)
    torch.testing.assert_close(out[valid], expected)
    assert out[0, 1] == 0


def test_fixed_size_minibatches_drop_the_last_partial_one() -> None:
    T, N = 50, 6  # 300 real transitions: 2 minibatches of 128, 44 dropped
    rollout = Rollout(
        obs=torch.arange((T + 1) * N, dtype=torch.float32).view(T + 1, N, 1),
        actions=torch.zeros(T, N, dtype=torch.long), logprobs=torch.zeros(T, N),
        values=torch.zeros(T + 1, N), rewards=torch.zeros(T, N),
        terminated=torch.zeros(T, N, dtype=torch.bool), truncated=torch.zeros(T, N, dtype=torch.bool),
        valid=torch.ones(T, N, dtype=torch.bool),
    )
    zeros = torch.zeros(T, N)
    sizes = [len(mb.obs) for mb in rollout.minibatches(zeros, zeros, 4, torch.Generator(), size=128)]
    assert sizes == [128, 128]
    seen = torch.cat([mb.obs for mb in rollout.minibatches(zeros, zeros, 4,
                                                             torch.Generator().manual_seed(3), size=128)])
    assert len(set(seen.flatten().tolist())) == 256  # distinct rows


def test_collection_until_episodes_end_keeps_every_step_of_every_env() -> None:
    # 15 envs, episodes of exactly 3 steps: all 15 end at step 2, so 10 are reached after 3 steps
    rollout = collect_until_episodes_end(FIXED, RecordingAgent(), 10, seed=0, num_envs=15)
    assert rollout.num_steps == 3 and rollout.valid.all()
    assert int(rollout.valid.sum()) == 45 and rollout.episode_returns == [3.0] * 15
    # random lengths: it stops at the first step where 5 episodes have ended in total
    rollout = collect_until_episodes_end(RANDOM, RecordingAgent(), 5, seed=2, num_envs=4)
    done = (rollout.terminated | rollout.truncated).sum(1).cumsum(0)
    assert done[-1] >= 5 and (len(done) == 1 or done[-2] < 5)
    autoreset = torch.zeros_like(rollout.valid)
    autoreset[1:] = rollout.terminated[:-1] | rollout.truncated[:-1]
    assert torch.equal(rollout.valid, ~autoreset)  # unfinished episodes are kept
    assert len(rollout.episode_returns) == int(done[-1])


def tiny_paper_config(executor: Path, agent: str = "xlvin-r", updates: int = 4):
    cfg = table1.Cell("paper", "CartPole-v0", agent, 0).config()
    cfg.train = dataclasses.replace(cfg.train, executor=str(executor))
    cfg.transe = dataclasses.replace(cfg.transe, episodes=30, epochs=1)
    cfg.low_data = dataclasses.replace(cfg.low_data, updates=updates, eval_points=updates,
                                       eval_episodes=3)
    return cfg


def test_paper_protocol_keeps_its_targets_fixed_and_counts_exactly(
    tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    cfg = tiny_paper_config(executor_path)
    seen: list[tuple[Rollout, torch.Tensor, torch.Tensor]] = []
    minibatches = []
    real_update = loop.ppo_update

    def spy(policy, optimizer, rollout, ppo_cfg, generator):
        seen.append((rollout, rollout.logprobs.clone(), estimate_advantages(rollout, ppo_cfg)[1]))
        forward = policy.forward_with_aux
        policy.forward_with_aux = lambda batch: (minibatches.append(len(batch.obs)), forward(batch))[1]
        try:
            return real_update(policy, optimizer, rollout, ppo_cfg, generator)
        finally:
            del policy.forward_with_aux

    monkeypatch.setattr(loop, "ppo_update", spy)
    _, summary = train_run(cfg, tmp_path / "run", progress=False)

    assert len(seen) == 4 and all(r is seen[0][0] for r, _, _ in seen)  # one fixed dataset
    for _, logprobs, returns in seen[1:]:  # log pi_old and the returns never recomputed
        assert torch.equal(logprobs, seen[0][1]) and torch.equal(returns, seen[0][2])
    rollout = seen[0][0]
    done = (rollout.terminated | rollout.truncated).sum(1).cumsum(0)
    assert rollout.num_envs == 15 and done[-1] >= 10 and done[-2] < 10
    n = int(rollout.valid.sum())
    assert summary["ppo_transitions"] == n and summary["ppo_episodes"] == int(done[-1])
    assert minibatches == [128] * (n // 128) * 4  # one epoch per update, the rest dropped
    assert len(summary["ppo"]["progress"]) == 4  # an evaluation after every update
    assert summary["transe_transitions"] > 0 and "transe_shared_file" in summary


def test_shared_transe_pretraining_is_made_once_and_shared_by_seeds_and_agents(
    tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    weights = []
    for name, seed in (("a", 0), ("b", 1)):
        cfg = tiny_paper_config(executor_path, updates=1)
        cfg.train = dataclasses.replace(cfg.train, seed=seed, pretrain_transe=True)
        cfg.ppo = dataclasses.replace(cfg.ppo, minibatch_size=10**6)  # no PPO step: weights as loaded
        agent, summary = train_run(cfg, tmp_path / name, progress=False)
        weights.append({k: v.clone() for k, v in agent.encoder.state_dict().items()})
    (cached,) = (tmp_path / "cache" / "transe").iterdir()
    assert summary["transe_shared_file"] == cached.name
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]), name


def test_paper_budgets_and_settings_are_the_authors() -> None:
    for env, (rounds, episodes, updates, envs) in {
        "CartPole-v0": (1, 10, 100, 15), "Acrobot-v1": (20, 5, 1, 5),
        "MountainCar-v0": (20, 5, 1, 5),
    }.items():
        cfg = table1.Cell("paper", env, "xlvin-r", 0).config()
        low = cfg.low_data
        assert (low.rounds, low.episodes, low.updates, low.num_envs) == (rounds, episodes, updates, envs)
        assert low.collect == "until_done" and low.eval_points == rounds * updates
        assert low.eval_episodes == 100 and not low.refresh_old_policy
        transe_episodes, transe_epochs = {"CartPole-v0": (50_000, 10), "Acrobot-v1": (4_000, 5),
                                          "MountainCar-v0": (5_000, 5)}[env]
        assert (cfg.transe.episodes, cfg.transe.epochs, cfg.transe.shared) == (
            transe_episodes, transe_epochs, True)
        p = cfg.ppo
        assert (p.lr, p.adam_eps, p.anneal_lr, p.update_epochs, p.minibatch_size) == (
            1e-3, 1e-8, False, 1, 128)
        assert (p.advantages, p.time_limit_terminal, p.norm_adv_batch) == ("monte_carlo", True, True)
        assert (p.clip_coef, p.ent_coef, p.vf_coef, p.max_grad_norm, p.gamma) == (
            0.2, 0.01, 0.5, 0.5, 0.99)
        t = cfg.train
        assert (t.init, t.executor_layer_norm, t.executor_messages, t.executor_projections,
                t.ppo_transe, t.transe_weight) == ("pytorch", True, "linear", True, True, 1e-3)
        # TransE.contrastive_loss: negatives are next states drawn with replacement, both in
        # pre-training and in the term added to PPO
        assert t.transe_negatives == "next_states"
        # --gnn_steps 1: XLVIN's tree and executor at depth 1 (the paper's text says K = 2);
        # ATreeC, which their code does not have, keeps the library's depth
        assert t.depth == 1
        # XLVIN-R's executor: their Erdos-Renyi pre-training (sum), run with max
        assert (t.executor, t.executor_aggregation) == ("authors-random", "max")
        assert table1.Cell("paper", env, "xlvin-cp", 0).config().train.depth == 1
        assert table1.Cell("paper", env, "atreec", 0).config().train.depth == 2


def test_linear_messages_keep_negative_values() -> None:
    torch.manual_seed(0)
    linear, relu = MessagePassing(4, messages="linear"), MessagePassing(4)
    relu.load_state_dict(linear.state_dict())
    x = torch.randn(5, 4)
    out = linear.message(x, x, x)
    assert (out < 0).any()
    torch.testing.assert_close(relu.message(x, x, x), out.relu())
    with pytest.raises(Exception, match="messages must be one of"):
        MessagePassing(4, messages="tanh")


def test_pytorch_init_leaves_the_pretrained_executor_alone(executor_path: Path) -> None:
    processor = load_executor(executor_path).processor
    before = {k: v.clone() for k, v in processor.state_dict().items()}
    torch.manual_seed(0)
    cartpole = Spaces((4,), "flat", 2)
    ortho = agent_of(RunConfig(train=TrainConfig(agent="xlvin")), cartpole, processor)
    torch.manual_seed(0)
    default = agent_of(RunConfig(train=TrainConfig(agent="xlvin", init="pytorch",
                                                  executor_projections=True)), cartpole, processor)
    for k, v in processor.state_dict().items():
        assert torch.equal(v, before[k])
    # orthogonal actor head: gain 0.01; PyTorch's default: uniform(+-1/sqrt(fan_in))
    assert ortho.heads.actor.weight.abs().max() < 0.05
    assert default.heads.actor.weight.abs().max() > 0.05
    assert default.node_projection is not None and default.chi_projection is not None
    logits, values = default(torch.randn(3, 4))
    assert logits.shape == (3, 2) and values.shape == (3,)
    assert np.isfinite(logits.detach().numpy()).all()


def test_low_data_config_rejects_unknown_collection_with_one_line() -> None:
    with pytest.raises(Exception, match="collect must be episodes or until_done"):
        LowDataConfig(collect="bogus")




def test_target_kl_stops_the_round_and_freezes_the_policy(
    tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    weights = []
    real_update = loop.ppo_update

    def spy(policy, *args):
        metrics = real_update(policy, *args)
        weights.append([p.detach().clone() for p in policy.parameters()])
        return metrics

    monkeypatch.setattr(loop, "ppo_update", spy)
    cfg = tiny_paper_config(executor_path, agent="ppo", updates=6)
    cfg.ppo = dataclasses.replace(cfg.ppo, target_kl=1e-9, minibatch_size=32)
    agent, summary = train_run(cfg, tmp_path / "kl", progress=False)
    assert summary["ppo"]["stopped_rounds"] == [0] and summary["ppo"]["updates"] == 6
    assert len(weights) == 1  # the first update exceeded the target: no further update ran
    for final, after_first in zip(agent.parameters(), weights[0], strict=True):
        assert torch.equal(final, after_first)


def test_weight_averaging_ends_with_the_mean_of_the_last_weights(
    tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    snapshots = []
    real_update = loop.ppo_update

    def spy(policy, *args):
        metrics = real_update(policy, *args)
        snapshots.append({k: v.clone() for k, v in policy.state_dict().items()})
        return metrics

    monkeypatch.setattr(loop, "ppo_update", spy)
    cfg = tiny_paper_config(executor_path, agent="ppo", updates=6)
    cfg.ppo = dataclasses.replace(cfg.ppo, minibatch_size=32)
    cfg.low_data = dataclasses.replace(cfg.low_data, average_last=3, eval_points=1)
    agent, _ = train_run(cfg, tmp_path / "avg", progress=False)
    assert len(snapshots) == 6
    for name, value in agent.state_dict().items():
        expected = sum(s[name] for s in snapshots[-3:]) / 3
        torch.testing.assert_close(value, expected)


def test_finished_only_with_nothing_finished_is_one_line(tmp_path: Path, capsys) -> None:
    from xlvin.cli import main

    code = main(["reproduce", "classic", "--finished-only", "--runs", str(tmp_path / "runs"),
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("xlvin: error: none of the 120 cells has finished")
    assert not (tmp_path / "results").exists()


def _record(protocol: str, agent: str, seed: int, final: float) -> dict:
    """A cell record as `table1.cell_record` writes it, with made-up numbers."""
    cell = table1.Cell(protocol, "CartPole-v0", agent, seed)
    progress = [{"updates": u, "episodes": 10, "transitions": 300, "eval_return": final + u}
                for u in (1, 2, 3)]
    return {**dataclasses.asdict(cell), "final_return": final, "final_return_std_over_episodes": 0.0,
            "max_eval_return": final + 3, "last_evals_mean": final + 2, "progress": progress,
            "training_returns": [20.0] * 10, "episodes": 10, "transitions": 300,
            "transe_transitions": 0, "wall_seconds": 1.0}


def test_both_protocols_give_the_combined_table_json_and_plot(tmp_path: Path) -> None:
    """Each protocol's table labels it (ours as our variant); once both exist, table1.md,
    table1.json and table1.png hold the paper's number beside both protocols' statistics."""
    for protocol, base in (("paper", 30.0), ("ours", 150.0)):
        records = [_record(protocol, agent, seed, base + seed + (10 if agent == "xlvin-r" else 0))
                   for agent in ("ppo", "xlvin-r") for seed in range(4)]
        md = table1_report.write_results(records, tmp_path, wall_seconds=None)
        assert table1.PROTOCOL_LABELS[protocol] in md
        assert (tmp_path / f"table1-{protocol}.png").stat().st_size > 0
        assert (tmp_path / "table1.md").exists() == (protocol == "ours")
    combined = (tmp_path / "table1.md").read_text()
    xlvin_line = next(line for line in combined.splitlines() if "| xlvin-r |" in line)
    # paper 199.2; paper protocol: max over evaluations IQM 44.5 (43..46), final 41.5; ours final 161.5
    assert "199.2 +- 1.6" in xlvin_line and "44.5 [" in xlvin_line and "**41.5 [" in xlvin_line
    assert "**161.5 [" in xlvin_line and "164.5 [" in xlvin_line  # ours: final, authors' max
    assert "our variant" in combined
    data = json.loads((tmp_path / "table1.json").read_text())
    assert {(r["protocol"], r["agent"]) for r in data["rows"]} == {
        (p, a) for p in ("paper", "ours") for a in ("ppo", "xlvin-r")}
    assert (tmp_path / "table1.png").stat().st_size > 10_000


def test_a_variant_with_a_dot_keeps_its_whole_name(tmp_path: Path) -> None:
    """kl-0.01 and kl-0.03 write table1-paper-kl-0.01.* and table1-paper-kl-0.03.*, not one
    table1-paper-kl-0.* that the second overwrites."""
    for v in ("kl-0.01", "kl-0.03"):
        records = [{**_record("paper", "xlvin-r", seed, 50.0), "variant": v} for seed in range(3)]
        table1_report.write_results(records, tmp_path, wall_seconds=None)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"table1-paper-kl-0.0{i}.{ext}" for i in (1, 3) for ext in ("json", "md", "png")]


def test_executor_ablation_variants_change_what_they_name() -> None:
    """The arms of the executor ablation, under both protocols."""
    for protocol in ("paper", "ours"):
        def train(agent: str, variant: str, protocol: str = protocol) -> TrainConfig:
            return table1.Cell(protocol, "CartPole-v0", agent, 0, variant=variant).config().train
        base = train("xlvin-r", "")
        assert train("xlvin-r", "untrained-executor") == dataclasses.replace(base, executor="untrained")
        assert train("xlvin-r", "zero-chi") == dataclasses.replace(base, zero_chi=True)
        assert train("xlvin-r", "depth-1").depth == 1 and train("xlvin-r", "depth-2").depth == 2
        assert train("ppo", "ppo-transe").ppo_transe and not train("ppo", "no-ppo-transe").ppo_transe


def test_executor_aggregation_runs_the_executor_otherwise_than_pre_trained() -> None:
    """--executor-aggregation max on an executor pre-trained with sum (the authors' XLVIN-R):
    the agent's tree aggregates with max, which changes chi; empty keeps the file's."""
    torch.manual_seed(0)
    processor = MessagePassing(16, "sum", layer_norm=True, messages="linear")
    cartpole = Spaces((4,), "flat", 2)
    kept = agent_of(RunConfig(train=TrainConfig(agent="xlvin", hidden=16, embedding_dim=16,
                                                depth=1)), cartpole, processor)
    assert kept.processor.aggregation == "sum"
    h = torch.randn(3, 16)
    with torch.no_grad():
        chi_sum = kept.plan(h)
        other = agent_of(RunConfig(train=TrainConfig(
            agent="xlvin", hidden=16, embedding_dim=16, depth=1, executor_aggregation="max")),
            cartpole, processor)
        other.load_state_dict(kept.state_dict())
        assert other.processor.aggregation == "max"
        assert not torch.allclose(other.plan(h), chi_sum)
