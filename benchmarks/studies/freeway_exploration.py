"""Why an agent can score 0 on Freeway (issue 17): the two measurements behind the README's
diagnosis, neither of which trains anything.

    python -m benchmarks.studies.freeway_exploration [--games 3] [--run DIR ...]

1. Whole unclipped games of `xlvin/FreewayEval-v4` under policies that press UP with probability
   p and NOOP / DOWN with (1 - p) / 2 each: how far a policy must lean up before any reward.
2. Gradient norms of each loss term of the Atari PPO agent and XLVIN-R (the cells of
   `xlvin reproduce atari`), at initialisation and for each finished run directory given, on 256
   random-play transitions (`xlvin.pretrain.random_data.random_transitions`) with standard-normal
   advantages: policy (-A log pi(a|s)), value (0.5 V(s)^2: every return is 0 before the first
   point) and the agent's auxiliary terms (TransE x 0.001). PPO clips the sum's gradient to norm
   0.5. With `--run`, also the policy's mean action probabilities on the same observations. Not
   part of the test suite.
"""

import argparse

import gymnasium as gym
import numpy as np
import torch

from xlvin.envs.atari import atari_eval_id, atari_train_id
from xlvin.experiments.atari import Cell
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.process import prepare_process, set_threads
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.pretrain.random_data import random_transitions
from xlvin.run.training import load_run
from xlvin.run.architecture import agent_of
from xlvin.envs.spaces import Spaces

UP_PROBABILITIES = (1 / 3, 0.37, 0.40, 0.45)


def biased_scores(p_up: float, games: int) -> list[float]:
    """Unclipped scores of `games` whole Freeway games (seeds 0..games-1) under the policy
    P(UP) = p_up, P(NOOP) = P(DOWN) = (1 - p_up) / 2."""
    env = gym.make(atari_eval_id("Freeway"))
    scores = []
    for seed in range(games):
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        score, done = 0.0, False
        while not done:
            action = 1 if rng.random() < p_up else int(rng.choice([0, 2]))
            _, reward, terminated, truncated, _ = env.step(action)
            score += float(reward)
            done = terminated or truncated
        scores.append(score)
    env.close()
    return scores


def gradient_norms(agent: ActorCritic, batch: TransitionBatch) -> dict[str, float]:
    """Norm of each loss term's gradient over the agent's trainable parameters."""
    torch.manual_seed(0)
    logits, values = agent(batch.obs)
    advantages = torch.randn(len(batch.actions))
    log_pi = torch.log_softmax(logits, -1).gather(1, batch.actions[:, None]).squeeze(1)
    terms = {"policy": -(advantages * log_pi).mean(), "value": 0.5 * values.pow(2).mean(),
             **agent.auxiliary_losses(batch)}
    params = [p for p in agent.parameters() if p.requires_grad]
    norms = {}
    for name, loss in terms.items():
        grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        norms[name] = float(torch.sqrt(sum(g.pow(2).sum() for g in grads if g is not None)))
    return norms


def initial_agent(name: str) -> ActorCritic:
    """The Freeway cell's agent `name` as it starts training (seed 0)."""
    run = Cell("Freeway", name, 0).config()
    cfg = run.train
    processor = None
    if cfg.agent == "xlvin":
        processor, _ = load_executor_processor(executor_file(cfg.executor, cfg, False))
    torch.manual_seed(cfg.seed)
    return agent_of(run, Spaces((4, 84, 84), "image", 3), processor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=3, help="games per policy (default 3)")
    parser.add_argument("--run", nargs="*", default=[], help="finished Freeway run directories")
    args = parser.parse_args()
    prepare_process()
    set_threads(1)
    for p in UP_PROBABILITIES:
        print(f"P(UP) = {p:.2f}: scores {biased_scores(p, args.games)}", flush=True)
    batch = random_transitions(atari_train_id("Freeway"), episodes=1, seed=3,
                               max_transitions=256)  # one game's first 256 steps
    for name in ("ppo", "xlvin_r"):
        norms = gradient_norms(initial_agent(name), batch)
        print(f"{name} at initialisation, gradient norms: "
              + ", ".join(f"{k} {v:.4f}" for k, v in norms.items()))
    for run in args.run:
        agent, _ = load_run(run)
        with torch.no_grad():
            probs = torch.softmax(agent(batch.obs)[0], -1).mean(0)
        norms = gradient_norms(agent.train(), batch)
        print(f"{run}: P(NOOP, UP, DOWN) = {[round(float(x), 3) for x in probs]}; gradient norms: "
              + ", ".join(f"{k} {v:.4f}" for k, v in norms.items()))


if __name__ == "__main__":
    main()
