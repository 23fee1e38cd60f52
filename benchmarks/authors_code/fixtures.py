"""Record what the authors' code computes, for the differential test of our modules.

Run with the authors' environment (`run.sh` builds it), never with ours:

    DIR/venv/bin/python benchmarks/authors_code/fixtures.py --cnap-weights DIR \
        --out tests/fixtures/authors_code

It imports dransyhe/CNAP (installed in that environment) and writes two files: `cnap.safetensors`
(every tensor: inputs, weights, outputs) and `cnap.json` (scalars and provenance). Our test
(`tests/test_authors_code.py`) loads both through `convert.py` into our modules and compares,
without their code. What is recorded, all on CartPole-v0 sizes (k = 50, F = 64, H = 50, A = 2):

- `mp.*`: their pre-trained executor's message-passing layer (`Executor.message_passing`, as
  the policy uses it: max aggregation) on one small graph with a node that receives nothing;
- `transe.*`: their pre-trained TransE's `contrastive_loss` on one batch of random-policy
  CartPole transitions, with the negative indices its `torch.randint` draws;
- `policy.*` / `ppo_policy.*`: the XLVIN-R policy (K = 1, as their README runs it) and the PPO
  policy, built as `training/classic_control.py` builds them: initial weights, and logits and
  values on a batch of observations;
- `update.*`: one rollout collected by their `gather_fixed_episodes_rollout` (15 envs until 10
  episodes ended, seed 1), then 10 calls of their `PPO.update` on it, each after
  `torch.manual_seed(UPDATE_SEED + u)`: the global-RNG draws each update makes (the minibatch
  permutation, then one `randint` of negatives per minibatch), the loss terms and gradient norm
  of every minibatch (read by wrapping `torch.nn.utils.clip_grad_norm_` and
  `Policy.evaluate_actions` in this process; their code is not changed), and the weights after
  update 1 and update 10.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

UPDATE_SEED = 1000
POLICY_SEED = 1
UPDATES = 10


def their_args(include_executor: bool) -> argparse.Namespace:
    """classic_control's arguments for `--env=cartpole --gnn_steps=1` (their README's command),
    read through their own parser so every default is theirs."""
    from cnap.arguments import get_args

    argv = ["classic", "--env=cartpole", "--seed=1", "--graph_type=erdos-renyi", "--gnn_steps=1"]
    if include_executor:
        argv += ["--include_transe=True", "--include_executor=True"]
    saved, sys.argv = sys.argv, argv
    try:
        return get_args()
    finally:
        sys.argv = saved


def build_policy(args, weights: Path):
    """Their Policy, PPO and TransE exactly as classic_control.main builds them."""
    from cnap.models.executor.gnn import Executor
    from cnap.models.ppo.policy import Policy
    from cnap.models.ppo.ppo import PPO
    from cnap.models.ppo.utils import set_seed
    from cnap.models.transe.transe_classic import TransE

    set_seed(POLICY_SEED)
    transe = TransE(state_embedding_dimension=args.transe_embedding_dim,
                    state_dimension=args.env_input_dims, hidden_dimension=args.transe_hidden_dim,
                    action_dimension=args.env_action_dim, sigma=0.5, hinge_loss=1.0)
    if args.include_transe:
        transe.load_state_dict(torch.load(weights / "transe_cartpole.pt", weights_only=True))
    executor = Executor(node_dimension=2, edge_dimension=2, hidden_dimension=args.gnn_hidden_dim,
                        out_dimension=1, gnn_steps=args.gnn_steps, activation=args.activation,
                        layernorm=args.layernorm, neighbour_aggregation=args.neighbour_aggregation)
    if args.include_executor:
        executor.load_state_dict(torch.load(weights / "executor.pt", weights_only=True))
    policy = Policy(action_space=args.action_space, gamma=args.gamma, transe=transe,
                    edge_feat=args.env_action_dim + 1, transe_hidden_dim=args.transe_embedding_dim,
                    gnn_hidden_dim=args.gnn_hidden_dim, num_processes=args.num_processes,
                    include_executor=args.include_executor, executor=executor.message_passing,
                    freeze_encoder=args.freeze_encoder, freeze_executor=args.freeze_executor,
                    transe2gnn=args.transe2gnn, gnn_decoder=args.gnn_decoder,
                    gnn_steps=args.gnn_steps, graph_detach=args.graph_detach)
    optimizer = torch.optim.Adam(list(policy.parameters()))
    ppo = PPO(actor_critic=policy, clip_param=args.clip_param, ppo_epoch=args.ppo_epoch,
              num_mini_batch=args.num_mini_batch, value_loss_coef=args.value_loss_coef,
              entropy_coef=args.entropy_coef, transe_loss_coef=args.transe_loss_coef,
              optimizer=optimizer, max_grad_norm=args.max_grad_norm,
              mini_batch_size=args.mini_batch_size, transe_detach=args.transe_detach,
              use_clipped_value_loss=args.use_clipped_value_loss)
    return policy, ppo, executor, transe


def logits_and_values(policy, obs: torch.Tensor):
    """The path of Policy.act / evaluate_actions, stopped before the distribution."""
    latents = policy.encoder(obs)
    if policy.include_executor:
        latents = policy.executor_layer(latents)
    return policy.actor_linear(latents), policy.critic_linear(latents).squeeze(-1)


def random_transitions(n: int, seed: int):
    import gym

    env = gym.make("CartPole-v0")
    env.seed(seed)
    env.action_space.seed(seed)
    rows, state = [], env.reset()
    while len(rows) < n:
        action = env.action_space.sample()
        nxt, _, done, _ = env.step(action)
        rows.append((state, action, nxt))
        state = env.reset() if done else nxt
    obs, actions, next_obs = zip(*rows)
    return (torch.tensor(np.array(obs), dtype=torch.float32), torch.tensor(actions),
            torch.tensor(np.array(next_obs), dtype=torch.float32))


def message_passing_case(executor, tensors: dict) -> None:
    mp = executor.message_passing
    g = torch.Generator().manual_seed(0)
    nodes, hidden = 7, mp.hidden_dimension
    # node 6 receives nothing; node 0 receives three messages
    senders = torch.tensor([1, 2, 3, 0, 4, 5, 6, 6, 1])
    receivers = torch.tensor([0, 0, 0, 1, 1, 2, 3, 4, 5])
    x = torch.randn(nodes, hidden, generator=g)
    edges = torch.randn(len(senders), hidden, generator=g)
    with torch.no_grad():
        out = mp(x.clone(), senders, receivers, edges)  # it adds into its input in place
    tensors.update({"mp.x": x, "mp.senders": senders, "mp.receivers": receivers,
                    "mp.edges": edges, "mp.out": out})


def transe_case(transe, tensors: dict, scalars: dict) -> None:
    obs, actions, next_obs = random_transitions(64, seed=7)
    torch.manual_seed(5)
    negatives = torch.randint(0, len(obs), (len(obs),))
    torch.manual_seed(5)
    with torch.no_grad():
        loss = transe.contrastive_loss(obs, actions, next_obs)
    tensors.update({"transe.obs": obs, "transe.actions": actions, "transe.next_obs": next_obs,
                    "transe.negatives": negatives})
    scalars["transe.loss"] = loss.item()


def update_case(policy, ppo, args, tensors: dict, scalars: dict) -> None:
    from cnap.environment.env import make_vec_envs
    from cnap.models.ppo.rollout import gather_fixed_episodes_rollout

    envs = make_vec_envs(num_processes=args.num_processes, env_type="cartpole", seed=1,
                         gamma=args.gamma, log_dir=None, continuous=False, device="cpu")
    torch.manual_seed(2)
    rollouts = gather_fixed_episodes_rollout(env=envs, policy=policy, num_episodes=10,
                                             gamma=args.gamma, num_processes=args.num_processes,
                                             device="cpu")
    envs.close()
    for name in ("obs", "actions", "action_log_probs", "value_preds", "rewards", "masks",
                 "solved_obs", "returns"):
        tensors[f"update.{name}"] = getattr(rollouts, name).clone()

    records: list[dict] = []
    clip = torch.nn.utils.clip_grad_norm_
    evaluate = policy.evaluate_actions

    def recording_clip(parameters, max_norm, *a, **kw):
        norm = clip(parameters, max_norm, *a, **kw)
        records[-1]["grad_norm"] = float(norm)
        return norm

    def recording_evaluate(obs, action):
        values, log_probs, entropy = evaluate(obs, action)
        records.append({"batch": len(obs), "entropy": float(entropy)})
        return values, log_probs, entropy

    torch.nn.utils.clip_grad_norm_ = recording_clip
    policy.evaluate_actions = recording_evaluate
    n = rollouts.rewards.shape[0] * rollouts.rewards.shape[1]
    updates = []
    try:
        for u in range(UPDATES):
            torch.manual_seed(UPDATE_SEED + u)  # replay the draws the update is about to make
            order = torch.randperm(n)
            draws = [torch.randint(0, args.mini_batch_size, (args.mini_batch_size,))
                     for _ in range(n // args.mini_batch_size)]
            tensors[f"update.{u}.order"] = order
            tensors[f"update.{u}.negatives"] = torch.stack(draws)
            torch.manual_seed(UPDATE_SEED + u)
            start = len(records)
            value, action, entropy, transe = ppo.update(rollouts)
            # PPO.update divides its sums by ppo_epoch x num_mini_batch (1 x 32), whatever the
            # number of minibatches it ran: undo that to get means over the minibatches run
            ran = len(records) - start
            scale = args.ppo_epoch * args.num_mini_batch / ran
            updates.append({"minibatches": records[start:], "value_loss": value * scale,
                            "policy_loss": action * scale, "entropy": entropy * scale,
                            "transe_loss": transe * scale})
            if u in (0, UPDATES - 1):
                for key, value in policy.state_dict().items():
                    tensors[f"update.after{u + 1}.{key}"] = value.clone()
    finally:
        torch.nn.utils.clip_grad_norm_ = clip
        policy.evaluate_actions = evaluate
    scalars["update"] = updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cnap-weights", type=Path, required=True,
                        help="the run.sh output folder (holds their pre-trained weights)")
    parser.add_argument("--out", type=Path, required=True)
    cli = parser.parse_args()
    root = cli.cnap_weights
    weights = root / "fixture-weights"
    weights.mkdir(exist_ok=True)
    executor = "work/cnap/models/executor/trained_executor/erdos-renyi-gnnstep1-actFalse-lnTrue.pt"
    for src, dst in ((executor, "executor.pt"),
                     ("models/transe/trained_transe/transe_cartpole.pt", "transe_cartpole.pt")):
        target = weights / dst
        if not target.exists():
            os.symlink(root / src, target)
    torch.set_num_threads(1)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict = {"source": "dransyhe/CNAP e303fc5, weights from benchmarks/authors_code/run.sh",
                     "torch": torch.__version__}

    args = their_args(include_executor=True)
    policy, ppo, executor, transe = build_policy(args, weights)
    message_passing_case(executor, tensors)
    transe_case(transe, tensors, scalars)
    for key, value in policy.state_dict().items():
        tensors[f"policy.init.{key}"] = value.clone()
    obs, _, _ = random_transitions(32, seed=11)
    with torch.no_grad():
        logits, values = logits_and_values(policy, obs)
    tensors.update({"policy.obs": obs, "policy.logits": logits, "policy.values": values})

    ppo_args = their_args(include_executor=False)
    ppo_policy, _, _, _ = build_policy(ppo_args, weights)
    for key, value in ppo_policy.state_dict().items():
        tensors[f"ppo_policy.init.{key}"] = value.clone()
    with torch.no_grad():
        logits, values = logits_and_values(ppo_policy, obs)
    tensors.update({"ppo_policy.logits": logits, "ppo_policy.values": values})

    update_case(policy, ppo, args, tensors, scalars)

    cli.out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, cli.out / "cnap.safetensors")
    (cli.out / "cnap.json").write_text(json.dumps(scalars, indent=1) + "\n")
    print(f"wrote {len(tensors)} tensors to {cli.out}")


if __name__ == "__main__":
    main()
