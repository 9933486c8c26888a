"""forecast_bench's --real-dir: real hourly series read from CSV files, cut into 14-day windows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.forecast_real import DIR_GROUP, WINDOW, RealDirError, dir_series, evaluate


def _write(path: Path, values: list[str], header: str = "hour,value") -> None:
    rows = [header] + [f"{i},{v}" for i, v in enumerate(values)]
    path.write_text("\n".join(rows) + "\n")


def test_windows_are_cut_per_file_and_empty_cells_are_missing_hours(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    values = [f"{v:.1f}" for v in rng.gamma(2.0, 500.0, size=2 * WINDOW + 40)]
    values[5] = ""
    _write(tmp_path / "requests.csv", values)
    _write(tmp_path / "short.csv", ["1"] * (WINDOW - 1))

    series = dir_series(tmp_path, max_windows=3)

    assert [s.name for s in series] == ["requests_w0", "requests_w1"]
    assert all(s.group == DIR_GROUP and s.y.shape == (WINDOW,) for s in series)
    assert np.isnan(series[0].y[5]) and np.isfinite(series[1].y).all()
    assert series[1].y[0] == float(values[WINDOW])
    assert series[0].origins == tuple(range(168, WINDOW - 72 + 1, 24))
    assert len(dir_series(tmp_path, max_windows=1)) == 1


def test_a_window_is_scored_against_both_seasonal_naives(tmp_path: Path) -> None:
    t = np.arange(WINDOW)
    y = 1000 + 400 * np.sin(2 * np.pi * t / 24) + 200 * (t % 168 >= 120)
    _write(tmp_path / "weekly.csv", [f"{v:.3f}" for v in y])
    result = evaluate(dir_series(tmp_path, 1)[0])
    assert result.group == DIR_GROUP and result.snaive168 is not None
    assert result.snaive168.wape < 1e-9 < result.snaive24.wape  # an exact weekly repeat
    assert result.method.points == 5 * 72


def test_a_file_without_a_value_column_is_named(tmp_path: Path) -> None:
    _write(tmp_path / "bad.csv", ["1", "2"], header="hour,tokens")
    with pytest.raises(RealDirError, match=r"bad\.csv: needs a column named 'value'"):
        dir_series(tmp_path, 3)


def test_a_cell_that_is_not_a_number_is_named_with_its_line(tmp_path: Path) -> None:
    _write(tmp_path / "typo.csv", ["1", "2", "x3"])
    with pytest.raises(RealDirError, match=r"typo\.csv, line 4: value 'x3' is not a number"):
        dir_series(tmp_path, 3)
