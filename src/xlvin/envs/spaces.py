"""An environment's spaces, probed once and classified: how its observations are read (the
observation adapter and encoder that fit them) and its actions (Discrete, MultiDiscrete or Box,
`ACTION_KINDS`); the action distribution that fits them is `xlvin.nn.distributions.for_spaces`."""

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from xlvin.envs import ensure_registered
from xlvin.envs.maze import is_maze_env
from xlvin.envs.wrappers import wrapped_env_id
from xlvin.errors import FieldError, UserError, one_line

#: How observations are read, by observation space (the encoder registry's keys):
#: flat      Box of up to 2 axes, flattened          -> MLP encoder
#: discrete  Discrete(n), one-hot                    -> OneHot, MLP encoder
#: image     images [C, H, W]                        -> Nature CNN (small CNN under 36x36)
#: image_hwc images [H, W, C] (channels last)        -> ChannelsFirst, then as image
#: maze      the library's mazes [C, H, W]           -> the paper's maze CNN
#: dict      Dict of the above (text parts dropped)  -> a CNN per image, one MLP for the rest
OBSERVATION_KINDS = ("flat", "discrete", "image", "image_hwc", "maze", "dict")
#: The kinds a part of a Dict observation is read as.
PART_KINDS = ("flat", "discrete", "image", "image_hwc")
SUPPORTED = (
    "supported: Discrete (one-hot), a Box of up to 2 axes (flattened), images [C, H, W] or "
    f"[H, W, C] of at least {{size}}x{{size}}, and a Dict of these (text parts dropped)"
)
#: The smallest image side the Nature CNN's convolutions accept: smaller images get the small
#: CNN (`xlvin.nn.encoders.SmallCNN`).
MIN_IMAGE_SIZE = 36
#: The smallest image side the small CNN accepts.
MIN_SMALL_IMAGE_SIZE = 4
#: Action spaces: discrete Discrete(n), multi_discrete MultiDiscrete(nvec) of one axis, box a Box
#: of one axis with finite bounds.
ACTION_KINDS = ("discrete", "multi_discrete", "box")


@dataclass(frozen=True)
class Part:
    """One part of a Dict observation as the agent reads it: its key, its kind (one of
    PART_KINDS), its shape and, Discrete, its number of states. It takes `size` numbers of the
    flat vector the env's observations become (`flatten_parts`): the value of a Discrete part,
    every number of the others."""

    key: str
    kind: str
    shape: tuple[int, ...]
    states: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return image_shape(self.kind, self.shape)


def image_shape(kind: str, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """[C, H, W] of images of `kind` (image or image_hwc) and `shape`."""
    if kind == "image_hwc":
        height, width, channels = shape
        return channels, height, width
    channels, height, width = shape
    return channels, height, width


@dataclass(frozen=True)
class Spaces:
    """What an agent is built from: one observation's shape as the agent reads it, how it is read
    (`kind`, one of OBSERVATION_KINDS), the number of states of a Discrete observation space (0
    otherwise), for Dict observations their parts (the observation is then their flat vector,
    `flatten_parts`), and the actions: their kind (ACTION_KINDS) and `num_actions`, the width of
    the policy's action head (n of Discrete(n), sum(nvec) of MultiDiscrete(nvec), d of a Box of d
    dims), with `action_nvec` (MultiDiscrete) or the bounds `action_low` / `action_high` (Box)."""

    obs_shape: tuple[int, ...]
    kind: str
    num_actions: int
    states: int = 0
    action_kind: str = "discrete"
    action_nvec: tuple[int, ...] = ()
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    parts: tuple[Part, ...] = ()

    @property
    def flat_size(self) -> int:
        """The MLP encoder's input width: n for Discrete(n), else the flattened observation."""
        return self.states if self.kind == "discrete" else int(np.prod(self.obs_shape))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """[C, H, W] of image observations, whichever layout the env gives them in."""
        return image_shape(self.kind, self.obs_shape)

    def action_factors(self, bins: int = 0) -> tuple[int, ...]:
        """The sizes of a joint action's factors: (n,) for Discrete(n), nvec for
        MultiDiscrete(nvec), (B,) * d for a Box of d dims binned into `bins` B."""
        if self.action_kind == "box":
            return (bins,) * self.num_actions
        return self.action_nvec or (self.num_actions,)



def _read_as(env_id: str, space: gym.Space, supported: str) -> tuple[str, tuple[int, ...], int]:
    """(kind, shape, states) of an observation space that is not a Dict, or one UserError."""
    if isinstance(space, gym.spaces.Discrete):
        return "discrete", (), int(space.n)
    if not isinstance(space, gym.spaces.Box):
        raise UserError(f"{env_id} has {type(space).__name__} observations; {supported}")
    shape = tuple(int(n) for n in space.shape)
    if len(shape) <= 1 or (len(shape) == 2 and space.dtype != np.uint8):
        return "flat", shape, 0
    if len(shape) != 3:
        ale = env_id.startswith("ALE/")
        hint = "; xlvin/<Game>-v5 is ALE preprocessed to [4, 84, 84]" if ale else ""
        raise UserError(f"{env_id} has observations of shape {shape}; {supported}{hint}")
    kind = "image_hwc" if shape[2] < shape[0] else "image"
    _, height, width = image_shape(kind, shape)
    if min(height, width) < MIN_SMALL_IMAGE_SIZE:
        raise UserError(f"{env_id} has images of {height}x{width}; the small CNN needs at least "
                        f"{MIN_SMALL_IMAGE_SIZE}x{MIN_SMALL_IMAGE_SIZE}")
    return kind, shape, 0


def _is_text(space: gym.Space) -> bool:
    """Whether a space's values are strings (gymnasium's Text, MiniGrid's MissionSpace)."""
    if isinstance(space, gym.spaces.Text):
        return True
    try:
        return isinstance(space.sample(), str)
    except Exception:  # a space that cannot sample on its own is no text space
        return False


#: The envs whose dropped text parts were noticed in this process.
_NOTICED: set[str] = set()


def dict_parts(env_id: str, space: gym.spaces.Dict, notice: bool = False) -> tuple[Part, ...]:
    """The parts the agent reads of a Dict observation space, in the Dict's order: images,
    vectors and Discrete values; text parts are dropped (`notice`: saying so, as a warning, the
    first time in this process for `env_id`). One UserError for a part of another kind, or a Dict of nothing readable."""
    supported = SUPPORTED.format(size=MIN_SMALL_IMAGE_SIZE)
    parts, text = [], []
    for key, sub in space.spaces.items():
        if _is_text(sub):
            text.append(key)
            continue
        if isinstance(sub, (gym.spaces.Dict, gym.spaces.Tuple)):
            raise UserError(f"{env_id} has a nested {type(sub).__name__} in its Dict "
                            f"observations (part {key!r}); {supported}")
        kind, shape, states = _read_as(f"{env_id} (part {key!r})", sub, supported)
        parts.append(Part(str(key), kind, shape, states))
    if not parts:
        raise UserError(f"{env_id} has Dict observations with no image, vector or discrete part")
    if notice and text and env_id not in _NOTICED:
        _NOTICED.add(env_id)
        warnings.warn(f"{env_id}: the text part of its observations ({', '.join(text)}) is "
                      "dropped: the agent reads images, vectors and discrete values", stacklevel=2)
    return tuple(parts)


def flatten_parts(parts: tuple[Part, ...], obs: Mapping[str, Any]) -> np.ndarray:
    """A Dict observation [*] or a batch of them (a dict of arrays [N, *]) as the float32 vector
    [size] or [N, size] the agent reads: the parts one after the other, each flattened (a
    Discrete part as its value)."""
    arrays = []
    for part in parts:
        x = np.asarray(obs[part.key], dtype=np.float32)
        arrays.append(x.reshape(*x.shape[: x.ndim - len(part.shape)], part.size))
    return np.concatenate(arrays, axis=-1)


def flat_observation(parts: tuple[Part, ...], obs: Any, name: str) -> np.ndarray:
    """A Dict observation (or batch) that `name` (e.g. predict) was given as the flat vector the
    policy reads (`flatten_parts`), or one UserError saying which parts and shapes it reads."""
    if not isinstance(obs, Mapping) or any(p.key not in obs for p in parts):
        raise UserError(f"{name}: this model reads Dict observations with parts "
                        f"{', '.join(p.key for p in parts)}; got {type(obs).__name__}")
    try:
        return flatten_parts(parts, obs)
    except ValueError:
        shapes = ", ".join(f"{p.key} {list(p.shape)}" for p in parts)
        raise UserError(f"{name}: the parts of an observation have shapes {shapes} (a batch "
                        "[N, ...] each)") from None


class FlatDict(gym.ObservationWrapper):
    """The observation adapter of Dict observations, on the env: each one as its flat vector
    (`flatten_parts`), so that rollouts store one array per step."""

    def __init__(self, env: gym.Env, parts: tuple[Part, ...]) -> None:
        super().__init__(env)
        self.parts = parts
        size = sum(part.size for part in parts)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        return flatten_parts(self.parts, observation)


def read_observations(env: gym.Env) -> gym.Env:
    """`env` as the agent reads it: Dict observations flattened (`FlatDict`), others as they
    are. Every path that makes an env for an agent applies it."""
    space = env.observation_space
    if isinstance(space, gym.spaces.Dict):
        return FlatDict(env, dict_parts(str(env.spec.id if env.spec else "env"), space))
    return env


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
    actions as ACTION_KINDS lists them; observations as OBSERVATION_KINDS lists them. Text parts
    of a Dict are dropped with a notice."""
    actions = action_fields(env_id, action_space)
    if isinstance(obs_space, gym.spaces.Dict):
        parts = dict_parts(env_id, obs_space, notice=True)
        return Spaces((sum(part.size for part in parts),), "dict", parts=parts, **actions)
    if isinstance(obs_space, gym.spaces.Box) and is_maze_env(env_id):
        return Spaces(tuple(int(n) for n in obs_space.shape), "maze", **actions)
    kind, shape, states = _read_as(env_id, obs_space, SUPPORTED.format(size=MIN_SMALL_IMAGE_SIZE))
    return Spaces(shape, kind, states=states, **actions)


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


def require_registered(env_id: str) -> str:
    """`env_id`, once it is in gymnasium's registry (ALE's and MiniGrid's registered on first
    use), else one UserError: an id naming a module to import (`module:Env`, which `gym.make`
    would import) is refused, never made."""
    ensure_registered(env_id)
    if env_id not in gym.registry:
        if ":" in env_id:
            raise FieldError("unknown environment {!r}: {} (ids that name a module to import, "
                             "module:Env, are refused; register it in a module and pass "
                             "{gym_packages} MODULE)", env_id, registry_hint(env_id))
        raise UserError(f"unknown environment {env_id!r}: {registry_hint(env_id)}")
    return env_id


def env_spaces(
    env_id: str, env_kwargs: dict[str, Any] | None = None, wrappers: Sequence[str] = ()
) -> Spaces:
    """The `Spaces` of `gym.make(env_id, **env_kwargs)` in `wrappers` (module:Class, imported),
    checked for support (`classify`). Only ids in gymnasium's registry are made: an id naming a
    module to import (`module:Env`) is refused, so a config file never runs code (a user's own
    envs come from `--gym-packages`, their wrappers from `--env-wrapper`)."""
    require_registered(env_id)
    try:
        env = gym.make(wrapped_env_id(env_id, wrappers), **(env_kwargs or {}))
    except (gym.error.Error, TypeError) as err:
        raise UserError(f"cannot make environment {env_id!r}: {one_line(err)}") from None
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    return classify(env_id, obs_space, action_space)


def require_spaces(env_id: str, env_kwargs: dict[str, Any], wrappers: Sequence[str],
                   spaces: Spaces) -> None:
    """Refuse, in one line, an env whose spaces (`env_spaces`) are not `spaces` (a model's)."""
    found = env_spaces(env_id, env_kwargs, wrappers)
    fields = ("obs_shape", "num_actions", "states", "action_kind", "action_nvec", "parts")
    if any(getattr(found, f) != getattr(spaces, f) for f in fields):
        raise UserError(
            f"env {env_id!r} has observations {list(found.obs_shape)} and "
            f"{found.num_actions} actions; the model reads {list(spaces.obs_shape)} and "
            f"{spaces.num_actions}")


def recorded_spaces(spaces: Spaces) -> tuple[gym.Space, gym.Space]:
    """(observation space, action space) of one env rebuilt from a run's recorded `spaces`, for
    where its env cannot be made: a Box of the observation's shape as the agent reads it, and
    the action space itself."""
    observation = gym.spaces.Box(-np.inf, np.inf, spaces.obs_shape, np.float32)
    if spaces.action_kind == "discrete":
        return observation, gym.spaces.Discrete(spaces.num_actions)
    if spaces.action_kind == "multi_discrete":
        return observation, gym.spaces.MultiDiscrete(list(spaces.action_nvec))
    return observation, gym.spaces.Box(np.array(spaces.action_low, np.float32),
                                       np.array(spaces.action_high, np.float32))


#: Bounds on a stored observation shape: what any supported env gives, with room to spare.
MAX_STORED_AXES, MAX_STORED_SIZE = 3, 2**31


def spaces_to_json(spaces: Spaces) -> dict[str, Any]:
    """`spaces` as a run stores them (the weights' header): the observation and action spaces as
    the agent reads them, so that the policy is rebuilt without making the env. Discrete actions
    write only `num_actions` (as runs did before other action spaces existed); `parts` only for
    Dict observations."""
    data: dict[str, Any] = {"obs_shape": list(spaces.obs_shape), "kind": spaces.kind,
                            "num_actions": spaces.num_actions, "states": spaces.states}
    if spaces.action_kind != "discrete":
        data.update(action_kind=spaces.action_kind, action_nvec=list(spaces.action_nvec),
                    action_low=list(spaces.action_low), action_high=list(spaces.action_high))
    if spaces.parts:
        data["parts"] = [{"key": p.key, "kind": p.kind, "shape": list(p.shape),
                          "states": p.states} for p in spaces.parts]
    return data


def _count(value: Any, low: int) -> bool:
    return type(value) is int and low <= value < MAX_STORED_SIZE


def _shape(value: Any, source: str, what: str) -> tuple[int, ...]:
    if not (isinstance(value, list) and len(value) <= MAX_STORED_AXES
            and all(_count(n, 1) for n in value)):
        raise UserError(f"{source}: {what} must be up to {MAX_STORED_AXES} positive integers")
    return tuple(value)


def _part_from_json(data: Any, source: str) -> Part:
    fields = {"key", "kind", "shape", "states"}
    if not isinstance(data, dict) or set(data) != fields or not isinstance(data["key"], str):
        raise UserError(f"{source}: each of spaces.parts must be an object of "
                        f"{', '.join(sorted(fields))}")
    shape = _shape(data["shape"], source, "a part's shape")
    if data["kind"] not in PART_KINDS or not _count(data["states"], 0):
        raise UserError(f"{source}: a part's kind must be one of {', '.join(PART_KINDS)} and "
                        "its states >= 0")
    if (data["kind"] == "discrete") != (data["states"] > 0 and not shape):
        raise UserError(f"{source}: a part's states must be > 0 for discrete parts only")
    if data["kind"] not in ("flat", "discrete") and len(shape) != 3:
        raise UserError(f"{source}: an image part's shape must have 3 axes")
    return Part(data["key"], data["kind"], shape, data["states"])


def spaces_from_json(data: Any, source: str) -> Spaces:
    """The `Spaces` a run stored (`spaces_to_json`), every field checked; one UserError for
    anything else."""
    fields = {"obs_shape", "kind", "num_actions", "states"}
    action = {"action_kind", "action_nvec", "action_low", "action_high"}
    dict_kind = isinstance(data, dict) and data.get("kind") == "dict"
    parts_field = {"parts"} if dict_kind else set()
    if not isinstance(data, dict) or set(data) not in (fields | parts_field,
                                                       fields | action | parts_field):
        raise UserError(f"{source}: spaces must be an object of {', '.join(sorted(fields))} "
                        f"(and, for other than Discrete actions, {', '.join(sorted(action))}; "
                        "parts, for dict observations)")
    shape = _shape(data["obs_shape"], source, "spaces.obs_shape")
    if data["kind"] not in OBSERVATION_KINDS:
        raise UserError(f"{source}: spaces.kind must be one of {', '.join(OBSERVATION_KINDS)}")
    if not _count(data["num_actions"], 1) or not _count(data["states"], 0):
        raise UserError(f"{source}: spaces.num_actions must be >= 1 and spaces.states >= 0")
    if (data["kind"] == "discrete") != (data["states"] > 0 and not shape):
        raise UserError(f"{source}: spaces.states must be > 0 for discrete observations (shape "
                        "[]) only")
    actions = action_fields_from_json(data, source) if "action_kind" in data else {}
    parts: tuple[Part, ...] = ()
    if dict_kind:
        if not isinstance(data["parts"], list) or not data["parts"]:
            raise UserError(f"{source}: spaces.parts must be a list of parts")
        parts = tuple(_part_from_json(part, source) for part in data["parts"])
        if shape != (sum(part.size for part in parts),):
            raise UserError(f"{source}: spaces.obs_shape must be [the parts' total size]")
    return Spaces(shape, data["kind"], data["num_actions"], data["states"], parts=parts, **actions)


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
