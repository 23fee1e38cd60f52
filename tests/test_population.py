"""A population (`xlvin train --seeds`): seed s trained with others in one process writes the
run directory of seed s trained alone, bit for bit; the stacked kernels compute each seed's own
numbers; bad input is one error line and creates nothing."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from xlvin import PPO, learn_seeds
from xlvin.accel import proof
from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.fused_ppo_loss import fused_ppo_loss
from xlvin.accel.numpy_actor import make_actor
from xlvin.accel.population import (
    MIN_STACKED_ROWS,
    StackedActor,
    StackedPPO,
    StackedWeights,
    StackedXLVINActor,
    stacks_updates,
)
from xlvin.accel.stacked_xlvin import StackedXLVIN
from xlvin.cli import main
from tests.test_continuous import BUTTONS, TARGET
from tests.test_curriculum import curriculum_args
from xlvin.envs.maze import MAZE_ID
from xlvin.errors import UserError
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.run_dir import METRICS, MODEL, read_metrics
from xlvin.kernels import pins
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transition import TransitionModel
from xlvin.ppo.config import PPOConfig
from xlvin.ppo.storage import Minibatch
from xlvin.ppo.update import LOGRATIO_LIMIT, minibatch_step
from xlvin.process import set_threads
from xlvin.run.config import RunConfig
from xlvin.experiments import table1
from xlvin.experiments.protocol import run_cells, seed_blocks, train_populations
from xlvin.experiments.registry import CLASSIC
from xlvin.run.population import parse_seeds, train_population
from tests.tiny_runs import tiny_cell_config

ROOT = Path(__file__).resolve().parents[1]
#: Seeds not in a row, with seed 0.
SEEDS = (0, 3, 7)
#: Wall-clock fields of a metrics row (the digest chains them).
WALL_CLOCK = ("charts/sps", "sha256")
#: A PPO run of 8 updates of 4 envs x 32 steps, a checkpoint every 3.
RUN = ["--env", "CartPole-v1", "--agent", "ppo", "--num-envs", "4", "--num-steps", "32",
       "--total-steps", "1024", "--checkpoint-every", "3", "--quiet"]
#: An XLVIN-R run (a tree of depth 2, TransE online) of 4 updates of 4 envs x 32 steps in 4
#: minibatches, a checkpoint every 3.
XLVIN_RUN = ["--env", "CartPole-v1", "--agent", "xlvin-r", "--num-envs", "4", "--num-steps",
             "32", "--total-steps", "512", "--checkpoint-every", "3", "--pretrain-transe",
             "false", "--quiet"]


def rows(run: Path) -> list[dict[str, float]]:
    """The metrics rows of `run`, wall-clock fields left out."""
    lines = (run / METRICS).read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in WALL_CLOCK} for line in lines]


def tensors_and_header(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(path, "pt") as f:
        header = f.metadata()
    return load_file(path), header


def assert_same_run(alone: Path, together: Path) -> None:
    """Same metrics rows, final weights and header, checkpoint tensors (weights, optimiser
    state, envs) and checkpoint loop state (wall-clock aside)."""
    assert rows(together) == rows(alone)
    weights, header = tensors_and_header(alone / MODEL)
    weights_pop, header_pop = tensors_and_header(together / MODEL)
    assert header_pop == header and weights_pop.keys() == weights.keys()
    assert all(torch.equal(weights_pop[k], weights[k]) for k in weights)
    state, meta = tensors_and_header(alone / CHECKPOINT)
    state_pop, meta_pop = tensors_and_header(together / CHECKPOINT)
    assert state_pop.keys() == state.keys()
    assert all(torch.equal(state_pop[k], state[k]) for k in state)

    def loop(meta: dict[str, str]) -> dict:  # without wall-clock figures
        body = json.loads(meta["xlvin"])
        result = body["loop"]["result"]
        del result["wall_time_s"], result["last_metrics"]["charts/sps"]
        curriculum = body["loop"]["data"].get("curriculum")
        for timed in [curriculum, *curriculum["history"]] if curriculum else []:
            del timed["seconds"]  # a level's training time
        return {k: v for k, v in body.items() if k != "extra"}

    assert loop(meta_pop) == loop(meta)


def train_alone_and_together(tmp_path: Path, run: list[str]) -> None:
    """`xlvin train` of `run` for each of SEEDS alone (tmp_path/alone/seed-S) and together
    (tmp_path/pop), each seed's two runs the same (`assert_same_run`)."""
    for seed in SEEDS:
        assert main(["train", *run, "--seed", str(seed),
                     "--out", str(tmp_path / "alone" / f"seed-{seed}")]) == 0
    seeds = ",".join(map(str, SEEDS))
    assert main(["train", *run, "--seeds", seeds, "--out", str(tmp_path / "pop")]) == 0
    for seed in SEEDS:
        assert_same_run(tmp_path / "alone" / f"seed-{seed}", tmp_path / "pop" / f"seed-{seed}")


@pytest.mark.parametrize("options", [
    [],
    ["--num-minibatches", "16", "--update-epochs", "1"],  # of 7 rows (alone) and 8 (stacked)
    ["--minibatch-size", "24"],  # seeds cut different numbers of minibatches
], ids=["default", "tiny-minibatches", "minibatch-size"])
def test_each_seed_of_a_population_writes_its_solo_run(tmp_path: Path, options: list[str]) -> None:
    train_alone_and_together(tmp_path, [*RUN, *options])
    assert sorted(p.name for p in (tmp_path / "pop").iterdir()) == [f"seed-{s}" for s in SEEDS]


@pytest.mark.parametrize("env, options", [
    (BUTTONS, []),  # MultiDiscrete([3, 2])
    (TARGET, ["--norm-obs", "false"]),  # a 1-D Box: a diagonal Gaussian, rewards normalised
    ("Pendulum-v1", ["--norm-obs", "false", "--action-bins", "5"]),  # a Box binned
    (TARGET, []),  # observations normalised too: each seed acts alone
    ("CartPole-v1", ["--separate-critic", "true"]),
    ("CartPole-v1", ["--ppo-transe", "true"]),  # a transition model: updates seed by seed
    ("CartPole-v1", ["--agent", "xlvin-r", "--prune", "2", "--depth", "2"]),
    ("CartPole-v1", ["--agent", "xlvin-r", "--zero-chi", "true"]),
    (BUTTONS, ["--agent", "xlvin-r", "--expansion", "uniform", "--expand", "3"]),  # sampled
], ids=["multi-discrete", "box-gaussian", "box-binned", "box-normalised", "separate-critic",
        "ppo-transe", "xlvin-pruned", "xlvin-zero-chi", "xlvin-sampled-expansion"])
@pytest.mark.usefixtures("tiny_default_executors")
def test_each_seed_of_any_agent_writes_its_solo_run(
    tmp_path: Path, env: str, options: list[str]
) -> None:
    """PPO on MultiDiscrete and Box actions (the stacked actor gives a Gaussian's log std
    beside its means), and the agents whose acting or update the stacked kernels do not compute:
    those parts run seed by seed, with the seed's own generators (a sampled expansion draws
    from them while acting), as alone."""
    run = [*RUN, "--env", env, "--pretrain-transe", "false", *options]
    train_alone_and_together(tmp_path, run)


@pytest.mark.parametrize("options", [
    [],
    ["--executor", "EXECUTOR", "--depth", "1"],  # LayerNorm, widths k 50 -> H 16 (projected)
], ids=["xlvin-r", "executor-file"])
@pytest.mark.usefixtures("tiny_default_executors")
def test_each_xlvin_seed_of_a_population_writes_its_solo_run(tmp_path: Path, executor_path: Path,
                                                             options: list[str]) -> None:
    """XLVIN: the stacked actor collects, each seed's update (tree, executor, TransE drawing
    its negatives from the seed's own generator) runs as alone."""
    run = [*XLVIN_RUN, *(str(executor_path) if o == "EXECUTOR" else o for o in options)]
    if options:
        run[run.index("xlvin-r")] = "xlvin"
    train_alone_and_together(tmp_path, run)
    assert "losses/transe" in rows(tmp_path / "pop" / f"seed-{SEEDS[-1]}")[-1]


@pytest.mark.parametrize("agent", ["ppo", "xlvin-r"])
@pytest.mark.usefixtures("tiny_default_executors")
def test_each_low_data_seed_of_a_population_writes_its_solo_run(tmp_path: Path,
                                                                agent: str) -> None:
    """The low-data protocol: each seed collects its own episodes (in its own envs, as alone),
    the updates run together; its last updates averaged, its evaluations during training."""
    run = ["--env", "CartPole-v0", "--agent", agent, "--protocol", "low_data",
           "--low-data-rounds", "2", "--low-data-episodes", "2", "--low-data-updates", "3",
           "--low-data-average-last", "2", "--low-data-eval-points", "1",
           "--low-data-eval-episodes", "2", "--pretrain-transe", "false",
           "--checkpoint-every", "4", "--quiet"]
    train_alone_and_together(tmp_path, run)


@pytest.mark.parametrize("options", [
    [], ["--agent", "xlvin", "--executor", "maze", "--depth", "2", "--prune", "2"],
], ids=["ppo-cnn", "xlvin-maze"])
def test_each_seed_of_a_maze_curriculum_writes_its_solo_run(
    tmp_path: Path, options: list[str]
) -> None:
    """The continual maze: each seed's curriculum (its levels, windows, held-out evaluations,
    the policies of its passed levels) collects as alone, the CNN agents update seed by seed."""
    for seed in SEEDS:
        args = curriculum_args(tmp_path / "alone" / f"seed-{seed}")
        assert main(["train", *args, "--seed", str(seed), *options]) == 0
    seeds = ",".join(map(str, SEEDS))
    assert main(["train", *curriculum_args(tmp_path / "pop"), "--seeds", seeds, *options]) == 0
    for seed in SEEDS:
        alone, together = tmp_path / "alone" / f"seed-{seed}", tmp_path / "pop" / f"seed-{seed}"
        assert_same_run(alone, together)
        levels = sorted(p.name for p in (alone / "levels").iterdir())
        assert levels and levels == sorted(p.name for p in (together / "levels").iterdir())
        for name in levels:
            mine, theirs = load_file(alone / "levels" / name), load_file(together / "levels" / name)
            assert mine.keys() == theirs.keys()
            assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def compare_runs(root: str, options: list[str]) -> None:
    """Seeds 0 and 3 of RUN with `options` trained alone and together under `root`, and
    compared (`assert_same_run`)."""
    root_path = Path(root)
    for seed in (0, 3):
        assert main(["train", *RUN, *options, "--seed", str(seed),
                     "--out", str(root_path / "alone" / f"seed-{seed}")]) == 0
    assert main(["train", *RUN, *options, "--seeds", "0,3", "--out", str(root_path / "pop")]) == 0
    for seed in (0, 3):
        assert_same_run(root_path / "alone" / f"seed-{seed}", root_path / "pop" / f"seed-{seed}")


def test_seeds_act_with_their_forward_where_the_numpy_actor_fails_its_proof(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the NumPy actor differs from the policy's forward (here: a tolerance nothing
    meets), a seed's rollout acts with its forward, alone and in a population alike."""
    monkeypatch.setattr(proof, "_verdicts", {})
    monkeypatch.setattr(proof, "ACTOR_TOLERANCE", {"rtol": 0.0, "atol": -1.0})
    with pytest.warns(proof.AcceleratorFallback, match="numpy_actor"):
        compare_runs(str(tmp_path), ["--total-steps", "256"])
    assert proof._verdicts[("numpy actor", proof.code_key(PPOAgent(MLPEncoder(4, 64, 50), 50,
                                                                   2)))] is False


def test_each_seed_writes_its_solo_run_with_the_libraries_own_kernels(tmp_path: Path) -> None:
    """The same outside reproducible mode (what `xlvin train` runs by default), on Acrobot-v1:
    three actions, where a batched product of MKL's own kernels once gave other bits."""
    env = {k: v for k, v in os.environ.items() if k not in pins()}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    code = ("import test_population as t; "
            f"t.compare_runs({str(tmp_path)!r}, ['--env', 'Acrobot-v1'])")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_population_continues_as_its_seeds_do(tmp_path: Path) -> None:
    """A finished population continued to a larger total (from every seed's checkpoint) ends
    as each seed continued alone."""
    longer = ["--total-steps", "1536", "--resume"]
    for seed in SEEDS[:2]:
        out = str(tmp_path / "alone" / f"seed-{seed}")
        assert main(["train", *RUN, "--seed", str(seed), "--out", out]) == 0
        assert main(["train", *RUN, *longer, "--seed", str(seed), "--out", out]) == 0
    seeds = f"{SEEDS[0]},{SEEDS[1]}"
    assert main(["train", *RUN, "--seeds", seeds, "--out", str(tmp_path / "pop")]) == 0
    assert main(["train", *RUN, *longer, "--seeds", seeds, "--out", str(tmp_path / "pop")]) == 0
    for seed in SEEDS[:2]:
        assert_same_run(tmp_path / "alone" / f"seed-{seed}", tmp_path / "pop" / f"seed-{seed}")


def _policies(count: int, obs_dim: int, hidden: int, actions: int
              ) -> tuple[list[PPOAgent], list[FlatAdam]]:
    """`count` PPO agents of different weights, each with its FlatAdam."""
    policies = []
    for seed in range(count):
        torch.manual_seed(seed)
        policy = PPOAgent(MLPEncoder(obs_dim, hidden, 50), 50, actions)
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(torch.randn_like(p) * 0.05)  # biases off zero
        policies.append(policy)
    return policies, [FlatAdam(list(p.parameters()), lr=2.5e-4, eps=1e-5) for p in policies]


def check_stacked_kernels() -> None:
    """Acting, and a minibatch step (the PPO loss, the clipped gradient of every parameter,
    Adam's step) of seeds stacked, against each seed's own (the NumPy actor; a forward, the
    fused loss, backward, clipping and FlatAdam's step), bit for bit: CartPole's and Acrobot's
    shapes (with three actions, MKL's batched product of the actor head's gradient differed:
    it is taken seed by seed), minibatches from `MIN_STACKED_ROWS` rows to past MKL's blocks of
    128, odd and even."""
    set_threads(1)
    count, rng = 3, np.random.default_rng(0)
    loss_options = dict(clip=0.2, clip_value_loss=True, ent_coef=0.01, vf_coef=0.5,
                        logratio_limit=20.0)
    for obs_dim, hidden, actions in ((4, 64, 2), (6, 32, 3)):
        alone, alone_adam = _policies(count, obs_dim, hidden, actions)
        _, stacked_adam = _policies(count, obs_dim, hidden, actions)
        weights = StackedWeights(stacked_adam)
        kernels = StackedPPO(weights)
        for rows in (MIN_STACKED_ROWS, 9, 31, 64, 127, 129):
            batch = dict(obs=torch.randn(count, rows, obs_dim),
                         actions=torch.randint(0, actions, (count, rows)),
                         logprobs=-torch.rand(count, rows), adv=torch.randn(count, rows),
                         ret=torch.randn(count, rows) * 10, values=torch.randn(count, rows))
            columns = ("actions", "logprobs", "adv", "ret", "values")
            terms_alone, grads_alone = [], []
            for s, (policy, opt) in enumerate(zip(alone, alone_adam)):
                logits, values = policy(batch["obs"][s])
                loss, terms = fused_ppo_loss(logits, values, *(batch[k][s] for k in columns),
                                             **loss_options)
                opt.zero_grad()
                loss.backward()
                opt.clip_grad_norm_(0.5)
                grads_alone.append(opt.flat.grad.clone())
                opt.step()
                terms_alone.append([loss.item(), *(t.item() for t in dataclasses.astuple(terms))])
            terms = kernels.gradients(list(range(count)), batch["obs"],
                                      *(batch[k].numpy() for k in columns), **loss_options,
                                      max_norm=0.5)
            assert terms.tolist() == np.float32(terms_alone).tolist()
            for s, grad in enumerate(grads_alone):
                assert torch.equal(weights.grad[s, : weights.size], grad), (obs_dim, rows, s)
            weights.step(list(range(count)))
            for one, together in zip(alone_adam, stacked_adam):
                assert torch.equal(one.flat, together.flat)
                assert torch.equal(one.exp_avg_sq, together.exp_avg_sq)
            obs = rng.standard_normal((count, 4, obs_dim)).astype(np.float32)
            logits, values = StackedActor(weights, list(range(count)), alone[0])(obs)
            for s, policy in enumerate(alone):
                own_logits, own_values = make_actor(policy)(obs[s].copy())
                assert np.array_equal(logits[s], own_logits)
                assert np.array_equal(values[s], own_values)


def _xlvin_agents(count: int, actions: int, hidden: int, depth: int, aggregation: str,
                  layer_norm: bool, projections: bool) -> list[XLVINAgent]:
    """`count` XLVIN agents over one processor's weights (the frozen executor every seed
    shares), the rest their own, biases off zero."""
    agents = []
    for seed in range(count):
        torch.manual_seed(100)
        processor = MessagePassing(hidden, aggregation, layer_norm)
        with torch.no_grad():
            for p in processor.parameters():  # LayerNorm's off 1 and 0
                p.add_(torch.randn_like(p) * 0.05)
        torch.manual_seed(seed)
        agent = XLVINAgent(MLPEncoder(6, 32, 50), 50, actions, TransitionModel(50, actions, 32),
                           processor, depth=depth, projections=projections)
        with torch.no_grad():
            for p in agent.parameters():
                if p.requires_grad:
                    p.add_(torch.randn_like(p) * 0.05)
        agents.append(agent)
    return agents


def check_stacked_xlvin_actor() -> None:
    """The stacked XLVIN actor against each seed's own NumPy actor, bit for bit: full trees of
    depth 1 to 3, max and sum aggregates, with and without the executor's LayerNorm and the
    node and chi projections, 1 to 9 observations a seed."""
    set_threads(1)
    rng = np.random.default_rng(0)
    for actions, hidden, depth, aggregation, layer_norm, projections in (
            (2, 50, 2, "max", False, False), (3, 16, 3, "sum", True, False),
            (2, 50, 1, "max", True, True)):
        agents = _xlvin_agents(3, actions, hidden, depth, aggregation, layer_norm, projections)
        stacked = StackedXLVINActor(agents)
        for rows in (1, 4, 9):
            obs = rng.standard_normal((len(agents), rows, 6)).astype(np.float32)
            logits, values = stacked(obs)
            for s, agent in enumerate(agents):
                own_logits, own_values = make_actor(agent)(obs[s].copy())
                assert np.array_equal(logits[s], own_logits), (depth, rows, s)
                assert np.array_equal(values[s], own_values), (depth, rows, s)


def check_stacked_xlvin_step() -> None:
    """A minibatch step of XLVIN agents stacked (`StackedXLVIN`: forward, loss, backward through
    tree, executor and TransE, clipping; then Adam) against each seed's own `minibatch_step`,
    bit for bit: the clipped gradient, the loss terms, the weights after the step; seeds 0, 3
    and 7 of 8 stacked (rows not in a row), TransE's negatives each seed's own draw; trees of
    depth 1 to 3, max and sum, ReLU and linear messages, both kinds of negatives, minibatches
    from `MIN_STACKED_ROWS` rows to past MKL's blocks of 128."""
    set_threads(1)
    cfg = PPOConfig(norm_adv=False)
    seeds, rows_of = [0, 3, 7], (MIN_STACKED_ROWS, 9, 31, 64, 129)
    for actions, depth, aggregation, messages, negatives in (
            (2, 2, "max", "relu", "states"), (3, 1, "sum", "linear", "next_states"),
            (2, 3, "max", "relu", "states")):
        alone, together = (_xlvin_agents(8, actions, 50, depth, aggregation, False, False)
                           for _ in range(2))
        for agent in (*alone, *together):
            agent.processor.messages, agent.transe_negatives = messages, negatives
        assert stacks_updates(together[0])
        alone_adam, stacked_adam = ([FlatAdam([p for p in a.parameters() if p.requires_grad],
                                              lr=2.5e-4, eps=1e-5) for a in agents]
                                    for agents in (alone, together))
        weights = StackedWeights(stacked_adam)
        kernels = StackedXLVIN(weights, together[0])
        for rows in rows_of:
            count = len(seeds)
            obs, next_obs = torch.randn(2, count, rows, 6).unbind()
            batch = dict(actions=torch.randint(0, actions, (count, rows)),
                         logprobs=-torch.rand(count, rows), adv=torch.randn(count, rows),
                         ret=torch.randn(count, rows) * 10, values=torch.randn(count, rows))
            draws, terms_alone = [], []
            for k, s in enumerate(seeds):
                torch.manual_seed(1000 * rows + s)  # the seed's global generator
                draws.append(torch.randperm(rows) if negatives == "states"
                             else torch.randint(0, rows, (rows,)))
                torch.manual_seed(1000 * rows + s)
                mb = Minibatch(obs[k], next_obs[k], batch["actions"][k], torch.zeros(rows),
                               batch["logprobs"][k], batch["values"][k], batch["adv"][k],
                               batch["ret"][k])
                own_terms, names = minibatch_step(alone[s], alone_adam[s], mb, cfg)
                assert names == ["transe"]
                terms_alone.append(own_terms.tolist())
            terms = kernels.gradients(
                seeds, obs, next_obs, batch["actions"], torch.stack(draws),
                *(batch[k].numpy() for k in ("logprobs", "adv", "ret", "values")),
                clip=cfg.clip_coef, clip_value_loss=cfg.clip_value_loss, ent_coef=cfg.ent_coef,
                vf_coef=cfg.vf_coef, logratio_limit=LOGRATIO_LIMIT, max_norm=cfg.max_grad_norm)
            assert terms[:, 1:].tolist() == terms_alone, (depth, rows)
            for s in seeds:
                assert torch.equal(weights.grad[s, : weights.size], alone_adam[s].flat.grad), (
                    depth, rows, s)
            weights.step(seeds)
            for s in seeds:
                assert torch.equal(stacked_adam[s].flat, alone_adam[s].flat), (depth, rows, s)


def test_the_stacked_xlvin_step_computes_each_seeds_own_bits_in_both_kernel_modes() -> None:
    """`check_stacked_xlvin_step` here (reproducible mode) and in a process with the libraries'
    own kernels."""
    check_stacked_xlvin_step()
    env = {k: v for k, v in os.environ.items() if k not in pins()}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    done = subprocess.run([sys.executable, "-c", "import test_population as t; "
                           "t.check_stacked_xlvin_step()"], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_stacked_kernels_compute_each_seeds_own_bits_in_reproducible_mode() -> None:
    check_stacked_kernels()  # the suite runs in reproducible mode (conftest.py)
    check_stacked_xlvin_actor()


def test_stacked_kernels_compute_each_seeds_own_bits_with_the_libraries_own_kernels() -> None:
    """The same check in a process outside reproducible mode: MKL and NumPy pick their kernels
    for this CPU (where the batched products differed where they differed)."""
    env = {k: v for k, v in os.environ.items() if k not in pins()}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    done = subprocess.run([sys.executable, "-c", "import test_population as t; "
                           "t.check_stacked_kernels(); t.check_stacked_xlvin_actor()"],
                          env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("args, said", [
    (["--seeds", "0,3", "--seed", "1"], "give --seeds or --seed, not both"),
    (["--seeds", "0,3", "--agent", "atreec"], "not agent atreec"),
    (["--seeds", "0,3", "--env", "Pendulum-v1", "--use-sde", "true"], "not gSDE's actions"),
    (["--seeds", "0-x"], "--seeds takes seeds as 0-63"),
    (["--seeds", "3-1"], "a range goes up"),
    (["--seeds", "0,1,1"], "names seed 1 twice"),
    (["--seeds", "0-99999"], "names more than 10,000 seeds"),
])
def test_bad_seeds_are_one_error_line_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    out = tmp_path / "pop"
    assert main(["train", "--agent", "ppo", "--total-steps", "512", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("xlvin: error: ") and said in err[0]
    assert not out.exists()


def test_a_seed_directory_that_holds_a_run_is_refused_first(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    (tmp_path / "pop" / "seed-7").mkdir(parents=True)
    (tmp_path / "pop" / "seed-7" / "config.json").write_text("{}")
    assert main(["train", *RUN, "--seeds", "0,7", "--out", str(tmp_path / "pop")]) == 2
    assert "seed-7 already holds a run" in capsys.readouterr().err
    assert not (tmp_path / "pop" / "seed-0").exists()


def test_seeds_are_read_as_written() -> None:
    assert parse_seeds("0-3,10,12-13") == [0, 1, 2, 3, 10, 12, 13]
    assert parse_seeds(" 5 ") == [5]


def test_learn_seeds_is_learn_once_per_seed(tmp_path: Path) -> None:
    """The Python API: `learn_seeds(model, seeds, ...)` gives the models (and run directories)
    that `learn` gives on the model with each seed."""
    options = dict(num_envs=2, num_steps=32, checkpoint_every=2, verbose=0)
    alone = PPO("CartPole-v1", seed=5, **options).learn(256, out=tmp_path / "alone")
    models = learn_seeds(PPO("CartPole-v1", **options), seeds=[0, 5], total_timesteps=256,
                         out=tmp_path / "pop")
    assert [m.config.train.seed for m in models] == [0, 5]
    assert [m.num_timesteps for m in models] == [256, 256]
    assert_same_run(tmp_path / "alone", tmp_path / "pop" / "seed-5")
    own, together = alone.get_parameters()["policy"], models[1].get_parameters()["policy"]
    assert all(torch.equal(own[k], together[k]) for k in own)
    with pytest.raises(UserError, match="^seeds names seed 1 twice$"):
        learn_seeds(PPO("CartPole-v1", **options), seeds=[1, 1], out=tmp_path / "twice")


def test_sigterm_checkpoints_every_seed_and_the_resume_ends_as_uninterrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--env", "CartPole-v1", "--agent", "ppo", "--num-envs", "2", "--num-steps", "32",
            "--total-steps", "2048", "--checkpoint-every", "50", "--quiet", "--seeds", "0,3"]
    assert main(["train", *args, "--out", str(tmp_path / "full")]) == 0
    metrics = tmp_path / "stopped" / "seed-3" / METRICS

    def signal_after_three_updates() -> None:
        while not (metrics.exists() and metrics.read_text().count("\n") >= 3):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=signal_after_three_updates, daemon=True).start()
    capsys.readouterr()
    assert main(["train", *args, "--out", str(tmp_path / "stopped")]) == 143
    err = capsys.readouterr().err
    assert err.startswith("xlvin: terminated (stopped after update ") and err.count("\n") == 1
    for seed in (0, 3):
        run = tmp_path / "stopped" / f"seed-{seed}"
        assert read_loop_state(run / CHECKPOINT)["log_step"] == read_metrics(run)[-1]["step"]
        assert len(read_metrics(run)) % 50 != 0  # saved at the signal, not periodically
    assert main(["train", *args, "--resume", "--out", str(tmp_path / "stopped")]) == 0
    for seed in (0, 3):
        assert_same_run(tmp_path / "full" / f"seed-{seed}", tmp_path / "stopped" / f"seed-{seed}")


def test_a_deadline_stops_every_seed_resumably(tmp_path: Path) -> None:
    """A population past its deadline stops every seed at its next boundary, each unfinished
    with a checkpoint; resumed, each ends as its solo run."""
    cfg = RunConfig.from_json(json.loads((_solo(tmp_path, 3) / "config.json").read_text()), "")
    summaries = train_population(cfg, [0, 3], tmp_path / "pop", progress=False, deadline=0.0)
    assert [s["stopped_at_deadline"] for s in summaries] == [True, True]
    assert not (tmp_path / "pop" / "seed-3" / MODEL).exists()
    train_population(cfg, [0, 3], tmp_path / "pop", progress=False, resume=True)
    assert_same_run(tmp_path / "alone" / "seed-3", tmp_path / "pop" / "seed-3")


def _solo(root: Path, seed: int) -> Path:
    """Seed `seed` of RUN trained alone under root/alone."""
    out = root / "alone" / f"seed-{seed}"
    assert main(["train", *RUN, "--seed", str(seed), "--out", str(out)]) == 0
    return out


def test_seeds_that_would_not_fit_in_memory_are_refused_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory is bounded before anything starts: S times one run's estimate."""
    from xlvin.run import population

    monkeypatch.setattr(population, "machine_memory", lambda: 2**20)  # 1 MiB
    assert main(["train", *RUN, "--seeds", "0-9", "--out", str(tmp_path / "pop")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: 10 seeds need about ") and "fewer --seeds" in err
    assert not (tmp_path / "pop").exists()


def test_a_flat_adam_that_differs_refuses_the_population_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the flat Adam the stacked step needs gives way to Adam as written (its proof
    failed), the seeds are refused in one line, not stopped by an internal error after their
    directories were made."""
    step = FlatAdam.step

    def off(self, *args, **kwargs):
        step(self, *args, **kwargs)
        with torch.no_grad():
            self.flat.add_(1e-3)

    monkeypatch.setattr(proof, "_verdicts", {})  # as in a new process
    monkeypatch.setattr(FlatAdam, "step", off)
    assert main(["train", *RUN, "--seeds", "0-2", "--out", str(tmp_path / "pop")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: --seeds trains together runs of the PPO baseline and "
                          "XLVIN on the CPU, not Adam as written")
    assert len(err.splitlines()) == 1 and not (tmp_path / "pop").exists()


@pytest.mark.parametrize("agent", ["ppo", "xlvin-r"])
def test_a_diverged_seed_is_named_and_every_seed_keeps_its_checkpoint(
    agent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A loss that diverges in a population is one line naming its seed, with no NumPy warning
    before it; every seed's run directory keeps its checkpoint, as a run of its own does."""
    out = tmp_path / "pop"
    assert main(["train", *RUN, "--agent", agent, "--seeds", "0,3,7", "--lr", "1e6", "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the progress bar
    assert last.startswith("xlvin: error: seed 0: non-finite PPO loss") and last.endswith(
        "every seed stopped at its last checkpoint, in its own run directory")
    assert "Warning" not in err
    assert all((out / f"seed-{s}" / CHECKPOINT).is_file() for s in (0, 3, 7))


def test_a_large_learning_rate_keeps_the_flat_adam(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flat Adam's proof holds at any learning rate (its float32 rounding grows with it)."""
    monkeypatch.setattr(proof, "_verdicts", {})
    for lr in (2.5e-4, 1.0, 1e6):
        assert proof.flat_adam_proven(lr, 1e-5, 0.5) and proof.flat_adam_proven(lr, 1e-8, None)


@pytest.mark.parametrize("protocol, agent, together", [
    ("ours", "ppo", 3), ("paper", "xlvin-r", 3),
    ("paper", "ppo", 3),  # the authors' PPO: a separate critic encoder, acting seed by seed
])
def test_reproduce_trains_the_cells_of_one_config_together(
    protocol: str, agent: str, together: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`xlvin reproduce classic --population 3`: Table 1's cells that differ only in their seed
    train as one population into their own run directories, each its solo cell's run bit for
    bit, and are then evaluated and tabled as cells; a started cell, or a config the population
    does not take, is left to itself."""
    monkeypatch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))
    cells = [table1.Cell(protocol, "CartPole-v0", agent, seed) for seed in SEEDS]
    alone = [table1.run_cell(cell, tmp_path / "alone") for cell in cells]
    assert train_populations(CLASSIC, cells, tmp_path / "together", 3) == together
    assert train_populations(CLASSIC, cells, tmp_path / "together", 3) == 0  # all started
    together = [table1.run_cell(cell, tmp_path / "together") for cell in cells]
    for cell, solo, pop in zip(cells, alone, together):
        assert_same_run(cell.run_dir(tmp_path / "alone"), cell.run_dir(tmp_path / "together"))
        assert {k: v for k, v in pop.items() if "seconds" not in k} == \
            {k: v for k, v in solo.items() if "seconds" not in k}


def test_reproduce_refuses_a_population_under_one_before_anything(tmp_path: Path, capsys) -> None:
    code = main(["reproduce", "executor-ablation", "--population", "0", "--runs",
                 str(tmp_path / "runs"), "--results", str(tmp_path / "results")])
    assert code == 2 and "--population >= 1" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_a_study_with_a_population_runs_block_by_block_of_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`reproduce --population 2`: the first two seeds of every arm train (together where the
    population takes the config, else alone) and are evaluated before the next two start, so a
    long study's results come as it goes; every cell's record is its solo run's."""
    monkeypatch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))
    cells = [table1.Cell("paper", "CartPole-v0", agent, seed)
             for agent in ("xlvin-r", "ppo") for seed in (7, 0, 3, 5)]
    assert [[(c.agent, c.seed) for c in block] for block in seed_blocks(cells, 2)] == [
        [("xlvin-r", 0), ("xlvin-r", 3), ("ppo", 0), ("ppo", 3)],
        [("xlvin-r", 7), ("xlvin-r", 5), ("ppo", 7), ("ppo", 5)]]
    assert seed_blocks(cells, 1) == [cells]
    records, _ = run_cells(CLASSIC, cells, tmp_path / "together", 1, "cells", population=2)
    assert [(r["agent"], r["seed"]) for r in records] == [
        (c.agent, c.seed) for block in seed_blocks(cells, 2) for c in block]
    for cell in cells[:1] + cells[4:5]:
        alone = table1.run_cell(cell, tmp_path / "alone")
        assert_same_run(cell.run_dir(tmp_path / "alone"), cell.run_dir(tmp_path / "together"))
        assert {k: v for k, v in records[[(r["agent"], r["seed"]) for r in records].index(
            (cell.agent, cell.seed))].items() if "seconds" not in k} == \
            {k: v for k, v in alone.items() if "seconds" not in k}


def test_a_study_resumes_its_stopped_population_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cells a population left with a checkpoint (a study stopped) resume together, each
    ending as its solo run; a finished cell is left alone."""
    monkeypatch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))
    cells = [table1.Cell("ours", "CartPole-v0", "ppo", seed) for seed in SEEDS]
    dirs = {cell.seed: cell.run_dir(tmp_path / "together") for cell in cells}
    train_population(cells[0].config(), list(SEEDS), None, deadline=0.0, dirs=dirs)
    assert not any((d / MODEL).exists() for d in dirs.values())
    assert train_populations(CLASSIC, cells, tmp_path / "together", 3) == 3
    assert train_populations(CLASSIC, cells, tmp_path / "together", 3) == 0  # all finished
    for cell in cells:
        table1.run_cell(cell, tmp_path / "alone")
        assert_same_run(cell.run_dir(tmp_path / "alone"), cell.run_dir(tmp_path / "together"))
