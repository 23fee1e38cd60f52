"""Progress of the pre-trainings (the executor's, TransE's and its random-policy data), which can
take minutes before a run's first PPO update: a tqdm bar with its ETA when stderr is a terminal,
and otherwise (a log file, a pipe, CI) one plain line when it starts, one a minute and one when
it ends."""

import sys
import time
from typing import Any, Self, TextIO

from tqdm import tqdm

#: Seconds between two plain progress lines.
LINE_EVERY_S = 60.0


def duration(seconds: float) -> str:
    """`10.1s`, `2m07s` or `1h02m`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


class Progress:
    """Counts `total` units of one pre-training named `desc` (`update`, `close`; a context
    manager), `done` of them done already (a resumed pre-training). show=False prints nothing;
    `position`: the bar's line below the cursor when several processes draw bars at once (0:
    the first free line of this process; only a bar on the cursor's line stays on screen when
    done). `set_total` replaces an estimated total as the work goes on."""

    def __init__(
        self, desc: str, total: int, unit: str, show: bool = True, position: int = 0,
        done: int = 0, stream: TextIO | None = None,
    ) -> None:
        self.desc, self.total, self.unit, self.done = desc, total, unit, done
        self.stream = stream or sys.stderr
        self.start = self.last_line = time.monotonic()
        self.bar: tqdm | None = None
        self.lines = show and not self.stream.isatty()
        if show and not self.lines:
            self.bar = tqdm(total=total, initial=done, desc=desc, unit=unit, file=self.stream,
                            position=position or None, leave=None, dynamic_ncols=True)
        elif self.lines:
            self._line(f"started ({done:,}/{total:,} {unit}s)" if done else
                       f"started ({total:,} {unit}s)")

    def _line(self, text: str) -> None:
        print(f"xlvin: {self.desc}: {text}", file=self.stream, flush=True)

    def set_total(self, total: int) -> None:
        if total == self.total:
            return
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.lines and time.monotonic() - self.last_line >= LINE_EVERY_S:
            self.last_line = time.monotonic()
            elapsed = self.last_line - self.start
            fraction = min(self.done / self.total, 1.0) if self.total else 0.0
            left = f", about {duration(elapsed / fraction - elapsed)} left" if fraction else ""
            self._line(f"{self.done:,}/{self.total:,} {self.unit}s ({100 * fraction:.0f} %), "
                       f"{duration(elapsed)}{left}")

    def set_postfix(self, **values: Any) -> None:
        if self.bar is not None:
            self.bar.set_postfix(values)

    def close(self, finished: bool = True) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.lines:
            self.lines = False
            took = duration(time.monotonic() - self.start)
            self._line(f"done, {self.done:,} {self.unit}s in {took}" if finished
                       else f"stopped after {self.done:,} {self.unit}s ({took})")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, error: type[BaseException] | None, *_: object) -> None:
        self.close(finished=error is None)
