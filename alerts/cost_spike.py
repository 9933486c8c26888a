"""The three checks seed 000 §4.2 asks for when per-token cost jumps, attached to the alert:
(1) the utilization curve, (2) the change in request mix (prompt and generation lengths),
(3) whether autoscaling acted on its last recommendation; and the nearest deploy or config
change before the alert (``check_release``), when markers are recorded.

Each check compares the last hour with the 24 hours before it, on the same store the rules read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from alerts.scaling import ScaleAdvisor
from promql import SampleSource, context_at, first_value

RECENT, BASELINE = "1h", "24h"


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:.0f}%"


def _num(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.0f}"


class CostSpikeChecks:
    def __init__(
        self,
        source: SampleSource,
        advisor: ScaleAdvisor | None,
        count_instances: Callable[[str, int], int],
        nearest_change: Callable[[int, str], Any] | None = None,
    ) -> None:
        self.source = source
        self.advisor = advisor
        self.count_instances = count_instances
        # (at_ms, model) -> the latest marker before (releases.markers.MarkerStore.nearest_before)
        self.nearest_change = nearest_change

    def __call__(self, labels: dict[str, str], at_ms: int) -> dict[str, str]:
        model = labels.get("model", "")
        match = f'{{model="{model}"}}' if model else ""
        now = context_at(self.source, at_ms)
        before = context_at(self.source, at_ms - 3_600_000)
        util_now = first_value(now, f"avg(avg_over_time(gpu_utilization_ratio[{RECENT}]))")
        util_before = first_value(before, f"avg(avg_over_time(gpu_utilization_ratio[{BASELINE}]))")
        checks = {
            "check_utilization": (
                f"fleet GPU utilization {_pct(util_now)} over the last hour vs {_pct(util_before)} over the "
                f"24 h before" + (" — utilization fell, idle GPUs raise cost per token" if util_now < util_before - 0.05 else "")
            ),
        }
        mix = []
        for kind in ("prompt", "generation"):

            def per_request(window: str, kind: str = kind) -> str:
                # the selector's own braces rule out str.format here
                return (
                    f"sum(increase(inference_{kind}_tokens_total{match}[{window}])) / "
                    f"sum(increase(inference_requests_total{match}[{window}]))"
                )

            recent = first_value(now, per_request(RECENT))
            base = first_value(before, per_request(BASELINE))
            shift = (recent / base - 1) if base and not math.isnan(base) and not math.isnan(recent) else math.nan
            text = f"{kind} tokens/request {_num(recent)} vs {_num(base)}"
            if not math.isnan(shift):
                text += f" ({shift * 100:+.0f}%)"
            mix.append(text)
        checks["check_request_mix"] = "; ".join(mix)
        checks["check_autoscaling"] = self._autoscaling(model or "fleet", at_ms)
        if self.nearest_change is not None:
            checks["check_release"] = self._release(model, at_ms)
        return checks

    def _release(self, model: str, at_ms: int) -> str:
        try:
            marker = self.nearest_change(at_ms, model)  # type: ignore[misc]
        except Exception as exc:  # the markers table is one more read: its failure is said, not raised
            return f"deploy markers could not be read: {type(exc).__name__}"
        if marker is None:
            return "no deploy or config change recorded in the 24 h before"
        return (f"nearest change before: {marker.describe()} ({(at_ms - marker.at_ms) / 60_000:.0f} min before); "
                f"compare it with `infermeter compare --marker {marker.id}`")

    def _autoscaling(self, scope: str, at_ms: int) -> str:
        event = self.advisor.last_event(scope) if self.advisor is not None else None
        if event is None:
            return "no scale recommendation on record for this scope"
        actual = self.count_instances(scope, at_ms)
        acted = actual >= event.to_instances if event.action == "add_instance" else actual <= event.to_instances
        return (
            f"last recommendation {event.action} to {event.to_instances} instances "
            f"({(at_ms - event.at_ms) / 60_000:.0f} min ago); {actual} running now — "
            + ("acted on" if acted else "NOT acted on")
        )
