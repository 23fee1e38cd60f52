"""Aggregate performance estimators of rliable, in plain NumPy.

Agarwal, Schwarzer, Castro, Courville & Bellemare (2021), "Deep Reinforcement Learning at the Edge
of the Statistical Precipice" (NeurIPS), recommend reporting, over all runs of all tasks:

* the interquartile mean (IQM), the mean of the middle 50 % of the pooled run scores;
* stratified bootstrap confidence intervals, which resample runs with replacement independently
  within each task (the tasks are the strata and are kept fixed), with the percentile interval;
* the probability of improvement P(X > Y), the Mann-Whitney U statistic of each task normalised by
  the number of run pairs, averaged over tasks.

These functions reproduce the reference implementation (the `rliable` package: `metrics.aggregate_iqm`,
`metrics.probability_of_improvement`, `library.get_interval_estimates` with its default
`method="percentile"`) without its pandas/scipy/arch dependencies. Only the random streams differ:
here a replicate draws from `np.random.default_rng(seed)`.

Scores come in one of two layouts:

* a 2-D array `[runs, tasks]`, as in rliable, where every task has the same number of runs;
* a sequence of per-task 1-D arrays `[runs_t]`, whose run counts may differ between tasks.

A statistic passed to the bootstrap receives resampled scores in the layout it was given.
"""

import math
from collections.abc import Callable, Sequence

import numpy as np

Scores = np.ndarray | Sequence[np.ndarray]


def _per_task(scores: Scores) -> list[np.ndarray]:
    """The runs of each task as a float array: [tasks] of [runs_t]."""
    if isinstance(scores, np.ndarray):
        if scores.ndim != 2:
            raise ValueError(f"scores must be a 2-D [runs, tasks] array, got shape {scores.shape}")
        tasks = list(scores.T.astype(float))
    else:
        tasks = [np.asarray(runs, dtype=float) for runs in scores]
        if any(runs.ndim != 1 for runs in tasks):
            raise ValueError("a sequence of scores must hold one 1-D array of runs per task")
    if not tasks or any(runs.size == 0 for runs in tasks):
        raise ValueError("scores need at least one task, and at least one run per task")
    return tasks


def _same_layout(tasks: list[np.ndarray], like: Scores) -> Scores:
    """Per-task runs back in the layout of `like`: [runs, tasks] array, or a list of [runs_t]."""
    return np.column_stack(tasks) if isinstance(like, np.ndarray) else tasks


def _resample(tasks: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """One stratified bootstrap draw: each task's runs resampled with replacement, counts kept."""
    return [runs[rng.integers(0, runs.size, size=runs.size)] for runs in tasks]


def _percentile_interval(
    point: float, replicates: list[float], confidence: float
) -> tuple[float, float, float]:
    """(point, low, high) with the percentile bootstrap interval: the (1 -/+ confidence) / 2
    quantiles of the replicates, linearly interpolated (np.percentile, as arch/rliable)."""
    alpha = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [alpha, 100.0 - alpha])
    return float(point), float(low), float(high)


def _check_bootstrap(reps: int, confidence: float) -> None:
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def iqm(scores: Scores) -> float:
    """Interquartile mean of all runs of all tasks (Agarwal et al. 2021, section 4).

    The 25 % trimmed mean of the pooled scores, exactly as rliable's `aggregate_iqm`, i.e.
    `scipy.stats.trim_mean(scores, proportiontocut=0.25, axis=None)`: sort the n pooled scores,
    drop int(0.25 * n) from each end (rounded down, so n = 10 drops 2 and n < 4 drops none), and
    average the rest. Accepts any array (it is flattened) or a sequence of per-task 1-D arrays.
    A NaN score makes the result NaN, as in scipy.
    """
    parts = [scores] if isinstance(scores, np.ndarray) else scores
    flat = [np.ravel(np.asarray(part, dtype=float)) for part in parts]
    pooled = np.concatenate(flat) if flat else np.empty(0)  # [runs * tasks]
    if pooled.size == 0:
        raise ValueError("iqm of no scores")
    if np.isnan(pooled).any():
        return float("nan")
    cut = int(0.25 * pooled.size)
    return float(np.sort(pooled)[cut : pooled.size - cut].mean())


def stratified_bootstrap_ci(
    scores_per_task: Scores,
    statistic: Callable[[Scores], float],
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Stratified bootstrap percentile interval of an aggregate `statistic` (Agarwal et al. 2021,
    section 4, "stratified bootstrap confidence intervals"; rliable's `get_interval_estimates`).

    `scores_per_task` is a [runs, tasks] array or a sequence of per-task [runs_t] arrays. Each of
    the `reps` replicates resamples, within each task independently, as many runs as that task has,
    with replacement; the tasks themselves are never resampled or mixed. `statistic` maps scores in
    the same layout as given to a scalar. Returns (statistic(scores), low, high), where low and high
    are the (1 - confidence) / 2 and (1 + confidence) / 2 percentiles of the replicates.
    Deterministic for a given `seed` (np.random.default_rng).
    """
    _check_bootstrap(reps, confidence)
    tasks = _per_task(scores_per_task)
    rng = np.random.default_rng(seed)
    replicates = [
        float(statistic(_same_layout(_resample(tasks, rng), scores_per_task))) for _ in range(reps)
    ]
    return _percentile_interval(statistic(scores_per_task), replicates, confidence)


def _improvement(x_tasks: list[np.ndarray], y_tasks: list[np.ndarray]) -> float:
    """Mean over tasks of P(X_t > Y_t), each the normalised Mann-Whitney U statistic."""
    if len(x_tasks) != len(y_tasks):
        raise ValueError(f"x has {len(x_tasks)} tasks but y has {len(y_tasks)}")
    per_task = [
        # [runs_x, runs_y] pairwise comparisons of one task
        np.mean((x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :]))
        for x, y in zip(x_tasks, y_tasks)
    ]
    return float(np.mean(per_task))


def probability_of_improvement(x: Scores, y: Scores) -> float:
    """Average probability of improvement P(X > Y) (Agarwal et al. 2021, section 4.3).

    For each task m, P(X_m > Y_m) = 1 / (N_x N_y) * sum_{i, j} S(x_{i,m}, y_{j,m}) with
    S(a, b) = 1 if a > b, 1/2 if a == b, 0 if a < b (the Mann-Whitney U statistic normalised by
    the number of run pairs); the result is the mean over the M tasks, as rliable's
    `metrics.probability_of_improvement`. `x` and `y` are [runs, tasks] arrays (or sequences of
    per-task runs) over the same tasks; their run counts may differ.
    """
    return _improvement(_per_task(x), _per_task(y))


def probability_of_improvement_ci(
    x: Scores, y: Scores, reps: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(P(X > Y), low, high): `probability_of_improvement` with its stratified bootstrap interval.

    As rliable's `StratifiedIndependentBootstrap`: each replicate resamples x's runs and y's runs
    independently, and within each task independently; the interval is the percentile one.
    Deterministic for a given `seed` (np.random.default_rng).
    """
    _check_bootstrap(reps, confidence)
    x_tasks, y_tasks = _per_task(x), _per_task(y)
    rng = np.random.default_rng(seed)
    replicates = [
        _improvement(_resample(x_tasks, rng), _resample(y_tasks, rng)) for _ in range(reps)
    ]
    return _percentile_interval(_improvement(x_tasks, y_tasks), replicates, confidence)


def summarize(scores_1d: np.ndarray | Sequence[float], reps: int = 2000, seed: int = 0) -> dict:
    """Summary of the runs of one task (one cell of a results table).

    Returns {"iqm", "iqm_low", "iqm_high", "mean", "std", "median", "n"}: the IQM with its 95 %
    stratified bootstrap interval (a single stratum, so a plain bootstrap over runs), the mean,
    the population standard deviation (ddof=0), the median, and the number of runs.
    """
    runs = np.asarray(scores_1d, dtype=float)  # [runs]
    if runs.ndim != 1:
        raise ValueError(f"summarize takes the 1-D runs of one task, got shape {runs.shape}")
    point, low, high = stratified_bootstrap_ci(runs[:, None], iqm, reps=reps, seed=seed)
    return {
        "iqm": point,
        "iqm_low": low,
        "iqm_high": high,
        "mean": float(runs.mean()),
        "std": float(runs.std()),
        "median": float(np.median(runs)),
        "n": int(runs.size),
    }


#: Resamples of a family-wise interval (`improvement_over`), whose tails are thinner than 2.5 %.
FAMILY_REPS = 20_000


def family_confidence(family: int) -> float:
    """The confidence of each interval of a `family` of comparisons read together, so that all
    of them hold together at 95 % (Bonferroni): 1 - 0.05 / family."""
    return 1 - 0.05 / family


def improvement_over(x_runs: Sequence[float], y_runs: Sequence[float],
                     family: int = 1) -> dict[str, float]:
    """{"p", "low", "high"}: P(X > Y) over the runs of one task, with its 95 % stratified
    bootstrap interval (`probability_of_improvement_ci`). Where the comparison is one of a
    `family` > 1 read together, also "family_low" and "family_high": the interval at
    1 - 0.05 / family (Bonferroni), from `FAMILY_REPS` resamples, so that all of the family's
    intervals hold together with 95 % probability."""
    x = np.asarray(x_runs, dtype=float)[:, None]  # [runs, 1 task]
    y = np.asarray(y_runs, dtype=float)[:, None]
    p, low, high = probability_of_improvement_ci(x, y)
    out = {"p": p, "low": low, "high": high}
    if family > 1:
        _, out["family_low"], out["family_high"] = probability_of_improvement_ci(
            x, y, reps=FAMILY_REPS, confidence=family_confidence(family))
    return out


def interval_text(point: float, low: float, high: float, digits: int) -> str:
    """'point [low, high]' with `digits` decimals, as the results tables print an estimate."""
    return f"{point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def share_text(summary: dict[str, float], percent: bool) -> str:
    """`iqm_text` of a share in % to 1 digit where `percent`, else of a ratio or an R^2 to 3."""
    return iqm_text(summary, 1, 100.0) if percent else iqm_text(summary, 3)


def iqm_text(summary: dict[str, float], digits: int, scale: float = 1.0) -> str:
    """A `summarize` result (scaled) as 'iqm [low, high]'; of one run 'iqm' alone, since one
    run has no interval (a bootstrap over it is the point itself)."""
    if summary.get("n") == 1:
        return f"{scale * summary['iqm']:.{digits}f}"
    return interval_text(scale * summary["iqm"], scale * summary["iqm_low"],
                         scale * summary["iqm_high"], digits)


def improvement_text(improvement: dict[str, float] | None) -> str:
    """An `improvement_over` result as 'p [low, high]', or '-' without one."""
    if improvement is None:
        return "-"
    return interval_text(improvement["p"], improvement["low"], improvement["high"], 2)


def fisher_exact(successes_a: int, runs_a: int, successes_b: int, runs_b: int) -> float:
    """Two-sided p-value of Fisher's exact test on a 2 x 2 table (successes and failures of two
    groups of runs): the total probability, under the hypergeometric law with the margins held,
    of the tables no more likely than the one seen (scipy's `fisher_exact` convention)."""
    if not (0 <= successes_a <= runs_a and 0 <= successes_b <= runs_b):
        raise ValueError("successes must lie between 0 and the runs of their group")
    successes, runs = successes_a + successes_b, runs_a + runs_b
    low, high = max(0, successes - runs_b), min(successes, runs_a)
    # P(k of group a's runs succeed | margins) for every possible k
    law = {k: math.comb(runs_a, k) * math.comb(runs_b, successes - k) / math.comb(runs, successes)
           for k in range(low, high + 1)}
    seen = law[successes_a]
    return min(1.0, sum(p for p in law.values() if p <= seen * (1 + 1e-7)))
