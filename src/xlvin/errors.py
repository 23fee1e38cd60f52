"""Errors a user can cause: the CLI prints them as one line on stderr and exits non-zero."""

import string
from collections.abc import Mapping, Sequence
from typing import Any

#: The longest reason `one_line` keeps.
REASON_LIMIT = 300


class UserError(Exception):
    """Bad input (unknown id, bad value, missing or corrupt file). Message is one line."""


class FieldError(UserError):
    """A refusal naming config fields, said in its reader's terms: a field is its flag on the
    command line (`--total-steps`) and its keyword in Python (`total_steps`).

    `template` is a format string whose named fields are config fields by their names: `{seed}`
    is the name alone, `{depth=}` the name and its value (the keyword argument `depth`), said
    `--depth 9` and `depth=9` (a value that is a word stays apart in Python as on the command
    line: `agent vin`); its positional fields are the other values, as in `str.format`. The
    message is the command line's; `in_python()` is the same error in the API's terms. `field`
    is the first field the message names (None if it names none: a memory bound's parts may
    not)."""

    def __init__(self, template: str, *values: Any, **fields: Any) -> None:
        self.template, self.values, self.fields = template, values, fields
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
        self.field = next((name.rstrip("=") for name in names if not name.isdigit()), None)
        super().__init__(_Terms(python=False).format(template, *values, **fields))

    def in_python(self) -> "FieldError":
        """This error said in the API's terms; `command_line_message` keeps the command line's."""
        said = FieldError(self.template, *self.values, **self.fields)
        said.args = (_Terms(python=True).format(self.template, *self.values, **self.fields),)
        said.command_line_message = str(self)
        return said

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as made (a worker process's error reaches its parent), with its message."""
        return _rebuilt, (self.template, self.values, self.fields, self.__dict__, self.args)


def _rebuilt(template: str, values: tuple[Any, ...], fields: dict[str, Any],
             state: dict[str, Any], args: tuple[Any, ...]) -> FieldError:
    err = FieldError(template, *values, **fields)
    err.__dict__.update(state)
    err.args = args
    return err


#: Fields whose flag is not their name with dashes: lists given once per item (`--env-wrapper`).
FLAGS = {"env_wrappers": "env-wrapper"}
#: What a value starts with that the API joins to its keyword with `=` (numbers, quoted
#: strings, paths: `total_steps=9`); a word stays apart (`agent vin`).
JOINED = frozenset("0123456789'\"/.~-")


class _Terms(string.Formatter):
    """`FieldError`'s template formatted with its fields as flags, or (`python`) keywords."""

    def __init__(self, python: bool) -> None:
        self.python = python

    def get_value(self, key: int | str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, int):
            return args[key]
        name = key.rstrip("=")
        return _Field(name, kwargs[name]) if key.endswith("=") else _Field(name)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if isinstance(value, _Field) and value.has_value:
            return _Field(value.name, super().convert_field(value.value, conversion))
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        if not isinstance(value, _Field):
            return super().format_field(value, format_spec)
        flag = "--" + FLAGS.get(value.name, value.name.replace("_", "-"))
        name = value.name if self.python else flag
        if not value.has_value:
            return name
        said = super().format_field(value.value, format_spec)
        return f"{name}={said}" if self.python and said[:1] in JOINED else f"{name} {said}"


class _Field:
    """A field named in a template, with its value where it is said with one."""

    def __init__(self, name: str, *value: Any) -> None:
        self.name, self.has_value = name, bool(value)
        self.value = value[0] if value else None


class TrainingDiverged(UserError):
    """A loss became NaN or infinite (PPO's, TransE's): training stops before the weights are
    touched."""


def one_line(err: BaseException, limit: int = REASON_LIMIT) -> str:
    """An exception's message as one line: every line of it joined (so a reason on the second
    line is kept), whitespace collapsed, cut at `limit` characters; its type name if empty."""
    text = " ".join(str(err).split())
    if not text:
        return type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
