"""Our binned actions and sampled expansions against numbers the authors' continuous-action
code produced (dransyhe/CNAP e303fc5: `discretizing_wrapper` in `environment/env.py`,
`create_graph_selective` in `models/ppo/policy.py`). tests/fixtures/authors_code/continuous.json
was written by benchmarks/authors_code/continuous_fixtures.py in their environment, so these
tests run without their code.

The same in both: a Box dimension's B bins are the B evenly spaced values from low to high, ends
included; a joint action's edge feature is its dimensions' one-hots side by side, then gamma; a
full expansion enumerates the joint actions in the same order (the first dimension most
significant) and lays children out the same way (node i's N children are rows i N .. i N + N - 1
of the next level); `uniform` draws every dimension uniformly over its bins.

Differences, each pinned below (benchmarks/authors_code/README.md says why):

1. Their `manual_gaussian` ignores the node and the policy: every dimension of every child is
   clip(trunc(x), 0, B - 1), x ~ N(B / 2, B / 4), whatever the state. Ours (`gaussian`) centres
   on the node's greedy bins c under the rollout policy: clip(round(c + B / 4 eps), 0, B - 1).
   With B odd (their MuJoCo command's 11 bins) and c the middle bin (B - 1) / 2, the two are the
   same draws from the same seed; with B even theirs is centred between the two middle bins,
   where ours cannot be.
2. Their uniform draws are `torch.randint` per dimension, ours floor(U B): the same distribution,
   other draws from the same seed.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from xlvin.accel.numpy_sampling import env_actions
from xlvin.nn.distributions import BinnedCategorical
from xlvin.nn.expansion import Expansion
from xlvin.nn.transition import TransitionModel, joint_actions, one_hots

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "authors_code" / "continuous.json").read_text())


class Greedy(nn.Module):
    """A rollout policy whose greedy bin is `centre` in every factor, at every node."""

    def __init__(self, nvec: tuple[int, ...], centre: int) -> None:
        super().__init__()
        self.logits = torch.cat([nn.functional.one_hot(torch.tensor(centre), n).float()
                                 for n in nvec])

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(h.shape[0], -1)


def phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def bin_probabilities(bins: int, mean: float, cut: float) -> np.ndarray:
    """P(bin k) of clip(floor(x + cut), 0, B - 1), x ~ N(mean, B / 4): theirs is cut 0 with
    mean B / 2 (trunc and floor agree wherever the clip does not), ours cut 1/2 with mean c."""
    edges = [-math.inf] + [k - cut for k in range(1, bins)] + [math.inf]
    cdf = [phi((e - mean) / (bins / 4)) if math.isfinite(e) else float(e > 0) for e in edges]
    return np.diff(cdf)


def assert_frequencies(counts: np.ndarray, expected: np.ndarray) -> None:
    """Every bin's frequency within 5 standard errors of `expected` (counts [..., B] pooled)."""
    n = counts.sum()
    freq = counts.reshape(-1, len(expected)).sum(0) / n
    np.testing.assert_array_less(np.abs(freq - expected),
                                 5 * np.sqrt(expected * (1 - expected) / n) + 1e-12)


def draws(method: str, bins: int) -> dict:
    (record,) = [d for d in FIXTURE["draws"] if d["method"] == method and d["bins"] == bins]
    return record


def histogram(method: str, bins: int) -> np.ndarray:
    (record,) = [h for h in FIXTURE["histograms"] if h["method"] == method and h["bins"] == bins]
    return np.array(record["counts"])


def our_counts(method: str, bins: int, centre: int, nodes: int = 4000) -> np.ndarray:
    nvec = (bins,) * 6
    torch.manual_seed(0)
    drawn = Expansion(method, 11, nvec).choose(torch.zeros(nodes, 4), Greedy(nvec, centre))
    return np.stack([np.bincount(drawn[:, j].numpy(), minlength=bins) for j in range(6)])


@pytest.mark.parametrize("case", FIXTURE["binning"], ids=lambda c: c["name"])
def test_their_bins_are_our_bin_centres(case: dict) -> None:
    """What their wrapped env receives for bin indices is what ours sends (MountainCarContinuous
    and HalfCheetah through their vector envs, as their training loops send actions)."""
    dist = BinnedCategorical(tuple(case["low"]), tuple(case["high"]), case["bins"])
    assert list(dist.nvec) == case["nvec"]
    ours = env_actions(dist, np.array(case["indices"]))
    np.testing.assert_allclose(ours, np.array(case["received"]), rtol=0, atol=1e-6)


def test_their_full_expansion_is_ours() -> None:
    """expand_all over 3 x 3 joint actions, depth 2: the same children in the same rows, and the
    edge features [one-hots, gamma] of our sampled trees."""
    rec = FIXTURE["expand_all"]
    nvec, n = (rec["bins"],) * rec["dims"], rec["neighbours"]
    parents = rec["nodes"]
    for level in rec["actions"]:
        np.testing.assert_array_equal(np.array(level), joint_actions(nvec).repeat(parents, 1).numpy())
        parents *= n
    # node i's children are rows i N .. i N + N - 1 of the next level, in both
    receivers = np.array(rec["receivers"])
    starts = np.cumsum([0] + [rec["nodes"] * n ** d for d in range(rec["steps"])])
    ours = np.concatenate([np.repeat(np.arange(rec["nodes"] * n ** d) + starts[d], n)
                           for d in range(rec["steps"])])
    np.testing.assert_array_equal(receivers, ours)
    np.testing.assert_array_equal(np.array(rec["senders"]), np.arange(len(ours)) + rec["nodes"])
    actions = torch.tensor(rec["actions"][0] + rec["actions"][1])
    edges = torch.tensor(rec["edge_features"])
    torch.testing.assert_close(edges[:, :-1], one_hots(actions, nvec), rtol=0, atol=0)
    torch.testing.assert_close(edges[:, -1], torch.full((len(edges),), FIXTURE["gamma"]))
    # our full tree's rows hold the children of those joint actions
    torch.manual_seed(0)
    model = TransitionModel(4, nvec, 8)
    h = torch.randn(rec["nodes"], 4)
    torch.testing.assert_close(
        model.successors(h).reshape(-1, 4),
        model.next_embedding(h.repeat_interleave(n, 0), torch.tensor(rec["actions"][0])),
        rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bins", [11, 10])
def test_uniform_draws_the_same_distribution(bins: int) -> None:
    """Their uniform and ours: uniform over every dimension's bins, whatever the node; N children
    per node laid out as ours; other draws from the same seed (randint vs floor(U B))."""
    rec = draws("uniform", bins)
    assert rec["actions"] == rec["actions_other_nodes"]
    np.testing.assert_array_equal(np.array(rec["receivers"]), np.repeat(np.arange(rec["nodes"]), 11))
    uniform = np.full(bins, 1 / bins)
    assert_frequencies(histogram("uniform", bins), uniform)
    assert_frequencies(our_counts("uniform", bins, centre=0), uniform)
    torch.manual_seed(rec["seed"])
    ours = Expansion("uniform", 11, (bins,) * 6).choose(torch.zeros(3, 4), None)
    assert not torch.equal(ours, torch.tensor(rec["actions"][0]))


def test_their_gaussian_at_odd_bins_is_ours_centred_on_the_middle_bin() -> None:
    """11 bins (their README's MuJoCo command): the same seed draws the same joint actions as
    ours at greedy bin 5 (at most one of 198 may differ by float rounding at a bin edge), and
    the same edge features."""
    rec = draws("manual_gaussian", 11)
    torch.manual_seed(rec["seed"])
    ours = Expansion("gaussian", 11, (11,) * 6).choose(torch.zeros(3, 4), Greedy((11,) * 6, 5))
    theirs = torch.tensor(rec["actions"][0])
    assert (ours != theirs).sum() <= 1
    edges = torch.tensor(rec["edge_features"])
    torch.testing.assert_close(edges[:, :-1], one_hots(theirs, (11,) * 6), rtol=0, atol=0)
    expected = bin_probabilities(11, 5.5, cut=0)
    np.testing.assert_allclose(expected, bin_probabilities(11, 5.0, cut=0.5), atol=1e-12)
    assert_frequencies(histogram("manual_gaussian", 11), expected)
    assert_frequencies(our_counts("gaussian", 11, centre=5), expected)


def test_their_gaussian_ignores_the_node_and_the_policy() -> None:
    """Theirs: the same draws for other nodes, centred on the middle of the range whatever the
    policy; ours follows the node's greedy bins."""
    for bins in (11, 10):
        rec = draws("manual_gaussian", bins)
        assert rec["actions"] == rec["actions_other_nodes"]
        counts = histogram("manual_gaussian", bins)
        mean = (counts * np.arange(bins)).sum() / counts.sum()
        assert abs(mean - (bins - 1) / 2) < 0.02
    ours = our_counts("gaussian", 11, centre=2)
    assert_frequencies(ours, bin_probabilities(11, 2.0, cut=0.5))
    assert abs((ours * np.arange(11)).sum() / ours.sum() - 5) > 2


def test_their_gaussian_at_even_bins_is_centred_between_two_bins() -> None:
    """10 bins: theirs is symmetric about 4.5 (P(4) = P(5)); ours, centred on a bin, is not."""
    theirs = bin_probabilities(10, 5.0, cut=0)
    np.testing.assert_allclose(theirs, theirs[::-1], atol=1e-12)
    assert_frequencies(histogram("manual_gaussian", 10), theirs)
    for centre in (4, 5):
        ours = bin_probabilities(10, float(centre), cut=0.5)
        assert abs(ours[4] - ours[5]) > 0.01
        assert 0.5 * np.abs(ours - theirs).sum() > 0.05
        assert_frequencies(our_counts("gaussian", 10, centre=centre), ours)


def test_continuous_log_parser_reads_their_statistics(tmp_path) -> None:
    """benchmarks/authors_code/parse_continuous_logs.py on logs in the form their
    classic_control.py, mujoco.py and our harness write (lines as their code printed them in a
    trial run): MountainCarContinuous's evaluations and printed maximum, HalfCheetah's training
    means and its Monitor file, a run stopped at its CPU budget and one still going."""
    from benchmarks.authors_code import parse_continuous_logs

    logs, monitor = tmp_path / "logs", tmp_path / "monitor" / "hc" / "halfcheetah" / "ppo_11bins_1seed"
    logs.mkdir()
    monitor.mkdir(parents=True)
    classic = ["harness: env mountaincar-continuous agent ppo seed 1",
               "harness: flags --env=mountaincar-continuous --seed=1 --num_rollouts=2",
               "harness: cpu_budget_s 3600 (main process, RLIMIT_CPU)",
               "Number of steps  999", "PPO update 0",
               "Rollout 0 : Total rewards -197.860 from total episodes 5 (Average: -39.572)",
               "Number of steps  400", "PPO update 0",
               "Rollout 1 : Total rewards -97.860 from total episodes 5 (Average: -19.572)",
               " Largest average reward =  -19.572",
               "harness: cpu_s 50.0 user 2.0 system (with reaped children)",
               "harness: exit 0", "wall_s 300"]
    (logs / "mountaincar-continuous-ppo-seed1.txt").write_text("\n".join(classic) + "\n")
    (logs / "mountaincar-continuous-xlvin-seed1.txt.part").write_text("\n".join(classic[:5]) + "\n")
    mujoco = ["harness: env halfcheetah agent ppo seed 1",
              f"harness: flags --env=halfcheetah --seed=1 --log_dir={tmp_path / 'monitor' / 'hc'}",
              "Updates 0, num timesteps 2048 ",
              "Last 2 training episodes: mean/median reward -246.7/-246.7, min/max reward -248.0/-245.4",
              "Updates 1, num timesteps 4096 ",
              "Last 4 training episodes: mean/median reward -301.9/-260.2, min/max reward -441.8/-245.4",
              "Command terminated by signal 24", "harness: exit 152"]
    (logs / "halfcheetah-ppo-seed1.txt").write_text("\n".join(mujoco) + "\n")
    returns = [-248.0, -245.4, -441.8, -272.4]
    (monitor / "0.monitor.csv").write_text(
        '#{"t_start": 0, "env_id": "HalfCheetah-v2"}\nr,l,t\n'
        + "".join(f"{r},1000,{t}\n" for t, r in enumerate(returns, 1)))
    assert parse_continuous_logs.main([str(logs)]) == 0
    data = json.loads((tmp_path / "results" / "continuous.json").read_text())
    mcc = data["runs"]["mountaincar-continuous"]
    ppo = mcc["ppo"][0]
    assert ppo["status"] == "finished" and ppo["env_steps"] == (999 + 400) * 5
    assert ppo["max"] == -19.572 and ppo["last"] == -19.572 and ppo["cpu_s"] == 52.0
    assert mcc["xlvin"][0]["status"] == "running"
    hc = data["runs"]["halfcheetah"]["ppo"][0]
    assert hc["status"] == "cpu budget" and hc["env_steps"] == 4096 and hc["updates"] == 2
    assert hc["last100"] == -301.9 and hc["last10"] == pytest.approx(np.mean(returns))
    rows = {(r["env"], r["agent"]): r for r in data["rows"]}
    assert rows["mountaincar-continuous", "ppo"]["max"]["iqm"] == -19.572
    assert rows["mountaincar-continuous", "xlvin"]["unfinished"] == [1]
    assert "(theirs)" in (tmp_path / "results" / "continuous.md").read_text()
