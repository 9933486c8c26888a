"""When did each scrape of the simulated fleet become queryable in the engine? Part 2 of
:mod:`benchmarks.fleet_bench`: the engine is polled every second for every target's newest
``up`` sample (``tlast_over_time``, MetricsQL); a scrape at ``t`` arrived at the first poll
that saw a newest sample at or after ``t`` (the agents deliver each target's scrapes in order)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np


class ScrapeWatch:
    def __init__(self, engine_url: str, interval_ms: int, poll_s: float = 1.0) -> None:
        self.engine_url = engine_url
        self.interval_ms = interval_ms
        self.poll_s = poll_s
        self.polls: list[tuple[float, dict[str, float]]] = []  # (wall time, instance -> newest ts s)
        self.delays: list[float] = []
        self._stop = threading.Event()

    @contextlib.contextmanager
    def polling(self) -> Iterator[None]:
        thread = threading.Thread(target=self._poll, name="scrape-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join(10)

    def _poll(self) -> None:
        with httpx.Client(base_url=self.engine_url, timeout=10) as http:
            while not self._stop.is_set():
                began = time.time()
                try:
                    reply = http.get("/api/v1/query", params={
                        "query": 'tlast_over_time(up{job="fleet"}[10m])', "nocache": "1"}).json()
                    newest = {r["metric"]["instance"]: float(r["value"][1]) for r in reply["data"]["result"]}
                    self.polls.append((time.time(), newest))
                except (httpx.HTTPError, KeyError, ValueError):
                    pass  # a missed poll only makes later arrivals look later
                self._stop.wait(max(0.0, self.poll_s - (time.time() - began)))

    def _scrapes(self, t0: float, t1: float) -> dict[str, list[float]]:
        """Every target's scrape timestamps (s) in [t0, t1), as the engine holds them now."""
        with httpx.Client(base_url=self.engine_url, timeout=60) as http:
            http.get("/internal/force_flush")
            reply = http.post("/api/v1/export", data={"match[]": 'up{job="fleet"}', "start": f"{t0:.3f}", "end": f"{t1:.3f}"})
        out: dict[str, list[float]] = {}
        for line in reply.text.splitlines():
            row = json.loads(line)
            out.setdefault(row["metric"]["instance"], []).extend(t / 1000 for t in row["timestamps"] if t0 <= t / 1000 < t1)
        return out

    def delayed(self, t0: float, t1: float) -> tuple[int, int]:
        """(scrapes not queryable within 2 intervals of their timestamp, scrapes) in [t0, t1)."""
        limit = 2 * self.interval_ms / 1000
        polls = list(self.polls)
        times = np.asarray([p for p, _ in polls])
        late = total = 0
        for instance, stamps in self._scrapes(t0, t1).items():
            newest = np.maximum.accumulate(np.asarray([seen.get(instance, -np.inf) for _, seen in polls]))
            for ts in stamps:
                total += 1
                first = int(np.searchsorted(newest, ts - 1e-6, side="left"))
                if first >= len(polls):
                    late += 1
                    continue
                delay = float(times[first] - ts)
                self.delays.append(delay)
                late += delay > limit
        return late, total

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.delays, q)) if self.delays else float("nan")
