"""Weights of the authors' code (dransyhe/CNAP) in our modules' names.

Their classic-control policy (`models/ppo/policy.py`, `Policy`) and ours (`xlvin.nn.agent`) are
the same network under other names; this maps a state dict of theirs onto ours, key by key,
and refuses anything it does not know. It reads tensors only: nothing of their code is imported.

| theirs | ours |
|---|---|
| `encoder.layers.{0,2,4}` (TransE's encoder) | `encoder.net.{0,2,4}` (`MLPEncoder`) |
| `transe.transition.layers.{0,2,3,5}` | `transition.first`, `transition.rest.{1,2,4}` |
| `executor.message_proj`, `executor.ln` | `processor.message_fn`, `processor.norm` |
| `transe2gnn_fc.0`, `gnn_decoder_fc.0`, `edge_proj` | `node_projection`, `chi_projection`, `edge_projection` |
| `actor_linear`, `critic_linear` | `heads.actor`, `heads.critic` |
"""

from collections.abc import Mapping

import torch

ENCODER = {"encoder.layers.0": "encoder.net.0", "encoder.layers.2": "encoder.net.2",
           "encoder.layers.4": "encoder.net.4"}
TRANSITION = {"transe.transition.layers.0": "transition.first",
              "transe.transition.layers.2": "transition.rest.1",
              "transe.transition.layers.3": "transition.rest.2",
              "transe.transition.layers.5": "transition.rest.4"}
HEADS = {"actor_linear": "heads.actor", "critic_linear": "heads.critic"}
EXECUTOR = {"executor.message_proj": "processor.message_fn", "executor.ln": "processor.norm",
            "transe2gnn_fc.0": "node_projection", "gnn_decoder_fc.0": "chi_projection",
            "edge_proj": "edge_projection"}
#: Their Policy registers TransE's encoder twice (`transe.encoder` and `encoder`): one copy is
#: read, the other must be the same tensor.
ALIASES = {"transe.encoder.": "encoder."}
#: Their TransE module's keys (models/transe/transe_classic.py) -> ours.
TRANSE = {"encoder.layers.0": "encoder.net.0", "encoder.layers.2": "encoder.net.2",
          "encoder.layers.4": "encoder.net.4", "transition.layers.0": "transition.first",
          "transition.layers.2": "transition.rest.1", "transition.layers.3": "transition.rest.2",
          "transition.layers.5": "transition.rest.4"}
#: Their executor's message-passing layer (models/executor/gnn.py, MessagePassing) -> ours.
MESSAGE_PASSING = {"message_proj": "message_fn", "ln": "norm"}


def rename(state: Mapping[str, torch.Tensor], table: Mapping[str, str]) -> dict[str, torch.Tensor]:
    """`state` with every `module.param` key renamed by `table` (module -> module); a key whose
    module is not in the table is an error, so nothing is dropped silently."""
    out = {}
    for key, value in state.items():
        module, _, param = key.rpartition(".")
        if module not in table:
            raise KeyError(f"no counterpart for their weight {key!r}")
        out[f"{table[module]}.{param}"] = value
    return out


def policy_state(state: Mapping[str, torch.Tensor], executor: bool) -> dict[str, torch.Tensor]:
    """Their `Policy.state_dict()` as the state dict of our `XLVINAgent` (executor=True, built
    with `projections=True`) or of our `PPOAgent` with a transition model (executor=False)."""
    state = dict(state)
    for alias, kept in ALIASES.items():
        for key in [k for k in state if k.startswith(alias)]:
            twin = kept + key[len(alias):]
            if not torch.equal(state[key], state[twin]):
                raise ValueError(f"{key} and {twin} should be one tensor")
            del state[key]
    table = {**ENCODER, **TRANSITION, **HEADS, **(EXECUTOR if executor else {})}
    return rename(state, table)


def executor_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Their pre-trained `Executor.state_dict()` (models/executor/gnn.py) as the state dict of
    our `VIExecutor`. Their node projection has no bias (ours: a zero bias) and their edge
    features are [gamma, P(s'|s, a)] where ours are [P(s'|s, a), gamma] (columns swapped). The
    processor, the only part XLVIN reuses, maps one to one."""
    node = state["node_proj.0.weight"]
    return {
        "node_encoder.weight": node, "node_encoder.bias": torch.zeros(node.shape[0]),
        "edge_encoder.weight": state["edge_proj.weight"][:, [1, 0]],
        "edge_encoder.bias": state["edge_proj.bias"],
        **{f"processor.{k}": v for k, v in rename(
            {k[len("message_passing."):]: v for k, v in state.items()
             if k.startswith("message_passing.")}, MESSAGE_PASSING).items()},
        "decoder.weight": state["fc.weight"], "decoder.bias": state["fc.bias"],
    }


def write_executor_file(their_file: str, out: str, aggregation: str = "max") -> None:
    """Their executor `.pt` file as one of our executor files, with the aggregation their policy
    runs it with (classic_control.py: --neighbour_aggregation max; their pre-training default is
    sum). Their file is read with `torch.load(weights_only=True)`: tensors only, no code."""
    from xlvin.io.executor_file import save_executor
    from xlvin.nn.executor import VIExecutor

    state = torch.load(their_file, map_location="cpu", weights_only=True)
    hidden = state["message_passing.message_proj.weight"].shape[0]
    executor = VIExecutor(hidden, aggregation, layer_norm="message_passing.ln.weight" in state,
                          messages="linear")
    executor.load_state_dict(executor_state(state))
    save_executor(out, executor, {"family": "erdos-renyi (the authors' code)",
                                  "source": "dransyhe/CNAP models/executor/train.py defaults"})


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="their executor .pt -> our executor file")
    parser.add_argument("their_file")
    parser.add_argument("out")
    args = parser.parse_args()
    write_executor_file(args.their_file, args.out)
