"""Typed dataclass configs and the argparse options generated from them.

Every config field is declared with `option(default, "help text")`; `add_options` turns the fields
into `--kebab-case` flags whose `--help` text is that help, and `from_args` builds the config back.
"""

import argparse
import dataclasses
import difflib
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from xlvin.errors import UserError, one_line
from xlvin.io.files import read_json

C = TypeVar("C")


def option(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    """A dataclass field with a help text (shown by --help) and optional allowed values."""
    return dataclasses.field(default=default, metadata=described(help, choices))


def described(
    help: str, choices: tuple[Any, ...] | None = None, repeated: str | None = None
) -> dict[str, Any]:
    """The metadata of a config field: its help text and allowed values. A `list[str]` or
    `dict[str, Any]` field is `field(default_factory=list, metadata=described(...))`; `repeated`
    gives a `list[str]` field the flag `--{repeated} X`, given once per item (--env-wrapper a:A
    --env-wrapper b:B), in place of `--field X Y`."""
    return {"help": help, "choices": choices, "repeated": repeated}


def _base_type(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0]
    return tp


def parse_bool(text: str) -> bool:
    """An argparse type: true/false, yes/no, on/off, 1/0 (any case)."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_key_value(text: str) -> tuple[str, Any]:
    """`key=value` (the RL Zoo's --env-kwargs): the value as JSON (8, 0.5, true, null, [1, 2],
    "text") when it parses as JSON, else as plain text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def add_options(
    parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = (), prefix: str = "",
    first: tuple[argparse._ArgumentGroup, tuple[str, ...]] | None = None,
) -> None:
    """Add one `--{prefix}flag` per field of dataclass `cls` (defaults left as None: unset), in
    a group of its own; `first`: a group, listed earlier in the help, and the fields it takes."""
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(f"{cls.__name__} options")
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp = _base_type(hints[f.name])
        kwargs: dict[str, Any] = {
            "dest": prefix.replace("-", "_") + f.name,
            "default": None,
            "help": f"{f.metadata.get('help', '')} (default: {_default(f)})",
        }
        if f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        flag = f.name.replace("_", "-")
        if f.metadata.get("repeated"):  # --flag A --flag B
            flag = f.metadata["repeated"]
            kwargs.update(action="append", type=str, metavar="MODULE:CLASS")
        elif typing.get_origin(tp) is list:  # --flag A B C
            kwargs.update(nargs="+", type=str, metavar="NAME")
        elif typing.get_origin(tp) is dict:  # --flag key=value key=value
            kwargs.update(nargs="+", type=parse_key_value, metavar="KEY=VALUE")
        else:
            kwargs["type"] = parse_bool if tp is bool else tp
            kwargs["metavar"] = tp.__name__.upper() if not f.metadata.get("choices") else None
        into = first[0] if first is not None and f.name in first[1] else group
        into.add_argument("--" + prefix + flag, **kwargs)


def from_args(
    cls: type[C], args: argparse.Namespace, base: C | None = None, prefix: str = ""
) -> C:
    """Build `cls` from parsed args: flags that were given override `base` (or the defaults)."""
    config = base if base is not None else cls()
    dest = prefix.replace("-", "_")
    given = {
        f.name: getattr(args, dest + f.name)
        for f in dataclasses.fields(cls)
        if getattr(args, dest + f.name, None) is not None
    }
    hints = typing.get_type_hints(cls)
    for name, value in given.items():
        _check_finite(value, f"--{prefix}{name.replace('_', '-')}")
        if typing.get_origin(_base_type(hints[name])) is dict:
            given[name] = dict(value)  # the (key, value) pairs of `parse_key_value`
    return dataclasses.replace(config, **given)


def _check_finite(value: Any, name: str) -> None:
    """Refuse NaN and infinite floats: no setting of a config means anything with them."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{name} must be a finite number, got {value}")


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def from_dict(cls: type[C], data: Any, source: str = "config") -> C:
    """Build `cls` from a dict, rejecting anything but a dict, unknown fields, values of the wrong
    type, values outside a field's choices and non-finite floats; the config's own checks
    (`__post_init__`) run too. Every refusal is one UserError."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: the {cls.__name__} section must be an object, got "
                        f"{type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise UserError(f"{source}: unknown field(s) {names(unknown)} for {cls.__name__}")
    values = {key: _field_value(value, hints[key], fields[key], source)
              for key, value in data.items()}
    return cls(**values)


def names(keys: list[str]) -> str:
    """Keys of a JSON object for a one-line message: joined, control characters escaped."""
    return ", ".join(key.encode("unicode_escape").decode("ascii") for key in keys)


def _field_value(value: Any, hint: Any, field: dataclasses.Field, source: str) -> Any:
    """One field's value from JSON, checked against its type, choices and finiteness."""
    tp = _base_type(hint)
    if value is None and hint is not tp:
        return None
    if typing.get_origin(tp) in (list, dict):
        return _container_value(value, tp, field, source)
    ok = isinstance(value, tp) and not (tp is not bool and isinstance(value, bool))
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            value, ok = float(value), True
        except OverflowError:
            raise UserError(f"{source}: field {field.name!r} is too large") from None
    if not ok:
        raise UserError(
            f"{source}: field {field.name!r} must be {tp.__name__}, got {type(value).__name__}"
        )
    _check_finite(value, f"{source}: field {field.name!r}")
    choices = field.metadata.get("choices")
    if choices and value not in choices:
        raise UserError(f"{source}: field {field.name!r} must be one of {', '.join(choices)}, "
                        f"got {value!r}")
    return value


def _container_value(value: Any, tp: Any, field: dataclasses.Field, source: str) -> Any:
    """A `list[str]` field's list of strings, or a `dict[str, Any]` field's object of JSON
    values (finite numbers only)."""
    kind = typing.get_origin(tp)
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise UserError(f"{source}: field {field.name!r} must be a list of strings")
        return list(value)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UserError(f"{source}: field {field.name!r} must be an object with string keys")
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise UserError(f"{source}: field {field.name!r} must hold JSON values (numbers, strings, "
                        f"true/false, null, lists, objects): {one_line(err)}") from None
    return json.loads(text)  # plain JSON types (tuples as lists), as config.json reads back


#: The largest JSON file a user may hand over (a config is a few kB): more is refused unread.
MAX_JSON_BYTES = 1 << 20


def load_json(path: Path) -> dict[str, Any]:
    """Read a JSON object from `path`, with one clear error for a missing, corrupt or oversized
    file (at most MAX_JSON_BYTES are read: /dev/zero is refused, not loaded)."""
    try:
        data = read_json(path, MAX_JSON_BYTES, links=True)
    except ValueError as err:  # bad JSON, bad UTF-8, huge ints, deep nesting
        raise UserError(f"corrupt JSON in {path}: {one_line(err, limit=120)}") from None
    if not isinstance(data, dict):
        raise UserError(f"corrupt JSON in {path}: expected an object")
    return data


def _folded(name: str) -> str:
    """A name compared ignoring case and `_` against `-` (XLVIN-R, xlvin_r and xlvin-r agree)."""
    return name.casefold().replace("_", "-")


def close_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to `word` (difflib's ratio of at least 0.6, compared ignoring case
    and `_` against `-`), or None: the did-you-mean of every unknown name the user types (options,
    agents, environments, games)."""
    by_folded: dict[str, str] = {}
    for name in candidates:
        by_folded.setdefault(_folded(name), name)
    close = difflib.get_close_matches(_folded(word), list(by_folded), n=1, cutoff=0.6)
    return by_folded[close[0]] if close else None


def choice(
    text: str, allowed: Sequence[str], what: str, aliases: Mapping[str, str] | None = None,
    more: str = "",
) -> str:
    """`text` as one of `allowed`: itself, the name its alias stands for (`aliases`: alias ->
    one of `allowed`; those naming something else are ignored), or the one name or alias it
    spells otherwise (case, `_` for `-`). Anything else is one UserError naming the closest
    name (did you mean) and the choices (`what`: what a name is; `more`: said after them)."""
    aliases = {a: name for a, name in (aliases or {}).items() if name in allowed}
    if text in allowed:
        return text
    if text in aliases:
        return aliases[text]
    spelled = {aliases.get(name, name) for name in (*allowed, *aliases)
               if _folded(name) == _folded(text)}
    if len(spelled) == 1:
        return spelled.pop()
    guess = close_match(text, (*allowed, *aliases))
    hint = f"; did you mean {aliases.get(guess, guess)}?" if guess else ""
    raise UserError(f"unknown {what} {text!r}{hint} (choose from {', '.join(allowed)}{more})")


def csv_choices(
    text: str, allowed: Sequence[str], what: str, aliases: Mapping[str, str] | None = None
) -> list[str]:
    """The items of a comma-separated option, each resolved by `choice` (an alias or another
    spelling of a name becomes the name); one UserError for an unknown item, an empty list or a
    name given twice."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise UserError(f"unknown {what} {text!r}; choose from {', '.join(allowed)}")
    items = [choice(x, allowed, what, aliases) for x in items]
    repeated = sorted({x for x in items if items.count(x) > 1})
    if repeated:  # one cell would count twice, and could run twice at once
        raise UserError(f"{what} {', '.join(repeated)} given more than once in {text!r}")
    return items
