"""Many seeds of one configuration trained in one process (`xlvin train --seeds 0-63`): seed s
writes OUT/seed-s, the run directory `xlvin train --seed s --out OUT/seed-s` writes, with the
same metrics and weights bit for bit on the same machine.

Each seed is a run of `xlvin.run.training.run_steps` (its own envs, weights, optimiser and
random streams, its own checkpoint and log); their trainers train in step
(`xlvin.ppo.loop.train_together`), their networks as one stacked network
(`xlvin.ppo.population`): the PPO baseline and XLVIN, online or low-data. Everything is
checked before any directory is created: the seeds, the configuration (`population_refusal`:
what the population's kernels compute), every seed's directory and the memory of all seeds
together.
"""

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from xlvin.accel.population import unsupported
from xlvin.accel.proof import flat_adam_proven
from xlvin.envs.given import given_env
from xlvin.errors import FieldError, TrainingDiverged
from xlvin.io.run_dir import check_new_run_dir
from xlvin.ppo.loop import Trainer, train_together
from xlvin.ppo.population import Population
from xlvin.nn.executor import MessagePassing
from xlvin.run.agents import Architecture, agent_name, agent_spec, build_agent
from xlvin.run.architecture import machine_memory
from xlvin.run.checks import check_run, memory_parts
from xlvin.run.config import MAX_SEED, RunConfig
from xlvin.run.protocols import protocol_of
from xlvin.run.saved import open_to_resume
from xlvin.run.training import RunSteps, finish_run, run_steps
from xlvin.run.transe import with_transe_pretraining
from xlvin.envs.spaces import Spaces


#: The most seeds one population trains (memory bounds it first for any but the smallest nets).
MAX_SEEDS = 10_000


def parse_seeds(text: str) -> list[int]:
    """Seeds written as `0-63`, `0,5,9` or both (`0-9,20-29`), in the order written; one
    UserError for anything else (`check_seeds`)."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise FieldError("{seeds} takes seeds as 0-63, 0,5,9 or both (0-9,20-29), got {!r}",
                             text, seeds=text)
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first or last > MAX_SEED:
            raise FieldError("{seeds} {}: a range goes up, to at most {:,}", part.strip(),
                             MAX_SEED, seeds=text)
        if len(seeds) + last - first >= MAX_SEEDS:
            raise FieldError("{seeds} names more than {:,} seeds", MAX_SEEDS, seeds=text)
        seeds.extend(range(first, last + 1))
    check_seeds(seeds)
    return seeds


def check_seeds(seeds: list[int]) -> None:
    """Refuse no seed, a seed out of [0, MAX_SEED] or a seed given twice."""
    if not 0 < len(seeds) <= MAX_SEEDS:
        raise FieldError("{seeds} names {:,} seeds; from 1 to {:,} train together", len(seeds),
                         MAX_SEEDS, seeds=None)
    if min(seeds) < 0 or max(seeds) > MAX_SEED:
        raise FieldError("{seeds}: a training seed is in [0, {:,}]", MAX_SEED, seeds=None)
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise FieldError("{seeds} names seed {} twice", twice[0], seeds=None)


def seed_dir(out: Path, seed: int) -> Path:
    """Seed `seed`'s run directory under a population's `out`."""
    return Path(out) / f"seed-{seed}"


def population_refusal(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> str | None:
    """Why seeds of `cfg` cannot train as a population, or None."""
    t = cfg.train
    if not protocol_of(cfg).population:
        return f"protocol {t.protocol} (registered with population=False)"
    if t.agent not in ("ppo", "xlvin"):
        return (f"agent {agent_name(t.agent, t.executor)} (a population trains the PPO baseline "
                "and XLVIN)")
    if t.device != "cpu" or not cfg.ppo.accelerate:
        return "a device other than the CPU, or accelerate off (its kernels are the CPU's)"
    if not flat_adam_proven(cfg.ppo.lr, cfg.ppo.adam_eps, cfg.ppo.max_grad_norm):
        return "Adam as written (the flat Adam its stacked step needs differed from it here)"
    given = given_env(t.env)
    if given is not None and given.instance is not None:
        return "an env instance passed from Python (each seed's run would lend it)"
    # the network's kind decides, not its executor's weights: a stand-in processor of its width
    processor = MessagePassing(arch.embedding_dim) if agent_spec(t.agent).executor else None
    return unsupported(build_agent(arch, spaces, processor))


def check_population(cfg: RunConfig, seeds: list[int], dirs: dict[int, Path],
                     resume: bool) -> None:
    """Everything `train_population` checks before it creates anything (module docstring)."""
    check_seeds(seeds)
    spaces, arch = check_run(cfg)
    reason = population_refusal(cfg, spaces, arch)
    if reason is not None:
        raise FieldError("{seeds} trains together runs of the PPO baseline and XLVIN on the "
                         "CPU, not {}; train the seeds one by one ({seed})", reason, seeds=None,
                         seed=None)
    need = len(seeds) * sum(size for _, size in memory_parts(cfg, spaces, arch))
    total = machine_memory()
    if need > total:
        raise FieldError("{} seeds need about {}; this machine has {}: fewer {seeds}",
                         len(seeds), _size(need), _size(total), seeds=None)
    for seed in seeds:
        path = dirs[seed]
        if resume:  # the config as `run_steps` resolves it and writes it
            open_to_resume(path, with_transe_pretraining(with_seed(cfg, seed), spaces))
        else:
            check_new_run_dir(path)


def _size(size: int) -> str:
    """Bytes as GiB, or MiB under 1 GiB."""
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.0f} MiB"


def with_seed(cfg: RunConfig, seed: int) -> RunConfig:
    """`cfg` with `seed` as its training seed."""
    return replace(cfg, train=replace(cfg.train, seed=seed))


def train_population(
    cfg: RunConfig, seeds: list[int], out: Path | None, progress: bool = True,
    resume: bool = False, deadline: float | None = None, dirs: dict[int, Path] | None = None,
) -> list[dict[str, Any]]:
    """Train seed s of `cfg` (its `train.seed` replaced) into OUT/seed-s (or `dirs[s]`: an
    experiment's cells) for every s in `seeds`, all in step in this process; return their
    summaries. `resume`, `deadline`: as `xlvin.run.training.train_run`'s, for every seed. One
    progress bar counts every seed's updates."""
    dirs = dirs or {seed: seed_dir(out, seed) for seed in seeds}
    check_population(cfg, seeds, dirs, resume)
    runs: list[RunSteps] = []
    trainers: list[Trainer] = []
    try:
        for seed in seeds:
            runs.append(run_steps(with_seed(cfg, seed), dirs[seed], progress=False,
                                  resume=resume, deadline=deadline, pretrain_progress=progress))
            trainers.append(next(runs[-1]))
        population = Population([t.policy for t in trainers], [t.optimizer for t in trainers],
                                [f"seed {seed}" for seed in seeds])
        results = train_together(trainers, population, progress=progress)
    except BaseException as err:
        for run in runs:  # each closes its log and its directory, as a run of its own does
            try:
                run.throw(err)
            except BaseException:
                pass
        if isinstance(err, TrainingDiverged):  # one seed's: it names the seed
            raise TrainingDiverged(f"{err}; every seed stopped at its last checkpoint, in its "
                                   "own run directory") from None
        raise
    return [finish_run(run, result)[1] for run, result in zip(runs, results)]
