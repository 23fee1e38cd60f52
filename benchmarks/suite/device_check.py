"""A GPU machine's check: gSDE PPO on cuda, and Freeway training speed on cuda and on one CPU
thread, ours and Stable-Baselines3's, one after the other.

    OUT=DIR python -m benchmarks.suite.device_check [N | gsde | binned]    # N: Freeway transitions (20480)

Each stage writes DIR/gpu.json as it ends (a stage that fails records its traceback and the
next runs). Needs a CUDA GPU and the `bench` extra; not part of the test suite.
Results: benchmarks/notes.md, "Atari through the GPU".
"""
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

OUT = Path(os.environ["OUT"]) / "gpu.json"
RESULTS: dict = {"torch": torch.__version__, "cuda": torch.cuda.get_device_name(0),
                 "cpu": next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                             if l.startswith("model name")), "cpus": os.cpu_count()}


def save(name, value):
    RESULTS[name] = value
    OUT.write_text(json.dumps(RESULTS, indent=1))
    print(name, json.dumps(value), flush=True)


def stage(name, fn):
    try:
        save(name, fn())
    except Exception:
        save(name, {"error": traceback.format_exc()[-1500:]})


def gsde_cuda():
    import numpy as np
    from xlvin import PPO
    with tempfile.TemporaryDirectory() as tmp:
        m = PPO("Pendulum-v1", use_sde=True, sde_sample_freq=4, separate_critic=True,
                activation="tanh", hidden=32, embedding_dim=64, device="cuda", num_envs=4,
                num_steps=256, seed=0)
        t = time.perf_counter()
        m.learn(8192, out=Path(tmp) / "run", progress=False)
        wall = time.perf_counter() - t
        params_device = str(next(m.policy.parameters()).device)
        a, _ = m.predict(np.zeros((2, 3), np.float32), deterministic=True)
        loaded = PPO.load(Path(tmp) / "run")
        ev = loaded.evaluate(episodes=2)
    return {"wall": wall, "device": params_device, "action_shape": list(a.shape),
            "eval_mean": ev["mean"], "loaded_device": str(next(loaded.policy.parameters()).device)}


def binned_cuda():
    """XLVIN over binned Pendulum actions on cuda, each expansion method: trains, predicts,
    saves and loads on the CPU."""
    import numpy as np
    from xlvin import XLVIN
    out = {}
    for method, n in (("all", 0), ("uniform", 4), ("gaussian", 4), ("policy", 4)):
        with tempfile.TemporaryDirectory() as tmp:
            options = {"expansion": method, **({"expand": n} if n else {})}
            m = XLVIN("Pendulum-v1", device="cuda", num_envs=4, num_steps=128, seed=0,
                      transe_episodes=20, **options)
            t = time.perf_counter()
            m.learn(1024, out=Path(tmp) / "run", progress=False)
            a, _ = m.predict(np.zeros((2, 3), np.float32), deterministic=True)
            loaded = XLVIN.load(Path(tmp) / "run")
            out[method] = {"wall": time.perf_counter() - t, "action_shape": list(a.shape),
                           "eval_mean": loaded.evaluate(episodes=1)["mean"]}
    return out


def ours(agent, device, transitions):
    from xlvin.experiments.atari import Cell
    from xlvin.run.training import train_run
    torch.set_num_threads(1)
    cfg = Cell("Freeway", agent, 0, transitions, device=device).config()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        _, summary = train_run(cfg, Path(tmp) / "run", progress=False, pretrain_progress=False)
        wall = time.perf_counter() - t
    steps = summary["ppo"]["env_steps"]
    return {"steps": steps, "wall": wall, "steps_per_s": steps / wall}


def sb3(device, transitions):
    import gymnasium as gym
    import xlvin.envs  # noqa: F401  (registers xlvin/ ids)
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    torch.set_num_threads(1)
    envs = make_vec_env("xlvin/FreewayTrain-v4", n_envs=8, seed=0)
    t = time.perf_counter()
    model = PPO("CnnPolicy", envs, n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4,
                clip_range=0.1, ent_coef=0.01, vf_coef=0.5, gamma=0.99, gae_lambda=0.95,
                max_grad_norm=0.5, seed=0, device=device, verbose=0)
    model.learn(transitions)
    wall = time.perf_counter() - t
    return {"steps": model.num_timesteps, "wall": wall, "steps_per_s": model.num_timesteps / wall}


if sys.argv[1:] == ["binned"]:
    stage("binned_cuda", binned_cuda)
    sys.exit()
stage("gsde_cuda", gsde_cuda)
if sys.argv[1:] == ["gsde"]:
    sys.exit()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20480
stage("ppo_cuda", lambda: ours("ppo", "cuda", N))
stage("sb3_cuda", lambda: sb3("cuda", N))
stage("xlvin_r_cuda", lambda: ours("xlvin-r", "cuda", N))
stage("ppo_cpu", lambda: ours("ppo", "cpu", N // 2))
stage("sb3_cpu", lambda: sb3("cpu", N // 2))
stage("xlvin_r_cpu", lambda: ours("xlvin-r", "cpu", N // 2))
