"""Series reads for the panels: filters turned into label matchers, every range query stepped
in the store (the step comes from :func:`dashboard.window.plan`), histogram percentiles from one
stepped read of the buckets, and instant values in the rule language (so a headline number and
the alert on it agree).

Filters: a *model* filter selects inference series by their ``model`` label and GPUs by the
nodes that serve those models (``gpu_generation_tokens_per_second`` and the inference targets'
hosts); a *node* filter selects GPU series by ``host`` and inference series by the node of
their ``instance`` (as the cost ledger attributes it: loopback means this host).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cost.attribution import TARGET_GPU_INFO
from dashboard.model import Line
from dashboard.window import NICE_STEPS_MS, Window, plan
from promql import SampleSource, Vector, context_at, parse
from promql.sources import StoreSource
from store.interfaces import SeriesReader
from store.quantile import bucket_quantile, parse_le
from store.reader import Combine, Fn, RangeQuery
from store.series_index import Matcher, Selector
from store.types import SeriesKey

Labels = dict[str, str]
Namer = Callable[[Labels], str]
MODEL_SOURCES = ("inference_generation_tokens_total", "inference_requests_total", "gpu_generation_tokens_per_second")
NODE_GPU_SOURCE = "gpu_utilization_ratio"
NODE_INFERENCE_SOURCE = "inference_requests_total"
NCCL_TIMEOUT_EVENTS = "nccl_timeout_event_timestamp_seconds"  # value: when the collector read the timeout


def _strings(value: object) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        return tuple(sorted({str(v) for v in value if v not in (None, "")}))
    return ()


@dataclass(frozen=True)
class Filters:
    models: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()

    @classmethod
    def of(cls, models: object, nodes: object) -> Filters:
        """From the dropdowns' values (None, one string or a list)."""
        return cls(_strings(models), _strings(nodes))

    @property
    def active(self) -> bool:
        return bool(self.models or self.nodes)

    def describe(self) -> str:
        parts = []
        if self.models:
            parts.append("model " + ", ".join(self.models))
        if self.nodes:
            parts.append("node " + ", ".join(self.nodes))
        return " and ".join(parts)


@dataclass(frozen=True)
class View:
    """What a callback draws: the range ending now, the filters, the points per trace."""

    now_ms: int
    range_ms: int
    filters: Filters = Filters()
    max_points: int = 1000

    @property
    def start_ms(self) -> int:
        return self.now_ms - self.range_ms

    def window(self, traces: int = 1, series: int | None = None, min_step_ms: int = NICE_STEPS_MS[0]) -> Window:
        return plan(self.now_ms, self.range_ms, traces=traces, series=series, max_points=self.max_points,
                    min_step_ms=min_step_ms)


def one_of(label: str, values: Iterable[str]) -> Matcher:
    """``label=~"(a|b)"`` with every value matched literally."""
    return Matcher(label, "=~", "|".join(re.escape(v) for v in sorted(set(values))) or "$^")


def gpu_name(labels: Labels) -> str:
    host = labels.get("host") or labels.get("instance", "")
    return f"{host}/{labels.get('gpu', '?')}" if host else f"gpu {labels.get('gpu', '?')}"


class SeriesQueries:
    def __init__(self, reader: SeriesReader, node_of: Callable[[str], str], source: SampleSource | None = None) -> None:
        self.reader = reader
        self.node_of = node_of
        # Expressions run through ``source``: over a remote engine, in the engine.
        self.source: SampleSource = source if source is not None else StoreSource(reader)

    # -- what exists -------------------------------------------------------------------------
    def keys(self, metric: str, matchers: Sequence[Matcher] = ()) -> list[SeriesKey]:
        return [key for _, key in self.reader.select(Selector(metric, tuple(matchers)))]

    def exists(self, metric: str) -> bool:
        return bool(self.reader.select(Selector(metric)))

    def models(self) -> list[str]:
        found = {key.get("model") for metric in MODEL_SOURCES for key in self.keys(metric)}
        return sorted(m for m in found if m)

    def nodes(self) -> list[str]:
        found = {key.get("host") for key in self.keys(NODE_GPU_SOURCE)}
        found |= {self.node_of(key.get("instance")) for key in self.keys(NODE_INFERENCE_SOURCE) if key.get("instance")}
        return sorted(n for n in found if n)

    def earliest_sample(self, now_ms: int, horizon_ms: int, metric: str = "up") -> int | None:
        """The first minute within ``horizon_ms`` before now with a sample of ``metric`` (every
        scraped or local target writes ``up``): a count per minute over the few ``up`` series,
        read from the 1 min rollups. None when there is no such series; ``now - horizon`` (or
        earlier) when the data is older than the horizon."""
        selector = Selector(metric)
        if not self.reader.select(selector):
            return None
        found = self.reader.range(RangeQuery(selector, now_ms - horizon_ms, now_ms, 60_000, "count", (), "sum"))
        if not found:
            return None
        seen = np.flatnonzero(np.nan_to_num(found[0].values) > 0)
        return int(found[0].ts_ms[seen[0]]) if len(seen) else None

    def cpu_nodes(self) -> list[str]:
        """Nodes whose engines run on CPUs only (``infermeter_target_gpu_info{gpu="cpu"}``, e.g.
        the embedded worker without a GPU): what the cost ledger prices per CPU node-hour."""
        info = self.keys(TARGET_GPU_INFO, [Matcher("gpu", "=", "cpu")])
        return sorted({self.node_of(key.get("target_instance")) for key in info if key.get("target_instance")})

    # -- filters as matchers -----------------------------------------------------------------
    def inference_matchers(self, metric: str, filters: Filters) -> tuple[Matcher, ...] | None:
        """Matchers for an inference metric; None when the filters exclude every series."""
        matchers: list[Matcher] = []
        if filters.models:
            matchers.append(one_of("model", filters.models))
        if filters.nodes:
            wanted = set(filters.nodes)
            instances = {k.get("instance") for k in self.keys(metric, matchers)}
            chosen = [i for i in instances if i and self.node_of(i) in wanted]
            if not chosen:
                return None
            matchers.append(one_of("instance", chosen))
        return tuple(matchers)

    def gpu_hosts(self, filters: Filters) -> set[str] | None:
        """Hosts a GPU panel may show; None means no host restriction."""
        hosts: set[str] | None = set(filters.nodes) if filters.nodes else None
        if filters.models:
            serving = {k.get("host") for k in self.keys("gpu_generation_tokens_per_second", [one_of("model", filters.models)])}
            serving |= {self.node_of(k.get("instance")) for k in self.keys(NODE_INFERENCE_SOURCE, [one_of("model", filters.models)])}
            serving.discard("")
            hosts = serving if hosts is None else hosts & serving
        return hosts

    def gpu_matchers(self, filters: Filters) -> tuple[Matcher, ...] | None:
        hosts = self.gpu_hosts(filters)
        if hosts is None:
            return ()
        if not hosts:
            return None
        return (one_of("host", hosts),)

    def window_for(self, metric: str, matchers: Sequence[Matcher] | None, view: View, traces: int = 1) -> Window:
        """A window for reads of ``metric`` that will be combined with each other."""
        found = self.reader.select(Selector(metric, tuple(matchers or ()))) if matchers is not None else []
        return view.window(traces=traces, series=max(1, len(found)))

    # -- stepped reads -----------------------------------------------------------------------
    def range(
        self,
        metric: str,
        matchers: Sequence[Matcher] | None,
        view: View,
        *,
        fn: Fn = "avg",
        by: tuple[str, ...] | None = None,
        combine: Combine = "sum",
        name: Namer | None = None,
        group: Namer | None = None,
        window: Window | None = None,
    ) -> list[Line]:
        """One line per series (``by=None``) or per ``by`` group, stepped in the store (with
        ``window`` when given: lines that are combined later must share their steps)."""
        if matchers is None:
            return []
        selector = Selector(metric, tuple(matchers))
        found = self.reader.select(selector)
        if not found:
            return []
        if window is None:
            traces = len(found) if by is None else len({tuple(k.get(label) for label in by) for _, k in found})
            window = view.window(traces=traces, series=len(found))
        results = self.reader.range(
            RangeQuery(selector, window.start_ms, window.end_ms, window.step_ms, fn, by, combine)
        )
        namer = name or _default_name(by)
        lines = []
        for r in results:
            labels = {k: v for k, v in r.labels.items() if k != "__name__"}
            ts, values = r.ts_ms, r.values
            if fn in ("rate", "increase") and len(ts) > 1 and ts[-1] + window.step_ms > view.now_ms:
                ts, values = ts[:-1], values[:-1]  # the bucket in progress is no rate yet
            lines.append(Line(namer(labels), ts, values, group(labels) if group else "", labels))
        return sorted(lines, key=lambda line: line.name)

    def quantiles(
        self, metric: str, qs: Sequence[float], matchers: Sequence[Matcher] | None, view: View, by: tuple[str, ...] = ()
    ) -> list[Line]:
        """Percentiles of a histogram (``<metric>_bucket``) per step, from one stepped read of the
        buckets' increase (Prometheus's ``histogram_quantile`` over ``sum by (le)``)."""
        if matchers is None:
            return []
        selector = Selector(f"{metric}_bucket", tuple(matchers))
        found = self.reader.select(selector)
        if not found:
            return []
        groups = len({tuple(k.get(label) for label in by) for _, k in found})
        window: Window = view.window(traces=groups * len(qs), series=len(found))
        grouped = self.reader.range(
            RangeQuery(selector, window.start_ms, window.end_ms, window.step_ms, "increase", (*by, "le"), "sum")
        )
        per_group: dict[tuple[str, ...], list[tuple[float, np.ndarray]]] = {}
        stamps = grouped[0].ts_ms if grouped else np.empty(0, np.int64)
        keep = len(stamps) - 1 if len(stamps) > 1 and stamps[-1] + window.step_ms > view.now_ms else len(stamps)
        stamps = stamps[:keep]  # the bucket in progress has too few observations yet
        for r in grouped:
            key = tuple(r.labels.get(label, "") for label in by)
            per_group.setdefault(key, []).append((parse_le(r.labels.get("le", "+Inf")), r.values[:keep]))
        lines = []
        for key, members in sorted(per_group.items()):
            bounds = np.asarray([b for b, _ in members])
            counts = np.vstack([v for _, v in members])
            prefix = " ".join(key)
            for q in qs:
                label = f"p{q * 100:g}"
                lines.append(Line(f"{prefix} {label}".strip(), stamps, bucket_quantile(q, bounds, counts), prefix,
                                  dict(zip(by, key))))
        return lines

    # -- NCCL --------------------------------------------------------------------------------
    def nccl_timeout_events(self, matchers: Sequence[Matcher] | None, view: View) -> list[tuple[Labels, int]]:
        """Every NCCL watchdog timeout read in the view's range: its series' labels and the time
        the collector read it (the series' value), newest first. One stepped ``max`` read: the
        value is the same in every sample, so the step does not blur the time."""
        out = []
        for line in self.range(NCCL_TIMEOUT_EVENTS, matchers, view, fn="max"):
            finite = line.values[np.isfinite(line.values)]
            if len(finite):
                at_ms = int(round(float(finite.max()) * 1000))
                if view.start_ms <= at_ms <= view.now_ms:
                    out.append((line.labels, at_ms))
        return sorted(out, key=lambda event: -event[1])

    # -- instant values ----------------------------------------------------------------------
    def instant(self, expr: str, at_ms: int) -> list[tuple[Labels, float]]:
        """An expression of the rule language at ``at_ms``: [(labels, value)]."""
        value = context_at(self.source, at_ms).evaluate(parse(expr))
        if isinstance(value, Vector):
            return [(labels, v) for labels, v in value.as_dicts() if v == v]
        number = float(value) if not isinstance(value, str) else float("nan")
        return [({}, number)] if number == number else []

    def instant_one(self, expr: str, at_ms: int) -> float | None:
        found = self.instant(expr, at_ms)
        return found[0][1] if found else None


def _default_name(by: tuple[str, ...] | None) -> Namer:
    if by is None:
        return lambda labels: ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "value"
    return lambda labels: " ".join(labels.get(label, "") for label in by).strip() or "all"


def selector_text(metric: str, matchers: Sequence[Matcher] = (), extra: str = "") -> str:
    """``metric{a=~"x|y",...}`` in the rule language, values escaped."""
    parts = [f'{m.label}{m.op}"{_escape(m.value)}"' for m in matchers]
    if extra:
        parts.append(extra)
    return f"{metric}{{{', '.join(parts)}}}" if parts else metric


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


__all__ = ["Filters", "View", "SeriesQueries", "gpu_name", "one_of", "selector_text", "NCCL_TIMEOUT_EVENTS"]
