"""Start the authors' maze training (`maze = cnap.training.maze:main`, dransyhe/CNAP e303fc5)
with what its entry point lacks, and one cap; run with their environment (`run.sh` builds it):

    DIR/venv/bin/python benchmarks/authors_code/maze_main.py --env=maze --seed=S [their flags]

from a working folder laid out as their relative paths expect (`run_maze.sh` makes one). Their
arguments are parsed by their own `get_args`. Three things are added around their `main`,
none of which changes what it computes:

- `training/maze.py`'s evaluation functions read a module-level `args` (`args.device`) that
  only exists when the module runs as a script; through the `maze` entry point the first
  evaluation raises NameError. The parsed arguments are put there before `main` runs.
- `training/maze.py` never calls their `set_seed`: this seeds Python, NumPy and torch in the
  main process with `--seed` (the policy's initial weights and its action samples). The
  environments run in SB3 subprocesses (forkserver) and draw their mazes unseeded, as theirs do.
- The vector environments it opens (2 x `--num_processes` processes per level, and as many per
  level again for every held-out evaluation) are never closed; an environment is closed here
  once the next one of its kind is opened, after which their code never uses it again.
  Without this a run holds hundreds of processes by level 5.

One thing is changed, where their code would otherwise never return: their held-out
evaluation (`test_hold_out_mazes`) steps the deterministic policy until every held-out maze has
ended, and their env has no step limit, so one maze on which the policy cycles between cells
would keep it (and the run) going forever. (A trial run sat in a held-out evaluation for minutes
under heavy CPU contention, which is what prompted the cap; whether a policy was cycling there
was not established: an untrained policy ends all 150 mazes of a check within 21 moves.) Here a
held-out maze still going after `HELD_OUT_CAP` moves is ended as their env ends a
failure: reward -1 (what their count of failures reads) and the env's own `reset` (the next maze
of that env's share). Each such cut prints `wrapper: held-out maze cut`. A maze has at most 21
free cells, so a policy still walking after 1,000 moves is cycling (its BatchNorm, in training
mode, makes each action depend on the other envs' observations too, so this is a bound in
practice, not a proof).

A line `wrapper: ...` is printed for each of these, and `wrapper: held-out evaluation started`
and `finished` around each held-out evaluation.
"""

import random
import sys

import numpy as np
import torch

HELD_OUT_CAP = 1000


class CappedHeldOut:
    """Their held-out vector env (a VecPyTorchFrameStack of one frame), with a maze still going
    after HELD_OUT_CAP moves ended as a failure (module docstring)."""

    def __init__(self, env):
        self.env = env
        self.moves = None
        self.steps = 0
        self.ended = 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self):
        obs = self.env.reset()
        self.moves = np.zeros(len(obs), dtype=np.int64)
        return obs

    def step(self, action):
        obs, reward, done, info = self.env.step(action)
        flat = reward.view(-1)
        self.moves += 1
        self.steps += 1
        self.ended += int(((flat > 0.5) | ((flat < -0.5) & (flat > -1.5))).sum())
        self.moves[((flat > 0.5) | (flat < -0.5)).numpy()] = 0  # a pass, a failure, or finished
        if self.steps % 2000 == 0:
            print(f"wrapper: held-out evaluation: {self.steps} steps, {self.ended} mazes ended, "
                  f"longest current walk {self.moves.max()} moves", flush=True)
        for i in np.flatnonzero(self.moves >= HELD_OUT_CAP):
            flat[i] = -1.0
            obs[i] = torch.as_tensor(self.env.env_method("reset", indices=[int(i)])[0],
                                     dtype=obs.dtype)
            self.moves[i] = 0
            print(f"wrapper: held-out maze cut after {HELD_OUT_CAP} moves (env {i}, counted "
                  f"as a failure)", flush=True)
        return obs, reward, done, info


def main() -> int:
    from cnap.arguments import get_args
    import cnap.training.maze as maze

    args = get_args()
    if args.env != "maze":
        print("maze_main.py: pass --env=maze (their get_args sets the maze sizes only then)",
              file=sys.stderr)
        return 2
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    print(f"wrapper: seeded python, numpy and torch with {args.seed} in the main process")

    maze.args = args
    print("wrapper: set cnap.training.maze.args (their evaluation functions read it)")

    opened: dict[str, list] = {"train": [], "held-out": []}

    def closing(kind: str, make):
        def wrapped(*a, **kw):
            if kind == "held-out" and not opened[kind]:
                print("wrapper: held-out evaluation started", flush=True)
            if kind == "train":
                for stale in opened["held-out"]:
                    stale.close()
                opened["held-out"].clear()
            # the train and test envs of a level come in pairs: close the previous level's pair
            keep = 1 if kind == "train" else 0
            while len(opened[kind]) > keep:
                opened[kind].pop(0).close()
            env = make(*a, **kw)
            opened[kind].append(env)
            return env
        return wrapped

    maze.make_vec_maze_envs = closing("train", maze.make_vec_maze_envs)
    test_vec_envs = maze.test_vec_envs
    maze.test_vec_envs = closing("held-out",
                                 lambda *a, **kw: CappedHeldOut(test_vec_envs(*a, **kw)))
    evaluate = maze.test_hold_out_mazes

    def held_out(*a, **kw):
        result = evaluate(*a, **kw)
        for env in opened["held-out"]:
            env.close()
        opened["held-out"].clear()
        print("wrapper: held-out evaluation finished", flush=True)
        return result

    maze.test_hold_out_mazes = held_out
    print("wrapper: closes each vector env once their code has opened its successor")
    maze.main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
