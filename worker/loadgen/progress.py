"""A one-line progress bar on stderr (only when it is a terminal, or when asked)."""

from __future__ import annotations

import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO, *, total: int | None = None, duration_s: float | None = None,
                 enabled: bool | None = None, width: int = 30) -> None:
        self.stream, self.total, self.duration_s, self.width = stream, total, duration_s, width
        self.enabled = stream.isatty() if enabled is None else enabled
        self._last = 0.0
        self._shown = False
        self._latest: tuple[int, int, float] | None = None

    def update(self, done: int, failed: int, elapsed_s: float, force: bool = False) -> None:
        if not self.enabled:
            return
        self._latest = (done, failed, elapsed_s)
        now = time.monotonic()
        if not force and now - self._last < 0.1 and (self.total is None or done < self.total):
            return
        self._last = now
        fractions = []
        if self.total:
            fractions.append(done / self.total)
        if self.duration_s:
            fractions.append(elapsed_s / self.duration_s)
        frac = min(1.0, max(fractions)) if fractions else 0.0
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled) if fractions else ""
        rate = done / elapsed_s if elapsed_s > 0 else 0.0
        self.stream.write(f"\r[{bar}] {done} done, {failed} failed, {elapsed_s:6.1f} s, {rate:6.2f} req/s ")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self.enabled and self._latest is not None:
            self.update(*self._latest, force=True)
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()
