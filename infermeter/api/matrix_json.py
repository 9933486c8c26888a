"""A range query's matrix as Prometheus's JSON body, written as text directly.

A per-host panel over a 4 k-host fleet answers 250 k points; building a list per point and
handing it to the JSON encoder cost about as much as evaluating the query. The step stamps are
shared by every series and formatted once; each value is formatted as Prometheus does (Go's
shortest 'f' form, NaN, +Inf) and joined into the text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from promql.aggregate import format_value
from promql.matrix import Series


def matrix_body(series: Iterable[Series]) -> bytes:
    stamps: dict[int, str] = {}  # ms -> its JSON number, shared by the series
    parts = []
    for s in series:
        times = s.ts_ms.tolist()
        missing = [t for t in times if t not in stamps]
        stamps.update(zip(missing, map(json.dumps, (t / 1000 for t in missing))))
        points = ",".join(map(_POINT.format, map(stamps.__getitem__, times), format_values(s.values.tolist())))
        metric = json.dumps(dict(s.labels), ensure_ascii=False, separators=(",", ":"))
        parts.append(f'{{"metric":{metric},"values":[{points}]}}')
    text = '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}"
    return text.encode()


_POINT = '[{},"{}"]'


def format_values(values: list[float]) -> list[str]:
    """:func:`promql.aggregate.format_value` of each value; ``repr`` in one C loop for the
    common case (positional, no NaN or infinity), the general formatter for the rest."""
    texts = list(map(repr, values))
    return [t[:-2] if t.endswith(".0") else t if "e" not in t and "n" not in t else format_value(v)
            for t, v in zip(texts, values)]
