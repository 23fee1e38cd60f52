"""The algorithm's configs, torch-free (the command line's parser lists their fields without
importing torch): PPO's hyperparameters (`xlvin.ppo.update`), the progress evaluations during
training (`xlvin.ppo.loop`), the paper's low-data protocol (`xlvin.ppo.low_data`) and the
continual maze (`xlvin.ppo.curriculum`). What their methods run is imported when they run: the
maze data (`xlvin.envs`, which imports gymnasium to register its envs)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlvin.config import option
from xlvin.errors import UserError

if TYPE_CHECKING:
    from xlvin.envs.maze_data import MazeSet

#: The most parallel envs a run may have: a checkpoint's JSON header holds every env's state, and
#: safetensors refuses headers over 100 MB.
MAX_ENVS = 1024
#: The most CPU threads a run may ask for: far more than any machine's cores, and few enough to
#: start (100,000 crash torch's thread pool).
MAX_THREADS = 1024


@dataclass
class Evaluation:
    """Greedy evaluations of the policy during training (the progress curve): `points` of them,
    evenly over the updates (as many as there are updates: after every update), `episodes`
    fresh episodes each (seeds from `xlvin.ppo.loop.PROGRESS_EVAL_SEED`). They are not training
    data and count in no budget; `xlvin.ppo.loop` runs them."""

    points: int = 0
    episodes: int = 10

    def due(self, update: int, total: int) -> bool:
        """After update number `update` (1-based) of `total`?"""
        return any(round(total * (i + 1) / self.points) == update for i in range(self.points))


@dataclass
class PPOConfig:
    """PPO hyperparameters (defaults: CleanRL / ikostrikov's PPO, clip 0.2 as in the authors'
    classic-control runs)."""

    num_envs: int = option(4, "parallel environments (sync vector env)")
    num_steps: int = option(128, "steps per env per rollout")
    total_steps: int = option(
        500_000, "total env steps of online training (all envs); a new run rounds it up to whole "
        "rollouts of num_envs x num_steps"
    )
    lr: float = option(2.5e-4, "Adam learning rate")
    adam_eps: float = option(1e-5, "Adam epsilon")
    anneal_lr: bool = option(True, "decay the learning rate linearly to 0 over training")
    gamma: float = option(0.99, "discount factor")
    advantages: str = option(
        "gae", "advantage estimator: 'gae' (GAE(lambda)), or 'monte_carlo' (discounted returns "
        "bootstrapped from V at the end of the data, advantage = return - V_old: the authors' "
        "code, ikostrikov's use_gae=False)", choices=("gae", "monte_carlo"),
    )
    gae_lambda: float = option(0.95, "GAE lambda")
    time_limit_terminal: bool = option(
        False, "treat a time limit (truncation) as a termination: no bootstrap from V(final "
        "observation) (the authors' code, ikostrikov's use_proper_time_limits=False)"
    )
    num_minibatches: int = option(4, "minibatches per epoch (of the rollout's real transitions)")
    minibatch_size: int = option(
        0, "0: cut each epoch into num_minibatches; N > 0: minibatches of N real transitions, "
        "the last partial one dropped (the authors' code: 128, drop_last=True)"
    )
    update_epochs: int = option(4, "passes over each rollout")
    clip_coef: float = option(0.2, "surrogate (and value) clipping coefficient")
    clip_value_loss: bool = option(True, "clip the value loss around the old values")
    ent_coef: float = option(0.01, "entropy bonus coefficient")
    vf_coef: float = option(0.5, "value loss coefficient")
    max_grad_norm: float = option(0.5, "global gradient norm clip")
    target_kl: float = option(
        0.0, "stop a round's remaining updates once an update's mean approx KL to the collecting "
        "policy exceeds this (0: never; SB3's / CleanRL's early stopping, on the round's data)"
    )
    norm_adv: bool = option(True, "normalise advantages (per minibatch, or see norm_adv_batch)")
    norm_adv_batch: bool = option(
        False, "normalise advantages once over all the update's real transitions, "
        "(A - mean) / (std + 1e-5), instead of per minibatch (the authors' code)"
    )
    torch_threads: int = option(
        1, "CPU threads of a training process for torch and NumPy's BLAS (1 is fastest for small "
        "nets; 0 keeps the libraries' defaults)"
    )
    norm_obs: bool | None = option(
        None, "normalise observations by their running mean and std, clipped to +-clip_obs (the "
        "statistics are saved with the model and frozen outside training); unset: on for Box "
        "actions with flat observations (SB3's / CleanRL's MuJoCo presets), off otherwise"
    )
    norm_reward: bool | None = option(
        None, "scale rewards by the running std of the discounted return, clipped to "
        "+-clip_reward; unset: on for Box actions (SB3's / CleanRL's MuJoCo presets)"
    )
    clip_obs: float = option(10.0, "bound of the normalised observations")
    clip_reward: float = option(10.0, "bound of the scaled rewards")
    log_std_init: float = option(
        0.0, "Box actions: initial log standard deviation of the Gaussian policy"
    )
    use_sde: bool = option(
        False, "Box actions: explore with generalized state-dependent exploration (gSDE, Raffin "
        "et al. 2022: noise = the actor's features times a noise matrix held for "
        "sde_sample_freq steps) in place of independent Gaussian noise at every step"
    )
    sde_sample_freq: int = option(
        -1, "gSDE: draw each env's noise matrix anew every N steps (-1: once per rollout)"
    )
    atari_vector: str = option(
        "gym", "how Atari envs (xlvin/<Game>-v5, xlvin/<Game>Train-v4) are stepped: 'gym' "
        "(gymnasium's wrappers, resumable) or 'ale' (ale-py's C++ vector env: faster, the same "
        "frames but other no-op draws at reset; a run cannot resume)", choices=("gym", "ale"),
    )
    accelerate: bool = option(
        True, "on CPU, act with the NumPy weight snapshot and update with the fused loss and flat "
        "Adam of xlvin.accel (same results up to float rounding; false: the readable code only)"
    )

    def __post_init__(self) -> None:
        checks = [
            (1 <= self.num_envs <= MAX_ENVS, f"num_envs must be in [1, {MAX_ENVS}]"),
            (self.num_steps >= 1, "num_steps must be >= 1"),
            (self.total_steps >= 1, "total_steps must be >= 1"),
            (self.lr > 0, "lr must be > 0"),
            (self.adam_eps > 0, "adam_eps must be > 0"),
            (0 <= self.gamma <= 1, "gamma must be in [0, 1]"),
            (0 <= self.gae_lambda <= 1, "gae_lambda must be in [0, 1]"),
            (self.num_minibatches >= 1, "num_minibatches must be >= 1"),
            (self.minibatch_size >= 0, "minibatch_size must be >= 0"),
            (self.advantages in ("gae", "monte_carlo"), "advantages must be gae or monte_carlo"),
            (self.atari_vector in ("gym", "ale"), "atari_vector must be gym or ale"),
            (self.update_epochs >= 1, "update_epochs must be >= 1"),
            (self.clip_coef > 0, "clip_coef must be > 0"),
            (self.ent_coef >= 0, "ent_coef must be >= 0"),
            (self.vf_coef >= 0, "vf_coef must be >= 0"),
            (self.max_grad_norm > 0, "max_grad_norm must be > 0"),
            (self.target_kl >= 0, "target_kl must be >= 0"),
            (0 <= self.torch_threads <= MAX_THREADS,
             f"torch_threads must be in [0, {MAX_THREADS}]"),
            (self.clip_obs > 0 and self.clip_reward > 0, "clip_obs and clip_reward must be > 0"),
            (self.sde_sample_freq == -1 or self.sde_sample_freq >= 1,
             "sde_sample_freq must be -1 (once per rollout) or >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"PPO config: {message}")

    def normalises(self, box_actions: bool) -> tuple[bool, bool]:
        """(norm_obs, norm_reward) as set, or where unset, on for Box actions."""
        return (box_actions if self.norm_obs is None else self.norm_obs,
                box_actions if self.norm_reward is None else self.norm_reward)

    @property
    def batch_size(self) -> int:
        """Env steps per rollout (all envs)."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Rollout + update iterations of `train_ppo`: total_steps // batch_size (at least 1)."""
        return max(1, self.total_steps // self.batch_size)


@dataclass
class LowDataConfig:
    """The low-data protocol: `rounds` x (collect `episodes` episodes, `updates` PPO updates)."""

    rounds: int = option(1, "collection rounds")
    episodes: int = option(10, "complete episodes collected per round with the current policy")
    collect: str = option(
        "episodes", "'episodes': exactly `episodes` complete episodes (the first to start), "
        "nothing else; 'until_done': every step of num_envs envs until `episodes` episodes have "
        "ended in total, unfinished ones included (the authors' gather_fixed_episodes_rollout)",
        choices=("episodes", "until_done"),
    )
    num_envs: int = option(4, "parallel envs collecting a round (the authors': CartPole 15, others 5)")
    updates: int = option(100, "PPO updates (each: update_epochs x num_minibatches) per round")
    strict_transe: bool = option(
        False, "pre-train TransE only on the first round's episodes (no extra random-policy data)"
    )
    refresh_old_policy: bool = option(
        False, "before each update, recompute log pi_old and V_old under the current policy "
        "(default: keep the collecting policy's, as the reference PPO does)"
    )
    average_last: int = option(
        0, "the final policy averages the weights after each of the last N updates (stochastic "
        "weight averaging; 0: the last weights). Ours, not the paper's"
    )
    eval_points: int = option(5, "evaluations of the policy during training (progress curve)")
    eval_episodes: int = option(10, "episodes per progress evaluation")

    def __post_init__(self) -> None:
        if self.average_last < 0:
            raise UserError("low-data protocol: average_last must be >= 0")
        if min(self.rounds, self.episodes, self.updates, self.num_envs) < 1:
            raise UserError("low-data protocol: rounds, episodes, updates and num_envs must be >= 1")
        if self.num_envs > MAX_ENVS:
            raise UserError(f"low-data protocol: num_envs must be <= {MAX_ENVS}")
        if not 0 <= self.eval_points <= self.rounds * self.updates or self.eval_episodes < 1:
            raise UserError("low-data protocol: eval_points must be in [0, rounds x updates] "
                            "(at most one evaluation after each update), eval_episodes >= 1")
        if self.collect not in ("episodes", "until_done"):
            raise UserError(f"low-data protocol: collect must be episodes or until_done, got {self.collect!r}")

    def evaluation(self) -> Evaluation:
        """The progress evaluations of `xlvin.ppo.loop`."""
        return Evaluation(points=self.eval_points, episodes=self.eval_episodes)


@dataclass
class CurriculumConfig:
    """The continual maze: which mazes, when a level passes or fails, how it is evaluated."""

    size: int = option(8, "side of the training mazes (the paper: 8)")
    dataset: str = option(
        "generated", "'generated' (the library's VIN generator) or the path of a VIN npz: its "
        "train split is trained on, its test split evaluated"
    )
    dataset_seed: int = option(0, "seed of the generated mazes")
    first_level: int = option(1, "the level the curriculum starts at")
    last_level: int = option(0, "the last level; 0: the highest level of the training split")
    window: int = option(1000, "a level passes when its last WINDOW episodes ... (paper: 1,000)")
    threshold: float = option(0.95, "... succeed at this rate (paper: 0.95)")
    budget: int = option(
        1_000_000, "episodes (trajectories) a level may use before it is failed (paper: 1,000,000)"
    )
    eval_per_level: int = option(
        250, "held-out starts per level in each evaluation (0: every start); the same for every "
        "agent (seeded)"
    )
    ood_size: int = option(16, "also evaluate on held-out generated mazes of this side (0: none)")

    def __post_init__(self) -> None:
        if min(self.size, self.first_level, self.window, self.budget) < 1:
            raise UserError("curriculum: size, first_level, window and budget must be >= 1")
        if self.last_level < 0 or self.eval_per_level < 0 or self.ood_size < 0:
            raise UserError("curriculum: last_level, eval_per_level and ood_size must be >= 0")
        if not 0.0 < self.threshold <= 1.0:
            raise UserError(f"curriculum: threshold must be in (0, 1], got {self.threshold}")

    def held_out_splits(self) -> dict[int, "MazeSet"]:
        """{maze side: held-out mazes}: the test split of the training data set, and generated
        mazes of side `ood_size` (out of distribution)."""
        from xlvin.envs.maze_data import maze_split

        sources = {self.size: self.dataset}
        if self.ood_size and self.ood_size != self.size:
            sources[self.ood_size] = "generated"
        return {size: maze_split(size, "test", dataset, self.dataset_seed)
                for size, dataset in sources.items()}

    def train_env_kwargs(self, level: int | None = None) -> dict[str, Any]:
        """Keyword arguments of the maze env on the training split (starts of `level` only, or
        of every level when None)."""
        return {"size": self.size, "level": level, "split": "train", "dataset": self.dataset,
                "dataset_seed": self.dataset_seed}

    def levels(self) -> list[int]:
        """The levels of the curriculum, in order: those of the training split from
        `first_level` to `last_level`."""
        from xlvin.envs.maze_data import maze_split

        present = sorted(maze_split(self.size, "train", self.dataset, self.dataset_seed).level_counts())
        last = self.last_level or present[-1]
        levels = [d for d in present if self.first_level <= d <= last]
        if not levels:
            raise UserError(f"curriculum: the training mazes have no level in "
                            f"[{self.first_level}, {last}] (they have {present[0]}..{present[-1]})")
        return levels
