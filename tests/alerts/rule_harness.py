"""Drives rules over synthetic series with a fake clock: when does an alert fire?"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry

from alerts.engine import RuleEngine
from alerts.rulefile import RuleGroup
from alerts.state import FIRING
from promql.sources import MemorySource
from store.clock import ManualClock
from store.types import SeriesKey

T0 = 1_800_000_000_000
SeriesFn = Callable[[float], float]  # seconds since T0 -> value (NaN: no sample)


def source_of(series: Mapping[SeriesKey, SeriesFn], until_s: float, step_s: float = 15.0, start_s: float = 0.0) -> MemorySource:
    src = MemorySource()
    for key, fn in series.items():
        samples = []
        t = start_s
        while t <= until_s:
            v = fn(t)
            if v == v:
                samples.append((T0 + int(t * 1000), v))
            t += step_s
        src.add(key, samples)
    return src


def first_firing(
    groups: list[RuleGroup],
    alert: str,
    series: Mapping[SeriesKey, SeriesFn],
    minutes: float,
    every_s: float = 30.0,
    start_s: float = 0.0,
    data_start_s: float = 0.0,
) -> tuple[float | None, RuleEngine]:
    """Seconds after T0 when ``alert`` first fires (None if never), and the engine."""
    src = source_of(series, start_s + minutes * 60, start_s=data_start_s)
    clock = ManualClock(T0)
    engine = RuleEngine(groups, src, clock, CollectorRegistry())
    t = start_s
    while t <= start_s + minutes * 60:
        at = T0 + int(t * 1000)
        clock.set(at)
        for group in groups:
            engine.evaluate_group(group, at)
        for rule, inst in engine.active():
            if rule.name == alert and inst.state == FIRING:
                return t, engine
        t += every_s
    return None, engine
