"""The benchmark suite: `python -m benchmarks.suite.run [--only PARTS] [--repeats N] [--quick]`.

Parts (default: all but end_to_end):
  ppo_sb3     our PPO vs Stable-Baselines3 PPO on CartPole-v1, same hyperparameters and network
  atari       the same on Freeway (8 envs x 128 steps, Nature CNN), same preprocessing
  planning    training steps/s of XLVIN over PPO for (A, K) = (2,2) CartPole, (3,2) Freeway,
              (9,2) Enduro, (18,1) Alien, (8,4) maze (synthetic observations)
  depth       CartPole-v1: PPO and XLVIN at tree depth K = 0, 1, 2, with the time per rollout
              of collection and of the update (what the tree costs)
  kernel      tree expansion + executor, batch 256: forward and forward+backward time, peak
              memory, fraction of the matmul floor; before (--baseline revision) and after
  end_to_end  (opt-in, ~40 min) wall time of executor pre-training, `xlvin quickstart` and
              `xlvin reproduce classic` with its default seeds

Every figure is measured in a fresh subprocess (nothing warms anything else), runs that are
compared are interleaved and repeated, and the load average is recorded at the start and end of
each part. Results are merged into results/bench.json (parts not re-run are kept) and
results/bench.md is rendered from it. Not part of the test suite.
"""

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
#: The code before the speed work (issue 5): "before" figures are measured on it, in the same run.
DEFAULT_BASELINE = "368992e~1"

CARTPOLE_HP = {"n_envs": 4, "n_steps": 128, "epochs": 4, "minibatches": 4, "lr": 2.5e-4,
               "clip": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5, "gamma": 0.99,
               "gae_lambda": 0.95}
ATARI_HP = dict(CARTPOLE_HP, n_envs=8)
CARTPOLE_ENCODER = {"kind": "mlp", "hidden": 64, "k": 50}  # our CartPole preset: 4-128-64-50 ReLU
NATURE_ENCODER = {"kind": "cnn", "k": 512}

PLANNING_CASES = {
    "cartpole": {"label": "CartPole-v1", "A": 2, "K": 2, "env": "CartPole-v1", "F": 64,
                 "encoder": CARTPOLE_ENCODER, "n_envs": 4, "n_steps": 128, "executor": "default"},
    "freeway": {"label": "Freeway", "A": 3, "K": 2, "env": "xlvin/Freeway-v5", "F": 64,
                "encoder": NATURE_ENCODER, "n_envs": 8, "n_steps": 128},
    "enduro": {"label": "Enduro", "A": 9, "K": 2, "env": "xlvin/Enduro-v5", "F": 64,
               "encoder": NATURE_ENCODER, "n_envs": 8, "n_steps": 128},
    "alien": {"label": "Alien", "A": 18, "K": 1, "env": "xlvin/Alien-v5", "F": 64,
              "encoder": NATURE_ENCODER, "n_envs": 8, "n_steps": 128},
    "maze": {"label": "maze 8x8 (synthetic observations)", "A": 8, "K": 4,
             "env": "synthetic:maze", "obs_shape": [3, 8, 8], "F": 128,
             "encoder": {"kind": "mlp", "hidden": 128, "k": 50}, "n_envs": 4, "n_steps": 128},
}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine(device: str = "cpu") -> dict[str, Any]:
    import torch

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu": model or platform.processor(), "cores": os.cpu_count(),
        "torch": torch.__version__, "torch_threads_used": 1, "python": platform.python_version(),
        "device": device if device == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})",
    }
    try:
        import stable_baselines3

        info["stable_baselines3"] = stable_baselines3.__version__
    except ImportError:
        info["stable_baselines3"] = None
    return info


class Runner:
    def __init__(self, baseline: str | None) -> None:
        self.baseline_src: str | None = None
        if baseline:
            tmp = Path(tempfile.mkdtemp(prefix="xlvin-baseline-"))
            archive = subprocess.run(["git", "archive", baseline, "src"], cwd=ROOT, check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
            self.baseline_src = str(tmp / "src")
            self.baseline_rev = subprocess.run(
                ["git", "rev-parse", "--short", baseline], cwd=ROOT, capture_output=True, text=True,
                check=True,
            ).stdout.strip()

    device = "cpu"  # every task's torch device (--device)

    def __call__(self, task: dict[str, Any], code: str = "current", env: dict[str, str] | None = None) -> dict[str, Any]:
        """Run one worker task in a fresh process on the current code or the baseline."""
        task = {**task, "device": self.device}
        environ = dict(os.environ, **(env or {}))
        paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
        if code == "baseline":
            assert self.baseline_src, "no baseline"
            paths.insert(0, self.baseline_src)
        environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        print(f"  [{dt.datetime.now():%H:%M:%S}] {task['task']} {code} "
              f"{json.dumps({k: v for k, v in task.items() if k not in ('task', 'hp')})[:110]}",
              flush=True)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.suite.worker", json.dumps(task)],
                              cwd=ROOT, env=environ, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"      -> {json.dumps(result)[:160]}", flush=True)
        return result


def part_ppo(run: Runner, env_id: str, hp: dict, encoder: dict, steps: int, repeats: int,
             eval_episodes: int, baseline: bool, ale: bool = False) -> dict[str, Any]:
    """Interleaved repeats of ours, SB3, (ours with `--atari-vector ale`), (ours on the baseline
    code)."""
    rows: list[dict[str, Any]] = []
    sides = [("ours", "ppo_ours", "current", {}), ("sb3", "ppo_sb3", "current", {})]
    sides += [("ours_ale", "ppo_ours", "current", {"atari_vector": "ale"})] if ale else []
    sides += [("ours_baseline", "ppo_ours", "baseline", {})] if baseline else []
    for r in range(repeats):
        for side, task, code, extra in sides:
            args = {"task": task, "env": env_id, "steps": steps, "seed": r, "threads": 1, "hp": hp,
                    "encoder": encoder, "eval_episodes": eval_episodes, "eval_seed": 1_000_000,
                    **extra}
            rows.append({"side": side, "repeat": r, **run(args, code)})
    return {"env": env_id, "steps": steps, "hyperparameters": hp, "encoder": encoder,
            "repeats": repeats, "runs": rows}


def part_planning(run: Runner, quick: bool, baseline: bool, repeats: int,
                  only: list[str] | None = None, planning_baseline: bool = False) -> dict[str, Any]:
    """Every planning case (or those in `only`); with `planning_baseline`, the Atari cases also
    run PPO and XLVIN on the baseline code, so that both ratios come from the same run."""
    cases = {}
    for name, case in PLANNING_CASES.items():
        if only and name not in only:
            continue
        atari = case["env"].startswith("xlvin/")
        steps = {"cartpole": 10240 if quick else 20480, "maze": 512}.get(name, 1024 if quick else 2048)
        runs = []
        agents = [("ppo", "current"), ("xlvin", "current")]
        if baseline and name == "cartpole":
            agents.append(("xlvin", "baseline"))
        elif baseline and atari and planning_baseline:
            agents += [("ppo", "baseline"), ("xlvin", "baseline")]
        for r in range(1 if name == "maze" else repeats):  # the maze's XLVIN run alone is minutes
            for agent, code in agents:
                res = run({"task": "planning", "case": case, "agent": agent, "steps": steps,
                           "threads": 1}, code)
                runs.append({"agent": agent, "code": code, "repeat": r, **res})
        cases[name] = {"case": case, "steps": steps, "atari": atari, "runs": runs}
    return {"cases": cases}


MEASURED = ("started", "finished", "loadavg_start", "loadavg_end", "quick", "cpu")


def merge_cases(previous: dict[str, Any] | None, result: dict[str, Any]) -> dict[str, Any]:
    """The planning cases of a run limited by --planning-cases, added to those of the previous
    run: each case keeps when, on what and at what load it was measured."""
    def stamped(part: dict[str, Any]) -> dict[str, Any]:
        when = {k: part[k] for k in MEASURED if k in part}
        return {name: {"measured": when, **c} if "measured" not in c else c
                for name, c in part["cases"].items()}
    return {**(stamped(previous) if previous else {}), **stamped(result)}


def part_depth(run: Runner, quick: bool, repeats: int) -> dict[str, Any]:
    """CartPole-v1 with PPO and XLVIN at tree depths 0, 1 and 2 (A = 2), interleaved: steps/s
    and the wall time per rollout of collection and of the update, to show what the tree costs."""
    case, steps = PLANNING_CASES["cartpole"], 10240 if quick else 20480
    agents: list[tuple[str, int | None]] = [("ppo", None), ("xlvin", 0), ("xlvin", 1), ("xlvin", 2)]
    runs = []
    for r in range(repeats):
        for agent, depth in agents:
            task = {"task": "planning", "case": case, "agent": agent, "steps": steps, "threads": 1}
            res = run(task if depth is None else {**task, "depth": depth})
            runs.append({"agent": agent, "depth": depth, "repeat": r, **res})
    return {"case": case, "steps": steps, "runs": runs}


def part_kernel(run: Runner, quick: bool, baseline: bool) -> dict[str, Any]:
    rate = run({"task": "matmul_rate", "threads": 1})
    cases = {}
    for name, case in PLANNING_CASES.items():
        c = {"A": case["A"], "K": case["K"], "F": case["F"]}
        rows = []
        # glibc's memory retention is a CPU matter: on a GPU only the default variant is timed
        retain = [("current", True)] if run.device == "cpu" else []
        variants = [("current", False)] + retain + ([("baseline", False)] if baseline else [])
        for code, retain in variants:
            for mode in ("forward", "forward_backward"):
                if code == "baseline" and name == "maze" and mode == "forward_backward":
                    rows.append({"code": code, "retain_memory": retain, "mode": mode,
                                 "skipped": "the old kernel's full-tree autograd graph needs too "
                                            "much memory on a shared 23 GB machine"})
                    continue
                res = run({"task": "kernel", "case": c, "batch": 256, "mode": mode, "impl": "fused",
                           "threads": 1, "reps": 3 if name == "maze" else 7,
                           "retain_memory": retain, "budget_s": 30 if name == "maze" else 5}, code)
                rows.append({"code": code, "retain_memory": retain, "mode": mode, **res})
        cases[name] = {"case": c, "runs": rows}
    return {"matmul_rate": rate, "batch": 256, "cases": cases}


def part_end_to_end(run: Runner) -> dict[str, Any]:
    xlvin = str(Path(sys.executable).parent / "xlvin")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = {"XLVIN_CACHE": str(Path(tmp) / "cache")}
        out["pretrain_executor"] = run({"task": "command", "argv": [
            xlvin, "pretrain-executor", "--graphs", "random_deterministic", "--out",
            str(Path(tmp) / "executor.safetensors"), "--quiet"]})
        out["quickstart_cold_cache"] = run({"task": "command", "env": cache, "argv": [
            xlvin, "quickstart", "--out", str(Path(tmp) / "quickstart")]})
        out["quickstart_warm_cache"] = run({"task": "command", "env": cache, "argv": [
            xlvin, "quickstart", "--out", str(Path(tmp) / "quickstart2")]})
        out["reproduce_classic"] = run({"task": "command", "env": cache, "argv": [
            xlvin, "reproduce", "classic", "--runs", str(Path(tmp) / "runs"), "--results",
            str(Path(tmp) / "results")]})
    for v in out.values():
        v.pop("tail", None) if v.get("rc") == 0 else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="ppo_sb3,atari,planning,depth,kernel",
                        help="comma-separated parts (ppo_sb3, atari, planning, depth, kernel, end_to_end)")
    parser.add_argument("--repeats", type=int, default=2, help="repeats of PPO vs SB3 (CartPole)")
    parser.add_argument("--atari-repeats", type=int, default=1, help="repeats of PPO vs SB3 (Freeway)")
    parser.add_argument("--atari-vector", default="gym", choices=("gym", "ale"),
                        help="ale: the Freeway part also runs ours on ale-py's vector env")
    parser.add_argument("--planning-repeats", type=int, default=1,
                        help="interleaved repeats of each planning case (the maze: 1) and of the "
                             "depth part")
    parser.add_argument("--planning-cases", default="",
                        help=f"comma-separated planning cases (default all: {','.join(PLANNING_CASES)})")
    parser.add_argument("--planning-baseline", action="store_true",
                        help="run the Atari planning cases on the --baseline code too (before/after)")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run, ~5 min)")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE,
                        help="git revision measured as 'before' in the same run ('' for none)")
    parser.add_argument("--render-only", action="store_true", help="re-render bench.md from bench.json")
    parser.add_argument("--device", default="cpu",
                        help="torch device of every measurement (e.g. cuda); results then go to "
                             "results/bench-DEVICE.{json,md}")
    args = parser.parse_args()

    stem = "bench" if args.device == "cpu" else f"bench-{args.device.split(':')[0]}"
    path = RESULTS / f"{stem}.json"
    data = json.loads(path.read_text()) if path.exists() else {"parts": {}}
    if not args.render_only:
        run = Runner(args.baseline or None)
        run.device = args.device
        base = bool(args.baseline)
        parts = [p.strip() for p in args.only.split(",") if p.strip()]
        data["machine"] = machine(args.device)
        if base and {"ppo_sb3", "planning", "kernel"} & set(parts):  # the parts that compare
            data["baseline"] = {"revision": args.baseline, "commit": run.baseline_rev}
        for part in parts:
            print(f"== {part}", flush=True)
            started, load_start = dt.datetime.now().isoformat(timespec="seconds"), loadavg()
            if part == "ppo_sb3":
                result = part_ppo(run, "CartPole-v1", CARTPOLE_HP, CARTPOLE_ENCODER,
                                  20_000 if args.quick else 50_000, args.repeats, 100, base)
            elif part == "atari":
                result = part_ppo(run, "xlvin/Freeway-v5", ATARI_HP, NATURE_ENCODER,
                                  4096 if args.quick else 8192, args.atari_repeats, 2, False,
                                  args.atari_vector == "ale")
            elif part == "planning":
                only = [c for c in args.planning_cases.split(",") if c] or None
                result = part_planning(run, args.quick, base, args.planning_repeats, only,
                                       args.planning_baseline)
            elif part == "depth":
                result = part_depth(run, args.quick, args.planning_repeats)
            elif part == "kernel":
                result = part_kernel(run, args.quick, base)
            elif part == "end_to_end":
                result = part_end_to_end(run)
            else:
                parser.error(f"unknown part {part!r}")
            result.update(started=started, finished=dt.datetime.now().isoformat(timespec="seconds"),
                          loadavg_start=load_start, loadavg_end=loadavg(), quick=args.quick,
                          cpu=data["machine"]["cpu"])
            if part == "planning" and args.planning_cases:
                result["cases"] = merge_cases(data["parts"].get("planning"), result)
            data["parts"][part] = result
            RESULTS.mkdir(exist_ok=True)
            path.write_text(json.dumps(data, indent=1) + "\n")
    from benchmarks.suite.report import render

    (RESULTS / f"{stem}.md").write_text(render(data))
    print(f"wrote {path} and {RESULTS / f'{stem}.md'}")


if __name__ == "__main__":
    main()
