"""An environment's spaces, probed once and classified: how its observations are read (the
observation adapter and encoder that fit them) and its actions (Discrete, MultiDiscrete or Box,
`ACTION_KINDS`), with the action distribution that fits them (`action_distribution`)."""

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from xlvin.envs import ensure_registered
from xlvin.envs.maze import is_maze_env
from xlvin.errors import UserError, one_line
from xlvin.nn.distributions import ActionDistribution, Categorical, DiagGaussian, MultiCategorical

#: How observations are read, by observation space (the encoder registry's keys):
#: flat      Box of up to 2 axes, flattened          -> MLP encoder
#: discrete  Discrete(n), one-hot                    -> OneHot, MLP encoder
#: image     images [C, H, W]                        -> Nature CNN
#: image_hwc images [H, W, C] (channels last)        -> ChannelsFirst, Nature CNN
#: maze      the library's mazes [C, H, W]           -> the paper's maze CNN
OBSERVATION_KINDS = ("flat", "discrete", "image", "image_hwc", "maze")
SUPPORTED = (
    "supported: Discrete (one-hot), a Box of up to 2 axes (flattened), images [C, H, W] or "
    "[H, W, C] of at least {size}x{size}"
)
#: The smallest image side the Nature CNN's convolutions accept.
MIN_IMAGE_SIZE = 36
#: Action spaces: discrete Discrete(n), multi_discrete MultiDiscrete(nvec) of one axis, box a Box
#: of one axis with finite bounds.
ACTION_KINDS = ("discrete", "multi_discrete", "box")


@dataclass(frozen=True)
class Spaces:
    """What an agent is built from: one observation's shape as the env gives it, how it is read
    (`kind`, one of OBSERVATION_KINDS), the number of states of a Discrete observation space (0
    otherwise) and the actions: their kind (ACTION_KINDS) and `num_actions`, the width of the
    policy's action head (n of Discrete(n), sum(nvec) of MultiDiscrete(nvec), d of a Box of d
    dims), with `action_nvec` (MultiDiscrete) or the bounds `action_low` / `action_high` (Box)."""

    obs_shape: tuple[int, ...]
    kind: str
    num_actions: int
    states: int = 0
    action_kind: str = "discrete"
    action_nvec: tuple[int, ...] = ()
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @property
    def flat_size(self) -> int:
        """The MLP encoder's input width: n for Discrete(n), else the flattened observation."""
        return self.states if self.kind == "discrete" else int(np.prod(self.obs_shape))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """[C, H, W] of image observations, whichever layout the env gives them in."""
        if self.kind == "image_hwc":
            height, width, channels = self.obs_shape
            return channels, height, width
        channels, height, width = self.obs_shape
        return channels, height, width

    def action_distribution(self) -> ActionDistribution:
        """The distribution a policy's action head parameterises for these actions."""
        if self.action_kind == "box":
            return DiagGaussian(self.action_low, self.action_high)
        if self.action_kind == "multi_discrete":
            return MultiCategorical(self.action_nvec)
        return Categorical(self.num_actions)


def action_fields(env_id: str, action_space: gym.Space) -> dict[str, Any]:
    """The action fields of `Spaces` for `action_space`, or one UserError saying what is
    supported."""
    if isinstance(action_space, gym.spaces.Discrete):
        return {"num_actions": int(action_space.n)}
    shape = getattr(action_space, "shape", None)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and len(action_space.shape) == 1:
        if np.any(action_space.start != 0):
            raise UserError(f"{env_id} has MultiDiscrete actions starting at "
                            f"{action_space.start.tolist()}; supported: starting at 0")
        nvec = tuple(int(n) for n in action_space.nvec)
        return {"num_actions": sum(nvec), "action_kind": "multi_discrete", "action_nvec": nvec}
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
            raise UserError(f"{env_id} has Box actions with infinite bounds; PPO clips its "
                            "Gaussian actions to finite bounds")
        return {"num_actions": int(action_space.shape[0]), "action_kind": "box",
                "action_low": tuple(float(x) for x in action_space.low),
                "action_high": tuple(float(x) for x in action_space.high)}
    raise UserError(f"{env_id} has {type(action_space).__name__} actions of shape {shape}; "
                    "supported: Discrete, MultiDiscrete and Box of one axis")


def classify(
    env_id: str, obs_space: gym.Space, action_space: gym.Space
) -> Spaces:
    """The `Spaces` of an env with these spaces, or one UserError saying what is supported:
    actions as ACTION_KINDS lists them; observations as OBSERVATION_KINDS lists them."""
    actions = action_fields(env_id, action_space)
    if isinstance(obs_space, gym.spaces.Discrete):
        return Spaces((), "discrete", states=int(obs_space.n), **actions)
    supported = SUPPORTED.format(size=MIN_IMAGE_SIZE)
    if not isinstance(obs_space, gym.spaces.Box):
        raise UserError(f"{env_id} has {type(obs_space).__name__} observations; {supported}")
    shape = tuple(int(n) for n in obs_space.shape)
    if is_maze_env(env_id):
        return Spaces(shape, "maze", **actions)
    if len(shape) <= 1 or (len(shape) == 2 and obs_space.dtype != np.uint8):
        return Spaces(shape, "flat", **actions)
    if len(shape) != 3:
        ale = env_id.startswith("ALE/")
        hint = "; xlvin/<Game>-v5 is ALE preprocessed to [4, 84, 84]" if ale else ""
        raise UserError(f"{env_id} has observations of shape {shape}; {supported}{hint}")
    spaces = Spaces(shape, "image_hwc" if shape[2] < shape[0] else "image", **actions)
    _, height, width = spaces.image_shape
    if min(height, width) < MIN_IMAGE_SIZE:
        raise UserError(
            f"{env_id} has images of {height}x{width}; the Nature CNN needs at least "
            f"{MIN_IMAGE_SIZE}x{MIN_IMAGE_SIZE}"
        )
    return spaces


def registry_hint(env_id: str) -> str:
    """Gymnasium's own word on an id missing from its registry ("version v3 for `Taxi` is
    deprecated. Please use `Taxi-v4` instead", "Did you mean: `CartPole`?"), asked only for ids
    that name no module: gymnasium imports the module of a `module:Env` id."""
    if ":" not in env_id:
        try:
            gym.spec(env_id)
        except gym.error.Error as err:
            return " ".join(str(err).split())
    return "not in gymnasium's registry"


def env_spaces(env_id: str, env_kwargs: dict[str, Any] | None = None) -> Spaces:
    """The `Spaces` of `gym.make(env_id, **env_kwargs)`, checked for support (`classify`). Only ids
    in gymnasium's registry are made: an id naming a module to import (`module:Env`) is refused,
    so a config file never runs code (a user's own envs come from `--gym-packages`)."""
    ensure_registered(env_id)
    if env_id not in gym.registry:
        refused = (" (ids that name a module to import, module:Env, are refused; register it in a "
                   "module and pass --gym-packages MODULE)") if ":" in env_id else ""
        raise UserError(f"unknown environment {env_id!r}: {registry_hint(env_id)}{refused}")
    try:
        env = gym.make(env_id, **(env_kwargs or {}))
    except (gym.error.Error, TypeError) as err:
        raise UserError(f"cannot make environment {env_id!r}: {one_line(err)}") from None
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    return classify(env_id, obs_space, action_space)


#: Bounds on a stored observation shape: what any supported env gives, with room to spare.
MAX_STORED_AXES, MAX_STORED_SIZE = 3, 2**31


def spaces_to_json(spaces: Spaces) -> dict[str, Any]:
    """`spaces` as a run stores them (the weights' header): the observation and action spaces as
    the agent reads them, so that the policy is rebuilt without making the env. Discrete actions
    write only `num_actions` (as runs did before other action spaces existed)."""
    data: dict[str, Any] = {"obs_shape": list(spaces.obs_shape), "kind": spaces.kind,
                            "num_actions": spaces.num_actions, "states": spaces.states}
    if spaces.action_kind != "discrete":
        data.update(action_kind=spaces.action_kind, action_nvec=list(spaces.action_nvec),
                    action_low=list(spaces.action_low), action_high=list(spaces.action_high))
    return data


def spaces_from_json(data: Any, source: str) -> Spaces:
    """The `Spaces` a run stored (`spaces_to_json`), every field checked; one UserError for
    anything else."""

    def count(value: Any, low: int) -> bool:
        return type(value) is int and low <= value < MAX_STORED_SIZE

    fields = {"obs_shape", "kind", "num_actions", "states"}
    action = {"action_kind", "action_nvec", "action_low", "action_high"}
    if not isinstance(data, dict) or set(data) not in (fields, fields | action):
        raise UserError(f"{source}: spaces must be an object of {', '.join(sorted(fields))} "
                        f"(and, for other than Discrete actions, {', '.join(sorted(action))})")
    shape = data["obs_shape"]
    if not (isinstance(shape, list) and len(shape) <= MAX_STORED_AXES
            and all(count(n, 1) for n in shape)):
        raise UserError(f"{source}: spaces.obs_shape must be up to {MAX_STORED_AXES} positive "
                        "integers")
    if data["kind"] not in OBSERVATION_KINDS:
        raise UserError(f"{source}: spaces.kind must be one of {', '.join(OBSERVATION_KINDS)}")
    if not count(data["num_actions"], 1) or not count(data["states"], 0):
        raise UserError(f"{source}: spaces.num_actions must be >= 1 and spaces.states >= 0")
    if (data["kind"] == "discrete") != (data["states"] > 0 and not shape):
        raise UserError(f"{source}: spaces.states must be > 0 for discrete observations (shape "
                        "[]) only")
    actions = action_fields_from_json(data, source) if "action_kind" in data else {}
    return Spaces(tuple(shape), data["kind"], data["num_actions"], data["states"], **actions)


def action_fields_from_json(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The stored action fields of a MultiDiscrete or Box action space, checked against
    `num_actions`; one UserError for anything else."""
    kind, nvec = data["action_kind"], data["action_nvec"]
    low, high, width = data["action_low"], data["action_high"], data["num_actions"]

    def numbers(values: Any, size: int) -> bool:
        return (isinstance(values, list) and len(values) == size
                and all(type(x) in (int, float) and np.isfinite(x) for x in values))

    if kind == "multi_discrete" and isinstance(nvec, list) and nvec and all(
            type(n) is int and 1 <= n < MAX_STORED_SIZE for n in nvec) and sum(nvec) == width \
            and low == [] and high == []:
        return {"action_kind": kind, "action_nvec": tuple(nvec)}
    if kind == "box" and nvec == [] and numbers(low, width) and numbers(high, width):
        return {"action_kind": kind, "action_low": tuple(map(float, low)),
                "action_high": tuple(map(float, high))}
    raise UserError(f"{source}: spaces.action_kind must be multi_discrete (action_nvec summing "
                    "to num_actions) or box (num_actions finite action_low and action_high)")
