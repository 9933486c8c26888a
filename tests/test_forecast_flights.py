"""forecast_bench's flight series: hourly departures and delay minutes from flight records in
the vega-datasets parquet schema (date, delay, distance, origin, destination)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.forecast_flights import GROUP, flight_series, hourly_flight_series
from benchmarks.forecast_real import WINDOW


def _flights(path: Path, rows: list[tuple[dt.datetime, int, str]]) -> Path:
    table = pa.table(
        {
            "date": pa.array([r[0] for r in rows], pa.timestamp("us")),
            "delay": pa.array([r[1] for r in rows], pa.int64()),
            "distance": pa.array([500] * len(rows), pa.int64()),
            "origin": pa.array([r[2] for r in rows], pa.large_string()),
            "destination": pa.array(["ORD"] * len(rows), pa.large_string()),
        }
    )
    pq.write_table(table, path)
    return path


def test_flights_become_hourly_departures_and_delay_minutes(tmp_path: Path) -> None:
    start = dt.datetime(2001, 1, 1)
    rows = [
        (start + dt.timedelta(minutes=1), 33, "DEN"),
        (start + dt.timedelta(minutes=59), -4, "SEA"),  # early: no delay minutes
        (start + dt.timedelta(hours=2, minutes=30), 10, "DEN"),
        (start + dt.timedelta(hours=2, minutes=31), 5, "LAX"),
        (start + dt.timedelta(days=15), 0, "BOS"),  # past the first window
    ]
    series = hourly_flight_series(_flights(tmp_path / "f.parquet", rows))
    assert list(series) == ["flights_all", "flights_DEN", "flights_SEA", "flights_BOS", "flights_delay"]
    assert series["flights_all"][:3].tolist() == [2.0, 0.0, 2.0]
    assert series["flights_DEN"][:3].tolist() == [1.0, 0.0, 1.0]
    assert series["flights_SEA"][:3].tolist() == [1.0, 0.0, 0.0]
    assert series["flights_delay"][:3].tolist() == [33.0, 0.0, 15.0]
    assert series["flights_BOS"][15 * 24] == 1.0 and series["flights_BOS"].sum() == 1.0
    assert all(v.shape == (15 * 24 + 1,) for v in series.values())

    windows = flight_series(tmp_path / "f.parquet")
    assert [w.name for w in windows] == [f"{name}_w0" for name in series]
    assert all(w.group == GROUP and w.y.shape == (WINDOW,) for w in windows)


def test_records_before_2001_are_not_the_expected_data_set(tmp_path: Path) -> None:
    path = _flights(tmp_path / "old.parquet", [(dt.datetime(2000, 12, 31, 23), 1, "DEN")])
    with pytest.raises(ValueError, match=r"old\.parquet: flights before 2001-01-01"):
        hourly_flight_series(path)


def test_a_missing_file_is_skipped_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert flight_series(tmp_path / "absent.parquet") == []
    assert "skipping the flight series" in capsys.readouterr().out

