"""Real hourly demand series from US flight records, for forecast_bench's real-series section.

Source: ``flights-3m.parquet`` of the npm package vega-datasets 3.2.1 -- three million US
domestic flights from 1 January to 30 June 2001, from the Bureau of Transportation Statistics'
on-time performance reports (departure time, delay in minutes, origin, destination).
``scripts/fetch-bench-data.sh`` (run by ``make bench``) puts it in ``.cache/bench-data``; the
project does not ship it.

Why flights: departures are arrivals of work at a service -- a strong daily cycle with empty
nights, a weekly one that is weaker than electricity's, holidays, storms that cut a day short,
and partial gaps in the records (an airport reporting a trickle for an afternoon). Five series,
every 14-day window of each (twelve), on the protocol of :mod:`benchmarks.forecast_real`:

* ``flights_all`` -- departures per hour, whole network (about 700 an hour by day);
* ``flights_DEN``, ``flights_SEA``, ``flights_BOS`` -- departures per hour of three airports of
  different size (20 to 40 an hour by day, a few at night): the noisier scale of one tenant;
* ``flights_delay`` -- minutes of departure delay per hour, whole network (early departures
  count zero): bursty like spend in an incident, a cost rather than a count.

The timestamps are local times without a zone; an hour is a local clock hour, as a service's
demand follows its users' clocks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.forecast_real import RealSeries, windows
from forecast.types import F64

DEFAULT_PATH = Path(__file__).resolve().parent.parent / ".cache" / "bench-data" / "flights-3m.parquet"
GROUP = "flights (BTS 2001)"
AIRPORTS = ("DEN", "SEA", "BOS")
_START_US = 978_307_200 * 1_000_000  # 2001-01-01 00:00 as microseconds since the epoch
_HOUR_US = 3_600 * 1_000_000


def hourly_flight_series(path: Path) -> dict[str, F64]:
    """The five hourly series (module doc) from ``path``, hour 0 = 2001-01-01 00:00."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["date", "delay", "origin"])
    micros = pc.cast(table["date"], pa.timestamp("us")).cast(pa.int64()).to_numpy()
    hour = (micros - _START_US) // _HOUR_US
    if hour.size == 0 or hour.min() < 0:
        raise ValueError(f"{path}: flights before 2001-01-01 or none at all; not the expected data set")
    n = int(hour.max()) + 1
    delay = np.maximum(table["delay"].to_numpy(), 0).astype(np.float64)
    origin = table["origin"]
    out: dict[str, F64] = {
        "flights_all": np.bincount(hour, minlength=n).astype(np.float64),
        "flights_delay": np.bincount(hour, weights=delay, minlength=n).astype(np.float64),
    }
    for airport in AIRPORTS:
        mine = pc.equal(origin, airport).to_numpy(zero_copy_only=False)
        out[f"flights_{airport}"] = np.bincount(hour[mine], minlength=n).astype(np.float64)
    return {name: out[name] for name in ("flights_all", *(f"flights_{a}" for a in AIRPORTS), "flights_delay")}


def flight_series(path: Path = DEFAULT_PATH) -> list[RealSeries]:
    """Every 14-day window of the five series; none (with a message) when the file is absent."""
    if not path.exists():
        print(f"skipping the flight series: {path} not found (scripts/fetch-bench-data.sh fetches it)")
        return []
    return [w for name, values in hourly_flight_series(path).items() for w in windows(name, values, GROUP)]
