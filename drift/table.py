"""The drift table (one row per node, one column per component or watched setting, odd values
marked) and the history of versions, read from the info series over a time range.

Used by the dashboard's Drift page and the finance report's ``software`` section. A node is the
series' ``node`` label (fleet agents add it), else ``host`` (NVML, NCCL logs), else the host part
of ``instance`` (an engine's endpoint), so an engine's version lands on the row of the machine
that runs it. The value a column's nodes mostly share is the intended one (the rule's choice,
see :mod:`alerts.drift_rules`); the others are odd. Per cluster label when there is one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from store.interfaces import SeriesReader
from store.reader import RangeQuery
from store.series_index import Selector

INFO, ENV = "node_software_info", "nccl_env_info"
COMPONENT_ORDER = ("driver", "cuda_driver", "nvml", "vbios", "nccl", "engine")


def node_of(labels: Mapping[str, str]) -> str:
    if labels.get("node"):
        return labels["node"]
    if labels.get("host"):
        return labels["host"]
    instance = labels.get("instance", "")
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance or "unknown"


def column_of(metric: str, labels: Mapping[str, str]) -> tuple[str, str]:
    """(column, value) of one info series: ``engine vllm`` / ``vbios`` / ``NCCL_X``."""
    if metric == ENV:
        return labels.get("name", "?"), labels.get("value", "")
    component = labels.get("component", "?")
    if component == "engine":
        return f"engine {labels.get('engine', '?')}", labels.get("version", "")
    return component, labels.get("version", "")


@dataclass(frozen=True)
class Span:
    """One value of one column on one node, and when it was seen in the range."""

    node: str
    cluster: str
    column: str
    value: str
    first_ms: int
    last_ms: int


@dataclass
class DriftTable:
    columns: list[str]
    rows: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (cluster, node) -> column -> value
    odd: set[tuple[str, str, str]] = field(default_factory=set)  # (cluster, node, column)
    intended: dict[tuple[str, str], str] = field(default_factory=dict)  # (cluster, column) -> the common value


def _sort_columns(columns: set[str]) -> list[str]:
    def key(c: str) -> tuple[int, str]:
        base = c.split(" ", 1)[0]
        return (COMPONENT_ORDER.index(base) if base in COMPONENT_ORDER else len(COMPONENT_ORDER), c)
    return sorted(columns, key=key)


def drift_table(current: list[Span]) -> DriftTable:
    """The table of the latest value of each (node, column); several values of a column on one
    node (VBIOS of several GPUs, or settings differing between its processes) are joined."""
    cells: dict[tuple[str, str], dict[str, set[str]]] = {}
    for span in current:
        cells.setdefault((span.cluster, span.node), {}).setdefault(span.column, set()).add(span.value)
    table = DriftTable(_sort_columns({s.column for s in current}))
    for row, columns in sorted(cells.items()):
        table.rows[row] = {c: ", ".join(sorted(values)) for c, values in columns.items()}
    for cluster in {c for c, _ in table.rows}:
        for column in table.columns:
            values = Counter(r[column] for (c, _), r in table.rows.items() if c == cluster and column in r)
            if len(values) < 2:
                continue
            top = max(values.values())
            leaders = [v for v, n in values.items() if n == top]
            common = leaders[0] if len(leaders) == 1 else ""  # a tie: no intended value, all of them odd
            table.intended[(cluster, column)] = common or "no most common value"
            table.odd |= {(cluster, node, column) for (c, node), r in table.rows.items()
                          if c == cluster and column in r and r[column] != common}
    return table


def history(reader: SeriesReader, start_ms: int, end_ms: int, points: int = 500) -> list[Span]:
    """Every value seen in ``[start, end]``: its first and last step (one stepped max read per
    metric; a value present for part of a step counts for that step)."""
    step = max(60_000, (end_ms - start_ms) // points // 60_000 * 60_000)
    spans: dict[tuple[str, str, str, str], Span] = {}
    for metric in (INFO, ENV):
        for result in reader.range(RangeQuery(Selector(metric, ()), start_ms, end_ms, step, "max", None)):
            labels = {k: v for k, v in result.labels.items() if k != "__name__"}
            seen = np.asarray(result.ts_ms)[np.isfinite(np.asarray(result.values, np.float64))]
            if not len(seen):
                continue
            column, value = column_of(metric, labels)
            node, cluster = node_of(labels), labels.get("cluster", "")
            key = (cluster, node, column, value)
            first, last = int(seen.min()), int(seen.max())
            known = spans.get(key)
            if known is not None:
                first, last = min(first, known.first_ms), max(last, known.last_ms)
            spans[key] = Span(node, cluster, column, value, first, last)
    return sorted(spans.values(), key=lambda s: (s.cluster, s.node, s.column, s.first_ms))


def latest(spans: list[Span]) -> list[Span]:
    """Per (cluster, node, column), the values seen at the last step any of them was seen."""
    last: dict[tuple[str, str, str], int] = {}
    for s in spans:
        key = (s.cluster, s.node, s.column)
        last[key] = max(last.get(key, s.last_ms), s.last_ms)
    return [s for s in spans if s.last_ms == last[(s.cluster, s.node, s.column)]]


def changes(spans: list[Span]) -> list[tuple[Span, Span]]:
    """The values that replaced another on the same node and column within the range (upgrades,
    changed settings), as (before, after), oldest first."""
    previous: dict[tuple[str, str, str], Span] = {}
    out = []
    for s in sorted(spans, key=lambda s: s.first_ms):
        key = (s.cluster, s.node, s.column)
        if key in previous and previous[key].value != s.value:
            out.append((previous[key], s))
        previous[key] = s
    return out
