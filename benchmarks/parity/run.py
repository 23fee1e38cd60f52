"""Parity of our PPO with Stable-Baselines3's on Box actions, at the RL Zoo's hyperparameters.

    python -m benchmarks.parity.run --env Pendulum-v1 --seeds 5
    python -m benchmarks.parity.run --env HalfCheetah-v5 --seeds 5            # 1M steps each
    python -m benchmarks.parity.run --env HalfCheetah-v5 --seeds 1 --steps 4096 --out /tmp/smoke

Each (library, seed) trains in a fresh process, one at a time (`--jobs`: several), libraries
interleaved seed by seed; the parent times the whole process (interpreter start, imports, env and model creation,
training) and subtracts the final evaluation, which the child times itself; the child also
records its CPU seconds up to the evaluation (steps per CPU second: the fairer speed on a machine
shared with other work). Both libraries then
play the same `EVAL_EPISODES` fresh episodes (seeds from `EVAL_SEED`) with their final policy,
greedily (the Gaussian's mean, clipped to the bounds; observations normalised with the frozen
statistics where the preset normalises). Runs land in OUT/runs/<env>/<lib>-<seed>.json and a run
whose file exists is not repeated; OUT/<name>.{json,md,png} are written from every run on file:
the final return's IQM with its 95 % bootstrap interval (`xlvin.stats.summarize`), the
whole-process env steps/s, the training curves and the exact commands.

The RL Zoo's presets (hyperparams/ppo.yml; HalfCheetah-v3's, the latest MuJoCo version it tunes)
are `ZOO`; `ours` maps each onto our options: separate policy and value networks as SB3's
(`separate_critic`), its activation, gSDE where the preset explores with it (`use_sde`). Where
the two differ by construction it says so: SB3's value loss is vf_coef * MSE where ours is
vf_coef * MSE / 2 (so our vf_coef is twice theirs); SB3's MLP is obs -> 64 -> 64 (or 256 -> 256)
before its linear heads, ours obs -> 2F -> F -> k (64 -> 32 -> 64, or 256 -> 128 -> 256). Both
libraries run torch with one thread. `--jobs N` runs N processes at once (on a machine with at
least N idle cores; the steps/s are then per process). Requires the `bench` extra
(stable-baselines3, gymnasium[mujoco]); not part of the test suite.
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "parity"
EVAL_SEED, EVAL_EPISODES = 1_000_000, 10
LIBRARIES = ("xlvin", "sb3")
NAMES = {"Pendulum-v1": "pendulum", "HalfCheetah-v5": "halfcheetah"}

#: The RL Zoo's PPO presets (SB3's argument names).
ZOO: dict[str, dict[str, Any]] = {
    "Pendulum-v1": {
        "normalize": False, "n_envs": 4, "n_timesteps": 100_000, "n_steps": 1024,
        "batch_size": 64, "gae_lambda": 0.95, "gamma": 0.9, "n_epochs": 10, "ent_coef": 0.0,
        "learning_rate": 1e-3, "clip_range": 0.2, "vf_coef": 0.5, "max_grad_norm": 0.5,
        "use_sde": True, "sde_sample_freq": 4, "policy_kwargs": {},
    },
    "HalfCheetah-v5": {
        "normalize": True, "n_envs": 1, "n_timesteps": 1_000_000, "n_steps": 512,
        "batch_size": 64, "gae_lambda": 0.92, "gamma": 0.98, "n_epochs": 20,
        "ent_coef": 0.000401762, "learning_rate": 2.0633e-05, "clip_range": 0.1,
        "vf_coef": 0.58096, "max_grad_norm": 0.8, "use_sde": False, "sde_sample_freq": -1,
        "policy_kwargs": {"log_std_init": -2, "ortho_init": False, "activation_fn": "relu",
                          "net_arch": {"pi": [256, 256], "vf": [256, 256]}},
    },
}


def ours(env_id: str) -> dict[str, Any]:
    """Our options for the Zoo's preset of `env_id` (the module docstring says what differs)."""
    z = ZOO[env_id]
    kwargs = z["policy_kwargs"]
    options = {
        "num_envs": z["n_envs"], "num_steps": z["n_steps"], "minibatch_size": z["batch_size"],
        "update_epochs": z["n_epochs"], "lr": z["learning_rate"], "anneal_lr": False,
        "gamma": z["gamma"], "gae_lambda": z["gae_lambda"], "clip_coef": z["clip_range"],
        "clip_value_loss": False, "ent_coef": z["ent_coef"], "vf_coef": 2 * z["vf_coef"],
        "max_grad_norm": z["max_grad_norm"], "norm_obs": z["normalize"],
        "norm_reward": z["normalize"], "log_std_init": kwargs.get("log_std_init", 0.0),
        "use_sde": z["use_sde"], "sde_sample_freq": z["sde_sample_freq"],
        "separate_critic": True, "activation": kwargs.get("activation_fn", "tanh"),
    }
    if "net_arch" in kwargs:  # 256-wide: each encoder obs -> 256 -> 128 -> 256
        options.update(hidden=128, embedding_dim=256)
    else:  # SB3's 64 x 64: each encoder obs -> 64 -> 32 -> 64
        options.update(hidden=32, embedding_dim=64)
    if not kwargs.get("ortho_init", True):
        options["init"] = "pytorch"
    return options


def train_xlvin(env_id: str, seed: int, steps: int) -> tuple[Any, list[list[float]]]:
    from xlvin import PPO

    model = PPO(env_id, seed=seed, **ours(env_id))
    with tempfile.TemporaryDirectory() as tmp:
        model.learn(steps, out=Path(tmp) / "run", progress=False)
        curve = []
        for line in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines():
            row = json.loads(line)
            if "charts/episodic_return" in row:
                curve.append([row["step"], row["charts/episodic_return"]])
    return model, curve


def evaluate_xlvin(model: Any) -> list[float]:
    return model.evaluate(episodes=EVAL_EPISODES, seed=EVAL_SEED)["returns"]


def train_sb3(env_id: str, seed: int, steps: int) -> tuple[Any, list[list[float]]]:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    z = dict(ZOO[env_id])
    kwargs = dict(z.pop("policy_kwargs"))
    if kwargs.get("activation_fn") == "relu":
        kwargs["activation_fn"] = torch.nn.ReLU
    envs = make_vec_env(env_id, n_envs=z.pop("n_envs"), seed=seed)
    if z.pop("normalize"):
        envs = VecNormalize(envs, gamma=z["gamma"])
    z.pop("n_timesteps")
    curve: list[list[float]] = []

    class Episodes(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    curve.append([self.num_timesteps, float(info["episode"]["r"])])
            return True

    model = PPO("MlpPolicy", envs, seed=seed, policy_kwargs=kwargs, verbose=0, device="cpu", **z)
    model.learn(steps, callback=Episodes())
    return model, curve


def evaluate_sb3(model: Any, env_id: str) -> list[float]:
    import gymnasium as gym
    import numpy as np

    envs = model.get_env()
    normalize = getattr(envs, "normalize_obs", None)
    returns = []
    for i in range(EVAL_EPISODES):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=EVAL_SEED + i)
        total, done = 0.0, False
        while not done:
            x = normalize(obs[None]) if normalize is not None else obs[None]
            action, _ = model.predict(x, deterministic=True)
            action = np.clip(action[0], env.action_space.low, env.action_space.high)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        env.close()
        returns.append(total)
    return returns


def worker(lib: str, env_id: str, seed: int, steps: int, out: Path) -> None:
    """Train and evaluate one run in this process; write its JSON to `out`."""
    import torch

    torch.set_num_threads(1)
    if lib == "xlvin":
        model, curve = train_xlvin(env_id, seed, steps)
        cpu, start = time.process_time(), time.perf_counter()
        returns = evaluate_xlvin(model)
        steps_done = model.summary["ppo"]["env_steps"]
    else:
        model, curve = train_sb3(env_id, seed, steps)
        cpu, start = time.process_time(), time.perf_counter()
        returns = evaluate_sb3(model, env_id)
        steps_done = model.num_timesteps
    out.write_text(json.dumps({
        "lib": lib, "env": env_id, "seed": seed, "env_steps": int(steps_done),
        "eval_returns": returns, "final_return": sum(returns) / len(returns),
        "eval_seconds": time.perf_counter() - start, "cpu_seconds": cpu, "curve": curve,
    }))


def run_one(lib: str, env_id: str, seed: int, steps: int, runs: Path) -> dict[str, Any]:
    """One run in a fresh process (nice 10), timed from the outside; its JSON."""
    path = runs / f"{lib}-{seed}.json"
    if path.is_file():
        return json.loads(path.read_text())
    command = ["nice", "-n", "10", sys.executable, "-m", "benchmarks.parity.run", "worker",
               "--lib", lib, "--env", env_id, "--seed", str(seed), "--steps", str(steps),
               "--worker-out", str(path)]
    paths = (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:  # MuJoCo may write a log file where it runs
        subprocess.run(command, check=True, cwd=scratch, env=env)
    wall = time.perf_counter() - start
    result = json.loads(path.read_text())
    result.update(process_seconds=wall, load_before=load, load_after=os.getloadavg()[0])
    result["sps"] = result["env_steps"] / (wall - result["eval_seconds"])
    result["sps_cpu"] = result["env_steps"] / result["cpu_seconds"]
    path.write_text(json.dumps(result))
    print(f"{lib} seed {seed}: return {result['final_return']:.1f}, {result['sps']:.0f} steps/s "
          f"({result['sps_cpu']:.0f} per CPU second), {wall:.0f} s (load {load:.2f})", flush=True)
    return result


def report(env_id: str, steps: int, results: list[dict[str, Any]], out: Path,
           command: str, name: str, planned: int) -> None:
    """OUT/<name>.{json,md,png} from the runs of both libraries."""
    from xlvin.stats import interval_text, summarize

    summary: dict[str, Any] = {"env": env_id, "steps": steps, "command": command,
                               "seeds_planned": planned,
                               "eval_episodes": EVAL_EPISODES, "eval_seed": EVAL_SEED,
                               "zoo": ZOO[env_id], "ours": ours(env_id),
                               "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                                          f"{cpu_model()}, torch {torch_version()}",
                               "libraries": {}}
    for lib in LIBRARIES:
        runs = sorted((r for r in results if r["lib"] == lib), key=lambda r: r["seed"])
        if not runs:
            continue
        sps = [r["sps"] for r in runs]
        cpu = [r["env_steps"] / r["cpu_seconds"] for r in runs if "cpu_seconds" in r]
        summary["libraries"][lib] = {
            "final_return": summarize([r["final_return"] for r in runs]),
            "sps_mean": sum(sps) / len(sps), "sps": sps,
            "sps_cpu_mean": sum(cpu) / len(cpu) if cpu else None, "sps_cpu": cpu,
            "seeds": [r["seed"] for r in runs], "runs": runs,
        }
    libs = summary["libraries"]
    if set(libs) == set(LIBRARIES):
        ours_, theirs = libs["xlvin"]["final_return"], libs["sb3"]["final_return"]
        summary["return_inside_or_above_sb3_ci"] = ours_["iqm"] >= theirs["iqm_low"]
        summary["sps_ratio"] = libs["xlvin"]["sps_mean"] / libs["sb3"]["sps_mean"]
        if libs["xlvin"]["sps_cpu_mean"] and libs["sb3"]["sps_cpu_mean"]:
            summary["sps_cpu_ratio"] = libs["xlvin"]["sps_cpu_mean"] / libs["sb3"]["sps_cpu_mean"]
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")

    lines = [f"# PPO parity on {env_id}: xlvin vs Stable-Baselines3 (RL Zoo hyperparameters)", "",
             f"{steps:,} env steps per run; final return = mean over {EVAL_EPISODES} fresh "
             f"greedy episodes (seeds {EVAL_SEED}+) of the final policy; IQM over seeds with its "
             "95 % bootstrap interval. Steps/s: env steps over the whole training process "
             "(start, imports, set-up, training; not the final evaluation), per wall-clock "
             "second and per CPU second of the process (the fairer figure on a loaded machine), "
             "nice 10, torch with 1 thread, on " + summary["machine"] + " (load average per run "
             "in the JSON).", "",
             "| library | seeds | final return IQM [95 % CI] | mean | steps/s (wall) | steps/s (CPU) |",
             "|---|---|---|---|---|---|"]
    for lib, s in libs.items():
        r = s["final_return"]
        per_cpu = f"{s['sps_cpu_mean']:,.0f}" if s["sps_cpu_mean"] else "-"
        lines.append(f"| {lib} | {len(s['seeds'])} | {interval_text(r['iqm'], r['iqm_low'], r['iqm_high'], 1)}"
                     f" | {r['mean']:.1f} | {s['sps_mean']:,.0f} | {per_cpu} |")
    missing = {lib: planned - len(s["seeds"]) for lib, s in libs.items() if len(s["seeds"]) < planned}
    if missing:
        lines += ["", f"**Unfinished:** of the {planned} seeds the command runs, "
                  + ", ".join(f"{lib} lacks {n}" for lib, n in missing.items())
                  + "; the table holds the finished runs only."]
    if "sps_ratio" in summary:
        inside = "inside or above" if summary["return_inside_or_above_sb3_ci"] else "below"
        cpu_ratio = (f", per CPU second {summary['sps_cpu_ratio']:.2f}x"
                     if "sps_cpu_ratio" in summary else "")
        lines += ["", f"Our IQM is {inside} SB3's 95 % interval; speed ratio (ours / SB3) "
                  f"{summary['sps_ratio']:.2f}x per wall-clock second{cpu_ratio}."]
    lines += ["", "Hyperparameters: the RL Zoo's preset for SB3 and our mapping of it (value "
              "loss: our vf_coef is twice SB3's, whose loss has no 1/2; networks: separate "
              "policy and value MLPs in both, SB3's obs -> W -> W, ours obs -> 2F -> F -> k).",
              "", "```", json.dumps(ZOO[env_id]),
              json.dumps(ours(env_id)), "```", "", "Command:", "", "```", command, "```", ""]
    (out / f"{name}.md").write_text("\n".join(lines))
    plot(env_id, libs, out / f"{name}.png")


def cpu_model() -> str:
    """The processor's model name (Linux), or the platform's word for it."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def torch_version() -> str:
    import torch

    return torch.__version__


def plot(env_id: str, libs: dict[str, Any], path: Path) -> None:
    """Training returns against env steps, one line per seed (ours: the mean return of the
    episodes that ended in each rollout, as metrics.jsonl logs it; SB3: every episode), and the
    final returns per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, finals) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=[3, 1])
    for i, (lib, s) in enumerate(libs.items()):
        color = f"C{i}"
        for run in s["runs"]:
            if run["curve"]:
                steps, returns = zip(*run["curve"])
                curves.plot(steps, returns, color=color, alpha=0.25, lw=0.7)
        finals.scatter([i] * len(s["runs"]), [r["final_return"] for r in s["runs"]],
                       color=color, label=lib)
        curves.plot([], [], color=color, label=lib)
    curves.set(xlabel="env steps", ylabel="training episode return", title=env_id)
    curves.legend()
    finals.set(xticks=range(len(libs)), xticklabels=list(libs), title="final return per seed")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def measured_argv(argv: list[str]) -> list[str]:
    """The arguments of the command that runs (or ran) the runs: without `report`, which only
    rewrites the files from them, and without --out (where they went, a machine's own folder)."""
    kept, args = [], iter(argv)
    for a in args:
        if a == "--out":
            next(args, None)
        elif a != "report" and not a.startswith("--out="):
            kept.append(a)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="run", choices=("run", "worker", "report"))
    parser.add_argument("--env", default="Pendulum-v1", choices=tuple(ZOO))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1")
    parser.add_argument("--steps", type=int, default=0, help="env steps per run (0: the Zoo's)")
    parser.add_argument("--libs", default=",".join(LIBRARIES))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--lib", choices=LIBRARIES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker-out", type=Path)
    parser.add_argument("--tag", default="", help="name the files <env>-TAG (a smoke run)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one process each)")
    args = parser.parse_args()
    steps = args.steps or ZOO[args.env]["n_timesteps"]
    if args.mode == "worker":
        worker(args.lib, args.env, args.seed, steps, args.worker_out)
        return
    name = NAMES.get(args.env, args.env.lower()) + (f"-{args.tag}" if args.tag else "")
    runs = args.out / "runs" / name
    runs.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.parity.run " + shlex.join(measured_argv(sys.argv[1:]))
    cells = [(lib, seed) for seed in range(args.seeds) for lib in args.libs.split(",")]
    if args.mode == "run":
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda c: run_one(c[0], args.env, c[1], steps, runs), cells))
    else:
        results = [json.loads((runs / f"{lib}-{seed}.json").read_text()) for lib, seed in cells
                   if (runs / f"{lib}-{seed}.json").is_file()]
    report(args.env, steps, results, args.out, command, name, args.seeds)


if __name__ == "__main__":
    main()
