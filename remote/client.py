"""A client of a Prometheus-compatible engine's HTTP API (Prometheus, VictoriaMetrics single or
cluster, Mimir, Thanos): instant queries, raw samples and series lists.

``query_url`` is the API root the engine serves ``/api/v1/...`` under: ``http://vm:8428``,
``http://vmselect:8481/select/0/prometheus`` or ``http://mimir:8080/prometheus``. Every failure
is an :class:`EngineError` that names the URL and what the engine said, so a caller can keep it
as data (a rule's health, a panel's message) instead of crashing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import numpy as np

from promql.ast import VectorSelector
from promql.promql import to_promql
from promql.vector import Labels, Vector
from store.series_index import Selector
from store.types import Float64Array, Int64Array

_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class EngineError(RuntimeError):
    """The engine could not be reached or refused a request; the message says which and why."""


@dataclass(slots=True)
class RawMatrix:
    """Series with their raw samples: ``labels[i]`` owns ``ts[i]``/``values[i]``."""

    labels: list[dict[str, str]]
    ts: list[Int64Array]
    values: list[Float64Array]


def selector_text(selector: Selector, range_ms: int | None = None) -> str:
    return to_promql(VectorSelector(0, selector.metric, tuple(selector.matchers), range_ms))


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}"


class EngineClient:
    def __init__(
        self,
        query_url: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.query_url = query_url.rstrip("/")
        self._client = httpx.Client(headers=dict(headers or {}), timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._client.close()

    # -- transport ---------------------------------------------------------------------------
    def post(self, path: str, params: Mapping[str, Any] | list[tuple[str, str]]) -> httpx.Response:
        """The engine's reply to ``{query_url}{path}`` with ``params`` as a form body (as Grafana
        sends them: long selectors do not fit in a URL), whatever its status; EngineError when
        the engine cannot be reached. The connection pool is shared by every caller."""
        url = self.query_url + path
        try:
            pairs = list(params.items()) if isinstance(params, Mapping) else params
            return self._client.post(url, content=urlencode(pairs), headers=_FORM)
        except httpx.HTTPError as exc:
            raise EngineError(f"engine at {url} unreachable: {type(exc).__name__}: {exc}") from exc

    def call(self, path: str, params: Mapping[str, Any] | list[tuple[str, str]]) -> Any:
        """``data`` of a successful reply to ``{query_url}{path}``; EngineError otherwise."""
        url = self.query_url + path
        reply = self.post(path, params)
        try:
            body = reply.json()
        except (json.JSONDecodeError, ValueError):
            raise EngineError(f"engine at {url} answered {reply.status_code} without JSON: {reply.text[:200]!r}") from None
        if reply.status_code != 200 or body.get("status") != "success":
            what = body.get("error") or reply.text[:200]
            raise EngineError(f"engine at {url} refused the request ({reply.status_code} {body.get('errorType', '')}): {what}")
        return body.get("data")

    # -- queries -----------------------------------------------------------------------------
    def instant(self, expr: str, at_ms: int) -> Vector | float | str:
        """An instant query's result as the evaluator's values (vector, scalar or string)."""
        data = self.call("/api/v1/query", {"query": expr, "time": _seconds(at_ms)})
        kind, result = data.get("resultType"), data.get("result")
        if kind == "vector":  # values are strings, "+Inf", "-Inf" and "NaN" included: float() reads them all
            labels: list[Labels] = [tuple(sorted(r["metric"].items())) for r in result]
            values = np.fromiter((float(r["value"][1]) for r in result), np.float64, len(result))
            return Vector(labels, values)
        if kind == "scalar":
            return float(result[1])
        if kind == "string":
            return str(result[1])
        raise EngineError(f"engine at {self.query_url} answered a {kind} to an instant query of {expr!r}")

    def raw(self, selector: Selector, start_ms: int, end_ms: int) -> RawMatrix:
        """Every sample of the selected series in [start, end], as the engine stores them (an
        instant query of a range selector returns raw samples, on Prometheus and VictoriaMetrics)."""
        if end_ms < start_ms:
            return RawMatrix([], [], [])
        # The window (end - range, end] holds [start, end] with range = end - start + 1 ms.
        data = self.call("/api/v1/query", {"query": selector_text(selector, end_ms - start_ms + 1), "time": _seconds(end_ms)})
        if data.get("resultType") != "matrix":
            raise EngineError(f"engine at {self.query_url} answered a {data.get('resultType')} to a range selector")
        out = RawMatrix([], [], [])
        for series in data["result"]:
            points = series.get("values") or []
            ts = np.fromiter((round(float(p[0]) * 1000) for p in points), np.int64, len(points))
            vals = np.fromiter((float(p[1]) for p in points), np.float64, len(points))
            keep = (ts >= start_ms) & (ts <= end_ms)
            out.labels.append(dict(series["metric"]))
            out.ts.append(ts[keep])
            out.values.append(vals[keep])
        return out

    def series(self, selector: Selector, start_ms: int | None, end_ms: int | None) -> list[dict[str, str]]:
        params: list[tuple[str, str]] = [("match[]", selector_text(selector))]
        if start_ms is not None:
            params.append(("start", _seconds(max(start_ms, 0))))
        if end_ms is not None:
            params.append(("end", _seconds(end_ms)))
        found = self.call("/api/v1/series", params)
        return [dict(s) for s in found or []]

    def healthy(self, at_ms: int) -> str | None:
        """None when the engine answers a trivial query, else why not."""
        try:
            value = self.instant("1", at_ms)
        except EngineError as exc:
            return str(exc)
        if isinstance(value, Vector) and len(value) == 1:  # VictoriaMetrics answers a vector
            value = float(value.values[0])
        if not isinstance(value, float) or not math.isclose(value, 1.0):
            return f"engine at {self.query_url} answered {value!r} to the query 1"
        return None
