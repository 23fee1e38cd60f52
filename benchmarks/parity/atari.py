"""Learning parity on Freeway: Stable-Baselines3's PPO at our Atari settings, beside our PPO seeds.

    python -m benchmarks.parity.atari --seeds 3                   # 1M transitions each
    python -m benchmarks.parity.atari --seeds 1 --transitions 4096 --checkpoint-updates 2 \\
        --runs /tmp/parity-smoke --out /tmp/parity-smoke          # a smoke run
    python -m benchmarks.parity.atari report                      # rewrite the files
    python -m benchmarks.parity.atari speed --transitions 20480   # training speed
    python -m benchmarks.parity.atari unclipped --seeds 7 --transitions 100000  # ours, SB3's value loss

SB3 2.9.2's `PPO("CnnPolicy")` trains on OUR training environment (`xlvin/FreewayTrain-v4` in
SB3's `DummyVecEnv`: the same ALE settings and wrappers, no SB3 `AtariWrapper`), seeded as ours
seeds it (env i reset with seed + i), at our Atari PPO settings (`SB3_SETTINGS`: 8 envs x 128
steps, 4 epochs of 4 minibatches, clip 0.1, lr 2.5e-4 decaying linearly to 0 over the same
number of updates as ours, entropy 0.01, GAE 0.95, gamma 0.99, gradient norm 0.5, Adam eps
1e-5). The two losses differ where SB3 cannot express ours: our value loss is 1/2 MSE, clipped
as max(unclipped, clipped) around the old values (ikostrikov's), SB3's is MSE, unclipped by
default (its `clip_range_vf` clips the prediction alone, another loss): SB3 runs with vf_coef
0.25 (= our 0.5 x 1/2) and no value clipping. SB3's policy is the same Nature CNN with shared
features and the same orthogonal gains (sqrt 2, actor 0.01, critic 1, zero biases).

Each seed trains in a fresh process (nice 10, torch with 1 thread, one at a time) in
RUNS/seed<S>/. Every `--checkpoint-updates` updates it saves SB3's model (weights, Adam state,
timestep count) and the log of the whole games that ended so far (unclipped score, the
transition index at which each ended, the policy's entropy per update). A killed run resumes
from its last checkpoint with the same learning-rate schedule, but NOT exactly: the emulators,
frame stacks and games in progress are not saved (every env starts a fresh game, the partial
games are lost), nor are the random streams (reseeded from the seed and the update count), nor
the games that ended after the checkpoint (they are played again, differently). At the end SB3's
weights are copied into our PPO network and OUR evaluator plays the greedy policy on the same
10 evaluation games as `xlvin reproduce atari` (`xlvin/FreewayEval-v4`, seeds 1,000,000 on).

OUT/atari.{json,md,png}: SB3's seeds beside our PPO seeds of the same budget (`OURS_FILES`: the
1M cells of results/atari-1m, or the 100,000-transition study of results/atari-freeway-seeds),
with the same statistics as `xlvin.experiments.atari` (the training curve in windows of 10
updates, its area, the first update in which a training game scored, the final greedy score),
P(SB3's area > ours), and the seeds that learned (last window above `LEARNED_SCORE`) compared by
Fisher's exact test. `unclipped` trains our PPO cell with SB3's value loss (unclipped, the one
difference the one-update comparison leaves) on the same seeds and budget, through `xlvin
reproduce atari`'s own `run_cell` (RUNS/ours-unclipped-value/seed<S>), and adds it as a third
row. `speed` trains each library (ours: `xlvin reproduce atari`'s PPO cell)
for the transitions asked, seed 0, in a fresh process (nice 10, one after the other), without
evaluating, and prints the wall-clock and CPU seconds of the training. Requires the `bench`
extra (stable-baselines3); not part of the tests.
"""

import argparse
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
GAME = "Freeway"
#: Transitions of one round of games: a Freeway game lasts 2,048 steps of each of the 8 envs.
GAME_TRANSITIONS = 16_384
BUDGET = 1_000_000
#: Our PPO seeds on Freeway per budget (`xlvin reproduce atari`'s records): the paper's budget,
#: and the seven-seed study at 100,000 transitions (its lr decaying over that budget, as SB3's).
OURS_FILES = {BUDGET: ROOT / "results" / "atari-1m" / "atari.json",
              100_000: ROOT / "results" / "atari-freeway-seeds" / "atari.json"}
#: A seed learned to cross when its last training window averaged more than this a game (a
#: random policy scores 0; a policy that crosses scores 20-23).
LEARNED_SCORE = 10.0

#: Our parameter names -> SB3's CnnPolicy's (shared features extractor), for the same tensors.
SB3_NAMES = {
    "encoder.convs.0": "features_extractor.cnn.0",
    "encoder.convs.2": "features_extractor.cnn.2",
    "encoder.convs.4": "features_extractor.cnn.4",
    "encoder.linear": "features_extractor.linear.0",
    "heads.actor": "action_net",
    "heads.critic": "value_net",
}


def atari_ppo() -> dict[str, Any]:
    """Our Atari PPO settings (`xlvin.experiments.atari.ATARI_PPO`)."""
    from xlvin.experiments.atari import ATARI_PPO

    return dict(ATARI_PPO)


def sb3_settings(ours: dict[str, Any]) -> dict[str, Any]:
    """SB3 PPO's arguments for our settings `ours` (the learning rate: `LinearToZero`)."""
    return {
        "n_steps": ours["num_steps"], "batch_size": ours["num_envs"] * ours["num_steps"]
        // ours["num_minibatches"], "n_epochs": ours["update_epochs"], "gamma": ours["gamma"],
        "gae_lambda": ours["gae_lambda"], "clip_range": ours["clip_coef"], "clip_range_vf": None,
        "normalize_advantage": True, "ent_coef": ours["ent_coef"],
        "vf_coef": ours["vf_coef"] / 2, "max_grad_norm": ours["max_grad_norm"],
    }


class LinearToZero:
    """Our linear decay as SB3's schedule: SB3 calls it before update u (0-based) of N with
    progress_remaining = 1 - (u + 1) / N, where we set lr (1 - u / N)."""

    def __init__(self, lr: float, updates: int) -> None:
        self.lr, self.updates = lr, updates

    def __call__(self, progress_remaining: float) -> float:
        return self.lr * min(1.0, progress_remaining + 1.0 / self.updates)


def ours_from_sb3(sb3_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SB3 CnnPolicy's state dict as our PPO network's (`SB3_NAMES`)."""
    return {f"{ours}.{kind}": sb3_state[f"{theirs}.{kind}"]
            for ours, theirs in SB3_NAMES.items() for kind in ("weight", "bias")}


def copy_into_sb3(ours: torch.nn.Module, policy: torch.nn.Module) -> None:
    """Our network's weights into SB3's policy, in place (its shared extractor's tensors)."""
    with torch.no_grad():
        for name, value in ours.state_dict().items():
            prefix, kind = name.rsplit(".", 1)
            policy.get_parameter(f"{SB3_NAMES[prefix]}.{kind}").copy_(value)


def our_network(seed: int = 0) -> torch.nn.Module:
    """Our PPO network for Freeway, as `xlvin reproduce atari` builds it, seeded."""
    from xlvin.experiments.atari import Cell
    from xlvin.run.architecture import agent_of
    from xlvin.envs.spaces import Spaces

    torch.manual_seed(seed)
    return agent_of(Cell(GAME, "ppo", seed).config(), Spaces((4, 84, 84), "image", 3))


def make_envs(seed: int) -> Any:
    """SB3's DummyVecEnv of our training environment, seeded as ours (env i: seed + i)."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import xlvin.envs  # noqa: F401  (registers xlvin/<Game>Train-v4)
    from xlvin.envs.atari import atari_train_id

    envs = DummyVecEnv([lambda: gym.make(atari_train_id(GAME), disable_env_checker=True)]
                       * atari_ppo()["num_envs"])
    envs.seed(seed)
    return envs


def read_log(run: Path, timesteps: int) -> dict[str, Any]:
    """The run's log as of `timesteps` (games that ended after it are dropped), with the wall and
    CPU seconds of training up to its checkpoint (None in a log written before they were kept:
    that run's time is unknown)."""
    path = run / "log.json"
    if not path.is_file():
        return {"games": [], "entropy": [], "seconds": 0.0, "cpu_seconds": 0.0}
    log = json.loads(path.read_text())
    return {"games": [g for g in log["games"] if g[0] <= timesteps],
            "entropy": [e for e in log["entropy"] if e[0] <= timesteps],
            "seconds": log.get("seconds"), "cpu_seconds": log.get("cpu_seconds")}


def rollout_size() -> int:
    """Transitions per rollout of our Atari PPO (8 envs x 128 steps)."""
    return atari_ppo()["num_envs"] * atari_ppo()["num_steps"]


def new_model(seed: int, updates: int) -> Any:
    """SB3's PPO at our settings (`sb3_settings`), seeded, on fresh envs (`make_envs`), its
    learning rate decaying over `updates` updates (`LinearToZero`)."""
    from stable_baselines3 import PPO

    return PPO("CnnPolicy", make_envs(seed), learning_rate=LinearToZero(atari_ppo()["lr"], updates),
               seed=seed, device="cpu", verbose=0, **sb3_settings(atari_ppo()))


def load_model(path: Path, updates: int, envs: Any = None) -> Any:
    """SB3's PPO saved at `path` (weights, Adam state, timestep count) with our schedule over
    `updates` updates; on `envs`, where every env starts a new game, if given."""
    from stable_baselines3 import PPO

    schedule = LinearToZero(atari_ppo()["lr"], updates)
    model = PPO.load(path, env=envs, device="cpu",
                     custom_objects={"learning_rate": schedule, "lr_schedule": schedule})
    model._last_obs = None  # the envs are fresh: every one starts a new game
    return model


def train(seed: int, transitions: int, run: Path, checkpoint_updates: int) -> Any:
    """Train (or resume) SB3's PPO in `run`; the trained model."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import set_random_seed

    rollout = rollout_size()
    updates = max(1, transitions // rollout)  # as ours: PPOConfig.num_updates
    checkpoint = run / "checkpoint.zip"
    if checkpoint.is_file():
        envs = make_envs(seed)
        model = load_model(checkpoint, updates, envs)
        resumed = seed * 100_003 + model.num_timesteps // rollout
        set_random_seed(resumed)
        envs.seed(resumed)
    else:
        model = new_model(seed, updates)
    log = read_log(run, model.num_timesteps)
    start, cpu = time.perf_counter(), time.process_time()
    before = log["seconds"], log["cpu_seconds"]  # up to the checkpoint resumed from

    class Log(BaseCallback):
        """Whole games with the transition at which they ended; entropy and checkpoints
        between updates."""

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    log["games"].append([self.num_timesteps, float(info["episode"]["r"])])
            return True

        def _on_rollout_start(self) -> None:
            entropy = self.model.logger.name_to_value.get("train/entropy_loss")
            if entropy is not None and self.num_timesteps > 0:
                log["entropy"].append([self.num_timesteps, -float(entropy)])
            if self.num_timesteps and self.num_timesteps % (checkpoint_updates * rollout) == 0:
                save(self.model)

    def save(m: Any) -> None:
        """The log first, then the model (a log ahead of its model is cut back by `read_log`).
        The seconds count the training that led to this checkpoint, not work a kill threw away."""
        if None not in before:
            log["seconds"] = before[0] + time.perf_counter() - start
            log["cpu_seconds"] = before[1] + time.process_time() - cpu
        (run / "log.tmp.json").write_text(json.dumps(log))
        os.replace(run / "log.tmp.json", run / "log.json")
        m.save(run / "checkpoint.tmp.zip")
        os.replace(run / "checkpoint.tmp.zip", checkpoint)

    left = updates * rollout - model.num_timesteps
    if left > 0:
        model.learn(left, callback=Log(), reset_num_timesteps=False)
        entropy = model.logger.name_to_value.get("train/entropy_loss")  # the last update's
        if entropy is not None:
            log["entropy"].append([model.num_timesteps, -float(entropy)])
        save(model)
    return model


def evaluate(model: Any) -> dict[str, Any]:
    """SB3's final policy in our network, on our evaluation games (`run_cell`'s)."""
    from xlvin.envs.atari import atari_eval_id
    from xlvin.experiments.atari import EVAL_GAMES, EVAL_SEED
    from xlvin.ppo.evaluation import evaluate_policy

    agent = our_network()
    agent.load_state_dict(ours_from_sb3(model.policy.state_dict()))
    return evaluate_policy(agent, atari_eval_id(GAME), EVAL_GAMES, EVAL_SEED, num_envs=EVAL_GAMES)


def rows_per_update(games: list[list[float]], timesteps: int, rollout: int) -> list[dict]:
    """Our metrics rows (one per update: transitions, games so far, mean score of the games
    that ended in it) from SB3's game log, for `xlvin.experiments.atari.training_curve`."""
    rows, count, i = [], 0, 0
    for end in range(rollout, timesteps + 1, rollout):
        scores = []
        while i < len(games) and games[i][0] <= end:
            scores.append(games[i][1])
            i += 1
        count += len(scores)
        row = {"charts/transitions": end, "charts/episodes": count}
        if scores:
            row["charts/episodic_return"] = float(np.mean(scores))
        rows.append(row)
    return rows


def worker(seed: int, transitions: int, run: Path, checkpoint_updates: int) -> None:
    """Train and evaluate one seed in this process; RUN/result.json. The run directory is
    claimed (`xlvin.io.run_dir.claim_run_dir`) for the whole of it."""
    from xlvin.io.run_dir import claim_run_dir
    from xlvin.process import quiet_known_warnings

    torch.set_num_threads(1)
    quiet_known_warnings()
    with claim_run_dir(run):  # a second process on this seed is one error, before any work
        model = train(seed, transitions, run, checkpoint_updates)
        write_result(model, seed, transitions, run)


def write_result(model: Any, seed: int, transitions: int, run: Path) -> None:
    """Evaluate the trained `model` and write RUN/result.json."""
    from xlvin.experiments.atari import area_under_curve, first_score_at, training_curve

    rollout = model.n_steps * model.n_envs
    log = read_log(run, model.num_timesteps)
    rows = rows_per_update(log["games"], model.num_timesteps, rollout)
    curve = training_curve(rows)
    evaluation = evaluate(model)
    result = {
        "lib": "sb3", "seed": seed, "transitions": transitions,
        "transitions_reached": model.num_timesteps, "curve": curve,
        "auc": area_under_curve(curve, model.num_timesteps), "first_score_at": first_score_at(rows),
        "games": len(log["games"]), "entropy": log["entropy"],
        "final_eval": {k: evaluation[k] for k in ("mean", "std", "returns", "lengths")},
        # the whole training, over every resume; None where a log predates their keeping
        "train_seconds": log["seconds"], "cpu_seconds": log["cpu_seconds"],
    }
    (run / "result.json").write_text(json.dumps(result))


#: Our PPO with SB3's value loss (unclipped), the one difference left between the two updates.
UNCLIPPED = "ours-unclipped-value"


def unclipped_worker(seed: int, transitions: int, runs: Path) -> None:
    """Our PPO cell with the value loss unclipped, trained (or resumed) and evaluated by
    `xlvin reproduce atari`'s `run_cell`; RUNS/ours-unclipped-value/seed<S>/record.json."""
    from benchmarks.studies.atari_cells import VariantCell
    from xlvin.experiments.atari import run_cell

    cell = VariantCell(GAME, "ppo", seed, transitions, name=UNCLIPPED,
                       ppo=(("clip_value_loss", False),))
    record = run_cell(cell, runs)
    (cell.run_dir(runs) / "record.json").write_text(json.dumps(record))


def unclipped_seeds(seeds: int, runs: Path) -> list[dict[str, Any]]:
    """The finished seeds of our unclipped-value PPO on file."""
    paths = [runs / UNCLIPPED / f"seed{s}" / "record.json" for s in range(seeds)]
    return [json.loads(p.read_text()) for p in paths if p.is_file()]


def running_seed(seed: int, run: Path) -> dict[str, Any] | None:
    """An unfinished seed as its last checkpoint's log has it (no AUC or greedy score: its
    learning rate has not decayed yet), or None without a log or once it has a result."""
    from xlvin.experiments.atari import first_score_at, training_curve

    if (run / "result.json").is_file() or not (run / "log.json").is_file():
        return None
    log = json.loads((run / "log.json").read_text())
    if not log["entropy"]:
        return None
    settings = atari_ppo()
    reached = max(e[0] for e in log["entropy"])  # the last rollout's start before the save
    rows = rows_per_update(log["games"], reached, settings["num_envs"] * settings["num_steps"])
    last = [g[1] for g in log["games"] if g[0] > reached - 2 * GAME_TRANSITIONS]
    return {"lib": "sb3", "seed": seed, "transitions_reached": reached,
            "first_score_at": first_score_at(rows), "curve": training_curve(rows),
            "recent_mean": float(np.mean(last)) if last else None}


def fresh_worker(mode: str, seed: int, transitions: int, runs: Path, *extra: str) -> None:
    """This module's `mode` worker for one seed in a fresh process at nice 10."""
    command = ["nice", "-n", "10", sys.executable, "-m", "benchmarks.parity.atari", mode,
               "--seed", str(seed), "--transitions", str(transitions), "--runs", str(runs), *extra]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    subprocess.run(command, check=True, cwd=ROOT, env=env)


def run_seed(seed: int, transitions: int, runs: Path, checkpoint_updates: int) -> dict[str, Any]:
    """One seed in a fresh process (nice 10), unless its result is on file; its result."""
    run = runs / f"seed{seed}"
    if not (run / "result.json").is_file():
        load = os.getloadavg()[0]
        fresh_worker("worker", seed, transitions, runs,
                     "--checkpoint-updates", str(checkpoint_updates))
        result = json.loads((run / "result.json").read_text())
        result.update(load_before=load, load_after=os.getloadavg()[0])
        (run / "result.json").write_text(json.dumps(result))
    result = json.loads((run / "result.json").read_text())
    print(f"sb3 seed {seed}: {result['transitions_reached']:,} transitions, first point "
          f"{result['first_score_at']}, AUC {result['auc']:.2f}, greedy "
          f"{result['final_eval']['mean']:.1f}", flush=True)
    return result


def speed_worker(lib: str, transitions: int) -> None:
    """Train `lib`'s PPO for `transitions` in a scratch folder; print its seconds as JSON."""
    import tempfile

    from xlvin.experiments.atari import Cell
    from xlvin.process import quiet_known_warnings
    from xlvin.run.training import train_run

    torch.set_num_threads(1)
    quiet_known_warnings()
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        if lib == "sb3":
            steps = train(0, transitions, Path(tmp), checkpoint_updates=transitions).num_timesteps
        else:
            _, summary = train_run(Cell(GAME, "ppo", 0, transitions).config(), Path(tmp) / "run",
                                   progress=False, pretrain_progress=False)
            steps = summary["ppo"]["env_steps"]
        print(json.dumps({"lib": lib, "env_steps": steps,
                          "wall_seconds": time.perf_counter() - start,
                          "cpu_seconds": time.process_time() - cpu}))


def speed(transitions: int) -> None:
    """`speed_worker` of each library in a fresh process, one after the other (nice 10)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    for lib in ("xlvin", "sb3"):
        load = os.getloadavg()[0]
        out = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "benchmarks.parity.atari",
                              "speed-worker", "--lib", lib, "--transitions", str(transitions)],
                             check=True, cwd=ROOT, env=env, capture_output=True, text=True).stdout
        r = json.loads(out.splitlines()[-1])
        print(f"{lib}: {r['env_steps']:,} env steps in {r['wall_seconds']:.0f} s "
              f"({r['env_steps'] / r['wall_seconds']:.0f} steps/s wall, "
              f"{r['env_steps'] / r['cpu_seconds']:.0f} per CPU second), load "
              f"{load:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)


def ppo_cells(path: Path, transitions: int) -> list[dict[str, Any]]:
    """Our PPO's Freeway cells at this budget in a committed `xlvin reproduce atari` record."""
    cells = json.loads(path.read_text())["cells"]
    return [c for c in cells if (c["game"], c["agent"], c["transitions"]) == (GAME, "ppo", transitions)]


def our_seeds(transitions: int) -> list[dict[str, Any]]:
    """Our PPO cells on Freeway at this budget (`OURS_FILES`), none for another budget."""
    return ppo_cells(OURS_FILES[transitions], transitions) if transitions in OURS_FILES else []


def learned(run: dict[str, Any]) -> bool:
    """Whether a seed's last training window averaged more than `LEARNED_SCORE` a game."""
    return bool(run["curve"]) and run["curve"][-1][1] > LEARNED_SCORE


def over_seeds(values: list[float]) -> dict[str, float]:
    from xlvin.stats import summarize

    finite = [v for v in values if math.isfinite(v)]
    return summarize(finite) if finite else {"n": 0}


def estimate(summary: dict[str, float], digits: int) -> str:
    from xlvin.stats import interval_text

    if summary.get("n", 0) == 0:
        return "-"
    if summary["n"] == 1:
        return f"{summary['iqm']:.{digits}f}"
    return interval_text(summary["iqm"], summary["iqm_low"], summary["iqm_high"], digits)


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Seeds that learned in `a` and in `b`, Fisher's exact p of the two counts (None if a side
    has no seeds), and P(AUC of a > AUC of b) with its 95 % bootstrap interval (None with fewer
    than 2 seeds a side)."""
    from xlvin.stats import fisher_exact, improvement_over

    la, lb = sum(map(learned, a)), sum(map(learned, b))
    return {"learned": [la, len(a), lb, len(b)],
            "fisher_p": fisher_exact(la, len(a), lb, len(b)) if a and b else None,
            "auc_over": improvement_over([r["auc"] for r in a], [r["auc"] for r in b])
            if min(len(a), len(b)) >= 2 else None}


def library_rows(libs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per library with seeds: the seeds, the AUC and greedy score over seeds (IQM, 95 %
    bootstrap interval), how many seeds scored and how many learned."""
    return {name: {"seeds": [r["seed"] for r in runs], "auc": over_seeds([r["auc"] for r in runs]),
                   "final_eval": over_seeds([r["final_eval"]["mean"] for r in runs]),
                   "seeds_scored": sum(r["first_score_at"] is not None for r in runs),
                   "seeds_learned": sum(learned(r) for r in runs)}
            for name, runs in libs.items() if runs}


def rows_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """`library_rows` as a markdown table."""
    lines = [f"| library | seeds | AUC, IQM [95 % CI] | greedy, IQM [95 % CI] | seeds that scored "
             f"| seeds that learned (last window > {LEARNED_SCORE:g} a game) |",
             "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        n = len(r["seeds"])
        lines.append(f"| {name} | {n} | {estimate(r['auc'], 2)} | {estimate(r['final_eval'], 1)} "
                     f"| {r['seeds_scored']} of {n} | {r['seeds_learned']} of {n} |")
    return lines


def seeds_table(libs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One markdown row per seed of each library: transitions, first point, AUC, greedy score."""
    lines = ["| library | seed | transitions | first training game with a point | AUC "
             "| greedy score |", "|---|---|---|---|---|---|"]
    for name, runs in libs.items():
        for r in sorted(runs, key=lambda r: r["seed"]):
            first = "never" if r["first_score_at"] is None else f"{r['first_score_at']:,}"
            lines.append(f"| {name} | {r['seed']} | {r['transitions_reached']:,} | {first} | "
                         f"{r['auc']:.2f} | {r['final_eval']['mean']:.1f} |")
    return lines


def report(sb3: list[dict[str, Any]], out: Path, command: str, planned: int,
           transitions: int, running: list[dict[str, Any]],
           unclipped: list[dict[str, Any]] = ()) -> None:
    """OUT/atari.{json,md,png}: SB3's seeds and ours, per seed and over seeds; `running`: SB3's
    unfinished seeds, listed and drawn (dashed) but in no statistic; `unclipped`: our PPO with
    the value loss unclipped (`unclipped_worker`), a third row where there are any."""
    from xlvin.stats import improvement_text

    ours = our_seeds(transitions)
    libs = {"xlvin PPO": ours, "SB3 PPO": sb3, "xlvin PPO, value loss unclipped": list(unclipped)}
    rows = library_rows(libs)
    sb3_vs_ours = compare(sb3, ours)
    over, fisher = sb3_vs_ours["auc_over"], sb3_vs_ours["fisher_p"]
    fisher_unclipped = compare(list(unclipped), ours)["fisher_p"]
    settings = atari_ppo()
    ours_file = OURS_FILES.get(transitions)
    summary = {"game": GAME, "command": command, "seeds_planned": planned,
               "transitions": transitions,
               "ours_file": str(ours_file.relative_to(ROOT)) if ours_file else None,
               "ours_settings": settings, "sb3_settings": sb3_settings(settings),
               "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
               "rows": rows, "sb3_auc_over_ours": over, "learned_score": LEARNED_SCORE,
               "fisher_learned_p": fisher, "fisher_unclipped_learned_p": fisher_unclipped,
               "sb3": sb3, "ours": ours, "ours_unclipped": list(unclipped),
               "sb3_running": running}
    out.mkdir(parents=True, exist_ok=True)
    (out / "atari.json").write_text(json.dumps(summary, indent=1) + "\n")

    lines = [f"# PPO on {GAME}: xlvin against Stable-Baselines3 at the same settings", "",
             "Both train on our `xlvin/FreewayTrain-v4` at our Atari PPO settings "
             "(benchmarks/parity/atari.py says what differs); AUC: the mean unclipped score of "
             "the training games over the transitions trained (windows of 10 updates); "
             "greedy: the final policy on our 10 evaluation games (seeds 1,000,000 on), played "
             "by our evaluator; IQM over seeds [95 % bootstrap interval].", "",
             *rows_table(rows)]
    def p_text(p: float | None) -> str:
        return "-" if p is None else f"{p:.3f}"

    lines += ["", f"P(SB3's AUC > ours) over pairs of seeds: {improvement_text(over)}. Seeds "
              f"that learned, SB3's against ours: Fisher's exact p = {p_text(fisher)} "
              "(two-sided)."]
    if unclipped:
        lines += ["", "Seeds that learned, our PPO with the value loss unclipped against ours "
                  f"as committed: Fisher's exact p = {p_text(fisher_unclipped)} (two-sided)."]
    lines += ["", *seeds_table(libs)]
    if len(sb3) < planned:
        lines += ["", f"**Unfinished:** {len(sb3)} of the {planned} SB3 seeds the command runs "
                  "have finished."]
    if running:
        lines += ["", "Still training (at their last checkpoint; in no statistic above):", "",
                  "| library | seed | transitions so far | first training game with a point "
                  "| mean score of the last two rounds of games |", "|---|---|---|---|---|"]
        for r in running:
            first = "not yet" if r["first_score_at"] is None else f"{r['first_score_at']:,}"
            recent = "-" if r["recent_mean"] is None else f"{r['recent_mean']:.1f}"
            lines.append(f"| SB3 PPO | {r['seed']} | {r['transitions_reached']:,} | {first} | "
                         f"{recent} |")
    if ours_file is None:
        lines += ["", f"No seeds of our PPO at {transitions:,} transitions on file "
                  f"(budgets on file: {', '.join(f'{b:,}' for b in OURS_FILES)})."]
    lines += ["", f"Ours: `{summary['ours_file']}`; SB3's settings: "
              f"`{json.dumps(summary['sb3_settings'])}`.", "", "Command:", "", "```", command,
              "```", ""]
    (out / "atari.md").write_text("\n".join(lines))
    plot(libs, running, out / "atari.png")


def plot(libs: dict[str, list[dict[str, Any]]], running: list[dict[str, Any]], path: Path,
         running_lib: str = "SB3 PPO") -> None:
    """Training score against transitions, one thin line per seed, one colour per library;
    the unfinished seeds (`running`, of the library `running_lib`) dashed."""
    from xlvin.experiments.figures import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (name, runs) in enumerate(libs.items()):
        for j, r in enumerate(runs):
            if r["curve"]:
                ax.plot(*zip(*r["curve"]), color=f"C{i}", linewidth=0.9, alpha=0.8,
                        label=f"{name} ({len(runs)} seeds)" if j == 0 else None)
    for j, r in enumerate(running):
        if r["curve"]:
            ax.plot(*zip(*r["curve"]), color=f"C{list(libs).index(running_lib)}", linewidth=0.9,
                    linestyle="--", label=f"{running_lib}, training ({len(running)})" if j == 0
                    else None)
    ax.set(xlabel="transitions", ylabel="average training game score (unclipped)", title=GAME)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="run",
                        choices=("run", "worker", "report", "speed", "speed-worker", "unclipped",
                                 "unclipped-worker"))
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1")
    parser.add_argument("--transitions", type=int, default=BUDGET)
    parser.add_argument("--checkpoint-updates", type=int, default=50,
                        help="save a checkpoint every N updates (of 1,024 transitions)")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "parity-atari")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "parity")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lib", choices=("xlvin", "sb3"), default="sb3")
    args = parser.parse_args()
    if args.checkpoint_updates < 1:
        parser.error("--checkpoint-updates must be >= 1")
    if args.mode == "worker":
        worker(args.seed, args.transitions, args.runs / f"seed{args.seed}", args.checkpoint_updates)
        return
    if args.mode == "unclipped-worker":
        unclipped_worker(args.seed, args.transitions, args.runs)
        return
    if args.mode == "unclipped":  # each seed in a fresh process (nice 10), one at a time
        for seed in range(args.seeds):
            if not (args.runs / UNCLIPPED / f"seed{seed}" / "record.json").is_file():
                fresh_worker("unclipped-worker", seed, args.transitions, args.runs)
                print(f"ours, value loss unclipped, seed {seed}: done", flush=True)
    if args.mode in ("speed", "speed-worker"):
        if args.mode == "speed":
            speed(args.transitions)
        else:
            speed_worker(args.lib, args.transitions)
        return
    command = "python -m benchmarks.parity.atari " + shlex.join(
        [a for a in sys.argv[1:] if a != "report"]).replace(str(Path.home()) + "/", "~/")
    results, running = [], []
    for seed in range(args.seeds):  # after `unclipped` too: the report of everything on file
        if args.mode == "run":
            results.append(run_seed(seed, args.transitions, args.runs, args.checkpoint_updates))
        elif (args.runs / f"seed{seed}" / "result.json").is_file():
            results.append(json.loads((args.runs / f"seed{seed}" / "result.json").read_text()))
        elif partial := running_seed(seed, args.runs / f"seed{seed}"):
            running.append(partial)
    report(results, args.out, command, args.seeds, args.transitions, running,
           unclipped_seeds(args.seeds, args.runs))


if __name__ == "__main__":
    main()
