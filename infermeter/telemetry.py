"""OpenTelemetry metrics and traces of the service itself, exported over OTLP/HTTP when asked.

Off by default (no endpoint): the tracer is a no-op and nothing is exported. When
``telemetry.otlp_endpoint`` is set, a MeterProvider with a periodic reader and a TracerProvider
with a batching span processor export to ``<endpoint>/v1/metrics`` and ``/v1/traces``. Neither
is installed as the process-global provider: the composition root hands the tracer to the parts
that make spans, as it hands down everything else. Metrics are observable instruments that read
the same counters ``/metrics`` serves, so both views always agree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NoOpTracer, Tracer

from collector.scrape_loop import TargetStatus
from store.tsdb import TimeSeriesStore

log = logging.getLogger(__name__)


class Telemetry:
    def __init__(
        self,
        endpoint: str | None,
        export_interval_ms: int,
        service_name: str,
        store: TimeSeriesStore | None,
        statuses: Callable[[], list[TargetStatus]],
    ) -> None:
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.tracer: Tracer = NoOpTracer()
        self._meters: MeterProvider | None = None
        self._traces: TracerProvider | None = None
        if not self.endpoint:
            return
        # Imported only when used: the exporter pulls in protobuf and an HTTP session.
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        resource = Resource.create({"service.name": service_name})
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{self.endpoint}/v1/metrics"), export_interval_millis=export_interval_ms
        )
        self._meters = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._meters.get_meter("infermeter")

        def store_counter(key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
            assert store is not None
            return lambda _options: [Observation(store.stats[key])]

        if store is not None:  # None: samples live in a remote engine, which reports on itself
            for key in ("appended", "duplicates", "rejected", "checkpoints"):
                meter.create_observable_counter(f"infermeter.store.samples_{key}", [store_counter(key)])
            meter.create_observable_gauge(
                "infermeter.store.head_samples", [lambda _o: [Observation(store.head.samples)]]
            )

        def scrapes(_options: CallbackOptions) -> Iterable[Observation]:
            for st in statuses():
                yield Observation(st.scrapes, {"job": st.spec.job, "instance": st.spec.instance})

        def failures(_options: CallbackOptions) -> Iterable[Observation]:
            for st in statuses():
                for reason, count in st.failures_by_reason.items():
                    yield Observation(count, {"job": st.spec.job, "instance": st.spec.instance, "reason": reason})

        def lag(_options: CallbackOptions) -> Iterable[Observation]:
            for st in statuses():
                yield Observation(st.lag_s, {"job": st.spec.job, "instance": st.spec.instance})

        meter.create_observable_counter("infermeter.scrapes", [scrapes])
        meter.create_observable_counter("infermeter.scrape.failures", [failures])
        meter.create_observable_gauge("infermeter.scrape.loop_lag", [lag], unit="s")

        self._traces = TracerProvider(resource=resource)
        self._traces.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{self.endpoint}/v1/traces")))
        self.tracer = self._traces.get_tracer("infermeter")
        log.info("OpenTelemetry export to %s every %d ms", self.endpoint, export_interval_ms)

    def shutdown(self, timeout_ms: int = 5_000) -> None:
        """Flush what is pending and stop the exporters (bounded by ``timeout_ms``)."""
        if self._traces is not None:
            self._traces.force_flush(timeout_ms)
            self._traces.shutdown()
        if self._meters is not None:
            self._meters.shutdown(timeout_millis=timeout_ms)
