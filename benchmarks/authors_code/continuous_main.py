"""Start the authors' continuous-action code (dransyhe/CNAP e303fc5) with what it needs to run
here; run with their environment (`run.sh` builds it) from a working folder laid out as their
relative paths expect (`run_continuous.sh` makes one):

    VENV/bin/python benchmarks/authors_code/continuous_main.py transe --env=mountaincar-continuous --action_bins=10
    VENV/bin/python benchmarks/authors_code/continuous_main.py mujoco --env=halfcheetah --seed=S [their flags]

Their arguments are parsed by their own `get_args`; nothing here changes what their training
computes. Two things their code at e303fc5 cannot do on its own:

- `transe`: their TransE pre-training (`models/transe/train.py`) for a one-dimensional Box
  (MountainCarContinuous) stops with a shape error: `generate_training_data_continuous` draws two
  bin indices per step (`action_dim = 2`, written for a two-dimensional env), the env acts on the
  first (`MountainCarContinuous.step` reads `action[0]` of the two bins' values), and the two
  indices reach the one-factor transition model. Their functions collect the data and train as
  theirs do (their defaults: 1,000 random episodes, observations through a running
  VecNormalize, 5 epochs of batches of 128); here each stored action is the bin the env took,
  the first of the two. The weights are saved under the name their `classic_control.py` loads
  (`transe_mountaincar_continuous_{bins}bins.pt`; their script would write
  `transe_mountaincar-continuous_{bins}bins.pt`). Nothing of it is seeded, as in theirs.
- `mujoco`: their envs are gym 0.19's `*-v2`, which need mujoco-py and the MuJoCo 2.1 binaries
  (neither installable on Python 3.11 from a package registry). `HalfCheetah-v2` is registered
  here as gymnasium's `HalfCheetah-v5` (the `mujoco` bindings; the model and reward of v2),
  behind gym 0.19's API (`seed`, `reset` returning the observation, `step` returning four
  values) and gym 0.19's own 1,000-step TimeLimit, which their TimeLimitMask reads. Then their
  `cnap.training.mujoco:main` runs unchanged.
"""

import sys

import gym
import gymnasium
import numpy as np
import torch

#: Their env names with a one-dimensional Box (the TransE fix applies to these only).
ONE_DIMENSIONAL = ("mountaincar-continuous",)
#: Their gym 0.19 MuJoCo ids run here as these gymnasium ids.
MUJOCO = {"HalfCheetah-v2": "HalfCheetah-v5"}


class GymnasiumAsGym(gym.Env):
    """A gymnasium env behind gym 0.19's API: `seed` takes effect at the next reset, `reset`
    returns the observation, `step` (obs, reward, terminated or truncated, info)."""

    def __init__(self, env_id: str) -> None:
        self.inner = gymnasium.make(env_id).unwrapped
        obs, act = self.inner.observation_space, self.inner.action_space
        self.observation_space = gym.spaces.Box(obs.low, obs.high, dtype=obs.dtype)
        self.action_space = gym.spaces.Box(act.low, act.high, dtype=act.dtype)
        self.next_seed = None

    def seed(self, seed=None):
        self.next_seed = seed
        return [seed]

    def reset(self):
        obs, _ = self.inner.reset(seed=self.next_seed)
        self.next_seed = None
        return obs

    def step(self, action):
        obs, reward, terminated, truncated, info = self.inner.step(np.asarray(action))
        return obs, reward, terminated or truncated, info


def transe(argv: list[str]) -> int:
    sys.argv = ["transe", *argv]
    from cnap.models.transe import train as their
    from cnap.models.transe.arguments import get_args
    from cnap.models.transe.transe_classic import TransE

    args = get_args()
    if args.env not in ONE_DIMENSIONAL:
        raise SystemExit(f"continuous_main.py transe: --env must be one of {ONE_DIMENSIONAL}, "
                         f"got {args.env}")
    data = their.generate_training_data_continuous(
        env_name=args.env, episodes=args.num_episodes, action_bins=args.action_bins)
    data = [[state, action[0, :1], next_state] for state, action, next_state in data]
    model = TransE(state_dimension=args.state_dimension,
                   state_embedding_dimension=args.state_embedding_dimension,
                   action_dimension=args.action_dimension, hidden_dimension=args.hidden_dimension,
                   action_multidim=args.action_multidim)
    their.training(training_data=data, transe=model, epochs=args.num_epochs,
                   batch_size=args.batch_size)
    name = f"trained_transe/transe_{args.env.replace('-', '_')}_{args.action_bins}bins.pt"
    torch.save(model.state_dict(), name)
    print(f"wrapper: saved {name} ({len(data)} transitions)")
    return 0


def register_mujoco() -> None:
    """Their gym 0.19 MuJoCo ids (`MUJOCO`) made as the gymnasium envs, with gym's TimeLimit."""
    registry = gym.envs.registration.registry
    for old, new in MUJOCO.items():
        spec = registry.env_specs.pop(old)
        gym.register(old, entry_point=GymnasiumAsGym, kwargs={"env_id": new},
                     max_episode_steps=spec.max_episode_steps,
                     reward_threshold=spec.reward_threshold)
        print(f"wrapper: {old} runs as gymnasium {new} ({gymnasium.__version__}) behind gym "
              f"{gym.__version__}'s API")


def mujoco(argv: list[str]) -> int:
    register_mujoco()
    sys.argv = ["mujoco", *argv]
    from cnap.training import mujoco as their

    return their.main() or 0


if __name__ == "__main__":
    commands = {"transe": transe, "mujoco": mujoco}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(f"usage: continuous_main.py {{{','.join(commands)}}} [their flags]")
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))
