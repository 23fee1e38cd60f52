"""The one wording rule of a comparison on our pages: X is "ahead of" Y only where the 95 %
interval of P(X > Y) excludes 0.5 (for rates, where Fisher's exact p < 0.05), always with the
protocol and the seeds said; otherwise the two are "not separated", with their IQMs (or rates).
Given the seeds' counts, two arms of which either has fewer than `MIN_SEEDS` are "not compared".
Every results page renders its comparisons through `compare`, so no sentence says more than its
interval."""

from collections.abc import Sequence

from xlvin.stats import fisher_exact, improvement_over, improvement_text, iqm

#: Fisher's exact p below which two rates are separated.
ALPHA = 0.05
#: The seeds each side needs before `compare_seeds` compares them: over fewer, a bootstrap
#: interval is no interval (one seed's is a point).
MIN_SEEDS = 10


def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def compare(x: str, y: str, *, protocol: str, seeds: str,
            iqms: tuple[float, float] | None = None,
            improvement: dict[str, float] | None = None,
            rates: tuple[int, int, int, int] | None = None,
            digits: int = 1, measure: str = "IQM",
            counts: tuple[int, int] | None = None) -> str:
    """'X is ahead of Y (PROTOCOL, SEEDS: IQM X a, Y b; P(X > Y) = p [low, high])', 'Y is ahead
    of X (...)' or 'X and Y are not separated (...)'.

    Either `iqms` (X's, Y's) with `improvement` ({"p", "low", "high"}: P(X > Y), as
    `xlvin.stats.improvement_over` gives it, already oriented so that > is better), or `rates`
    (X's successes and runs, Y's successes and runs), judged by Fisher's exact test. `measure`
    names what the IQMs are of ("IQM", "AUC IQM", ...). `counts`, X's and Y's seeds: where
    either has fewer than `MIN_SEEDS`, 'X and Y are not compared (PROTOCOL, SEEDS, fewer than
    10: IQM X a, Y b)', whatever the interval.
    """
    if (rates is None) == (improvement is None or iqms is None):
        raise ValueError("compare takes either iqms and improvement, or rates")
    if counts is not None and min(counts) < MIN_SEEDS and iqms is not None:
        return (f"{x} and {y} are not compared ({protocol}, {seeds}, fewer than {MIN_SEEDS}: "
                f"{measure} {x} {_number(iqms[0], digits)}, {y} {_number(iqms[1], digits)})")
    if rates is not None:
        sx, nx, sy, ny = rates
        p = fisher_exact(sx, nx, sy, ny)
        evidence = f"{x} {sx} of {nx}, {y} {sy} of {ny}; Fisher's p = {p:.2f}"
        ahead = None if p >= ALPHA else sx / nx > sy / ny
    else:
        evidence = (f"{measure} {x} {_number(iqms[0], digits)}, {y} {_number(iqms[1], digits)}; "
                    f"P({x} > {y}) = {improvement_text(improvement)}")
        ahead = separated(improvement)
    verdict = (f"{x} and {y} are not separated" if ahead is None
               else f"{x} is ahead of {y}" if ahead else f"{y} is ahead of {x}")
    return f"{verdict} ({protocol}, {seeds}: {evidence})"


def separated(improvement: dict[str, float], family: bool = False) -> bool | None:
    """The verdict of P(X > Y) = {"p", "low", "high"}: True where X is ahead (its 95 % interval
    above 0.5), False where Y is (below), None where the two are not separated; by its
    family-wise interval ("family_low", "family_high") where `family`."""
    low, high = (improvement["family_low"], improvement["family_high"]) if family else (
        improvement["low"], improvement["high"])
    return True if low > 0.5 else False if high < 0.5 else None


def seed_count(count: int) -> str:
    """'1 seed', '7 seeds'."""
    return f"{count:,} seed{'s' * (count != 1)}"


def seed_counts(n: int, m: int) -> str:
    """Two sides' seed counts: '7 seeds each', '1 seed each', '3 and 2 seeds'."""
    return f"{seed_count(n)} each" if n == m else f"{n:,} and {seed_count(m)}"


def compare_seeds(x: str, y: str, x_seeds: Sequence[float], y_seeds: Sequence[float], *,
                  protocol: str, digits: int = 1, measure: str = "IQM") -> str:
    """`compare` of X's and Y's per-seed values (larger is better), the seed counts said, where
    each side has `MIN_SEEDS` or more; else 'X and Y are not compared (PROTOCOL, 3 and 2 seeds,
    fewer than 10: IQM X a, Y b)'."""
    counts = seed_counts(len(x_seeds), len(y_seeds))
    iqms = (float(iqm(x_seeds)), float(iqm(y_seeds)))
    return compare(x, y, protocol=protocol, seeds=counts, iqms=iqms,
                   improvement=improvement_over(x_seeds, y_seeds), digits=digits,
                   measure=measure, counts=(len(x_seeds), len(y_seeds)))
