"""The habits of Stable-Baselines3 in the Python API: a loaded model predicts without its env,
training continues (`learn(n)` again, `Model.load(dir).learn(n)`, `xlvin train --resume
--total-steps N`), and `learn(callback=...)` evaluates, saves and stops."""

import json
import random
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from xlvin import PPO, XLVIN, Callback, CheckpointCallback, EvalCallback, StopOnReward, UserError
from xlvin.cli import main

TINY = {"num_envs": 2, "num_steps": 16, "transe_episodes": 4, "transe_epochs": 1}
ROLLOUT = 32  # env steps per update under TINY
OBS = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def make_flat() -> gym.Env:
    """An env the API registers from a callable (`api/<this module>.make_flat`)."""
    return gym.make("CartPole-v1")


def rows(run: Path) -> list[dict[str, float]]:
    """metrics.jsonl without the wall-clock column and the digest that seals it with the rest."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in ("charts/sps", "sha256")}
            for x in lines]


def same_weights(a: Path, b: Path) -> bool:
    x, y = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


# --- a loaded model needs no env ------------------------------------------------------------

def test_a_run_of_a_callable_env_loads_and_predicts_in_a_new_process(tmp_path: Path) -> None:
    model = PPO(make_flat, seed=0, **TINY).learn(ROLLOUT, out=tmp_path / "run", progress=False)
    assert model.config.train.env.startswith("api/")
    expected = model.predict(OBS, deterministic=True)[0].tolist()
    script = (
        "import json, sys, numpy as np\n"
        "from xlvin import PPO, UserError\n"
        "model = PPO.load(sys.argv[1])\n"
        f"actions = model.predict(np.array({OBS.tolist()}, dtype=np.float32), deterministic=True)[0].tolist()\n"
        "try:\n"
        "    model.evaluate(episodes=2)\n"
        "    refusal = None\n"
        "except UserError as err:\n"
        "    refusal = str(err)\n"
        "print(json.dumps({'actions': actions, 'refusal': refusal, 'env': model.get_env()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], check=True,
                          capture_output=True, text=True)
    out = json.loads(done.stdout)
    assert out["actions"] == expected and out["env"] is None
    assert "cannot be made here" in out["refusal"] and "in Python: env=" in out["refusal"]


def test_evaluate_takes_an_env_where_the_runs_cannot_be_made(tmp_path: Path, capsys) -> None:
    model = PPO(make_flat, seed=0, **TINY).learn(ROLLOUT, out=tmp_path / "run", progress=False)
    expected = model.evaluate(episodes=3)
    gym.registry.pop(model.config.train.env)  # as in a new process
    loaded = PPO.load(tmp_path / "run")
    assert loaded.num_timesteps == ROLLOUT
    with pytest.raises(UserError, match="registered from a Python object"):
        loaded.evaluate(episodes=3)
    assert loaded.evaluate(episodes=3, env=make_flat) == expected
    assert loaded.evaluate(episodes=3, env="CartPole-v1") == expected
    with pytest.raises(UserError, match=r"env 'Acrobot-v1' has observations \[6\] and 3 actions"):
        loaded.evaluate(episodes=3, env="Acrobot-v1")
    # the command line: one line saying what to pass, then --env
    gym.registry.pop(model.config.train.env)  # env=make_flat registered it again
    assert main(["evaluate", str(tmp_path / "run"), "--episodes", "3", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlvin: error: ") and err.count("\n") == 1 and "--env ID" in err
    assert main(["evaluate", str(tmp_path / "run"), "--episodes", "3", "--json",
                 "--env", "CartPole-v1"]) == 0
    assert json.loads(capsys.readouterr().out) == {**expected, "finite": True}


def test_load_with_env_registers_the_runs_env_to_continue_training(tmp_path: Path) -> None:
    PPO(make_flat, seed=0, **TINY).learn(ROLLOUT, out=tmp_path / "run", progress=False)
    env_id = PPO.load(tmp_path / "run").config.train.env
    gym.registry.pop(env_id)

    def another_name() -> gym.Env:
        return gym.make("CartPole-v1")

    model = PPO.load(tmp_path / "run", env=another_name)
    assert model.get_env().num_envs == 2 and model.env is model.get_env()
    model.learn(ROLLOUT, progress=False)
    assert model.num_timesteps == 2 * ROLLOUT and model.config.train.env == env_id
    with pytest.raises(UserError, match="env= is 'Acrobot-v1' but the run trained on 'Cart"):
        PPO.load(PPO("CartPole-v1", **TINY).save(tmp_path / "cp"), env="Acrobot-v1")


def test_a_tampered_spaces_record_is_one_error(tmp_path: Path) -> None:
    from xlvin.io.weights import load_weights, save_weights

    run = PPO("CartPole-v1", **TINY).save(tmp_path / "run")
    tensors, meta = load_weights(run / "model.safetensors")
    assert meta["spaces"] == {"obs_shape": [4], "kind": "flat", "num_actions": 2, "states": 0}
    meta["spaces"]["kind"] = "__import__('os')"
    save_weights(run / "model.safetensors", torch.nn.ParameterDict(
        {k.replace(".", "_"): torch.nn.Parameter(v) for k, v in tensors.items()}), meta)
    with pytest.raises(UserError, match="spaces.kind must be one of"):
        PPO.load(run)


# --- training continues ---------------------------------------------------------------------

def test_learning_twice_equals_learning_once_without_annealing(tmp_path: Path) -> None:
    """With a constant learning rate, learn(n); learn(n) is learn(2n), bit for bit (same
    process); Model.load(dir).learn(n) continues the same way."""
    options = {"seed": 1, "anneal_lr": False, **TINY}
    twice = PPO("CartPole-v1", **options).learn(2 * ROLLOUT, out=tmp_path / "twice",
                                                 progress=False)
    twice.learn(2 * ROLLOUT, progress=False)
    assert twice.num_timesteps == 4 * ROLLOUT and twice.config.ppo.total_steps == 4 * ROLLOUT
    PPO.load(tmp_path / "twice").learn(ROLLOUT, progress=False)
    once = PPO("CartPole-v1", **options).learn(5 * ROLLOUT, out=tmp_path / "once",
                                               progress=False)
    assert same_weights(tmp_path / "twice", tmp_path / "once")
    assert rows(tmp_path / "twice") == rows(tmp_path / "once")
    assert [r["step"] for r in rows(tmp_path / "twice")] == [ROLLOUT * i for i in range(1, 6)]
    summary = json.loads((tmp_path / "twice" / "summary.json").read_text())
    assert summary["ppo"]["env_steps"] == once.summary["ppo"]["env_steps"] == 5 * ROLLOUT
    events = list((tmp_path / "twice" / "tb").iterdir())
    assert events  # TensorBoard continues in the same folder


def test_continuing_anneals_the_learning_rate_over_the_new_total(tmp_path: Path) -> None:
    model = PPO("CartPole-v1", seed=2, lr=0.01, **TINY)
    model.learn(2 * ROLLOUT, out=tmp_path / "run", progress=False)
    model.learn(2 * ROLLOUT, progress=False)
    rates = [r["charts/learning_rate"] for r in rows(tmp_path / "run")]
    # lr x (1 - update / total updates): over 2 updates, then over 4
    assert rates == pytest.approx([0.01, 0.005, 0.005, 0.0025], rel=1e-12)


def test_train_resume_with_a_larger_total_continues_a_finished_run(
    tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    flags = ["train", "--agent", "ppo", "--num-envs", "2", "--num-steps", "16", "--quiet",
             "--seed", "4", "--out", str(run)]
    assert main([*flags, "--total-steps", "64"]) == 0
    first = capsys.readouterr().out
    assert first.count("\n") == 1 and "64 env steps, 2 updates" in first
    before = files(run)
    for total, message in (("64", "finished run of 64 steps: --total-steps 64 must be more"),
                           ("32", "finished run of 64 steps")):
        assert main(["train", "--out", str(run), "--resume", "--total-steps", total]) == 2
        err = capsys.readouterr().err
        assert err.startswith("xlvin: error: ") and message in err and err.count("\n") == 1
        assert files(run) == before  # nothing in the run changed
    assert main(["train", "--out", str(run), "--resume", "--total-steps", "100"]) == 0
    captured = capsys.readouterr()
    assert "--total-steps 100 is not a multiple" in captured.err and "128 env steps" in captured.out
    assert [r["step"] for r in rows(run)] == [32, 64, 96, 128]
    assert json.loads((run / "config.json").read_text())["ppo"]["total_steps"] == 128
    # the API's resume=True with a larger total does the same
    PPO("CartPole-v1", seed=4, num_envs=2, num_steps=16).learn(160, out=run, resume=True,
                                                               progress=False)
    assert json.loads((run / "summary.json").read_text())["ppo"]["env_steps"] == 160
    # and refuses a total it has passed in its own terms: the keyword, not the flag
    before = files(run)
    with pytest.raises(UserError, match="finished run of 160 steps: total_steps=160 must be more"):
        PPO("CartPole-v1", seed=4, num_envs=2, num_steps=16).learn(160, out=run, resume=True,
                                                                   progress=False)
    assert files(run) == before


# --- callbacks ------------------------------------------------------------------------------

class Recorder(Callback):
    """Records what each hook saw; stops once `stop_at` env steps are trained."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.stop_at, self.seen = stop_at, []

    def on_rollout(self, model) -> bool:
        self.seen.append(("rollout", model.num_timesteps))
        return True

    def on_update(self, model, metrics) -> bool:
        self.seen.append(("update", model.num_timesteps, "losses/policy_loss" in metrics))
        return self.stop_at is None or model.num_timesteps < self.stop_at


def test_a_callback_sees_every_rollout_and_update_and_stops_the_run(tmp_path: Path) -> None:
    recorder = Recorder(stop_at=2 * ROLLOUT)
    model = PPO("CartPole-v1", seed=0, **TINY)
    model.learn(10 * ROLLOUT, out=tmp_path / "run", progress=False, callback=recorder)
    assert recorder.seen == [("rollout", 32), ("update", 32, True),
                             ("rollout", 64), ("update", 64, True)]
    assert model.num_timesteps == 2 * ROLLOUT and model.summary["ppo"]["stopped_by_hooks"]
    assert (tmp_path / "run" / "model.safetensors").exists()  # finished, with a checkpoint
    model.learn(ROLLOUT, progress=False)
    assert model.num_timesteps == 3 * ROLLOUT
    assert [r["step"] for r in rows(tmp_path / "run")] == [32, 64, 96]
    with pytest.raises(UserError, match=r"has trained 96 steps: learn\(n\) continues it"):
        model.learn()
    with pytest.raises(UserError, match="continues this model's run in place"):
        model.learn(ROLLOUT, out=tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_eval_callback_evaluates_a_separate_env_saves_the_best_and_changes_nothing(
    tmp_path: Path,
) -> None:
    def short_cartpole() -> gym.Env:
        return gym.make("CartPole-v1", max_episode_steps=30)

    evaluation = EvalCallback(short_cartpole, every=2 * ROLLOUT, episodes=3,
                              best_model_path=tmp_path / "best")
    saves = CheckpointCallback(every=3 * ROLLOUT, directory=tmp_path / "saves")
    watched = PPO("CartPole-v1", seed=5, **TINY)
    watched.learn(6 * ROLLOUT, out=tmp_path / "watched", progress=False,
                  callback=[evaluation, saves])
    plain = PPO("CartPole-v1", seed=5, **TINY).learn(6 * ROLLOUT, out=tmp_path / "plain",
                                                     progress=False)
    assert same_weights(tmp_path / "watched", tmp_path / "plain")  # observing changes nothing
    assert [e["num_timesteps"] for e in evaluation.evaluations] == [64, 128, 192]
    assert all(max(e["lengths"]) <= 30 for e in evaluation.evaluations)  # the separate env
    best = PPO.load(tmp_path / "best")
    score = best.evaluate(episodes=3, seed=2_000_000, env=short_cartpole)["mean"]
    assert score == evaluation.best_mean == max(e["mean"] for e in evaluation.evaluations)
    assert sorted(p.name for p in (tmp_path / "saves").iterdir()) == ["steps-192", "steps-96"]
    np.testing.assert_array_equal(PPO.load(tmp_path / "saves" / "steps-192").predict(OBS, deterministic=True)[0],
                                  plain.predict(OBS, deterministic=True)[0])
    with pytest.raises(UserError, match="EvalCallback: .* already holds files"):
        EvalCallback(every=10, best_model_path=tmp_path / "saves")
    with pytest.raises(UserError, match=r"env 'Acrobot-v1' has observations \[6\]"):
        PPO("CartPole-v1", **TINY).learn(ROLLOUT, out=tmp_path / "new", progress=False,
                                         callback=EvalCallback("Acrobot-v1", every=ROLLOUT))
    assert not (tmp_path / "new").exists()  # refused before anything was created


def test_the_callbacks_script_runs_twice_and_the_best_model_keeps_its_steps(
    tmp_path: Path,
) -> None:
    """As Stable-Baselines3's callbacks, EvalCallback and CheckpointCallback overwrite their
    own earlier saves (the README's example runs twice), and refuse a folder holding anything
    else; the best model loads with the env steps it was saved at."""
    for attempt in range(2):
        evaluation = EvalCallback("CartPole-v1", every=2 * ROLLOUT, episodes=2,
                                  best_model_path=tmp_path / "best")
        saves = CheckpointCallback(every=2 * ROLLOUT, directory=tmp_path / "saves")
        PPO("CartPole-v1", seed=attempt, **TINY).learn(
            4 * ROLLOUT, out=tmp_path / f"run{attempt}", progress=False,
            callback=[evaluation, saves])
        best = max(evaluation.evaluations, key=lambda e: e["mean"])  # the first of the best
        assert PPO.load(tmp_path / "best").num_timesteps == best["num_timesteps"]
        assert PPO.load(tmp_path / "saves" / "steps-128").num_timesteps == 128
    (tmp_path / "best" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="EvalCallback: .* already holds files that it did not"):
        EvalCallback(every=10, best_model_path=tmp_path / "best")
    (tmp_path / "saves" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="CheckpointCallback: .* already holds files"):
        CheckpointCallback(every=10, directory=tmp_path / "saves")
    assert (tmp_path / "best" / "notes.txt").read_text() == "mine"


def test_learn_without_out_leaves_no_temporary_folder_behind(tmp_path: Path) -> None:
    """learn() without out= trains in a temporary folder that goes with the model: removed when
    the model is garbage-collected, and at exit; save() keeps the run."""
    code = f"""
import gc, os, sys
from xlvin import PPO
tiny = {TINY!r}
kept = PPO("CartPole-v1", seed=0, **tiny).learn({ROLLOUT}, progress=False)
kept.save(sys.argv[1])
dropped = PPO("CartPole-v1", seed=0, **tiny).learn({ROLLOUT}, progress=False)
folder = dropped.run_dir.parent
del dropped
gc.collect()
print(folder, os.path.exists(folder), kept.run_dir.parent)
"""
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "saved")],
                          capture_output=True, text=True, check=True)
    gone, exists, at_exit = done.stdout.split()
    assert exists == "False"
    assert not Path(gone).exists() and not Path(at_exit).exists()
    assert (tmp_path / "saved" / "summary.json").is_file()


class RaiseAt(Callback):
    """Raises in the `n`-th update's hook, as a user's buggy callback would."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def on_update(self, model, metrics) -> bool:
        self.seen += 1
        if self.seen == self.n:
            raise RuntimeError("a bug in my callback")
        return True


@pytest.mark.parametrize("out", [None, "given"])
def test_learn_again_after_a_callback_raised_continues_the_run_it_has(
    tmp_path: Path, out: str | None,
) -> None:
    """As Stable-Baselines3's model, the object holds its run after an exception: learn(n)
    continues that run from its last checkpoint (here the first, at 0 steps, of a run asked
    for 8 rollouts), not a new run from zero in another folder, and gives the weights of the
    same run trained for n steps at once."""
    model = PPO("CartPole-v1", seed=3, anneal_lr=False, **TINY)
    given = None if out is None else tmp_path / out
    with pytest.raises(RuntimeError, match="a bug in my callback"):
        model.learn(8 * ROLLOUT, out=given, progress=False, callback=RaiseAt(3))
    held = model.run_dir
    assert held is not None and (given is None or held == given)
    model.learn(2 * ROLLOUT, progress=False)
    assert model.run_dir == held and model.num_timesteps == 2 * ROLLOUT
    once = PPO("CartPole-v1", seed=3, anneal_lr=False, **TINY)
    once.learn(2 * ROLLOUT, out=tmp_path / "once", progress=False)
    assert same_weights(held, tmp_path / "once")


def test_stop_on_reward_stops_at_the_first_evaluation_reaching_it(tmp_path: Path) -> None:
    stop = EvalCallback("CartPole-v1", every=ROLLOUT, episodes=2, callback=StopOnReward(1.0))
    model = PPO("CartPole-v1", seed=0, **TINY).learn(8 * ROLLOUT, progress=False, callback=stop)
    assert len(stop.evaluations) == 1 and model.num_timesteps == ROLLOUT
    # the low-data protocol's own evaluations (5 over 10 updates) reach it directly
    low = PPO("CartPole-v1", seed=0, protocol="low_data", low_data_episodes=2,
              low_data_updates=10, low_data_eval_episodes=2, low_data_num_envs=2)
    recorder = Recorder()
    low.learn(progress=False, callback=[recorder, StopOnReward(0.0)])
    assert low.summary["ppo"]["updates"] == 2 and low.summary["ppo"]["stopped_by_hooks"]
    assert [s[0] for s in recorder.seen] == ["rollout", "update", "update"]
    with pytest.raises(UserError, match="only online runs .counted in env steps. continue"):
        low.learn(ROLLOUT)
    with pytest.raises(UserError, match="callback must be an xlvin Callback"):
        PPO("CartPole-v1", **TINY).learn(ROLLOUT, progress=False, callback=42)


def test_a_refused_continuation_leaves_every_byte_of_the_run(tmp_path: Path) -> None:
    from test_integrity import flip_middle

    model = PPO("CartPole-v1", seed=0, **TINY).learn(ROLLOUT, out=tmp_path / "run", progress=False)
    flip_middle(tmp_path / "run" / "checkpoint.safetensors")
    before = files(tmp_path / "run")
    with pytest.raises(UserError, match="SHA-256 mismatch"):
        model.learn(ROLLOUT, progress=False)
    assert files(tmp_path / "run") == before
    assert main(["evaluate", str(tmp_path / "run"), "--episodes", "2"]) == 0  # still finished


class Draws(Callback):
    """Draws from every global generator, as a user's callback may (sampling, shuffling)."""

    def on_update(self, model, metrics) -> bool:
        np.random.rand()
        torch.rand(3)
        random.random()
        return True


def test_a_callback_drawing_random_numbers_leaves_the_run_as_it_is(
    tmp_path: Path, executor_path: Path
) -> None:
    """XLVIN's TransE term draws from torch's global generator during PPO: callbacks run with
    the training's generators saved and restored around them."""
    options = {"executor": str(executor_path), "seed": 0, **TINY}
    XLVIN("CartPole-v1", **options).learn(4 * ROLLOUT, out=tmp_path / "plain", progress=False)
    XLVIN("CartPole-v1", **options).learn(4 * ROLLOUT, out=tmp_path / "drawn", progress=False,
                                          callback=Draws())
    assert same_weights(tmp_path / "plain", tmp_path / "drawn")
    assert rows(tmp_path / "plain") == rows(tmp_path / "drawn")
