"""A one-line progress bar on stderr (only when it is a terminal, or when asked), drawn by
``rich.progress``.

On a terminal the line is redrawn in place (rich refreshes it ten times a second from its own
thread). Asked for (``--progress``) on something that is not a terminal, rich does not animate:
the final line is written once when the run ends. The bar fills with whichever is further along,
requests (``total``) or time (``duration_s``); with neither it is left out.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, TaskID, TextColumn
from rich.progress import Progress as RichProgress

_STATS = ("{task.fields[done]} done, {task.fields[failed]} failed, "
          "{task.fields[elapsed]:6.1f} s, {task.fields[rate]:6.2f} req/s")


class Progress:
    def __init__(self, stream: TextIO, *, total: int | None = None, duration_s: float | None = None,
                 enabled: bool | None = None, width: int = 30) -> None:
        self.stream, self.total, self.duration_s, self.width = stream, total, duration_s, width
        self.enabled = stream.isatty() if enabled is None else enabled
        self._bar: RichProgress | None = None  # started at the first update
        self._task = TaskID(0)

    def _start(self) -> RichProgress:
        columns: list[ProgressColumn] = []
        if self.total or self.duration_s:
            columns.append(BarColumn(bar_width=self.width))
        columns.append(TextColumn(_STATS, markup=False))
        bar = RichProgress(*columns, console=Console(file=self.stream), refresh_per_second=10,
                           redirect_stdout=False, redirect_stderr=False)
        self._task = bar.add_task("load", total=1.0, done=0, failed=0, elapsed=0.0, rate=0.0)
        return bar

    def update(self, done: int, failed: int, elapsed_s: float) -> None:
        if not self.enabled:
            return
        first = self._bar is None
        if self._bar is None:
            self._bar = self._start()
        fractions = []
        if self.total:
            fractions.append(done / self.total)
        if self.duration_s:
            fractions.append(elapsed_s / self.duration_s)
        rate = done / elapsed_s if elapsed_s > 0 else 0.0
        self._bar.update(self._task, completed=min(1.0, max(fractions, default=0.0)),
                         done=done, failed=failed, elapsed=elapsed_s, rate=rate)
        if first:
            self._bar.start()  # after the first numbers are in, so the first frame shows them

    def close(self) -> None:
        """Draws the latest numbers and ends the line (nothing if nothing was shown)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
