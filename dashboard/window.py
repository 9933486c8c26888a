"""Time ranges and step planning: every query is downsampled in the store, never in the browser.

The step of a query is picked from the range so that each trace has at most
``max_points`` points, and so that a figure with many traces (64 GPUs) stays within a point
budget. Steps are "nice" multiples of a minute where possible, because the store answers
minute- and hour-aligned steps from its 1 min / 1 h rollups instead of decoding raw chunks;
and when a query over many series would read too many 1 min rollup rows (a week of 64 GPUs
is 645 k rows per metric), the step is raised to an hour so the 1 h rollups answer it. Pure:
``now`` is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.settings import MAX_POINTS_PER_TRACE, format_duration

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000

# The time-range picker's choices, 15 min .. 30 days.
RANGES_MS: tuple[int, ...] = (
    15 * MINUTE_MS, HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, DAY_MS, 2 * DAY_MS, 7 * DAY_MS, 14 * DAY_MS, 30 * DAY_MS,
)  # fmt: skip
NICE_STEPS_MS: tuple[int, ...] = (
    15_000, 30_000, MINUTE_MS, 2 * MINUTE_MS, 5 * MINUTE_MS, 10 * MINUTE_MS, 15 * MINUTE_MS, 30 * MINUTE_MS,
    HOUR_MS, 2 * HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, DAY_MS,
)  # fmt: skip
FIGURE_POINTS = 24_000  # points per figure across all its traces (bytes sent and draw time)
MAX_ROLLUP_ROWS = 100_000  # 1 min rollup rows a query may read before it steps by hours (cold: ~3 µs a row)


def range_label(range_ms: int) -> str:
    return format_duration(range_ms)


def range_options(default_ms: int) -> list[dict[str, str | int]]:
    """Dropdown options; a configured default that is not a preset is added in order."""
    values = sorted(set(RANGES_MS) | {default_ms})
    return [{"label": f"last {range_label(v)}", "value": v} for v in values]


def parse_range(value: object, default_ms: int) -> int:
    """The picker's value, clamped to 15 min .. 30 d; anything unreadable means the default."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default_ms
    try:
        ms = int(float(value))
    except ValueError:
        return default_ms
    return min(max(ms, RANGES_MS[0]), RANGES_MS[-1])


def fitted_range(default_ms: int, age_ms: int | None) -> int:
    """The range to show first: the smallest preset that covers data ``age_ms`` old (15 min at
    least), never more than ``default_ms``; ``default_ms`` when the age is unknown."""
    if age_ms is None:
        return default_ms
    fits = next((r for r in RANGES_MS if r >= age_ms), RANGES_MS[-1])
    return min(default_ms, fits)


@dataclass(frozen=True)
class Window:
    """Buckets ``[t, t + step)`` from ``start_ms`` (a multiple of the step) through ``end_ms``."""

    start_ms: int
    end_ms: int
    step_ms: int

    @property
    def points(self) -> int:
        return (self.end_ms - self.start_ms) // self.step_ms + 1

    @property
    def range_ms(self) -> int:
        return self.end_ms - self.start_ms


def plan(
    now_ms: int,
    range_ms: int,
    *,
    traces: int = 1,
    series: int | None = None,
    max_points: int = 1000,
    figure_points: int = FIGURE_POINTS,
    max_rollup_rows: int = MAX_ROLLUP_ROWS,
    min_step_ms: int = NICE_STEPS_MS[0],
) -> Window:
    """The window ending at ``now`` for ``traces`` traces read from ``series`` stored series."""
    points = max(2, min(max_points, MAX_POINTS_PER_TRACE, figure_points // max(1, traces)))
    # Two buckets of slack: the first starts at or before now - range, the last is in progress.
    wanted = -(-range_ms // max(1, points - 2))
    step = next((s for s in NICE_STEPS_MS if s >= max(wanted, min_step_ms)), None)
    if step is None:
        step = -(-wanted // DAY_MS) * DAY_MS
    stored = traces if series is None else series
    if step < HOUR_MS and stored * (range_ms // MINUTE_MS) > max_rollup_rows:
        step = HOUR_MS
    start = (now_ms - range_ms) // step * step
    return Window(start, now_ms, step)


__all__ = ["Window", "plan", "parse_range", "fitted_range", "range_options", "RANGES_MS", "NICE_STEPS_MS", "HOUR_MS", "DAY_MS", "MINUTE_MS"]
