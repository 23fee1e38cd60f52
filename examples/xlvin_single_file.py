"""XLVIN-R trained with PPO on CartPole, in one file to read from top to bottom, in the shape of
CleanRL's ppo.py: the eXecuted Latent Value Iteration Network of Deac et al. 2020
(/work/shared/paper/xlvin.tex; equations numbered as in the paper).

    python examples/xlvin_single_file.py [--total-steps 500000] [--seed 0] [--executor FILE]

1. The executor X, pre-trained to imitate value iteration on random graphs (appendix B), is read
   from the file xlvin ships and frozen (section 3.3).
2. The encoder z and the transition model T are pre-trained with the TransE loss (eq. 2) on the
   transitions of a uniform random policy (appendix B).
3. PPO (Schulman et al. 2017) trains the policy of section 3.2: h_s = z(s); a latent tree grown
   with h' = h + T(h, a) (eq. 5); X run over it (eqs. 3-4) to chi_s; actor and critic on
   [h_s, chi_s]; with the TransE loss added at weight 0.001 (section 3.3).

Needs torch, numpy, gymnasium and safetensors; imports nothing of xlvin. Its defaults are those
of `xlvin train --env CartPole-v1 --agent xlvin-r`. It draws its random numbers in the library's
order and does its float operations in the library's order, so from the same seed and executor it
gives the numbers of the library's readable path (`XLVIN(..., accelerate=False)`) bit for bit:
tests/test_single_file.py compares every logged number and every weight after 3 updates. Three
places follow the library's order for that, where the same maths in another order rounds
otherwise (by ~1e-7 after 3 updates): T's first layer split in the tree (`Transition.successors`),
the executor run over the tree's flat layout (`XLVIN.plan`), and torch's fused Adam for TransE.
The library's default CPU path (a NumPy actor, a fused PPO loss and a flat Adam: the same maths in
other orders) differs from these numbers by at most 6e-8 in the weights and 1.4e-6 in the logged
losses after those 3 updates.
"""

import argparse
import dataclasses
import importlib.util
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from safetensors import safe_open
from torch import nn
from torch.nn import functional as F

#: The XLVIN-R executor shipped inside the xlvin package (`xlvin pretrain-executor --graphs
#: random_deterministic --hidden 50` re-creates it).
SHIPPED_EXECUTOR = "pretrain/data/executor-random_deterministic-518d1ec9f33b.safetensors"


@dataclass
class Args:
    seed: int = 0
    env_id: str = "CartPole-v1"
    total_steps: int = 500_000  # env steps of PPO, all envs; rounded up to whole rollouts
    num_envs: int = 4
    num_steps: int = 128  # steps per env per rollout
    lr: float = 2.5e-4
    adam_eps: float = 1e-5
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2  # the surrogate's and the value loss's
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64  # F: width of encoder and transition (paper 4.1, CartPole)
    embedding_dim: int = 50  # k: the latent state h_s (= the executor's width H)
    depth: int = 2  # K: tree depth and executor steps
    transe_weight: float = 1e-3  # the TransE loss's weight during PPO (section 3.3)
    transe_hinge: float = 1.0  # xi of eq. 2
    transe_sigma: float = 0.5  # d(x, y) = ||x - y||^2 / (2 sigma^2)
    transe_episodes: int = 1000  # random-policy episodes of TransE pre-training ...
    transe_max_transitions: int = 25_000  # ... stopped at this many transitions
    transe_epochs: int = 10
    transe_batch_size: int = 128
    transe_lr: float = 1e-3
    transe_holdout: float = 0.1  # fraction of the transitions held out of pre-training
    executor: str = ""  # an executor file; empty: the one xlvin ships
    torch_threads: int = 1


def load_executor(args: Args) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights [H, 3H] and bias [H] of X's message function (eq. 3) from an executor file.
    Its max aggregation, ReLU messages and lack of LayerNorm are what `XLVIN` computes."""
    path = Path(args.executor) if args.executor else None
    if path is None:
        spec = importlib.util.find_spec("xlvin")  # where the package is, without importing it
        if spec is None or spec.origin is None:
            raise SystemExit("xlvin is not installed: pass --executor FILE")
        path = Path(spec.origin).parent / SHIPPED_EXECUTOR
    with safe_open(path, "pt") as file:
        meta = json.loads(file.metadata()["xlvin"])
        weight, bias = (file.get_tensor(f"processor.message_fn.{n}") for n in ("weight", "bias"))
    assert (meta["aggregation"], meta["messages"], meta["layer_norm"]) == ("max", "relu", False)
    return weight, bias


def orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    """Orthogonal weights and zero bias, the PPO convention (CleanRL's layer_init)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class Encoder(nn.Module):
    """z: S -> R^k (section 3.1): in -> 2F -> F -> k, ReLU."""

    def __init__(self, obs_dim: int, hidden: int, k: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 2 * hidden), nn.ReLU(),
                                 nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, k))
        for layer in self.net[::2]:
            orthogonal(layer, math.sqrt(2))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)  # [B, obs_dim] -> [B, k]


class Transition(nn.Module):
    """T: R^k x A -> R^k (section 3.1), the translation of eq. 5: z(s) + T(z(s), a) ~ E z(s').
    [h, one-hot(a)] -> F -> ReLU -> F -> LayerNorm -> ReLU -> k (paper 4.1)."""

    def __init__(self, k: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.first = nn.Linear(k + num_actions, hidden)
        self.rest = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.LayerNorm(hidden),
                                  nn.ReLU(), nn.Linear(hidden, k))

    def forward(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """T(h, a): h [B, k], actions [B] -> [B, k]."""
        one_hot = F.one_hot(actions, self.num_actions).to(h.dtype)
        return self.rest(self.first(torch.cat([h, one_hot], dim=-1)))

    def successors(self, h: torch.Tensor) -> torch.Tensor:
        """h + T(h, a) for every action a: h [N, k] -> [N, A, k]. The first layer of [h; one-hot(a)]
        is W_h h + b + (column a of W_a): computed once per node, not once per (node, action)."""
        n, k = h.shape
        w_state, w_action = self.first.weight.split([k, self.num_actions], dim=1)
        first = F.linear(h, w_state, self.first.bias)[:, None] + w_action.T  # [N, A, F]
        translations = self.rest(first.reshape(n * self.num_actions, -1))  # [N A, k]
        return h[:, None] + translations.view(n, self.num_actions, k)


class XLVIN(nn.Module):
    """The policy network of section 3.2, steps 1-5:

        h_s = z(s)                                          [B, k]         step 1
        levels S^0 .. S^K of the tree, h' = h + T(h, a)     [B A^d, k]     steps 2-3 (eq. 5)
        chi_s = X run K times over the tree                 [B, H]         step 4 (eqs. 3-4)
        pi(.|s), V(s) = A([h_s, chi_s]), V([h_s, chi_s])    [B, A], [B]    step 5

    X's message function is loaded and frozen: buffers, not parameters (section 3.3). The edge
    feature of action a is e_a = Linear([one-hot(a), gamma]), trained."""

    def __init__(self, obs_dim: int, num_actions: int, args: Args,
                 message_weight: torch.Tensor, message_bias: torch.Tensor) -> None:
        super().__init__()
        k, hidden = args.embedding_dim, message_weight.shape[0]
        assert hidden == k and args.depth >= 1, "needs the executor's width H = k, and K >= 1"
        self.depth, self.num_actions = args.depth, num_actions
        self.encoder = Encoder(obs_dim, args.hidden, k)
        self.transition = Transition(k, num_actions, args.hidden)
        self.register_buffer("message_weight", message_weight)  # [H, 3H]
        self.register_buffer("message_bias", message_bias)  # [H]
        one_hots = torch.eye(num_actions)  # [A, A]
        edge_input = torch.cat([one_hots, torch.full((num_actions, 1), args.gamma)], 1)
        self.register_buffer("edge_input", edge_input, persistent=False)  # [A, A + 1]
        self.edge_projection = nn.Linear(num_actions + 1, hidden)
        self.actor = orthogonal(nn.Linear(k + hidden, num_actions), 0.01)
        self.critic = orthogonal(nn.Linear(k + hidden, 1), 1.0)

    def message(self, sender: torch.Tensor, receiver: torch.Tensor,
                edge: torch.Tensor) -> torch.Tensor:
        """M(h_j, h_i, e_ji) = ReLU(W [h_j; h_i; e_ji] + b) (eq. 3), W applied block by block so
        that the inputs broadcast: children [P, A, H], parents [P, 1, H], edges [A, H]."""
        w_sender, w_receiver, w_edge = self.message_weight.split(sender.shape[-1], dim=1)
        return torch.relu(F.linear(sender, w_sender) + F.linear(receiver, w_receiver)
                          + F.linear(edge, w_edge, self.message_bias))

    def plan(self, h: torch.Tensor) -> torch.Tensor:
        """chi_s [B, H] from h_s [B, k] (steps 2-4). Level d of the tree holds B A^d nodes; in the
        levels concatenated, the children of row p are rows B + p A .. B + p A + A - 1.

        X backs values up from children to parents, as value iteration does: x = nodes, then K
        times chi = X(x) = x + max_a M(x_child_a, x, e_a) (eqs. 3-4, max aggregation) and
        x = chi + nodes (the authors' code). A value climbs one level per step, so step s (from 0)
        updates only levels 0 .. K - 1 - s, those the later steps read: the last, the roots."""
        levels = [h]
        for _ in range(self.depth):
            levels.append(self.transition.successors(levels[-1]).flatten(0, 1))  # [B A^d, k]
        edges = self.edge_projection(self.edge_input)  # e_a [A, H]
        batch, hidden = h.shape
        nodes = torch.cat(levels)  # [N, H]
        x = nodes
        for step in range(self.depth):
            keep = sum(len(level) for level in levels[: self.depth - step])
            parents = x[:keep]  # [P, H]
            children = x[batch : batch + keep * self.num_actions].view(keep, -1, hidden)
            messages = self.message(children, parents[:, None], edges)  # [P, A, H]
            chi = parents + messages.max(dim=1).values  # [P, H]
            x = chi + nodes[:keep]
        return chi  # the roots' [B, H]

    def actor_critic(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h_s [B, k] -> logits [B, A], values [B] (steps 2-5)."""
        features = torch.cat([h, self.plan(h)], dim=-1)
        return self.actor(features), self.critic(features).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor_critic(self.encoder(obs))


def energy(x: torch.Tensor, y: torch.Tensor, args: Args) -> torch.Tensor:
    """TransE's distance d(x, y) = ||x - y||^2 / (2 sigma^2), row by row: [B, k] x2 -> [B]."""
    return (x - y).pow(2).sum(-1) / (2 * args.transe_sigma**2)


def transe_loss(z: torch.Tensor, predicted: torch.Tensor, z_next: torch.Tensor, args: Args,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Eq. 2 averaged over a batch, d(z(s) + T(z(s), a), z(s')) + max(0, xi - d(z(s~), z(s'))),
    from z = z(s), predicted = z + T(z, a) and z_next = z(s') [B, k]; the negatives s~ are a
    permutation of the batch's states."""
    negatives = z[torch.randperm(len(z), generator=generator)]
    positive = energy(predicted, z_next, args)
    negative = torch.clamp(args.transe_hinge - energy(negatives, z_next, args), min=0.0)
    return (positive + negative).mean()


def random_transitions(args: Args) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(s, a, s') of a uniform random policy (appendix B): obs [n, d], actions [n], next obs
    [n, d]. Episode i is reset with seed seed + 10,000 + i, and reset by hand, so that a
    terminal step keeps its true final observation."""
    env = gym.make(args.env_id)
    env.action_space.seed(args.seed + 10_000)
    obs_list, action_list, next_list = [], [], []
    for episode in range(args.transe_episodes):
        if len(obs_list) >= args.transe_max_transitions:
            break
        obs, _ = env.reset(seed=args.seed + 10_000 + episode)
        done = False
        while not done and len(obs_list) < args.transe_max_transitions:
            action = env.action_space.sample()
            next_obs, _, terminated, truncated, _ = env.step(action)
            obs_list.append(obs)
            action_list.append(action)
            next_list.append(next_obs)
            obs, done = next_obs, terminated or truncated
    env.close()
    return (torch.as_tensor(np.asarray(obs_list), dtype=torch.float32),
            torch.as_tensor(np.asarray(action_list), dtype=torch.long),
            torch.as_tensor(np.asarray(next_list), dtype=torch.float32))


def pretrain_transe(agent: XLVIN, args: Args) -> None:
    """Minimise eq. 2 over encoder and transition with Adam, in minibatches of random-policy
    transitions (the last partial one dropped); print the held-out transitions' mean
    d(z(s) + T(z(s), a), z(s')) before and after. Shuffles and negatives: a generator of `seed`."""
    obs, actions, next_obs = random_transitions(args)
    generator = torch.Generator().manual_seed(args.seed)
    shuffled = torch.randperm(len(obs), generator=generator)
    cut = len(obs) - max(1, round(args.transe_holdout * len(obs)))
    train, held_out = shuffled[:cut], shuffled[cut:]

    @torch.no_grad()
    def held_out_energy() -> float:
        z, z_next = agent.encoder(obs[held_out]), agent.encoder(next_obs[held_out])
        return energy(z + agent.transition(z, actions[held_out]), z_next, args).mean().item()

    before = held_out_energy()
    params = [*agent.encoder.parameters(), *agent.transition.parameters()]
    optimizer = torch.optim.Adam(params, lr=args.transe_lr, fused=True)  # fused: the library's
    batch = args.transe_batch_size
    for _ in range(args.transe_epochs):
        order = torch.randperm(cut, generator=generator)
        for start in range(0, max(cut - batch, 0) + 1, batch):
            idx = train[order[start : start + batch]]
            z, z_next = agent.encoder(torch.cat([obs[idx], next_obs[idx]])).chunk(2)
            loss = transe_loss(z, z + agent.transition(z, actions[idx]), z_next, args, generator)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"TransE on {len(obs)} random-policy transitions: held-out "
          f"d(z(s) + T(z(s), a), z(s')) {before:.3f} -> {held_out_energy():.3f}")


def log_prob(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a|s) [B] of logits [B, A] and actions [B]."""
    return torch.log_softmax(logits, dim=-1).gather(-1, actions[:, None]).squeeze(-1)


def sample(logits: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """a ~ softmax(logits) by inverse CDF with given uniforms: logits [N, A], uniform [N] -> [N]."""
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    cdf = np.cumsum(weights, axis=-1)
    return np.minimum(np.count_nonzero(cdf < uniform[:, None] * cdf[:, -1:], axis=-1),
                      logits.shape[-1] - 1)


def gae(rewards: np.ndarray, values: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
        valid: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation: advantages and returns [T, N] from rewards [T, N] and
    values [T + 1, N]. A termination cuts the bootstrap, a truncation keeps it (values[t + 1] is
    then V(final observation)); both cut the trace. Autoreset steps (not valid) get 0."""
    advantages = np.zeros_like(rewards)
    next_advantage = np.zeros_like(values[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + args.gamma * values[t + 1] * ~terminated[t] - values[t]
        done = terminated[t] | truncated[t]
        next_advantage = delta + args.gamma * args.gae_lambda * ~done * next_advantage
        advantages[t] = next_advantage
    advantages *= valid
    return advantages, (advantages + values[:-1]) * valid


@torch.no_grad()
def act(agent: XLVIN, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The policy acting on one step's observations [N, d]: logits [N, A], values [N]."""
    logits, values = agent(torch.from_numpy(obs))
    return logits.numpy(), values.numpy()


def train(args: Args) -> tuple[XLVIN, list[dict[str, float]]]:
    """Pre-train, then PPO; the trained agent and each update's metrics (the library's names).

    The random numbers, in the library's order: the initial weights from torch's global seed;
    TransE's shuffles and negatives from a generator of `seed`; then, with torch reseeded, each
    rollout's action uniforms and each epoch's minibatch order from another generator of `seed`,
    and the PPO TransE term's negatives from torch's global generator. Env i resets with
    seed + i."""
    torch.set_num_threads(args.torch_threads)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec(
        args.env_id, args.num_envs, vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}))
    obs_dim, num_actions = envs.single_observation_space.shape[0], envs.single_action_space.n
    torch.manual_seed(args.seed)
    agent = XLVIN(obs_dim, num_actions, args, *load_executor(args))
    pretrain_transe(agent, args)

    next_obs, _ = envs.reset(seed=args.seed)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    params = list(agent.parameters())  # the frozen executor is buffers
    optimizer = torch.optim.Adam(params, lr=args.lr, eps=args.adam_eps)
    T, N = args.num_steps, args.num_envs
    num_updates = -(-args.total_steps // (T * N))
    autoreset = np.zeros(N, dtype=bool)  # the last step ended an episode: the next one resets
    history, all_returns, start = [], [], time.perf_counter()
    for update in range(num_updates):
        lr = args.lr * (1.0 - update / num_updates) if args.anneal_lr else args.lr
        for group in optimizer.param_groups:
            group["lr"] = lr

        # A rollout. With gymnasium's NEXT_STEP autoreset, the step after a done ignores its
        # action and returns the reset observation: not a transition (valid False).
        obs = np.empty((T + 1, N, obs_dim), dtype=np.float32)
        actions = np.zeros((T, N), dtype=np.int64)
        logits = np.zeros((T, N, num_actions), dtype=np.float32)
        values = np.zeros((T + 1, N), dtype=np.float32)
        rewards = np.zeros((T, N), dtype=np.float32)
        terminated, truncated, valid = (np.zeros((T, N), dtype=bool) for _ in range(3))
        uniforms = torch.rand((T, N), generator=generator, dtype=torch.float64).numpy()
        episode_returns = []
        obs[0] = next_obs
        for t in range(T):
            valid[t] = ~autoreset
            logits[t], values[t] = act(agent, obs[t])
            actions[t] = sample(logits[t], uniforms[t])
            obs[t + 1], rewards[t], terminated[t], truncated[t], info = envs.step(actions[t])
            autoreset = terminated[t] | truncated[t]
            if "episode" in info:
                episode_returns += info["episode"]["r"][info["_episode"]].tolist()
        values[T] = act(agent, obs[T])[1]
        next_obs = obs[T].copy()
        logprobs = log_prob(torch.from_numpy(logits).flatten(0, 1),
                            torch.from_numpy(actions).flatten()).view(T, N)
        advantages, returns = (torch.from_numpy(x) for x in
                               gae(rewards, values, terminated, truncated, valid, args))

        # PPO on the rollout's real transitions (s, a, s'), in a fresh order every epoch.
        mask = torch.from_numpy(valid)
        b_obs, b_next_obs = torch.from_numpy(obs[:-1])[mask], torch.from_numpy(obs[1:])[mask]
        b_actions, b_logprobs = torch.from_numpy(actions)[mask], logprobs[mask]
        b_values, b_advantages = torch.from_numpy(values[:-1])[mask], advantages[mask]
        b_returns = returns[mask]
        logged = []
        for _ in range(args.update_epochs):
            order = torch.randperm(len(b_actions), generator=generator)
            for mb in torch.tensor_split(order, args.num_minibatches):
                h, h_next = agent.encoder(torch.cat([b_obs[mb], b_next_obs[mb]])).chunk(2)
                new_logits, new_values = agent.actor_critic(h)
                logratio = log_prob(new_logits, b_actions[mb]) - b_logprobs[mb]
                # (the library clamps logratio to [-20, 20] here: a diverged loss stays finite)
                ratio = logratio.exp()
                adv = b_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                clipped = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = -torch.min(adv * ratio, adv * clipped).mean()
                v_clipped = b_values[mb] + (new_values - b_values[mb]).clamp(-args.clip_coef,
                                                                             args.clip_coef)
                v_loss = 0.5 * torch.max((new_values - b_returns[mb]).square(),
                                         (v_clipped - b_returns[mb]).square()).mean()
                logp = torch.log_softmax(new_logits, dim=-1)
                entropy = -(logp.exp() * logp).sum(-1).mean()
                # XLVIN's term (section 3.3): eq. 2 keeps T a model of the env under PPO's gradient
                predicted = h + agent.transition(h, b_actions[mb])  # eq. 5
                transe = args.transe_weight * transe_loss(h, predicted, h_next, args)
                loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss + transe
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                optimizer.step()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()  # Schulman's k3 estimator
                    clipfrac = ((ratio - 1).abs() > args.clip_coef).float().mean()
                    logged.append(torch.stack([pg_loss, v_loss, entropy, approx_kl,
                                               clipfrac, transe]))

        # Logging: means over the minibatches, under the library's metric names.
        means = torch.stack(logged).double().mean(0).tolist()
        names = ["policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "transe"]
        metrics = {f"losses/{name}": value for name, value in zip(names, means)}
        var_returns = b_returns.var().item()  # the old values' explained variance:
        unexplained = (b_returns - b_values).var().item()
        metrics["losses/explained_variance"] = (1.0 - unexplained / var_returns if var_returns > 0
                                                else math.nan)
        metrics["charts/learning_rate"] = lr
        if episode_returns:
            metrics["charts/episodic_return"] = float(sum(episode_returns)) / len(episode_returns)
        history.append(metrics)
        all_returns += episode_returns
        if (update + 1) % 10 == 0 or update + 1 == num_updates:
            steps, seconds = (update + 1) * T * N, time.perf_counter() - start
            print(f"update {update + 1}/{num_updates}, {steps} steps: mean return of the last 20 "
                  f"episodes {sum(all_returns[-20:]) / max(len(all_returns[-20:]), 1):.1f}, "
                  f"{steps / seconds:.0f} steps/s")
    envs.close()
    return agent, history


def parse_args() -> Args:
    """Args from the command line: --field-name for each field."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        kind = (lambda s: s.lower() in ("1", "true", "yes")) if field.type is bool else field.type
        parser.add_argument("--" + field.name.replace("_", "-"), type=kind, default=field.default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    train(parse_args())
