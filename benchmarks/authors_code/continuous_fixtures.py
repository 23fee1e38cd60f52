"""Record how the authors' continuous-action code bins a Box and which actions its tree nodes
expand, for the differential test of ours (`tests/test_authors_continuous.py`).

Run with the authors' environment (`run.sh --continuous` adds gymnasium and mujoco to it), never
with ours:

    VENV/bin/python benchmarks/authors_code/continuous_fixtures.py --out tests/fixtures/authors_code

It imports dransyhe/CNAP (e303fc5) and writes `continuous.json`: numbers only. Recorded:

- `binning`: their `discretizing_wrapper` (`environment/env.py`) on three Boxes (an env of
  bounds chosen here, MountainCarContinuous-v0 at 10 bins as their classic runs bin it,
  HalfCheetah's bounds at 11 bins as their MuJoCo runs do): the table of each dimension's
  values, and the env action their wrapped env received for fixed bin indices, sent through
  their `make_vec_envs` (one env, `VecPyTorch`) as their training loops send them;
- `expand_all`: their `create_graph_selective(sample_method="expand_all")` (`models/ppo/
  policy.py`) on 2 nodes, 3 bins x 2 dimensions, depth 2: the joint action of every child, in
  order, the edge features, senders and receivers;
- `draws`: the same function with `uniform` and `manual_gaussian` (the README's MuJoCo
  command), each after `torch.manual_seed(seed)`: the joint actions drawn for 3 nodes x 11
  neighbours x 6 dimensions at 11 and 10 bins, once for each of two different batches of node
  embeddings (their draws do not read the nodes), and the edge features, senders and receivers
  of the first;
- `histograms`: per dimension, how often each bin was drawn over 4,000 nodes x 11 neighbours
  x 6 dimensions (264,000 draws), for both methods at 11 and 10 bins.

The transition model their function calls is replaced here by a stub that records the actions
it is given and returns zeros (the actions do not depend on it).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

SEED = 1
GAMMA = 0.99
NEIGHBOURS, DIMS = 11, 6
HIST_NODES = 4000


class RecordingTransition:
    """Stands in for TransE: `transition(children, actions)` records actions, returns zeros."""

    def __init__(self) -> None:
        self.actions: list[torch.Tensor] = []

    def transition(self, children: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        self.actions.append(actions.clone())
        return torch.zeros_like(children)


def their_graph(nodes: torch.Tensor, bins: int, dims: int, neighbours: int, method: str,
                steps: int = 1) -> tuple[list[torch.Tensor], dict]:
    """Their tree over `nodes`: the actions of each level, and its edges as lists. `bins` is
    a NumPy integer, as their Policy passes `action_space.nvec[0]`."""
    from cnap.models.ppo.policy import create_graph_selective

    model = RecordingTransition()
    _, senders, receivers, edges = create_graph_selective(
        current_state=nodes, model=model, gamma=GAMMA, action_bins=np.int64(bins),
        num_steps=steps, action_multidim=dims, num_neighbours=neighbours, sample_method=method)
    return model.actions, {"senders": senders.tolist(), "receivers": receivers.tolist(),
                           "edge_features": edges.tolist()}


def graph_record(nodes: torch.Tensor, bins: int, dims: int, neighbours: int, method: str,
                 steps: int = 1) -> dict:
    actions, edges = their_graph(nodes, bins, dims, neighbours, method, steps)
    return {"actions": [a.tolist() for a in actions], **edges}


def sent_through_their_envs(env_type: str, bins: int, indices: list[list[int]]) -> list[list[float]]:
    """The env action their wrapped env received for each joint index, sent as their loops send
    actions (a LongTensor through make_vec_envs' VecPyTorch, one env)."""
    from cnap.environment.env import make_vec_envs

    envs = make_vec_envs(env_type=env_type, seed=SEED, num_processes=1, gamma=0.99, log_dir=None,
                         device=torch.device("cpu"), continuous=True, bins=bins)
    inner = envs.venv.envs[0].unwrapped
    received: list[list[float]] = []
    original = inner.orig_step_

    def record(action):
        received.append(np.asarray(action, dtype=np.float64).reshape(-1).tolist())
        return original(action)

    inner.orig_step_ = record
    envs.reset()
    for index in indices:
        envs.step(torch.tensor([index], dtype=torch.long))
    envs.close()
    return received


def binning() -> list[dict]:
    import gym
    from cnap.environment.env import discretizing_wrapper

    class Bounds(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        action_space = gym.spaces.Box(np.array([-2.0, 0.0, -1.5], np.float32),
                                      np.array([2.0, 1.0, 3.0], np.float32))

        def __init__(self):
            self.received = []

        def reset(self):
            return np.zeros(1, np.float32)

        def step(self, action):
            self.received.append(np.asarray(action, dtype=np.float64).tolist())
            return np.zeros(1, np.float32), 0.0, False, {}

    cases = []
    for bins in (5, 11):
        env = Bounds()
        inner = env
        wrapped = discretizing_wrapper(env=env, K=bins)
        indices = [[0, 0, 0], [1, 2, 3], [bins - 1, bins - 1, bins - 1], [bins // 2, 0, bins - 1]]
        for index in indices:
            wrapped.step(np.array(index))
        cases.append({"name": f"bounds-{bins}", "low": Bounds.action_space.low.tolist(),
                      "high": Bounds.action_space.high.tolist(), "bins": bins,
                      "nvec": wrapped.action_space.nvec.tolist(), "indices": indices,
                      "received": inner.received})
    # MountainCarContinuous: their classic loop sends one index per env (Discrete(bins))
    indices = [[0], [3], [9], [5]]
    cases.append({"name": "mountaincar-continuous-10", "low": [-1.0], "high": [1.0], "bins": 10,
                  "nvec": [10], "indices": indices,
                  "received": sent_through_their_envs("mountaincar-continuous", 10, indices)})
    # HalfCheetah: their MuJoCo loop sends six indices per env
    sys.path.insert(0, str(Path(__file__).parent))
    from continuous_main import register_mujoco

    register_mujoco()
    indices = [[0, 1, 2, 3, 4, 5], [10, 9, 8, 7, 6, 5], [5, 5, 5, 5, 5, 5]]
    cases.append({"name": "halfcheetah-11", "low": [-1.0] * 6, "high": [1.0] * 6, "bins": 11,
                  "nvec": [11] * 6, "indices": indices,
                  "received": sent_through_their_envs("halfcheetah", 11, indices)})
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import cnap

    torch.manual_seed(SEED)
    nodes = torch.randn(2, 4)
    record: dict = {
        "provenance": {"code": "dransyhe/CNAP e303fc5", "module": cnap.__name__,
                       "torch": torch.__version__, "numpy": np.__version__},
        "binning": binning(),
        "gamma": GAMMA,
        "expand_all": {"nodes": 2, "bins": 3, "dims": 2, "neighbours": 9, "steps": 2,
                       **graph_record(nodes, 3, 2, 9, "expand_all", steps=2)},
        "draws": [], "histograms": [],
    }
    first, second = torch.randn(3, 4), torch.randn(3, 4) * 5 + 2
    for method in ("uniform", "manual_gaussian"):
        for bins in (11, 10):
            torch.manual_seed(SEED)
            graph = graph_record(first, bins, DIMS, NEIGHBOURS, method)
            torch.manual_seed(SEED)
            again = graph_record(second, bins, DIMS, NEIGHBOURS, method)
            record["draws"].append({"method": method, "bins": bins, "dims": DIMS, "nodes": 3,
                                    "neighbours": NEIGHBOURS, "seed": SEED, **graph,
                                    "actions_other_nodes": again["actions"]})
            torch.manual_seed(SEED)
            drawn = their_graph(torch.zeros(HIST_NODES, 1), bins, DIMS, NEIGHBOURS, method)[0][0]
            counts = [torch.bincount(drawn[:, j], minlength=bins).tolist() for j in range(DIMS)]
            record["histograms"].append({"method": method, "bins": bins, "dims": DIMS,
                                         "nodes": HIST_NODES, "neighbours": NEIGHBOURS,
                                         "seed": SEED, "counts": counts})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "continuous.json").write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"wrote {args.out / 'continuous.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
