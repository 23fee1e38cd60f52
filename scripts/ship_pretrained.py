"""Copy the pre-trained files the defaults use from a cache into the package
(src/xlvin/pretrain/data) and write their manifest.

Run it in reproducible mode, on a cache made in it (`xlvin quickstart`, `xlvin reproduce ...`,
or `xlvin pretrain-executor --verify`'s commands):

    env $(python -m xlvin.kernels) python scripts/ship_pretrained.py [--cache DIR ...]

Each file is checked before it is copied: its name's hash is its config's, and its metadata
holds that config. A file missing from the cache is named and left out.
"""

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from xlvin.config import to_dict
from xlvin.io.executor_file import read_executor_meta
from xlvin.io.weights import read_metadata
from xlvin.kernels import pinned
from xlvin.pretrain import shipped
from xlvin.pretrain.executor import (
    DEFAULT_EXECUTORS,
    ExecutorConfig,
    executor_command,
    executor_key,
)
from xlvin.pretrain.files import cached_executor_path, shared_transe_path
from xlvin.run.transe import transe_key
from xlvin.run.checks import check_run

#: The executors shipped: every default executor, and CartPole's in the authors' variant
#: (LayerNorm, linear messages: `xlvin reproduce classic --protocol paper`'s XLVIN-CP).
EXECUTORS = {
    **DEFAULT_EXECUTORS,
    "cartpole (LayerNorm, linear messages)": dataclasses.replace(
        DEFAULT_EXECUTORS["cartpole"], layer_norm=True, messages="linear"),
}
#: The shared TransE pre-trainings shipped: `xlvin reproduce classic --protocol paper`'s
#: (CartPole-v0's is the quickstart's).
TRANSE_ENVS = ("CartPole-v0", "Acrobot-v1", "MountainCar-v0")


def _entry(kind: str, name: str, key: dict[str, Any], source: Path, command: str,
           **more: Any) -> dict[str, Any]:
    digest = shipped.config_hash(key, reproducible=True)
    if not source.name.endswith(f"-{digest}.safetensors"):
        raise SystemExit(f"{source}: its name does not carry its config's hash {digest}")
    return {"file": source.name, "kind": kind, "name": name, "config": key,
            "config_hash": digest, "tensors_sha256": shipped.tensors_sha256(source),
            "kernels": "reproducible", "command": command, **more}


def _first(caches: list[Path], relative: Path) -> Path:
    """`relative` in the first cache that has it (in the last if none has)."""
    return next((c / relative for c in caches if (c / relative).exists()), caches[-1] / relative)


def executor_entry(name: str, cfg: ExecutorConfig, caches: list[Path]) -> tuple[dict, Path] | None:
    source = _first(caches, Path("executors") / cached_executor_path(cfg, Path()).name)
    if not source.exists():
        print(f"missing executor {name!r}: {source.name}")
        return None
    meta = read_executor_meta(source)
    if any(meta.get(field) != value for field, value in to_dict(cfg).items()):
        raise SystemExit(f"{source}: its metadata does not hold the config of {name!r}")
    accelerate = meta.get("training", {}).get("accelerated", False)
    return _entry("executor", name, executor_key(cfg), source,
                  executor_command(cfg, source.name, accelerate), accelerate=accelerate), source


def transe_entry(env: str, caches: list[Path]) -> tuple[dict, Path] | None:
    from xlvin.commands.transe import paper_run

    cfg = paper_run(env)
    key = transe_key(cfg, *check_run(cfg))
    source = _first(caches, Path("transe") / shared_transe_path(key, env).name)
    if not source.exists():
        print(f"missing TransE {env!r}: {source.name}")
        return None
    stored = read_metadata(source, "TransE weights")["key"]
    if stored != {**key, "kernels": "reproducible"}:
        raise SystemExit(f"{source}: its metadata does not hold the key of {env!r}")
    return _entry("TransE", f"{env} (paper protocol)", key, source,
                  f"xlvin pretrain-transe {env} --out {source.name}", run=cfg.to_json()), source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, action="append",
                        help="a cache folder, searched in the order given (repeatable; "
                        "default: ~/.cache/xlvin)")
    args = parser.parse_args()
    caches = args.cache or [Path.home() / ".cache" / "xlvin"]
    if not pinned():
        raise SystemExit("run in reproducible mode: env $(python -m xlvin.kernels) python ...")
    found = [e for e in (*(executor_entry(n, c, caches) for n, c in EXECUTORS.items()),
                         *(transe_entry(env, caches) for env in TRANSE_ENVS)) if e]
    shipped.DATA.mkdir(exist_ok=True)
    for old in shipped.DATA.glob("*.safetensors"):
        old.unlink()
    for entry, source in found:
        shutil.copyfile(source, shipped.DATA / entry["file"])
        print(f"shipped {entry['kind']} {entry['name']!r}: {entry['file']}")
    manifest = {"format": shipped.FORMAT, "files": [entry for entry, _ in found]}
    (shipped.DATA / shipped.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
