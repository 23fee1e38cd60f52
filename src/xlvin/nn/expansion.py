"""Which actions a latent tree node expands (ours; the paper's section 3.2 "Discussion" names
binned continuous actions and a policy that picks the actions to expand as the next steps).

A joint action has d factors of sizes nvec: Discrete(A) is one factor of A, a MultiDiscrete its
components, a Box binned into B bins per dimension d factors of B. Expanding every joint action
grows the tree as prod(nvec)^K (`xlvin.nn.tree.expand_tree`); expanding N sampled joint actions
at every node, the roots included, grows it as N^K whatever d. `Expansion.method` names how the
N are drawn, each factor on its own (a joint action may be drawn twice; both children are kept):

- uniform: every factor uniformly over its values;
- gaussian (ordered factors: binned Box actions): round(c_j + s_j eps), clipped to the factor's
  values, around the node's greedy bins c_j under the rollout policy, s_j = n_j / 4 bins;
- policy: every factor from the rollout policy's categorical at the node (learned: the rollout
  policy is distilled from the agent's own, `xlvin.nn.agent.XLVINAgent`).

Randomness is drawn on the CPU from torch's global generator, which a run seeds with its seed and
saves in its checkpoints: the same seed grows the same trees, and a resumed run continues
exactly. Every forward pass draws afresh, so a PPO update recomputes each tree with new draws,
not with the actions the tree had when the agent acted (as the authors' later code does); the
draws are a choice, not differentiable: gradients reach the chosen children only.
"""

from dataclasses import dataclass

import torch
from torch import nn

from xlvin.nn.names import EXPANSIONS
from xlvin.nn.transition import TransitionModel

#: The methods that read the rollout policy at each node.
LEARNED = ("gaussian", "policy")


@dataclass(frozen=True)
class Expansion:
    """Expand `samples` N joint actions of factors `nvec` at every node, drawn by `method`
    (one of `EXPANSIONS` but all)."""

    method: str
    samples: int
    nvec: tuple[int, ...]

    def choose(self, nodes: torch.Tensor, rollout_policy: nn.Module | None) -> torch.Tensor:
        """The joint actions nodes [n, k] expand: [n N, d] long, row i N + j the j-th child of
        node i; `rollout_policy` (embeddings [n, k] -> logits [n, sum(nvec)]) for `LEARNED`."""
        shape, device = (nodes.shape[0], self.samples, len(self.nvec)), nodes.device
        sizes = torch.tensor(self.nvec, device=device)
        if self.method == "uniform":
            actions = (torch.rand(shape).to(device) * sizes).long()
        else:
            assert rollout_policy is not None
            logits = rollout_policy(nodes.detach()).split(self.nvec, dim=-1)  # d x [n, n_j]
            if self.method == "gaussian":
                centre = torch.stack([part.argmax(-1) for part in logits], dim=-1)  # [n, d]
                noise = torch.randn(shape).to(device) * (sizes / 4)
                actions = (centre[:, None] + noise).round().long()
            else:
                uniform = torch.rand(shape).to(device)  # inverse-CDF sampling per factor
                cdfs = [torch.softmax(part, dim=-1).cumsum(-1) for part in logits]  # [n, n_j]
                actions = torch.stack([(cdf[:, None] < uniform[..., j, None]).sum(-1)
                                       for j, cdf in enumerate(cdfs)], dim=-1)
            actions = torch.minimum(actions.clamp(min=0), sizes - 1)
        return actions.flatten(0, 1)


def expand_sampled_tree(
    h: torch.Tensor, transition: TransitionModel, expansion: Expansion,
    rollout_policy: nn.Module | None, depth: int,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A latent tree of depth `depth` from the roots h [B, k] in which every node expands the
    N joint actions `expansion` chooses, h' = h + T(h, a) (paper section 3.2, step 3).

    Returns the levels [B N^d, k] and the joint action of every node below the roots,
    actions[d - 1] [B N^d, d_factors] (long): the layout of `xlvin.nn.tree.execute_levels`
    (children of row i of a level: rows i N .. i N + N - 1 of the next)."""
    levels, actions = [h], []
    for _ in range(depth):
        parents = levels[-1]
        chosen = expansion.choose(parents, rollout_policy)  # [n N, d]
        taken = chosen if transition.nvec else chosen[:, 0]  # Discrete(A): actions [n N]
        levels.append(transition.next_embedding(
            parents.repeat_interleave(expansion.samples, 0), taken))
        actions.append(chosen)
    return levels, actions
