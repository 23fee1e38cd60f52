"""The package's layers: no module imports from a layer above its own, and module-level imports
have no cycle.

The layers, lowest first (a module may import its own layer and those below):

  base         errors, config, stats, kernels, checked file reads and writes, progress bars: no
               model, no env
  envs         environments added to gymnasium's registry, the user's env modules, an env's
               spaces (how its observations are read) and its state (exact resume)
  mdp          MDPs and value iteration (the executor's training data)
  nn           the model, plain PyTorch, and the losses on its outputs (TransE, PPO)
  io           files: weights, executors, checkpoints, run directories
  accel        fast paths of nn and of the loss; ppo calls them, they never call ppo
  process      threads, seeds, signals, warnings of a training process
  pretrain     executor and TransE pre-training, their data and the shipped files
  ppo          the algorithm: storage, collection, the update, evaluation, the loop, protocols
  run          one run: its config and checks, the agent registry, training a run directory
  api          the Python API (XLVIN, PPO, ATreeC) and its callbacks, over run
  experiments  one module per paper experiment, over run
  commands     the `xlvin` command, over the API and the experiments
  package      xlvin/__init__.py: the lazy facade of the public names
"""

import ast
from pathlib import Path

import xlvin

SRC = Path(xlvin.__file__).parent
LAYERS = (
    # xlvin.io.files (checked reads, whole writes) needs only xlvin.errors, and config reads with it
    # xlvin.progress (the progress bars of training, pre-training and collection) needs only tqdm
    # xlvin.wording (how every comparison on our pages is worded) reads only xlvin.stats
    ("base", ("xlvin.errors", "xlvin.config", "xlvin.stats", "xlvin.wording", "xlvin.kernels",
              "xlvin.io.files", "xlvin.progress")),
    ("envs", ("xlvin.envs",)),
    ("mdp", ("xlvin.mdp",)),
    ("nn", ("xlvin.nn",)),
    ("io", ("xlvin.io",)),
    ("accel", ("xlvin.accel",)),
    ("process", ("xlvin.process", "xlvin.signals")),
    ("pretrain", ("xlvin.pretrain",)),
    ("ppo", ("xlvin.ppo",)),
    ("run", ("xlvin.run",)),
    ("api", ("xlvin.api", "xlvin.api_options", "xlvin.api_policy", "xlvin.api_runs",
             "xlvin.api_evaluation", "xlvin.callbacks")),
    ("experiments", ("xlvin.experiments",)),
    ("commands", ("xlvin.commands", "xlvin.cli")),
    ("package", ("xlvin",)),
)


def layer(module: str) -> int:
    """The index in LAYERS of the longest prefix naming `module`."""
    matches = [(len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The xlvin modules `path` imports (anywhere in it, or at module level only)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "xlvin"}
        elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
              and node.module.split(".")[0] == "xlvin"):
            found.add(node.module)
    return found


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def test_every_module_imports_only_its_own_layer_or_those_below() -> None:
    upward = [
        f"{name} ({LAYERS[layer(name)][0]}) imports {target} ({LAYERS[layer(target)][0]})"
        for name, path in MODULES.items() for target in sorted(imports(path))
        if layer(target) > layer(name)
    ]
    assert upward == []


def test_the_accelerators_sit_between_the_model_and_the_trainer() -> None:
    accel = {t for n, p in MODULES.items() if n.startswith("xlvin.accel") for t in imports(p)}
    assert not any(t.startswith(("xlvin.ppo", "xlvin.run")) for t in accel)
    assert any(t.startswith("xlvin.nn") for t in accel)
    assert "xlvin.nn.ppo_loss" in imports(MODULES["xlvin.accel.fused_ppo_loss"])


def test_module_level_imports_have_no_cycle() -> None:
    graph = {n: {t for t in imports(p, top_level_only=True) if t in MODULES}
             for n, p in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def test_every_benchmark_script_and_example_compiles() -> None:
    """Code outside the package that no test imports (the benchmark workers, the scripts, the
    examples) still parses: a broken indent in benchmarks/suite/worker.py once went unnoticed."""
    root = SRC.parents[1]
    files = [p for d in ("benchmarks", "scripts", "examples") for p in (root / d).rglob("*.py")]
    assert len(files) > 20
    for path in files:
        compile(path.read_text(), str(path), "exec")
