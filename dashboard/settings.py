"""The ``dashboard:`` section of the config: refresh interval, default range, points per trace.

Durations are written as everywhere else in the config (``15s``, ``6h``, ``7d``; bare numbers
are seconds) and held as integer milliseconds. Every field has a default, so the section is
optional.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from store.durations import format_duration, parse_duration_ms

MIN_RANGE_MS = 15 * 60_000
MAX_RANGE_MS = 30 * 86_400_000
MAX_POINTS_PER_TRACE = 2000  # the ceiling; every query is stepped to stay under it


duration_ms = parse_duration_ms  # the config's one duration syntax (store.durations)


DurationMs = Annotated[int, BeforeValidator(duration_ms)]


class DashboardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="serve the dashboard at /dashboard/ (and redirect / to it)")
    refresh_interval: DurationMs = Field(15_000, description="live refresh of every panel; 0 switches it off")
    default_range: DurationMs = Field(6 * 3_600_000, description="time range shown first, 15m .. 30d")
    max_points_per_trace: int = Field(
        1000, ge=10, le=MAX_POINTS_PER_TRACE, description="upper bound of points per trace (steps are picked from the range)"
    )

    @model_validator(mode="after")
    def _bounds(self) -> DashboardSettings:
        if self.refresh_interval and self.refresh_interval < 1000:
            raise ValueError("refresh_interval: use at least 1s (or 0 to switch live refresh off)")
        if not MIN_RANGE_MS <= self.default_range <= MAX_RANGE_MS:
            raise ValueError("default_range: must be between 15m and 30d")
        return self


__all__ = ["DashboardSettings", "DurationMs", "duration_ms", "format_duration", "MAX_POINTS_PER_TRACE"]
