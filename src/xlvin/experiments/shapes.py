"""The shape of what an earlier results file keeps: every field a report reads of a kept row or
record, with its type (and, for a name, the values the report knows), checked when the file is
read (`check_entries`: `Experiment.read_earlier`, before any cell trains or any file is
written). A results file the code did not write, or wrote for another experiment, is then one
ValueError naming the entry and field, which `xlvin.io.run_dir.reading_results` makes one
UserError, not a KeyError after other files were rewritten.

A shape is a type (`float`: any number, NaN and infinities included, as `json` writes them;
`int`, `str`, `bool`: exactly that; `object`: anything), a `OneOf` of values, a list of one
shape (every item), a tuple of shapes (a list of that length), a dict of field -> shape (an
object holding at least those fields; more are kept), `Each(shape)` (an object whose every value
has it), `Nullable(shape)` (the field may be null), `Optional(shape)` (the field may be missing;
present, it has the shape, so null only where that is `Nullable`), or `Holds(shape, check)`: the shape, then `check(value)`, which raises a ValueError
saying what is wrong (what one entry's fields must say together)."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from xlvin.errors import UserError, one_line

#: The most entries a section of a results file may hold: more than any experiment writes
#: (Table 1 over 2 protocols, 3 envs, every agent and variant, 1,000 seeds, is 10^5).
MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class OneOf:
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Each:
    shape: Any


@dataclass(frozen=True)
class Nullable:
    shape: Any


@dataclass(frozen=True)
class Optional:
    shape: Any


@dataclass(frozen=True)
class Holds:
    shape: Any
    check: Callable[[Any], None]


def one_of(values: Iterable[Any]) -> OneOf:
    return OneOf(tuple(values))


def _in_order(low: str, middle: str, high: str) -> Callable[[dict[str, Any]], None]:
    """A check that `low <= middle <= high` (where none is NaN: a statistic of no seeds), as
    every interval the code writes holds; a plot's error bars are drawn from them."""
    def check_order(value: dict[str, Any]) -> None:
        numbers = [value[low], value[middle], value[high]]
        if all(n == n for n in numbers) and not numbers[0] <= numbers[1] <= numbers[2]:
            raise ValueError(f"{middle} {numbers[1]!r} is not between {low} {numbers[0]!r} "
                             f"and {high} {numbers[2]!r}")
    return check_order


def interval(more: dict[str, Any] | None = None) -> Holds:
    """An IQM with its 95 % interval (`xlvin.stats.summarize`), in order, and `more` fields."""
    return Holds({"iqm": float, "iqm_low": float, "iqm_high": float, **(more or {})},
                 _in_order("iqm_low", "iqm", "iqm_high"))


INTERVAL = interval()
#: P(X > Y) with its interval (`xlvin.stats.improvement_over`), in order.
IMPROVEMENT = Holds({"p": float, "low": float, "high": float}, _in_order("low", "p", "high"))


def check_entries(data: Any, section: str, shape: Any) -> list[Any]:
    """The list `data[section]`, each entry of `shape` (at most MAX_ENTRIES of them); anything
    else is one ValueError naming the entry and its field."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {_kind(data)}")
    entries = data.get(section)
    if not isinstance(entries, list):
        raise ValueError(f"{section}: expected a list, got {_kind(entries)}")
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"{section}: {len(entries):,} entries, more than any results file "
                         f"holds (at most {MAX_ENTRIES:,})")
    for i, entry in enumerate(entries):
        check(entry, shape, f"{section}[{i}]")
    return entries


def check(value: Any, shape: Any, where: str) -> None:
    """Refuse `value` unless it has `shape` (module docstring): one ValueError naming `where`."""
    if isinstance(shape, Holds):
        check(value, shape.shape, where)
        try:
            shape.check(value)
        except (KeyError, TypeError, IndexError, ValueError, ZeroDivisionError, UserError) as err:
            raise ValueError(f"{where}: {one_line(err)}") from None
    elif isinstance(shape, Nullable):
        if value is not None:
            check(value, shape.shape, where)
    elif isinstance(shape, Optional):  # present (the object allows it missing): its shape
        check(value, shape.shape, where)
    elif isinstance(shape, OneOf):
        if not any(value == v and type(value) is type(v) for v in shape.values):
            known = ", ".join(map(repr, shape.values))
            raise ValueError(f"{where}: {_said(value)} is none of {known}")
    elif isinstance(shape, Each):
        _expect(value, dict, "an object", where)
        for name, item in value.items():
            check(item, shape.shape, f"{where}.{name}")
    elif isinstance(shape, dict):
        _expect(value, dict, "an object", where)
        for name, field in shape.items():
            if name in value:
                check(value[name], field, f"{where}.{name}")
            elif not isinstance(field, Optional):
                raise ValueError(f"{where}: no field {name!r}")
    elif isinstance(shape, list):
        _expect(value, list, "a list", where)
        for i, item in enumerate(value):
            check(item, shape[0], f"{where}[{i}]")
    elif isinstance(shape, tuple):
        _expect(value, list, f"a list of {len(shape)}", where)
        if len(value) != len(shape):
            raise ValueError(f"{where}: expected a list of {len(shape)}, got {len(value)} items")
        for i, (item, field) in enumerate(zip(value, shape)):
            check(item, field, f"{where}[{i}]")
    elif shape is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, got {_kind(value)}")
    elif shape is not object:
        if isinstance(value, bool) is not (shape is bool) or not isinstance(value, shape):
            raise ValueError(f"{where}: expected {shape.__name__}, got {_kind(value)}")


def _expect(value: Any, kind: type, said: str, where: str) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"{where}: expected {said}, got {_kind(value)}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _said(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
