"""MDPs as the executor's input graph: NumPy transition tables turned into edge-index tensors once,
before pre-training or evaluating `xlvin.nn.executor.VIExecutor`."""

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from xlvin.errors import UserError
from xlvin.mdp.value_iteration import MDP


@dataclass(frozen=True)
class MDPGraph:
    """One or several MDPs with a common action count as one disjoint executor graph.

    Node n = s * A + a is the copy of (global) state s for action a; an edge (s', a) -> (s, a)
    exists for every P(s'|s, a) > 0, with features [P(s'|s, a), gamma].
    state_offsets [B+1]: the states of MDP b are state_offsets[b]:state_offsets[b+1].
    """

    num_actions: int
    rewards: Tensor  # [N] R(s, a) of every node
    senders: Tensor  # [E]
    receivers: Tensor  # [E]
    edge_features: Tensor  # [E, 2]
    state_offsets: np.ndarray

    @property
    def num_states(self) -> int:
        return int(self.state_offsets[-1])

    @classmethod
    def from_mdps(cls, mdps: list[MDP]) -> "MDPGraph":
        """Build the edge index once with NumPy (no loop over nodes, one over MDPs)."""
        actions = {m.num_actions for m in mdps}
        if len(actions) != 1:
            raise UserError(f"cannot batch MDPs with different action counts {sorted(actions)}")
        (num_actions,) = actions
        offsets = np.concatenate([[0], np.cumsum([m.num_states for m in mdps])])
        senders, receivers, features = [], [], []
        for m, off in zip(mdps, offsets[:-1]):
            s, a, s2 = np.nonzero(m.P)
            senders.append((off + s2) * num_actions + a)
            receivers.append((off + s) * num_actions + a)
            features.append(np.stack([m.P[s, a, s2], np.full(len(s), m.gamma)], axis=1))
        return cls(
            num_actions=num_actions,
            rewards=torch.as_tensor(np.concatenate([m.R.ravel() for m in mdps]),
                                    dtype=torch.float32),
            senders=torch.as_tensor(np.concatenate(senders)),
            receivers=torch.as_tensor(np.concatenate(receivers)),
            edge_features=torch.as_tensor(np.concatenate(features), dtype=torch.float32),
            state_offsets=offsets,
        )
