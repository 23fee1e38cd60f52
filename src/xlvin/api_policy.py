"""A model's policy network outside training: the initial one a run starts from, acting on
observations as Stable-Baselines3's `predict` does, and weights set as its `set_parameters` sets
them. Used by `xlvin.api.Model`.
"""

from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.accel.numpy_sampling import env_actions, mode_actions, sample_actions
from xlvin.envs.spaces import Spaces, flat_observation
from xlvin.errors import UserError
from xlvin.io.executor_file import read_executor_meta
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.collect import policy_device
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.process import seed_everything
from xlvin.run.agents import Architecture, agent_spec, build_agent
from xlvin.run.config import TrainConfig
from xlvin.run.training import read_run


def initial_policy(t: TrainConfig, architecture: Architecture,
                   spaces: Spaces) -> tuple[ActorCritic, dict[str, Any] | None]:
    """(the policy the run of `t` starts from, its executor's description or None): seeded as
    training seeds it, its executor loaded (pre-trained first if needed, with progress)."""
    processor, meta = None, None
    if agent_spec(t.agent).executor:
        processor, meta = load_executor_processor(executor_file(t.executor, t, progress=True))
    seed_everything(t.seed)
    return build_agent(architecture, spaces, processor).to(t.device), meta


def executor_metadata(t: TrainConfig) -> dict[str, Any] | None:
    """The description of the executor of the run of `t` (its file's header; None without)."""
    if not agent_spec(t.agent).executor:
        return None
    return read_executor_meta(executor_file(t.executor, t, progress=True))


def act(policy: ActorCritic, spaces: Spaces, obs: Any, deterministic: bool,
        generator: torch.Generator, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(actions, values) of one observation or a batch [N, ...], NumPy or torch (a Dict one as
    the env gives it): sampled from pi(.|s) with `generator`'s noise, or its mode with
    `deterministic`, in the env's terms (Box actions clipped); `name` (predict, ...) in errors."""
    if spaces.parts:
        obs = flat_observation(spaces.parts, obs, name)
    x = obs.detach().cpu() if isinstance(obs, torch.Tensor) else torch.as_tensor(np.asarray(obs))
    shape = spaces.obs_shape
    single = tuple(x.shape) == shape
    if not single and tuple(x.shape[1:]) != shape:
        raise UserError(f"{name}: an observation has shape {list(shape)} (a batch [N, "
                        f"{', '.join(map(str, shape))}]), got {list(x.shape)}")
    batch = x.unsqueeze(0) if single else x
    if batch.is_floating_point() and not bool(torch.isfinite(batch).all()):
        bad = int((~torch.isfinite(batch)).flatten(1).any(1).nonzero()[0, 0])
        which = "the observation" if single else f"observation {bad} of the batch"
        raise UserError(f"{name}: {which} holds NaN or inf; a policy acts on finite numbers only")
    training = policy.training
    policy.eval()
    try:
        with torch.no_grad():
            logits, values = policy(batch.to(policy_device(policy)))
    finally:
        policy.train(training)
    params, values = logits.cpu().numpy(), values.cpu().numpy()
    dist = policy.action_distribution()
    if deterministic:
        actions = env_actions(dist, mode_actions(dist, params))
    else:
        noise = dist.noise((len(params),), generator).numpy()
        actions = env_actions(dist, sample_actions(dist, params, noise))
    if single:
        return np.asarray(actions[0]), np.asarray(values[0])
    return actions, values


def set_parameters(policy: ActorCritic, source: str | Path | dict[str, Any],
                   exact_match: bool) -> None:
    """Load into `policy` the weights of `source`, {"policy": state_dict} or a run directory:
    with `exact_match` every tensor of the policy and no other, else those given; one UserError
    naming a mismatch (of names or shapes)."""
    if isinstance(source, (str, Path)):
        state = {"policy": read_run(Path(source))[0].state_dict()}
    else:
        state = dict(source)
    if set(state) - {"policy"}:
        raise UserError(f"set_parameters: takes {{'policy': state_dict}}, got keys "
                        f"{sorted(state)}")
    ours = policy.state_dict()
    given = state.get("policy", {})
    missing, extra = sorted(set(ours) - set(given)), sorted(set(given) - set(ours))
    if exact_match and (missing or extra):
        raise UserError(f"set_parameters(exact_match=True): missing {missing[:3]}, "
                        f"unexpected {extra[:3]}")
    for name, value in given.items():
        if name in ours and tuple(value.shape) != tuple(ours[name].shape):
            raise UserError(f"set_parameters: {name} has shape {list(value.shape)}, the "
                            f"model's {list(ours[name].shape)}")
    policy.load_state_dict({k: v for k, v in given.items() if k in ours}, strict=False)
