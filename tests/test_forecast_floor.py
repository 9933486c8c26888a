"""forecast_bench's yardstick: the known-week profile on the real-series protocol."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.forecast_floor import WEEK, known_week_profile, print_known_week, window_ratio
from benchmarks.forecast_real import WINDOW


def test_the_known_week_is_each_hour_of_the_weeks_median() -> None:
    rng = np.random.default_rng(1)
    week = rng.uniform(10, 100, WEEK)
    y = np.tile(week, 5)
    y[WEEK + 7] = 1e6  # a burst in one week moves no median
    assert known_week_profile(np.concatenate([y, week[:30]])) == pytest.approx(week)


def test_on_a_timetable_with_independent_noise_it_errs_about_one_over_root_two() -> None:
    """Seasonal naive 168 differs from the truth by two draws of the noise, the median of 26
    weeks by about none: the ratio is near 1/sqrt(2) of the better seasonal naive."""
    rng = np.random.default_rng(2)
    week = 200 + 150 * np.sin(np.arange(WEEK) * 2 * np.pi / 24) + 60 * (np.arange(WEEK) >= 120)
    y = np.tile(week, 26) + rng.normal(0, 20, WEEK * 26)
    ratios = [window_ratio(y, i * WINDOW, known_week_profile(y)) for i in range(13)]
    assert 0.64 < float(np.mean(ratios)) < 0.78 and max(ratios) < 1.0, ratios


def test_nothing_is_printed_without_the_flight_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    print_known_week(tmp_path / "absent.parquet")
    assert capsys.readouterr().out == ""
