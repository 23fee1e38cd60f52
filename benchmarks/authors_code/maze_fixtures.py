"""Record what the authors' maze code computes, for the differential tests of our maze code.

Run with the authors' environment (`run.sh` builds it, scikit-learn included, which their
value-predictability script imports), never with ours:

    DIR/venv/bin/python benchmarks/authors_code/maze_fixtures.py --cnap ~/CNAP \
        --out tests/fixtures/authors_code

It imports dransyhe/CNAP (installed in that environment), works in a scratch folder laid out as
their relative paths expect (`cnap/environment/maze/dataset`, `.../trained`), and writes
`maze.safetensors` (arrays) and `maze.json` (scalars and provenance). `tests/test_authors_maze.py`
compares them with our code, without theirs. What is recorded:

- `env.<case>.*`: their `MazeEnv` (`environment/maze/maze_env.py`) reset on one sample of their
  npz (`reset(maze_index=i)`) and stepped through an action sequence chosen here: the maze image,
  the start, the actions, and per step the observation, reward, done flag and the `solved`
  observation of their info dict. Cases: a free move then an interior wall; the border wall;
  a shortest path to the goal; a 150-move walk that avoids the goal, then the shortest path;
  short random episodes.
- `levels.{train,test}`: the level of every npz sample according to their
  `{train,test}_8*8_maze_by_level.pkl` (0: in no level).
- `mdp.*`: their `generate_mdp` and `value_iteration` (`environment/maze/value_predictability.py`)
  on one held-out maze, and what their executor pre-training pipeline
  (`GenerateData._generate_data`, `models/executor/data.py`) makes of that P and R: node
  features, senders, receivers, edge features, the value-iteration targets and the policy.
- `held_out` (maze.json): their held-out evaluation loop with their `test_vec_envs` on the
  level-1 held-out mazes and a constant action: how many mazes ended.
- `vp.*`: their `v_star_predictability` run on three held-out mazes with two seeded, untrained
  policies saved as their level-1 and level-2 checkpoints (built as their `__main__` builds
  them); each `LinearRegression.fit` call's embeddings and targets and each `score`, read by
  wrapping the class in this process (their code is not changed).
"""

import argparse
import json
import os
import pickle
import sys
import tempfile
from collections import deque
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

SEED = 20201026
DATASET = "cnap/environment/maze/dataset"


def bfs(grid: np.ndarray, goal: tuple[int, int], moves: list[tuple[int, int]]) -> np.ndarray:
    """Moves to the goal from every cell (-1: wall or cut off), with the given 8 moves."""
    dist = np.full(grid.shape, -1)
    dist[goal] = 0
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in moves:
            nr, nc = r + dr, c + dc
            if 0 <= nr < grid.shape[0] and 0 <= nc < grid.shape[1] and grid[nr, nc] == 0 \
                    and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def load_split(train: bool):
    with np.load(f"{DATASET}/gridworld_8x8.npz") as f:
        names = ("arr_0", "arr_1", "arr_2") if train else ("arr_4", "arr_5", "arr_6")
        return tuple(f[n] for n in names)


def goal_of(image: np.ndarray) -> tuple[int, int]:
    return tuple(int(v) for v in np.argwhere(image[1] > 0)[0])


def small_ints(array: np.ndarray) -> torch.Tensor:
    """Their observations hold 0, 1 and 10 only (float64): stored as uint8, checked exact."""
    packed = np.asarray(array).astype(np.uint8)
    assert (packed == array).all()
    return torch.from_numpy(packed)


def record_episode(env, index: int, actions: list[int]) -> dict:
    """Their env from sample `index`, stepped through `actions` (stops at the first done)."""
    obs = env.reset(maze_index=index)
    out = {"first": obs.copy(), "obs": [], "reward": [], "done": [], "solved": [], "actions": []}
    for a in actions:
        o, r, d, info = env.step(np.int64(a))
        out["actions"].append(a)
        out["obs"].append(o.copy())
        out["reward"].append(r)
        out["done"].append(d)
        out["solved"].append(info["solved"].copy())
        if d:
            break
    return out


def env_cases(rng: np.random.Generator) -> tuple[dict, dict]:
    from cnap.environment.maze.maze_env import MazeEnv

    cases = {}
    for train in (True, False):
        env = MazeEnv(maze_size=8, train=train)
        moves = list(zip(env.dx, env.dy))
        images, sx, sy = load_split(train)

        def start(i):
            return int(sx[i, 0]), int(sy[i, 0])

        def free(image, r, c):
            return image[0, r, c] == 0

        def shortest(image, cell):
            goal = goal_of(image)
            dist = bfs(image[0], goal, moves)
            path = []
            while cell != goal:
                a = next(a for a, (dr, dc) in enumerate(moves)
                         if dist[cell[0] + dr, cell[1] + dc] == dist[cell] - 1)
                path.append(a)
                cell = (cell[0] + moves[a][0], cell[1] + moves[a][1])
            return path

        if train:
            # a free move, then into a wall inside the maze (not the border)
            for i in range(len(images)):
                r, c = start(i)
                goal = goal_of(images[i])
                step = [(a, (r + dr, c + dc)) for a, (dr, dc) in enumerate(moves)
                        if free(images[i], r + dr, c + dc) and (r + dr, c + dc) != goal]
                for a, (r1, c1) in step:
                    inner = [b for b, (dr, dc) in enumerate(moves)
                             if 1 <= r1 + dr <= 6 and 1 <= c1 + dc <= 6
                             and not free(images[i], r1 + dr, c1 + dc)]
                    if inner:
                        cases["wall"] = (train, i, [a, inner[0]])
                        break
                if "wall" in cases:
                    break
            # into the border: a start on row 1 moving north (row - 1)
            north = moves.index((-1, 0))
            i = next(i for i in range(len(images)) if start(i)[0] == 1)
            cases["border"] = (train, i, [north])
            # the shortest path from a start of level >= 5
            i = next(i for i in range(len(images))
                     if bfs(images[i][0], goal_of(images[i]), moves)[start(i)] >= 5)
            cases["goal"] = (train, i, shortest(images[i], start(i)))
            # short random episodes
            for k, i in enumerate(rng.choice(len(images), 4, replace=False)):
                cases[f"random{k}"] = (train, int(i), [int(a) for a in rng.integers(0, 8, 12)])
        else:
            # 150 random moves that neither hit a wall nor enter the goal, then the shortest path
            for i in rng.permutation(len(images)):
                i = int(i)
                goal, cell = goal_of(images[i]), start(i)
                walk = []
                for _ in range(150):
                    ok = [a for a, (dr, dc) in enumerate(moves)
                          if free(images[i], cell[0] + dr, cell[1] + dc)
                          and (cell[0] + dr, cell[1] + dc) != goal]
                    if not ok:
                        break
                    a = int(rng.choice(ok))
                    walk.append(a)
                    cell = (cell[0] + moves[a][0], cell[1] + moves[a][1])
                if len(walk) == 150:
                    cases["long"] = (train, i, walk + shortest(images[i], cell))
                    break

    tensors, meta = {}, {}
    envs = {True: MazeEnv(maze_size=8, train=True), False: MazeEnv(maze_size=8, train=False)}
    np.random.seed(SEED)  # their reset after an end draws the next maze with np.random
    for name, (train, index, actions) in cases.items():
        images, sx, sy = load_split(train)
        ep = record_episode(envs[train], index, actions)
        tensors.update({
            f"env.{name}.image": small_ints(images[index]),
            f"env.{name}.start": torch.tensor([sx[index, 0], sy[index, 0]]),
            f"env.{name}.first": small_ints(ep["first"]),
            f"env.{name}.actions": torch.tensor(ep["actions"]),
            f"env.{name}.obs": small_ints(np.stack(ep["obs"])),
            f"env.{name}.reward": torch.tensor(ep["reward"], dtype=torch.float64),
            f"env.{name}.done": torch.tensor(ep["done"]),
            f"env.{name}.solved": small_ints(np.stack(ep["solved"])),
        })
        meta[name] = {"split": "train" if train else "test", "index": index,
                      "steps": len(ep["actions"])}
    meta["_moves"] = {"dx": [int(v) for v in envs[True].dx], "dy": [int(v) for v in envs[True].dy]}
    return tensors, meta


def level_arrays(tensors: dict) -> None:
    for split, n in (("train", len(load_split(True)[0])), ("test", len(load_split(False)[0]))):
        with open(f"{DATASET}/{split}_8*8_maze_by_level.pkl", "rb") as f:
            by_level = pickle.load(f)
        levels = np.zeros(n, dtype=np.uint8)
        for level, indices in by_level.items():
            levels[np.asarray(indices)] = level
        tensors[f"levels.{split}"] = torch.from_numpy(levels)


def choose_mdp_maze() -> int:
    """A held-out sample whose maze has a free cell cut off from the goal, start level >= 4."""
    images, sx, sy = load_split(False)
    moves = [(1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)]
    for i in range(len(images)):
        dist = bfs(images[i][0], goal_of(images[i]), moves)
        if ((images[i][0] == 0) & (dist < 0)).any() and dist[int(sx[i, 0]), int(sy[i, 0])] >= 4:
            return i
    raise RuntimeError("no such maze")


def mdp_case(index: int, tensors: dict, meta: dict) -> None:
    from cnap.environment.maze.maze_env import MazeEnv
    from cnap.environment.maze.value_predictability import generate_mdp, value_iteration
    from cnap.models.executor.data import GenerateData

    env = MazeEnv(maze_size=8, train=False)
    grid, _, goal_map = env.reset(index)
    P, R, index_map = generate_mdp(grid=grid, goal_map=goal_map)
    v_star = value_iteration(P=P, R=R, discount=0.9)
    data = GenerateData(num_states=P.shape[-1], num_actions=8, graph_type="erdos-renyi",
                        cartpole_depth=10, cartpole_delta=0.1, cartpole_accel=0.05,
                        cartpole_thresh=0.5, cartpole_initial_position=0, epsilon=0.0001,
                        discount=0.9)
    data._transition = lambda: P.clone()  # their pipeline, fed the maze instead of a random graph
    data._reward = lambda: R.clone()
    node_features, (senders, receivers, edge_features), true_values, policy = \
        next(data._generate_data())
    cells = sorted(index_map, key=index_map.get)
    tensors.update({
        "mdp.grid": torch.tensor(grid, dtype=torch.float32),
        "mdp.goal_map": torch.tensor(goal_map, dtype=torch.float32),
        "mdp.P": P, "mdp.R": R, "mdp.cells": torch.tensor(cells), "mdp.v_star": v_star,
        # node features (V_t(s), R(s, a)) of the first 3 iterations; true_values has every V_t
        "mdp.node_features": node_features[:3],
        "mdp.iterations": torch.tensor(len(node_features)),
        "mdp.senders": senders, "mdp.receivers": receivers,
        "mdp.edge_features": edge_features, "mdp.true_values": true_values,
        "mdp.policy": policy["policy"],
    })
    meta["mdp"] = {"split": "test", "index": index, "discount": 0.9, "executor_epsilon": 1e-4}


def vp_case(mdp_index: int, tensors: dict, meta: dict) -> None:
    from gym import spaces

    import cnap.environment.maze.value_predictability as vp
    from cnap.models.executor.gnn import Executor
    from cnap.models.ppo.policy import Policy
    from cnap.models.transe.transe_maze import TransE

    calls: list[dict] = []

    class Recording(vp.LinearRegression):
        def fit(self, X, y, sample_weight=None):
            calls.append({"X": np.array(X, dtype=np.float32), "y": np.array(y)})
            return super().fit(X, y, sample_weight)

        def score(self, X, y, sample_weight=None):
            value = super().score(X, y, sample_weight)
            calls[-1]["score"] = float(value)
            return value

    def build(seed: int):
        # their __main__'s parameters (gnn_steps 3, hidden 10, embedding 10, TransE hidden 128)
        torch.manual_seed(seed)
        transe = TransE(state_embedding_dimension=10, input_dimensions=(3, 8, 8),
                        action_dimension=8, hidden_dimension=128)
        executor = Executor(node_dimension=2, edge_dimension=2, hidden_dimension=10,
                            out_dimension=1, neighbour_aggregation="max", activation=False,
                            layernorm=True, gnn_steps=3)
        policy = Policy(action_space=spaces.Discrete(8), gamma=0.99, transe=transe, edge_feat=9,
                        transe_hidden_dim=10, gnn_hidden_dim=10, num_processes=15,
                        include_executor=True, executor=executor.message_passing,
                        freeze_encoder=False, freeze_executor=True, transe2gnn=1, gnn_decoder=1,
                        gnn_steps=3, graph_detach=False)
        return transe, executor, policy

    os.makedirs("cnap/environment/maze/trained", exist_ok=True)
    for level, seed in ((1, 1), (2, 2)):
        transe, executor, policy = build(seed)
        torch.save({"transe": transe.state_dict(), "executor": executor.state_dict(),
                    "policy": policy.state_dict()},
                   f"cnap/environment/maze/trained/trained_model_level{level}.pt")
    transe, executor, policy = build(0)
    test_levels = pickle.load(open(f"{DATASET}/test_8*8_maze_by_level.pkl", "rb"))
    others = [i for i in test_levels[3][:2] if i != mdp_index]
    indices = {1: others, 2: [mdp_index]}
    saved, vp.LinearRegression = vp.LinearRegression, Recording
    try:
        vp.v_star_predictability(transe=transe, executor=executor, policy=policy,
                                 test_indices=indices)
    finally:
        vp.LinearRegression = saved
    assert len(calls) == 4, calls
    names = []
    for call, (level, stage) in zip(calls, [(1, "pre"), (1, "post"), (2, "pre"), (2, "post")]):
        tensors[f"vp.level{level}.{stage}.X"] = torch.from_numpy(call["X"])
        tensors[f"vp.level{level}.{stage}.y"] = torch.from_numpy(call["y"])
        names.append({"level": level, "stage": stage, "score": call["score"],
                      "rows": int(call["X"].shape[0]), "features": int(call["X"].shape[1])})
    meta["vp"] = {"test_indices": indices, "regressions": names,
                  "checkpoints": "untrained policies, torch.manual_seed(level) before building"}


def held_out_case(meta: dict) -> None:
    """Their held-out evaluation's loop (`training/maze.py`, `test_hold_out_mazes`) on the
    level-1 held-out mazes, with their `test_vec_envs` (15 SB3 subprocess envs) and a policy
    that always moves east: how many mazes end, against how many it was given."""
    from cnap.environment.env import test_vec_envs

    with open(f"{DATASET}/test_8*8_maze_by_level.pkl", "rb") as f:
        indices = pickle.load(f)[1]
    env = test_vec_envs(num_processes=15, maze_size=8, train_maze=False,
                        maze_indices_list=indices, device="cpu")
    env.reset()
    ended = steps = 0
    while True:
        _, reward, _, _ = env.step(torch.zeros(15, 1, dtype=torch.long))
        steps += 1
        ended += int(((reward == 1.0) | (reward == -1.0)).sum())
        if torch.max(reward) < -1.0:
            break
    env.close()
    meta["held_out"] = {"level": 1, "mazes": len(indices), "processes": 15, "ended": ended,
                        "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cnap", type=Path, required=True, help="their checkout (e303fc5)")
    parser.add_argument("--out", type=Path, required=True)
    cli = parser.parse_args()
    out = cli.out.resolve()
    dataset = (cli.cnap / "cnap" / "environment" / "maze" / "dataset").resolve()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        os.makedirs("cnap/environment/maze")
        os.symlink(dataset, DATASET)
        tensors: dict[str, torch.Tensor] = {}
        meta: dict = {"source": "dransyhe/CNAP e303fc5", "torch": torch.__version__,
                      "numpy": np.__version__}
        import sklearn

        meta["sklearn"] = sklearn.__version__
        env_tensors, meta["env"] = env_cases(np.random.default_rng(SEED))
        tensors.update(env_tensors)
        level_arrays(tensors)
        index = choose_mdp_maze()
        mdp_case(index, tensors, meta)
        vp_case(index, tensors, meta)
        held_out_case(meta)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, out / "maze.safetensors")
    (out / "maze.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(tensors)} tensors to {out}")


if __name__ == "__main__":
    sys.exit(main())
