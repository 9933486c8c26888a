"""How many samples a checkpoint writes in its next slice: fixed, or sized to a time per slice.

Why: a background checkpoint on SQLite commits every slice on its own, and an append that wants
SQLite's write lock meanwhile waits for the slice in flight; so slices were small (5,000
samples, a few ms). But each slice also pays a fixed cost -- its statements, the merge of split
rollup buckets, a commit, the publish gate and the marks under the store's lock -- and at 5,000
samples that was about a quarter of the checkpoint thread's CPU (measured with the store
benchmark's pressure section: 0.80 and 0.77 CPU-s per M flushed at 5,000 samples a slice, 0.58
and 0.63 at 25,000). :class:`TimedSlices` keeps the wait bounded by time instead of by samples:
each slice is sized from the samples a second the previous ones were written at, so that it
takes about ``target_s``; where appends share the interpreter with it and slow it down, the
next slices shrink.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class SliceSizes(Protocol):
    def begin(self) -> int:
        """A slice starts: the samples it should take (it takes at least one series whatever
        this says)."""
        ...

    def end(self, samples: int) -> None:
        """The slice begun last is written (and, where each is, committed): it took ``samples``."""
        ...


class FixedSlices:
    def __init__(self, samples: int) -> None:
        self.samples = samples

    def begin(self) -> int:
        return self.samples

    def end(self, samples: int) -> None:
        pass


class TimedSlices:
    """Slices sized to take about ``target_s`` each, between ``least`` and ``most`` samples.

    The rate is a moving mean (weight ``smoothing`` for the newest slice), so one slice slowed by
    a page cache miss or a burst of appends moves the size by a fraction, not all the way. The
    first slice is ``least``: nothing is known of this machine's speed yet."""

    def __init__(self, target_s: float, least: int, most: int, smoothing: float = 0.3,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        if not 0 < least <= most:
            raise ValueError(f"slice sizes need 0 < least <= most (got {least}, {most})")
        if not target_s > 0:
            raise ValueError(f"a slice's target time must be positive (got {target_s} s)")
        self.target_s, self.least, self.most, self.smoothing = target_s, least, most, smoothing
        self.timer = timer
        self._rate: float | None = None  # samples a second
        self._began = 0.0

    def begin(self) -> int:
        self._began = self.timer()
        if self._rate is None:
            return self.least
        return int(min(self.most, max(self.least, self._rate * self.target_s)))

    def end(self, samples: int) -> None:
        if samples <= 0:
            return
        rate = samples / max(self.timer() - self._began, 1e-6)
        self._rate = rate if self._rate is None else self._rate + self.smoothing * (rate - self._rate)
