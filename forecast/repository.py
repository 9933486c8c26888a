"""Saving and reading forecasts in ``forecast_runs`` / ``forecast_points`` (SQLAlchemy Core)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Engine, and_, delete, exists, func, insert, select
from sqlalchemy.engine import Connection, Row

from forecast.ids import SeriesId
from forecast.record import StoredForecast, nan_array
from forecast.schema import forecast_points as points
from forecast.schema import forecast_runs as runs


def _db(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _json(value: Any) -> str:
    return json.dumps(value, allow_nan=False, default=_default, sort_keys=True)


def _default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def clean_json(value: Any) -> Any:
    """Replace NaN/inf (not JSON) by None, recursively."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


class ForecastRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def save_all(self, forecasts: Iterable[StoredForecast]) -> list[int]:
        """Insert in one transaction; returns the new run ids."""
        ids: list[int] = []
        with self.engine.begin() as conn:
            for f in forecasts:
                ids.append(self._save(conn, f))
        return ids

    def _save(self, conn: Connection, f: StoredForecast) -> int:
        row = {
            "series": str(f.series),
            "generated_at_ms": f.generated_at_ms,
            "start_ms": f.start_ms,
            "step_ms": f.step_ms,
            "horizon": f.horizon,
            "model": f.model[:255],
            "backtest_wape": None if f.backtest_wape is None else _db(f.backtest_wape),
            "backtest_mase": None if f.backtest_mase is None else _db(f.backtest_mase),
            "backtest_coverage80": None if f.backtest_coverage80 is None else _db(f.backtest_coverage80),
            "backtest_coverage95": None if f.backtest_coverage95 is None else _db(f.backtest_coverage95),
            "history_points": f.history_points,
            "flags": _json(list(f.flags)),
            "warnings": _json(list(f.warnings)),
            "details": _json(clean_json(f.details)),
        }
        run_id = int(conn.execute(insert(runs).values(**row).returning(runs.c.id)).scalar_one())
        if f.horizon:
            conn.execute(
                insert(points),
                [
                    {
                        "run_id": run_id,
                        "step": i,
                        "ts_ms": f.start_ms + i * f.step_ms,
                        "mean": _db(f.mean[i]),
                        "lo80": _db(f.lo80[i]),
                        "hi80": _db(f.hi80[i]),
                        "lo95": _db(f.lo95[i]),
                        "hi95": _db(f.hi95[i]),
                    }
                    for i in range(f.horizon)
                ],
            )
        return run_id

    def latest(self, series: SeriesId) -> StoredForecast | None:
        found = self.latest_many([series])
        return found[0] if found else None

    def latest_many(self, series: Sequence[SeriesId] | None = None) -> list[StoredForecast]:
        """The latest run of each series (all series with a run when ``series`` is None),
        in the order asked for (else by name)."""
        newer = runs.alias("newer")
        is_latest = ~exists().where(
            and_(
                newer.c.series == runs.c.series,
                (newer.c.generated_at_ms > runs.c.generated_at_ms)
                | ((newer.c.generated_at_ms == runs.c.generated_at_ms) & (newer.c.id > runs.c.id)),
            )
        )
        query = select(runs).where(is_latest)
        if series is not None:
            if not series:
                return []
            query = query.where(runs.c.series.in_([str(s) for s in series]))
        with self.engine.connect() as conn:
            run_rows = list(conn.execute(query))
            by_run: dict[int, list[Row[Any]]] = {int(r.id): [] for r in run_rows}
            if by_run:
                pts = conn.execute(
                    select(points)
                    .where(points.c.run_id.in_(list(by_run)))
                    .order_by(points.c.run_id, points.c.step)
                )
                for p in pts:
                    by_run[int(p.run_id)].append(p)
        out = {r.series: _record(r, by_run[int(r.id)]) for r in run_rows}
        order = [str(s) for s in series] if series is not None else sorted(out)
        return [out[name] for name in order if name in out]

    def prune(self, older_than_ms: int) -> int:
        """Delete runs generated before ``older_than_ms`` that are not their series' latest;
        returns how many runs went."""
        newer = runs.alias("newer")
        superseded = and_(
            runs.c.generated_at_ms < older_than_ms,
            exists().where(
                and_(newer.c.series == runs.c.series, newer.c.generated_at_ms > runs.c.generated_at_ms)
            ),
        )
        with self.engine.begin() as conn:
            ids = [int(i) for i in conn.execute(select(runs.c.id).where(superseded)).scalars()]
            for lo in range(0, len(ids), 500):
                chunk = ids[lo : lo + 500]
                conn.execute(delete(points).where(points.c.run_id.in_(chunk)))
                conn.execute(delete(runs).where(runs.c.id.in_(chunk)))
        return len(ids)

    def count_runs(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


def _record(r: Row[Any], pts: list[Row[Any]]) -> StoredForecast:
    def col(name: str) -> Any:
        return nan_array([getattr(p, name) for p in pts])

    return StoredForecast(
        series=SeriesId.parse(r.series),
        generated_at_ms=int(r.generated_at_ms),
        start_ms=int(r.start_ms),
        mean=col("mean"),
        lo80=col("lo80"),
        hi80=col("hi80"),
        lo95=col("lo95"),
        hi95=col("hi95"),
        model=r.model,
        backtest_wape=r.backtest_wape,
        backtest_mase=r.backtest_mase,
        backtest_coverage80=r.backtest_coverage80,
        backtest_coverage95=r.backtest_coverage95,
        flags=tuple(json.loads(r.flags)),
        warnings=tuple(json.loads(r.warnings)),
        details=json.loads(r.details),
        history_points=int(r.history_points),
        step_ms=int(r.step_ms),
        id=int(r.id),
    )
