"""The one wording rule (`xlvin.wording.compare`): "ahead" only where the 95 % interval of
P(X > Y) excludes 0.5 (Fisher's p < 0.05 for rates), otherwise "not separated", always with
the protocol, the seeds and the numbers."""

import pytest

from xlvin.wording import compare, compare_seeds, seed_count, seed_counts, separated


def test_an_interval_above_one_half_is_ahead() -> None:
    text = compare("XLVIN-R", "PPO", protocol="protocol `paper`", seeds="30 seeds",
                   iqms=(58.3, 31.4), improvement={"p": 0.71, "low": 0.58, "high": 0.84})
    assert text == ("XLVIN-R is ahead of PPO (protocol `paper`, 30 seeds: IQM XLVIN-R 58.3, PPO "
                    "31.4; P(XLVIN-R > PPO) = 0.71 [0.58, 0.84])")


def test_an_interval_below_one_half_puts_the_other_ahead() -> None:
    text = compare("X", "Y", protocol="p", seeds="5 seeds", iqms=(1.0, 2.0),
                   improvement={"p": 0.08, "low": 0.0, "high": 0.32})
    assert text.startswith("Y is ahead of X (")


@pytest.mark.parametrize("low, high", [(0.33, 0.94), (0.5, 0.9), (0.1, 0.5)])
def test_an_interval_that_holds_one_half_is_not_separated(low: float, high: float) -> None:
    text = compare("X", "Y", protocol="p", seeds="7 seeds", iqms=(7.5, 1.9),
                   improvement={"p": 0.65, "low": low, "high": high})
    assert text.startswith("X and Y are not separated (p, 7 seeds: IQM X 7.5, Y 1.9;")


def test_rates_by_fishers_test() -> None:
    assert compare("X", "Y", protocol="p", seeds="seeds that learned",
                   rates=(5, 7, 2, 7)).startswith("X and Y are not separated")
    assert compare("X", "Y", protocol="p", seeds="runs", rates=(10, 10, 1, 10)).startswith(
        "X is ahead of Y (p, runs: X 10 of 10, Y 1 of 10; Fisher's p = 0.00)")


def test_one_kind_of_evidence() -> None:
    with pytest.raises(ValueError):
        compare("X", "Y", protocol="p", seeds="s")


def test_seeds_are_compared_only_from_ten_on_and_their_counts_said() -> None:
    low, high = [float(v) for v in range(10)], [float(v) + 100 for v in range(10)]
    assert compare_seeds("A", "B", high[:9], low[:9], protocol="p") == (
        "A and B are not compared (p, 9 seeds each, fewer than 10: IQM A 104.0, B 4.0)")
    assert compare_seeds("A", "B", high, low, protocol="p").startswith(
        "A is ahead of B (p, 10 seeds each: IQM A 104.5, B 4.5; P(A > B) = 1.00")
    assert compare_seeds("A", "B", low, high + [0.0], protocol="p").startswith(
        "B is ahead of A (p, 10 and 11 seeds:")
    assert compare_seeds("A", "B", low, low, protocol="p").startswith(
        "A and B are not separated (p, 10 seeds each:")
    assert seed_count(1) == "1 seed" and seed_count(1234) == "1,234 seeds"
    assert seed_counts(1, 1) == "1 seed each" and seed_counts(3, 1) == "3 and 1 seed"
    assert seed_counts(7, 7) == "7 seeds each" and seed_counts(1, 13) == "1 and 13 seeds"


def test_given_the_counts_fewer_than_ten_seeds_are_not_compared_whatever_the_interval() -> None:
    """An interim look at a study of fixed seeds: 9 and 8 seeds are not compared, even with an
    interval far above one half; 10 and 10 are, and the verdict is the interval's."""
    clear = {"p": 0.94, "low": 0.83, "high": 1.0}
    text = compare("XLVIN", "PPO-32", protocol="9 and 8 seeds", seeds="env steps", iqms=(740, 1017),
                   improvement=clear, digits=0, counts=(9, 8))
    assert text == ("XLVIN and PPO-32 are not compared (9 and 8 seeds, env steps, fewer than 10: "
                    "IQM XLVIN 740, PPO-32 1,017)")
    assert compare("XLVIN", "PPO-32", protocol="10 seeds", seeds="env steps", iqms=(740, 1017),
                   improvement=clear, digits=0, counts=(10, 10)).startswith(
        "XLVIN is ahead of PPO-32 (10 seeds, env steps: ")
    assert separated(clear) is True and separated({"p": 0.5, "low": 0.3, "high": 0.7}) is None
    assert separated({"p": 0.1, "low": 0.0, "high": 0.4}) is False
