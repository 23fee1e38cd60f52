"""An experiment's results files: its table and data written together (`write_files`), and
the one rule for what an earlier results file keeps (`kept`, `others`): its entries of cells
(or rows) that the records at hand do not bring, run elsewhere or by another invocation, so
that results gathered over several machines add up."""

from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any

from xlvin.io.files import atomic_write_text, prepare_results, read_json, write_json
from xlvin.errors import UserError, one_line
from xlvin.experiments.shapes import Each, check_entries
from xlvin.io.run_dir import reading_results

Entry = dict[str, Any]


def others(earlier: Iterable[Entry], fresh: Iterable[Entry],
           key: Callable[[Entry], Hashable]) -> list[Entry]:
    """The entries of `earlier` whose `key` no entry of `fresh` has, in their order."""
    mine = {key(r) for r in fresh}
    return [r for r in earlier if key(r) not in mine]


def kept(path: Path, section: str, fresh: Iterable[Entry], key: Callable[[Entry], Hashable],
         shape: Any, fix: Callable[[Entry], Entry] = dict) -> list[Entry]:
    """`others` of an earlier results file's `section` (each entry `fix`ed first: older
    spellings made current, then of `shape`: every field its report reads, `xlvin.experiments.
    shapes`) and `fresh`; [] without the file. A file that is not the JSON the code wrote is one
    UserError naming it (`reading_results`)."""
    if not path.is_file():
        return []
    with reading_results(path):
        entries = []
        for i, entry in enumerate(check_entries(read_json(path), section, Each(object))):
            try:
                entries.append(fix(entry))
            except UserError as err:  # an unknown name, say: named with its entry and file
                raise ValueError(f"{section}[{i}]: {one_line(err)}") from None
        return others(check_entries({section: entries}, section, shape), fresh, key)


def kept_records(path: Path, fresh: list[Entry], shape: Any,
                 setup: tuple[str, ...]) -> list[Entry]:
    """The records (section `runs`, each of `shape`) of an earlier results file at `path` whose
    (arm, seed) no `fresh` record has (`kept`), so that cells measured on several machines add
    up; each must have been measured as the fresh ones were (the same values of the fields
    `setup`), else one UserError naming the field: a results folder holds one setup."""
    earlier = kept(path, "runs", fresh, lambda r: (r["arm"], r["seed"]), shape)
    if fresh:
        check_setup(path, earlier, {field: fresh[0][field] for field in setup})
    return earlier


def check_setup(path: Path, records: list[Entry], setup: dict[str, Any]) -> None:
    """One UserError naming the first of `records` (kept from `path`) measured otherwise than
    `setup` ({field: value}) says: a results folder holds one setup."""
    for record in records:
        for field, value in setup.items():
            if record[field] != value:
                raise UserError(f"{path} holds {record['arm']} seed {record['seed']} measured "
                                f"with {field} {record[field]}, not {value} as now: give "
                                "--results a folder of its own, or the same options")


def write_files(results: Path, stem: str, markdown: str, data: dict[str, Any]) -> None:
    """RESULTS/STEM.md (`markdown` as it is) and RESULTS/STEM.json (`data`), each written whole
    (a killed writer leaves the earlier file), in a results folder made if missing. `stem` may
    hold dots (kl-0.01): the suffixes are appended."""
    prepare_results(results)
    atomic_write_text(results / f"{stem}.md", markdown)
    write_json(results / f"{stem}.json", data)
