"""One PPO update of Stable-Baselines3's on Atari-shaped data, for tests/test_sb3_update.py.

    env $(python -m xlvin.kernels) python -m benchmarks.parity.atari_update   # the fixture
    python -m benchmarks.parity.atari_update pipelines   # our frames against SB3's AtariWrapper's

`update_inputs` builds, without SB3, a rollout of Atari-shaped data (8 envs x 16 steps of
4 x 84 x 84 uint8 frames, sparse rewards, a few terminations) with our PPO network's initial
weights, its old log-probabilities and values, and the minibatch order of each epoch. `main`
copies those weights into SB3's CnnPolicy, fills SB3's rollout buffer with the same data, runs
SB3's `train()` once (2 epochs x 4 minibatches, the same order) and writes what it computed: the
advantages and returns, every minibatch's gradient norm before clipping, the logged losses, and
a digest of every weight after the update; and, from a fresh SB3 policy, the singular values of
each layer (its orthogonal gains). The test runs our `ppo_update` on the same inputs and compares
without SB3 installed. Both sides must compute with the same kernels: the fixture is written in
reproducible mode, in which the test suite runs (`xlvin.kernels`). Seen over 4 epochs: in the
same kernels the gradient norms agree within 1e-7 to the end; with SB3's side in the default
kernels and ours pinned they drift apart from the 9th minibatch on, to 1e-3. Settings: ours
(`PPO_SETTINGS`) and SB3's equivalent (vf_coef halved: SB3's value loss has no 1/2; no value
clipping on either side, as SB3 cannot clip ours).
"""

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.kernels import pinned
from benchmarks.parity.atari import copy_into_sb3, our_network, ours_from_sb3

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "sb3" / "atari_update.json"
STEPS, ENVS, EPOCHS, MINIBATCHES = 16, 8, 2, 4
#: Our PPOConfig for the comparison (fields of `xlvin.ppo.update.PPOConfig`).
PPO_SETTINGS = {
    "num_envs": ENVS, "num_steps": STEPS, "lr": 2.5e-4, "adam_eps": 1e-5, "anneal_lr": False,
    "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.1, "clip_value_loss": False,
    "update_epochs": EPOCHS, "num_minibatches": MINIBATCHES, "ent_coef": 0.01, "vf_coef": 0.5,
    "max_grad_norm": 0.5, "norm_adv": True,
}
ORDER_SEED = 7
#: Values of each weight after the update kept in the fixture (besides its sum and |sum|).
HEAD = 8


def update_inputs() -> tuple[torch.nn.Module, Any]:
    """Our initial network (seed 0) and the rollout (`xlvin.ppo.storage.Rollout`, every step
    real: SB3's same-step autoreset), old log-probabilities and values by that network."""
    from xlvin.ppo.storage import Rollout

    agent = our_network(seed=0)
    g = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (STEPS + 1, ENVS, 4, 84, 84), generator=g, dtype=torch.uint8)
    actions = torch.randint(0, 3, (STEPS, ENVS), generator=g)
    rewards = (torch.rand(STEPS, ENVS, generator=g) < 0.1).float()
    terminated = torch.rand(STEPS, ENVS, generator=g) < 0.05
    with torch.no_grad():
        logits, values = agent(obs.flatten(0, 1))
    logprobs = torch.log_softmax(logits, -1).view(STEPS + 1, ENVS, 3)[:-1]
    logprobs = logprobs.gather(-1, actions[..., None]).squeeze(-1)
    rollout = Rollout(obs=obs, actions=actions, logprobs=logprobs,
                      values=values.view(STEPS + 1, ENVS), rewards=rewards, terminated=terminated,
                      truncated=torch.zeros_like(terminated),
                      valid=torch.ones_like(terminated))
    return agent, rollout


def epoch_orders() -> list[torch.Tensor]:
    """The permutation of each epoch, as `ppo_update` draws them from a generator seeded
    ORDER_SEED (rows in our [T, N] flattened order: step r // N of env r % N)."""
    g = torch.Generator().manual_seed(ORDER_SEED)
    return [torch.randperm(STEPS * ENVS, generator=g) for _ in range(EPOCHS)]


def sb3_index(rows: torch.Tensor) -> np.ndarray:
    """Our flattened rows as SB3's buffer indices (it flattens env-major: env * T + step)."""
    return ((rows % ENVS) * STEPS + rows // ENVS).numpy()


def digest(state: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Per tensor: its sum, the sum of its absolute values and its first HEAD values."""
    return {name: {"sum": float(t.double().sum()), "abs_sum": float(t.double().abs().sum()),
                   "head": t.flatten()[:HEAD].tolist()} for name, t in state.items()}


def singular_values(state: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    """Per weight (as a matrix: outputs x the rest): its smallest and largest singular value;
    per bias: its largest absolute value."""
    out = {}
    for name, t in state.items():
        if name.endswith("weight"):
            s = torch.linalg.svdvals(t.flatten(1).double())
            out[name] = [float(s.min()), float(s.max())]
        else:
            out[name] = [float(t.abs().max())]
    return out


class AtariShaped:
    """A gymnasium env with Atari's spaces (4 x 84 x 84 uint8 frames, 3 actions) that SB3's
    PPO is built on; it is never stepped."""

    def __new__(cls) -> Any:
        import gymnasium as gym

        class Env(gym.Env):
            observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
            action_space = gym.spaces.Discrete(3)

        return Env()


def sb3_update() -> dict[str, Any]:
    """SB3's PPO update on `update_inputs` (module docstring); the fixture's content."""
    import stable_baselines3
    from stable_baselines3 import PPO
    from stable_baselines3.common import buffers
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    s = PPO_SETTINGS
    model = PPO("CnnPolicy", DummyVecEnv([AtariShaped] * ENVS), n_steps=STEPS,
                batch_size=STEPS * ENVS // MINIBATCHES, n_epochs=EPOCHS, learning_rate=s["lr"],
                gamma=s["gamma"], gae_lambda=s["gae_lambda"], clip_range=s["clip_coef"],
                ent_coef=s["ent_coef"], vf_coef=s["vf_coef"] / 2,
                max_grad_norm=s["max_grad_norm"], seed=0, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))
    initial = singular_values(ours_from_sb3(model.policy.state_dict()))
    adam = model.policy.optimizer.defaults
    agent, rollout = update_inputs()
    copy_into_sb3(agent, model.policy)
    buffer = model.rollout_buffer
    buffer.reset()
    starts = torch.cat([torch.zeros(1, ENVS, dtype=torch.bool), rollout.terminated[:-1]])
    for t in range(STEPS):
        buffer.add(rollout.obs[t].numpy(), rollout.actions[t, :, None].numpy(),
                   rollout.rewards[t].numpy(), starts[t].numpy(), rollout.values[t],
                   rollout.logprobs[t])
    buffer.compute_returns_and_advantage(rollout.values[STEPS], rollout.terminated[-1].numpy())
    # SB3's buffer is [T, N] until `get` flattens it: the same layout as ours
    advantages, returns = buffer.advantages.copy(), buffer.returns.copy()

    orders = iter([sb3_index(o) for o in epoch_orders()])
    norms: list[float] = []
    clip = torch.nn.utils.clip_grad_norm_
    permutation = np.random.permutation
    np.random.permutation = lambda n: next(orders)
    torch.nn.utils.clip_grad_norm_ = lambda params, max_norm: norms.append(
        float(clip(params, max_norm)))
    try:
        model.train()
    finally:
        np.random.permutation, torch.nn.utils.clip_grad_norm_ = permutation, clip
    assert buffers.np.random.permutation is permutation
    logged = model.logger.name_to_value
    return {
        "sb3_version": stable_baselines3.__version__, "torch_version": torch.__version__,
        "settings": PPO_SETTINGS, "adam": {"eps": adam["eps"], "lr": adam["lr"]},
        "initial_singular_values": initial,
        "advantages": advantages.tolist(), "returns": returns.tolist(), "grad_norms": norms,
        "policy_loss": logged["train/policy_gradient_loss"],
        "value_mse": logged["train/value_loss"], "entropy": -logged["train/entropy_loss"],
        "after": digest(ours_from_sb3(model.policy.state_dict())),
    }


def compare_pipelines(steps: int = 400, seed: int = 3) -> dict[str, float]:
    """Our `xlvin/FreewayTrain-v4` against SB3's `AtariWrapper` (with a 4-frame stack) on
    `FreewayNoFrameskip-v4`, reset with the same seed (so the same no-op count, both drawing it
    from the emulator env's generator) and stepped with the same random actions: the share of
    steps whose frames differ, their largest and mean absolute pixel differences, and whether
    rewards and ends agree."""
    import gymnasium as gym
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    import xlvin.envs  # noqa: F401
    from xlvin.envs.atari import atari_train_id

    ours = gym.make(atari_train_id("Freeway"))
    theirs = gym.wrappers.FrameStackObservation(
        AtariWrapper(gym.make("FreewayNoFrameskip-v4")), 4)
    a, _ = ours.reset(seed=seed)
    b, _ = theirs.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, 3, steps)
    frames_differ, worst, mean, same_rewards = 0, 0, [], True
    for action in actions:
        b = np.asarray(b).reshape(np.shape(a))  # SB3's frames are 84 x 84 x 1
        diff = np.abs(np.asarray(a, np.int16) - b.astype(np.int16))
        frames_differ += bool(diff.any())
        worst, mean = max(worst, int(diff.max())), mean + [float(diff.mean())]
        a, ra, ta, _, _ = ours.step(action)
        b, rb, tb, _, _ = theirs.step(action)
        same_rewards &= bool(ra == rb and ta == tb)
    return {"steps": steps, "share_of_steps_with_different_frames": frames_differ / steps,
            "largest_pixel_difference": worst, "mean_pixel_difference": float(np.mean(mean)),
            "same_rewards_and_ends": same_rewards}


def main() -> None:
    if sys.argv[1:] == ["pipelines"]:
        print(json.dumps(compare_pipelines(), indent=1))
        return
    if not pinned():
        raise SystemExit("run under reproducible mode, as the tests do: "
                         "env $(python -m xlvin.kernels) python -m benchmarks.parity.atari_update")
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(sb3_update(), indent=1) + "\n")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
