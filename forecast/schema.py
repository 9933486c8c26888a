"""Tables of stored forecasts (forecast); migrated by Alembic (migrations/versions/0004_forecast.py).

* ``forecast_runs``   -- one row per series per forecast: model, backtest error, flags and
                         captured warnings (JSON lists), details (JSON: candidate scores,
                         interval calibration, the ratio check), generated_at. Timestamps are
                         integer milliseconds UTC, like the store's.
* ``forecast_points`` -- the hourly values of a run: mean and the 80 %/95 % bounds. NULL where
                         a value is undefined (SQLite cannot keep NaN).

The latest forecast of a series is the run with the greatest ``generated_at_ms`` (then id).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

# SQLite only makes an INTEGER PRIMARY KEY an alias of the rowid (and so autoincrementing).
IdType = BigInteger().with_variant(Integer(), "sqlite")

forecast_runs = Table(
    "forecast_runs",
    metadata,
    Column("id", IdType, primary_key=True, autoincrement=True),
    Column("series", String(255), nullable=False),
    Column("generated_at_ms", BigInteger, nullable=False),
    Column("start_ms", BigInteger, nullable=False),
    Column("step_ms", Integer, nullable=False),
    Column("horizon", Integer, nullable=False),
    Column("model", String(255), nullable=False),
    Column("backtest_wape", Double, nullable=True),
    Column("backtest_mase", Double, nullable=True),
    Column("backtest_coverage80", Double, nullable=True),
    Column("backtest_coverage95", Double, nullable=True),
    Column("history_points", Integer, nullable=False),
    Column("flags", Text, nullable=False),
    Column("warnings", Text, nullable=False),
    Column("details", Text, nullable=False),
    Index("ix_forecast_runs_series_generated_at_ms", "series", "generated_at_ms"),
)

forecast_points = Table(
    "forecast_points",
    metadata,
    Column("run_id", BigInteger, ForeignKey("forecast_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("ts_ms", BigInteger, nullable=False),
    Column("mean", Double, nullable=True),
    Column("lo80", Double, nullable=True),
    Column("hi80", Double, nullable=True),
    Column("lo95", Double, nullable=True),
    Column("hi95", Double, nullable=True),
)
