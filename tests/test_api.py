"""The Python API (`xlvin.XLVIN`, `PPO`, `ATreeC`, `Model`) and the command line over it: the
same options, the same run directories, the same actions and returns either way."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.bright_channel import BrightChannel
from xlvin import PPO, XLVIN, ATreeC, Model, UserError
from xlvin.cli import build_parser, main
from xlvin.io.saves import SAVED
from xlvin.errors import FLAGS
from xlvin.nn.encoders import ChannelsFirst, MLPEncoder, NatureCNN, OneHot
from xlvin.run.training import load_run, train_run
from xlvin.run.config import RunConfig, TrainConfig, option_names

TINY = {"num_envs": 2, "num_steps": 16, "transe_episodes": 4, "transe_epochs": 1}
TINY_FLAGS = ["--num-envs", "2", "--num-steps", "16", "--transe-episodes", "4",
              "--transe-epochs", "1", "--quiet"]


class ChannelsLast(BrightChannel):
    """uint8 images [36, 44, 3] (channels last, as SB3's envs give them, and not square);
    reward 1 when the action names the bright channel."""

    observation_space = gym.spaces.Box(0, 255, (36, 44, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)
    channel_axis = -1


def test_every_train_flag_is_a_keyword_argument_of_the_same_name(tmp_path: Path) -> None:
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    # a flag given once per item names its list: --env-wrapper A --env-wrapper B, env_wrappers=
    # (errors say each field by its flag: `xlvin.errors.FLAGS`)
    lists = {flag: field for field, flag in FLAGS.items()}
    flags = {lists.get(a.option_strings[-1][2:], a.option_strings[-1][2:].replace("-", "_"))
             for a in train._actions if a.option_strings}
    # --reproducible is the process's kernel mode, set before torch loads: not a model's option
    # --accept-unsealed is the process's reading of older runs' files: not a model's option either
    process = {"help", "out", "quiet", "resume", "config", "no_reproducible", "accept_unsealed"}
    process.add("seeds")  # several models: the function `xlvin.learn_seeds`, not an option
    process.add("deadline_minutes")  # of one training: `learn(deadline_minutes=)`, not an option
    assert flags - process == set(option_names())
    model = PPO("CartPole-v1", lr=1e-3, transe_epochs=3, low_data_episodes=7, seed=5)
    assert (model.config.ppo.lr, model.config.transe.epochs) == (1e-3, 3)
    assert (model.config.low_data.episodes, model.config.train.seed) == (7, 5)
    # --config FILE is config=FILE, keyword arguments over it as flags over the file
    (tmp_path / "c.json").write_text(json.dumps({"train": {"depth": 1}, "ppo": {"lr": 0.01}}))
    model = XLVIN(config=tmp_path / "c.json", lr=0.02)
    assert (model.config.train.depth, model.config.ppo.lr, model.config.train.env) == (
        1, 0.02, "CartPole-v1")


@pytest.mark.parametrize("options, message", [
    ({"totl_steps": 5}, "unknown option 'totl_steps' (did you mean total_steps?)"),
    ({"lr": "fast"}, "field 'lr' must be float, got str"),
    ({"seed": -1}, "seed must be in [0,"),
    ({"depth": -1}, "depth must be >= 0, got -1"),
    ({"agent": "ppo"}, "XLVIN() trains agent 'xlvin'"),
])
def test_bad_options_are_one_line_errors_before_anything_is_built(options, message) -> None:
    with pytest.raises(UserError) as err:
        XLVIN("CartPole-v1", **options)
    assert message in str(err.value) and "\n" not in str(err.value)
    flag = "--" + next(iter(options)).replace("_", "-")
    assert flag not in str(err.value)  # the API's words, not the command line's flags


def test_api_errors_name_keyword_arguments_not_flags(tmp_path: Path) -> None:
    model = PPO("CartPole-v1")
    with pytest.raises(UserError, match=r"^episodes must be > 0, got 0$"):
        model.evaluate(episodes=0)
    with pytest.raises(UserError, match=r"^seed must be in \[0, "):
        model.evaluate(seed=-5)
    with pytest.raises(UserError, match=r"^prune=3: the environment has only 2 actions$"):
        XLVIN("CartPole-v1", prune=3)
    with pytest.raises(UserError, match=r"not a \.zip file; give a folder, e\.g\. '.*model'"):
        model.save(tmp_path / "model.zip")
    assert not (tmp_path / "model.zip").exists()


def test_env_forms_resolve_to_the_env_the_run_remakes() -> None:
    assert PPO(gym.make("CartPole-v1")).config.train.env == "CartPole-v1"
    lake = PPO(gym.make("FrozenLake-v1", is_slippery=False)).config.train
    assert (lake.env, lake.env_kwargs) == ("FrozenLake-v1", {"is_slippery": False})
    vec = PPO(gym.make_vec("CartPole-v1", 3)).config
    assert (vec.train.env, vec.ppo.num_envs) == ("CartPole-v1", 3)
    own = PPO(ChannelsLast).config.train.env
    assert own == f"api/{__name__}.ChannelsLast" and own in gym.registry
    fns = PPO(gym.vector.SyncVectorEnv([ChannelsLast, ChannelsLast])).config
    assert (fns.train.env, fns.ppo.num_envs) == (own, 2)
    instance = PPO(ChannelsLast()).config.train.env  # copies of it: its own id, not the class's
    assert instance.startswith(own + "-") and instance in gym.registry
    with pytest.raises(UserError, match="num_envs=4 but the vector env has 3"):
        PPO(gym.make_vec("CartPole-v1", 3), num_envs=4)
    with pytest.raises(UserError, match="env must be an id"):
        PPO(42)


def test_unsupported_spaces_are_one_line_errors() -> None:
    with pytest.raises(UserError, match=r"agent atreec needs Discrete actions \(use agent ppo"):
        Model("Pendulum-v1", agent="atreec")
    with pytest.raises(UserError, match=r"Tuple observations; supported: Discrete \(one-hot\)"):
        PPO("Blackjack-v1")


def test_predict_takes_one_observation_or_a_batch_numpy_or_torch() -> None:
    model = PPO("CartPole-v1", seed=0)
    batch = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    actions, state = model.predict(batch, deterministic=True)
    values = model.predict_values(batch)
    assert state is None  # (action, state), as Stable-Baselines3's predict
    assert actions.shape == (5,) and values.shape == (5,) and actions.dtype == np.int64
    logits, expected = model.policy(torch.from_numpy(batch))
    np.testing.assert_array_equal(actions, logits.argmax(-1).numpy())
    np.testing.assert_allclose(values, expected.detach().numpy())
    action, _ = model.predict(batch[2], deterministic=True)
    value = model.predict_values(batch[2])
    assert action.shape == () and action == actions[2] and value == pytest.approx(values[2])
    torch_actions, _ = model.predict(torch.from_numpy(batch), deterministic=True)
    np.testing.assert_array_equal(torch_actions, actions)
    sampled = {int(model.predict(batch[0], deterministic=False)[0]) for _ in range(50)}
    assert sampled == {0, 1}  # a near-uniform initial policy samples both actions
    with pytest.raises(UserError, match=r"an observation has shape \[4\]"):
        model.predict(np.zeros((2, 3)))


def test_api_save_and_cli_evaluate_agree_and_the_reverse(
    tmp_path: Path, executor_path: Path, capsys
) -> None:
    obs = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    # the API trains and saves; the command line evaluates
    model = XLVIN("CartPole-v1", executor=str(executor_path), seed=0, **TINY)
    model.learn(total_steps=64, progress=False)
    saved = model.save(tmp_path / "api")
    assert sorted(p.name for p in saved.iterdir() if p.name != SAVED) == sorted(
        p.name for p in model.run_dir.iterdir())
    assert main(["evaluate", str(saved), "--episodes", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {**model.evaluate(episodes=5), "finite": True}
    assert main(["evaluate", str(saved), "--episodes", "5", "--json", "--stochastic"]) == 0
    sampled = json.loads(capsys.readouterr().out)
    assert sampled == {**model.evaluate(episodes=5, deterministic=False), "finite": True}
    assert sampled["deterministic"] is False and model.evaluate(episodes=5)["deterministic"]
    assert main(["evaluate", str(saved), "--episodes", "5", "--stochastic"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("sampled actions)")
    loaded = XLVIN.load(saved)
    actions, trained_actions = (m.predict(obs, deterministic=True)[0] for m in (loaded, model))
    values, trained_values = loaded.predict_values(obs), model.predict_values(obs)
    np.testing.assert_array_equal(actions, trained_actions)
    np.testing.assert_array_equal(values, trained_values)
    # the command line trains; the API loads and evaluates
    assert main(["train", "--agent", "xlvin", "--executor", str(executor_path), *TINY_FLAGS,
                 "--total-steps", "64", "--out", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "cli"), "--episodes", "5", "--json"]) == 0
    from_cli = Model.load(tmp_path / "cli")
    assert type(from_cli) is XLVIN
    assert json.loads(capsys.readouterr().out) == {**from_cli.evaluate(episodes=5), "finite": True}
    agent, _ = load_run(tmp_path / "cli")
    with torch.no_grad():
        greedy = agent(torch.from_numpy(obs))[0].argmax(-1).numpy()
    np.testing.assert_array_equal(from_cli.predict(obs, deterministic=True)[0], greedy)
    # the same seed and config train the same weights through either door
    api_weights = load_file(saved / "model.safetensors")
    cli_weights = load_file(tmp_path / "cli" / "model.safetensors")
    assert api_weights.keys() == cli_weights.keys()
    assert all(torch.equal(api_weights[k], cli_weights[k]) for k in api_weights)


def files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (the lock aside), by its relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def test_load_refuses_another_agent_and_save_overwrites_only_its_own_saves(
    tmp_path: Path,
) -> None:
    """As Stable-Baselines3's, `save(path)` twice overwrites (a script runs twice) and loads
    the second model; a run directory, a folder holding anything a save did not write, or a
    saved run trained on since, is refused in one line and left as it is."""
    first = PPO("CartPole-v1", seed=0, **TINY).learn(total_steps=32, progress=False)
    first.save(tmp_path / "ppo")
    with pytest.raises(UserError, match="is a ppo run; use PPO"):
        ATreeC.load(tmp_path / "ppo")
    second = PPO("CartPole-v1", seed=1, **TINY).learn(total_steps=64, progress=False)
    second.save(tmp_path / "ppo")
    loaded = PPO.load(tmp_path / "ppo")
    assert loaded.num_timesteps == 64 and files(tmp_path / "ppo").keys() - {SAVED} == files(
        second.run_dir).keys()
    assert all(torch.equal(a, b) for a, b in zip(loaded.get_parameters()["policy"].values(),
                                                 second.get_parameters()["policy"].values()))
    PPO("CartPole-v1", seed=2, **TINY).save(tmp_path / "ppo")  # an untrained model's save too
    assert PPO.load(tmp_path / "ppo").num_timesteps == 0 and (tmp_path / "ppo" / SAVED).is_file()
    first.save(tmp_path / "ppo")  # and a run's copy over a saved policy
    assert PPO.load(tmp_path / "ppo").num_timesteps == 32
    # a run directory, a save with a file added, a folder of other files: refused, untouched
    run = PPO("CartPole-v1", seed=3, **TINY).learn(total_steps=32, out=tmp_path / "run",
                                                   progress=False)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    first.save(tmp_path / "added")
    (tmp_path / "added" / "notes.txt").write_text("mine")
    for folder, held in (("run", "a run directory"), ("mine", "files"), ("added", "a run dir")):
        before = files(tmp_path / folder)
        with pytest.raises(UserError, match=rf"save\(.*\): .*{folder} holds {held}"):
            second.save(tmp_path / folder)
        assert files(tmp_path / folder) == before
    (tmp_path / "a-file").write_text("mine")
    with pytest.raises(UserError, match="a-file is a file, kept as it is"):
        second.save(tmp_path / "a-file")
    # a saved run trained on since is a run of its own: no save replaces it
    continued = PPO.load(tmp_path / "ppo").learn(32, progress=False)
    assert continued.num_timesteps == 64 and not (tmp_path / "ppo" / SAVED).exists()
    with pytest.raises(UserError, match="holds a run directory that no save wrote"):
        run.save(tmp_path / "ppo")


def test_learn_resume_continues_exactly(tmp_path: Path) -> None:
    full = PPO("CartPole-v1", seed=3, checkpoint_every=1, **TINY)
    full.learn(total_steps=96, out=tmp_path / "full", progress=False)
    cut = PPO("CartPole-v1", seed=3, checkpoint_every=1, **TINY)
    # stopped at the first update boundary (as a kill after the first checkpoint would)
    _, summary = train_run(full.config, tmp_path / "cut", progress=False, deadline=0.0)
    assert summary["stopped_at_deadline"] and not (tmp_path / "cut" / "model.safetensors").exists()
    with pytest.raises(UserError, match="needs out=DIR"):
        cut.learn(total_steps=96, resume=True)
    # a run saved before fields existed (their defaults then implied) resumes all the same
    saved = json.loads((tmp_path / "cut" / "config.json").read_text())
    for field in ("zero_chi", "transe_negatives"):
        del saved["train"][field]
    (tmp_path / "cut" / "config.json").write_text(json.dumps(saved))
    cut.learn(total_steps=96, out=tmp_path / "cut", resume=True, progress=False)
    a = load_file(tmp_path / "full" / "model.safetensors")
    b = load_file(tmp_path / "cut" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    rows = [json.loads(x) for x in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [
        json.loads(x)["step"] for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]


def test_discrete_observations_train_one_hot(tmp_path: Path, capsys) -> None:
    """FrozenLake-v1 (Discrete(16) observations) through the command line, --env-kwargs
    recorded in the run; the encoder reads the state index one-hot."""
    out = tmp_path / "lake"
    assert main(["train", "--env", "FrozenLake-v1", "--env-kwargs", "is_slippery=false",
                 "map_name=4x4", "--agent", "ppo", *TINY_FLAGS, "--total-steps", "64",
                 "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())["train"]
    assert config["env_kwargs"] == {"is_slippery": False, "map_name": "4x4"}
    model = PPO.load(out)
    assert isinstance(model.policy.encoder[0], OneHot) and model.spaces.states == 16
    assert isinstance(model.policy.encoder[1], MLPEncoder)
    actions, _ = model.predict(np.arange(16), deterministic=True)
    assert actions.shape == (16,) and set(actions) <= {0, 1, 2, 3}
    assert model.evaluate(episodes=3)["episodes"] == 3


def test_channels_last_images_train_channels_first(tmp_path: Path, executor_path: Path) -> None:
    model = XLVIN(ChannelsLast, executor=str(executor_path), **TINY)
    assert model.spaces.kind == "image_hwc" and model.spaces.image_shape == (3, 36, 44)
    model.learn(total_steps=32, out=tmp_path / "img", progress=False)
    first, cnn = model.policy.encoder
    assert isinstance(first, ChannelsFirst) and isinstance(cnn, NatureCNN)
    frames = np.random.default_rng(0).integers(0, 256, (4, 36, 44, 3), dtype=np.uint8)
    with torch.no_grad():
        direct = cnn(torch.from_numpy(frames).permute(0, 3, 1, 2))
        adapted = model.policy.encoder(torch.from_numpy(frames))
    torch.testing.assert_close(adapted, direct, rtol=0, atol=0)
    assert model.predict(frames, deterministic=True)[0].shape == (4,)


def test_gym_packages_are_recorded_and_asked_for_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_line_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('MyLine-v0', entry_point='gymnasium.envs.toy_text:FrozenLakeEnv',\n"
        "             kwargs={'map_name': '4x4'}, max_episode_steps=20)\n"
    )
    monkeypatch.chdir(tmp_path)
    cfg = RunConfig(train=TrainConfig(env="MyLine-v0", agent="ppo", gym_packages=["my_line_envs"]))
    with pytest.raises(UserError, match="pass --gym-packages my_line_envs"):
        Model.from_config(cfg)  # a config never imports the modules it names
    out = tmp_path / "run"
    assert main(["train", "--gym-packages", "my_line_envs", "--env", "MyLine-v0", "--agent",
                 "ppo", *TINY_FLAGS, "--total-steps", "32", "--out", str(out)]) == 0
    sys.modules.pop("my_line_envs")
    assert json.loads((out / "config.json").read_text())["train"]["gym_packages"] == [
        "my_line_envs"]
    evaluate = [sys.executable, "-m", "xlvin.cli", "evaluate", str(out), "--episodes", "2"]
    refused = subprocess.run(evaluate, check=False, capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "pass --gym-packages my_line_envs" in refused.stderr
    done = subprocess.run([*evaluate, "--gym-packages", "my_line_envs"], check=False,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "over 2 episodes" in done.stdout


@pytest.mark.parametrize("flags, message", [
    (["--env-kwargs", "is_slippery"], "expected key=value, got 'is_slippery'"),
    (["--gym-packages", "no_such_env_module"], "--gym-packages no_such_env_module: cannot import"),
    (["--env", "FrozenLake-v1", "--env-kwargs", "size=3"], "cannot make environment 'FrozenLake-v1'"),
])
def test_bad_env_flags_are_one_line_errors_and_create_nothing(
    flags: list[str], message: str, tmp_path: Path, capsys
) -> None:
    assert main(["train", "--agent", "ppo", *flags, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "r").exists()


def test_an_untrained_model_saves_a_run_the_command_line_evaluates(tmp_path: Path, capsys) -> None:
    model = PPO("CartPole-v1", seed=4)
    model.save(tmp_path / "init")
    assert main(["evaluate", str(tmp_path / "init"), "--episodes", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {**model.evaluate(episodes=3), "finite": True}
    with pytest.raises(UserError, match="not to a ChannelsLast instance"):
        PPO(ChannelsLast(), env_kwargs={"size": 3})


def test_predict_is_stable_baselines3s() -> None:
    """predict(observation, state=None, episode_start=None, deterministic=False) -> (action,
    state): sampled by default, greedy with deterministic=True; the value in predict_values."""
    model = PPO("CartPole-v1", seed=0)
    obs = np.random.default_rng(0).normal(size=(4,)).astype(np.float32)
    action, state = model.predict(obs, None, np.array([True]), True)  # SB3's positional order
    assert state is None and action == model.predict(obs, deterministic=True)[0]
    assert {int(model.predict(obs)[0]) for _ in range(50)} == {0, 1}  # sampled by default
    assert model.predict(obs, state="kept")[1] == "kept"
    assert model.predict_values(obs).shape == ()
