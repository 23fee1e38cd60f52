"""The rliable estimators of xlvin.stats against hand-computed cases."""

import math
import statistics

import numpy as np
import pytest

from xlvin.stats import (
    fisher_exact,
    improvement_over,
    iqm,
    iqm_text,
    probability_of_improvement,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
    summarize,
)

# ---------------------------------------------------------------- interquartile mean


def test_iqm_of_one_to_eight_is_the_mean_of_three_to_six():
    assert iqm(np.arange(1, 9)) == (3 + 4 + 5 + 6) / 4 == 4.5


def test_iqm_cuts_int_of_a_quarter_from_each_end():
    # n = 10: int(2.5) = 2 cut from each end, leaving 4, 8, ..., 128 (cutting 3 would give 30).
    values = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    shuffled = np.random.default_rng(0).permutation(values).reshape(5, 2)  # [runs, tasks]
    assert iqm(shuffled) == (4 + 8 + 16 + 32 + 64 + 128) / 6 == 42.0
    assert iqm([1, 2, 9]) == 4.0  # n = 3: int(0.75) = 0, nothing is cut
    assert iqm([1, 2, 3, 4, 100]) == 3.0  # n = 5: one cut from each end


def test_iqm_trims_a_quarter_not_a_fifth_nor_three_tenths():
    """Skewed scores whose 20 %, 25 % and 30 % trimmed means all differ: n = 4 (a fifth cuts
    none, a quarter one), n = 8 (a fifth cuts one, a quarter two), n = 10 (a quarter cuts two,
    three tenths three)."""
    assert iqm([1, 2, 3, 10]) == (2 + 3) / 2  # a fifth: 4.0
    doubling = [1, 2, 4, 8, 16, 32, 64, 128]
    assert iqm(doubling) == (4 + 8 + 16 + 32) / 4 == 15.0  # a fifth: 21.0
    tens = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert iqm(tens) == 42.0  # three tenths: (8 + 16 + 32 + 64) / 4 = 30.0


def test_iqm_ignores_an_outlier():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 1e9]) == 4.5
    assert iqm([-1e9, 2, 3, 4, 5, 6, 7, 8]) == 4.5


def test_iqm_pools_per_task_runs_of_different_lengths():
    assert iqm([np.array([1.0, 2.0, 3.0]), np.array([8.0, 7.0, 6.0, 5.0, 4.0])]) == 4.5


def test_iqm_propagates_nan_and_rejects_no_scores():
    assert math.isnan(iqm([1.0, float("nan"), 3.0, 4.0]))
    with pytest.raises(ValueError):
        iqm(np.empty((0, 3)))
    with pytest.raises(ValueError):
        iqm([])


# ---------------------------------------------------------------- probability of improvement


def test_improvement_is_one_when_every_x_beats_every_y():
    x = np.array([[5.0, 50.0], [6.0, 60.0], [7.0, 70.0]])  # [3 runs, 2 tasks]
    y = np.array([[1.0, 10.0], [4.0, 40.0]])  # [2 runs, 2 tasks]
    assert probability_of_improvement(x, y) == 1.0
    assert probability_of_improvement(y, x) == 0.0


def test_improvement_of_identical_samples_is_one_half():
    x = np.array([[1.0, 3.0], [2.0, 3.0], [2.0, 3.0]])
    assert probability_of_improvement(x, x.copy()) == 0.5


def test_improvement_counts_ties_as_one_half():
    # x = [1, 2, 3, 4] against y = [2, 2]: the 8 pairs score 0, 0 | .5, .5 | 1, 1 | 1, 1 = 5 / 8.
    assert probability_of_improvement([[1, 2, 3, 4]], [[2, 2]]) == 5 / 8
    # x = [1, 2, 3] against y = [2, 2]: 0, 0 | .5, .5 | 1, 1 = 3 / 6.
    assert probability_of_improvement([[1, 2, 3]], [[2, 2]]) == 0.5


def test_improvement_averages_over_tasks():
    x = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])  # [4 runs, 2 tasks]
    y = np.array([[2.0, 0.0], [2.0, 5.0]])  # [2 runs, 2 tasks]
    # task 0 is the tied case above (5 / 8), in task 1 every x beats every y (1).
    assert probability_of_improvement(x, y) == (5 / 8 + 1.0) / 2
    assert probability_of_improvement(y, x) == 1.0 - (5 / 8 + 1.0) / 2


def test_improvement_needs_the_same_tasks():
    with pytest.raises(ValueError):
        probability_of_improvement(np.ones((3, 2)), np.ones((3, 3)))


# ---------------------------------------------------------------- stratified bootstrap


def test_interval_contains_the_point_estimate():
    scores = np.random.default_rng(1).normal(size=(10, 3))  # [runs, tasks]
    point, low, high = stratified_bootstrap_ci(scores, iqm, reps=500)
    assert point == iqm(scores)
    assert low < point < high


def test_interval_is_a_point_for_constant_scores():
    assert stratified_bootstrap_ci(np.full((5, 3), 2.5), iqm, reps=200) == (2.5, 2.5, 2.5)


def test_interval_is_deterministic_for_a_seed():
    scores = np.random.default_rng(2).normal(size=(8, 2))
    first = stratified_bootstrap_ci(scores, iqm, reps=300, seed=7)
    assert stratified_bootstrap_ci(scores, iqm, reps=300, seed=7) == first
    assert stratified_bootstrap_ci(scores, iqm, reps=300, seed=8) != first


def test_interval_shrinks_as_runs_grow():
    rng = np.random.default_rng(3)
    few = stratified_bootstrap_ci(rng.normal(size=(10, 1)), iqm, reps=500)
    many = stratified_bootstrap_ci(rng.normal(size=(1000, 1)), iqm, reps=500)
    # The width scales as 1 / sqrt(runs): 10 times narrower; allow a factor 2 of slack.
    assert many[2] - many[1] < (few[2] - few[1]) / 5


def test_interval_is_the_percentile_interval_of_the_replicates():
    # One task with runs [0, 1]: a replicate's mean is 0, 1/2 or 1 with probability 1/4, 1/2, 1/4,
    # so the 2.5 and 97.5 percentiles are 0 and 1, and the 30 and 70 percentiles are both 1/2.
    runs = np.array([[0.0], [1.0]])
    assert stratified_bootstrap_ci(runs, np.mean, reps=2000) == (0.5, 0.0, 1.0)
    assert stratified_bootstrap_ci(runs, np.mean, reps=2000, confidence=0.4) == (0.5, 0.5, 0.5)


def test_interval_bounds_are_the_2_5th_and_97_5th_percentiles_of_the_replicates():
    """Replicates 0, 1, ..., 200 (a statistic counting its calls on resamples): the 95 %
    interval is (5, 195), where a 90 % one would be (10, 190) and a 99 % one (1, 199)."""
    scores = np.ones((4, 1))
    calls = iter(range(201))

    def counted(resampled):
        return 1000.0 if resampled is scores else float(next(calls))

    assert stratified_bootstrap_ci(scores, counted, reps=201) == pytest.approx((1000, 5, 195))
    calls = iter(range(201))
    ninety = stratified_bootstrap_ci(scores, counted, reps=201, confidence=0.9)
    assert ninety == pytest.approx((1000, 10, 190))


def test_iqm_interval_width_matches_the_asymptotic_one_for_a_normal_sample():
    # The 25 % trimmed mean of n standard normal draws has asymptotic variance s2 / n with
    # s2 = (int_{-q}^{q} x^2 phi(x) dx + 2 * 0.25 * q^2) / (1 - 2 * 0.25)^2, q the upper quartile,
    # and int_{-q}^{q} x^2 phi = (Phi(q) - Phi(-q)) - 2 q phi(q) = 0.5 - 2 q phi(q).
    q = statistics.NormalDist().inv_cdf(0.75)
    phi_q = math.exp(-q * q / 2) / math.sqrt(2 * math.pi)
    s2 = (0.5 - 2 * q * phi_q + 0.5 * q * q) / 0.25  # = 1.195
    n = 2000
    expected = 2 * statistics.NormalDist().inv_cdf(0.975) * math.sqrt(s2 / n)  # = 0.0958
    _, low, high = stratified_bootstrap_ci(
        np.random.default_rng(4).normal(size=(n, 1)), iqm, reps=1000
    )
    assert high - low == pytest.approx(expected, rel=0.15)


def test_both_layouts_give_the_same_interval():
    scores = np.random.default_rng(5).normal(size=(6, 3))  # [runs, tasks]
    as_array = stratified_bootstrap_ci(scores, iqm, reps=200, seed=1)
    assert stratified_bootstrap_ci(list(scores.T), iqm, reps=200, seed=1) == as_array


def _two_scales(runs: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Task 0 in [0, 1) and task 1 in [1000, 1001), so that a mixed sample would show."""
    rng = np.random.default_rng(6)
    return rng.random(runs[0]), 1000.0 + rng.random(runs[1])


def test_resampling_keeps_each_task_and_its_run_count():
    small, large = _two_scales((5, 5))
    seen: list[np.ndarray] = []

    def record(scores: np.ndarray) -> float:
        seen.append(scores)
        return iqm(scores)

    stratified_bootstrap_ci(np.column_stack([small, large]), record, reps=300)
    assert len(seen) == 301  # every replicate, then the point estimate
    for sample in seen:
        assert sample.shape == (5, 2)
        assert np.isin(sample[:, 0], small).all() and np.isin(sample[:, 1], large).all()
    assert any(len(np.unique(sample[:, 0])) < 5 for sample in seen)  # drawn with replacement


def test_resampling_keeps_per_task_run_counts_that_differ():
    small, large = _two_scales((3, 9))
    seen: list[list[np.ndarray]] = []

    def record(scores: list[np.ndarray]) -> float:
        seen.append(scores)
        return iqm(scores)

    stratified_bootstrap_ci([small, large], record, reps=300)
    for sample in seen:
        assert [len(runs) for runs in sample] == [3, 9]
        assert np.isin(sample[0], small).all() and np.isin(sample[1], large).all()


def test_bootstrap_rejects_bad_arguments():
    with pytest.raises(ValueError):
        stratified_bootstrap_ci(np.ones((3, 2, 2)), iqm)
    with pytest.raises(ValueError):
        stratified_bootstrap_ci([np.ones(3), np.ones(0)], iqm)
    with pytest.raises(ValueError):
        stratified_bootstrap_ci(np.ones((3, 2)), iqm, reps=0)
    with pytest.raises(ValueError):
        stratified_bootstrap_ci(np.ones((3, 2)), iqm, confidence=1.0)


# ---------------------------------------------------------------- probability of improvement interval


def test_improvement_interval():
    rng = np.random.default_rng(7)
    x, y = rng.normal(0.5, 1.0, size=(10, 3)), rng.normal(0.0, 1.0, size=(6, 3))
    point, low, high = probability_of_improvement_ci(x, y, reps=500)
    assert point == probability_of_improvement(x, y)
    assert 0.0 <= low < point < high <= 1.0
    assert probability_of_improvement_ci(x, y, reps=500) == (point, low, high)
    assert probability_of_improvement_ci(x, y, reps=500, seed=1) != (point, low, high)


def test_improvement_interval_is_a_point_when_every_resample_agrees():
    x, y = np.arange(4.0)[:, None] + 10.0, np.arange(3.0)[:, None]  # every x beats every y
    assert probability_of_improvement_ci(x, y, reps=200) == (1.0, 1.0, 1.0)
    assert probability_of_improvement_ci(np.ones((4, 2)), np.ones((3, 2)), reps=200) == (
        0.5,
        0.5,
        0.5,
    )


def test_a_family_wise_interval_is_the_bonferroni_one_and_holds_the_95_percent_one():
    """One comparison of 12 read together: its interval at 1 - 0.05 / 12 (more resamples),
    wider than the 95 % one on both sides; alone, no family-wise interval."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.4, 1.0, size=16), rng.normal(0.0, 1.0, size=17)
    alone, together = improvement_over(x, y), improvement_over(x, y, family=12)
    assert set(alone) == {"p", "low", "high"}
    assert {k: together[k] for k in alone} == alone
    assert together["family_low"] < alone["low"] < alone["p"] < alone["high"]
    assert alone["high"] < together["family_high"]
    _, low, high = probability_of_improvement_ci(x[:, None], y[:, None], reps=20_000,
                                                 confidence=1 - 0.05 / 12)
    assert (together["family_low"], together["family_high"]) == (low, high)


# ---------------------------------------------------------------- summary of one cell


def test_summarize_one_task():
    # sorted: 2 4 4 4 5 5 7 9, mean 5, squared deviations sum to 32 so the population std is 2.
    summary = summarize([9, 4, 2, 4, 5, 5, 7, 4], reps=500)
    assert {k: summary[k] for k in ("iqm", "mean", "std", "median", "n")} == {
        "iqm": 4.5,  # mean of 4 4 5 5
        "mean": 5.0,
        "std": 2.0,
        "median": 4.5,
        "n": 8,
    }
    assert summary["iqm_low"] < 4.5 < summary["iqm_high"]
    assert summarize([3.0] * 5, reps=100)["iqm_low"] == summarize([3.0] * 5, reps=100)["iqm_high"]


# ---------------------------------------------------------------- Fisher's exact test


def test_fisher_exact_matches_known_tables():
    """Values from the hypergeometric law by hand (and scipy.stats.fisher_exact): 5 of 7 runs
    against 2 of 7 gives p = 0.2861; the tea-tasting table 3 of 4 against 1 of 4 gives
    34/70 = 0.4857; an all-or-nothing 7 of 7 against 0 of 7 gives 2 / C(14, 7)."""
    assert fisher_exact(5, 7, 2, 7) == pytest.approx(0.28613, abs=1e-5)
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70)
    assert fisher_exact(7, 7, 0, 7) == pytest.approx(2 / 3432)
    assert fisher_exact(2, 7, 5, 7) == fisher_exact(5, 7, 2, 7)  # symmetric in the groups
    assert fisher_exact(3, 6, 3, 6) == 1.0  # the most likely table


def test_fisher_exact_refuses_impossible_counts():
    with pytest.raises(ValueError, match="between 0 and the runs"):
        fisher_exact(8, 7, 2, 7)


def test_one_run_is_printed_without_an_interval():
    """A bootstrap over one run is the run itself: printing '14.0 [14.0, 14.0]' would claim a
    certainty one seed cannot give, so one run prints its value alone."""
    assert iqm_text(summarize([0.14]), 1, scale=100) == "14.0"
    two = summarize([0.1, 0.3])
    assert iqm_text(two, 1, scale=100) == (
        f"{100 * two['iqm']:.1f} [{100 * two['iqm_low']:.1f}, {100 * two['iqm_high']:.1f}]")
    assert two["iqm_low"] < two["iqm_high"]
