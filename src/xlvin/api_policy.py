"""A model's policy network outside training: the initial one a run starts from, acting on
observations as Stable-Baselines3's `predict` does, and weights set as its `set_parameters` sets
them. Used by `xlvin.api.Model`.
"""

import contextlib
import hashlib
import time
from collections.abc import Mapping
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
from xlvin.process import global_generators, seed_everything, torch_threads
from xlvin.run.agents import Architecture, agent_spec, build_agent
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.training import StartingPolicy, read_run


def initial_policy(cfg: RunConfig, architecture: Architecture,
                   spaces: Spaces) -> tuple[StartingPolicy, dict[str, Any] | None]:
    """(the policy the run of `cfg` starts from, its executor's description or None): seeded
    and on the torch threads of its training (the orthogonal initialisation's QR rounds
    otherwise on other thread counts), its executor loaded (pre-trained first if needed, with
    progress), with the global generators' states just after it was built."""
    t, threads = cfg.train, cfg.ppo.torch_threads
    processor, meta, start = None, None, time.perf_counter()
    if agent_spec(t.agent).executor:
        processor, meta = load_executor_processor(executor_file(t.executor, t, progress=True))
    seconds = time.perf_counter() - start
    with torch_threads(threads) if threads > 0 else contextlib.nullcontext():
        seed_everything(t.seed)
        agent = build_agent(architecture, spaces, processor).to(t.device)
    return StartingPolicy(agent, global_generators(), executor_seconds=seconds), meta


def executor_metadata(t: TrainConfig) -> dict[str, Any] | None:
    """The description of the executor of the run of `t` (its file's header; None without)."""
    if not agent_spec(t.agent).executor:
        return None
    return read_executor_meta(executor_file(t.executor, t, progress=True))


def _numbers(value: Any, name: str, expected: str) -> np.ndarray:
    """`value` as a NumPy array of numbers, or one UserError saying what `name` reads."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except ValueError:  # ragged nesting
        array = np.asarray(None)
    if array.dtype.kind not in "biuf":
        given = repr(value)[:40] if isinstance(value, str) else type(value).__name__
        raise UserError(f"{name}: observations are numbers, {expected}; got {given}")
    return array


def _states(array: np.ndarray, states: int, name: str, what: str) -> None:
    """Refuse values of a Discrete(states) observation (or part) that are not one of its
    states, 0 to states - 1."""
    bad = array[(array != np.round(array)) | (array < 0) | (array >= states)]
    if bad.size:
        raise UserError(f"{name}: {what} is a state of Discrete({states}), an integer 0 to "
                        f"{states - 1}; got {bad.flat[0].item()!r}")


def checked_observation(spaces: Spaces, obs: Any, name: str) -> np.ndarray:
    """One observation or a batch as the array the policy reads (Dict ones flattened), or one
    UserError naming what `name` (predict, ...) expects: not a gymnasium (obs, info) pair, not
    text, a Discrete value one of its states."""
    dims = ", ".join(map(str, spaces.obs_shape))
    if spaces.parts:
        expected = f"Dict observations with parts {', '.join(p.key for p in spaces.parts)}"
    elif dims:
        expected = f"an array of shape [{dims}] (a batch [N, {dims}])"
    else:
        expected = "a number (a batch [N])"
    if isinstance(obs, tuple) and len(obs) == 2 and isinstance(obs[1], dict):
        raise UserError(f"{name}: got a tuple (observation, info) as gymnasium's reset() gives "
                        f"it; pass the observation alone (obs, info = env.reset(); "
                        f"{name}(obs)): {expected}")
    if not spaces.parts:
        array = _numbers(obs, name, expected)
        if spaces.kind == "discrete":
            _states(array, spaces.states, name, "an observation")
        return array
    if isinstance(obs, Mapping):
        for part in spaces.parts:
            if part.key in obs:
                value = _numbers(obs[part.key], name, f"part {part.key!r} of {expected}")
                if part.kind == "discrete":
                    _states(value, part.states, name, f"part {part.key!r}")
    return flat_observation(spaces.parts, obs, name)


def act(policy: ActorCritic, spaces: Spaces, obs: Any, deterministic: bool,
        generator: torch.Generator, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(actions, values) of one observation or a batch [N, ...], NumPy or torch (a Dict one as
    the env gives it): sampled from pi(.|s) with `generator`'s noise, or its mode with
    `deterministic`, in the env's terms (Box actions clipped); `name` (predict, ...) in errors."""
    x = torch.as_tensor(checked_observation(spaces, obs, name))
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


def weights_digest(policy: torch.nn.Module) -> str:
    """SHA-256 of `policy`'s state (names, dtypes, shapes and bytes): whether the weights a
    model holds are still those its run left."""
    h = hashlib.sha256()
    for name, tensor in sorted(policy.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
