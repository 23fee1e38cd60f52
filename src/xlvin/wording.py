"""The one wording rule of a comparison on our pages: X is "ahead of" Y only where the 95 %
interval of P(X > Y) excludes 0.5 (for rates, where Fisher's exact p < 0.05), always with the
protocol and the seeds said; otherwise the two are "not separated", with their IQMs (or rates).
Every results page renders its comparisons through `compare`, so no sentence says more than its
interval."""

from xlvin.stats import fisher_exact, improvement_text

#: Fisher's exact p below which two rates are separated.
ALPHA = 0.05


def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def compare(x: str, y: str, *, protocol: str, seeds: str,
            iqms: tuple[float, float] | None = None,
            improvement: dict[str, float] | None = None,
            rates: tuple[int, int, int, int] | None = None,
            digits: int = 1, measure: str = "IQM") -> str:
    """'X is ahead of Y (PROTOCOL, SEEDS: IQM X a, Y b; P(X > Y) = p [low, high])', 'Y is ahead
    of X (...)' or 'X and Y are not separated (...)'.

    Either `iqms` (X's, Y's) with `improvement` ({"p", "low", "high"}: P(X > Y), as
    `xlvin.stats.improvement_over` gives it, already oriented so that > is better), or `rates`
    (X's successes and runs, Y's successes and runs), judged by Fisher's exact test. `measure`
    names what the IQMs are of ("IQM", "AUC IQM", ...).
    """
    if (rates is None) == (improvement is None or iqms is None):
        raise ValueError("compare takes either iqms and improvement, or rates")
    if rates is not None:
        sx, nx, sy, ny = rates
        p = fisher_exact(sx, nx, sy, ny)
        evidence = f"{x} {sx} of {nx}, {y} {sy} of {ny}; Fisher's p = {p:.2f}"
        ahead = None if p >= ALPHA else sx / nx > sy / ny
    else:
        evidence = (f"{measure} {x} {_number(iqms[0], digits)}, {y} {_number(iqms[1], digits)}; "
                    f"P({x} > {y}) = {improvement_text(improvement)}")
        ahead = True if improvement["low"] > 0.5 else False if improvement["high"] < 0.5 else None
    verdict = (f"{x} and {y} are not separated" if ahead is None
               else f"{x} is ahead of {y}" if ahead else f"{y} is ahead of {x}")
    return f"{verdict} ({protocol}, {seeds}: {evidence})"


def seed_count(count: int) -> str:
    """'1 seed', '7 seeds'."""
    return f"{count:,} seed{'s' * (count != 1)}"
