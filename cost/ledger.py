"""The cost ledger: hours priced into rows (re-priced whole, so ``cost recompute`` is a loop over
hours), and every minute the live cost series the rules, dashboard and Grafana read.

Series written each tick (labels ``scope="fleet"``, or ``scope="model", model=...``):
``infermeter_cost_dollars_per_hour`` (trailing hour), ``infermeter_idle_cost_dollars_per_hour``,
``infermeter_cost_per_million_tokens_dollars`` (generated tokens) and
``infermeter_cost_per_million_total_tokens_dollars`` (prompt + generated),
``infermeter_spend_period_dollars`` with ``infermeter_budget_spend_period_dollars`` and
``infermeter_budget_cost_per_million_tokens_dollars`` for configured budgets, and per GPU
``gpu_generation_tokens_per_second`` (its model's tokens on its node ÷ the node's GPUs serving it).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from alerts.schema import cost_ledger, usage_hourly
from cost.attribution import CPU, GpuRef
from cost.compute import MINUTE_MS, CostCalculator, LedgerRow, UsageRow
from cost.prices import PriceBook
from store.clock import Clock
from store.types import Sample, SampleBatch, SeriesKey

log = logging.getLogger(__name__)
HOUR_MS = 3_600_000


def period_start_ms(at_ms: int, period: str) -> int:
    when = datetime.fromtimestamp(at_ms / 1000, UTC)
    if period == "day":
        start = when.replace(hour=0, minute=0, second=0, microsecond=0)
    elif period == "week":
        start = (when - timedelta(days=when.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        start = when.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


def _scope_labels(model: str) -> dict[str, str]:
    return {"scope": "model", "model": model} if model else {"scope": "fleet"}


class CostLedger:
    def __init__(
        self,
        engine: Engine,
        calculator: CostCalculator,
        book: PriceBook,
        clock: Clock,
        append: Callable[[SampleBatch], object] | None = None,
        live: CostCalculator | None = None,
    ) -> None:
        """``live``: the calculator of the minute tick's hour in progress and live series, one
        that keeps settled minutes (:mod:`cost.settled_minutes`); a closed hour is priced with
        ``calculator``, which reads everything, so late samples and backfills count there."""
        self.engine = engine
        self.calc = calculator
        self.live = live if live is not None else calculator
        self.book = book
        self.clock = clock
        self.append = append

    # -- hours -------------------------------------------------------------------------------
    def reprice_hour(self, hour_ms: int, until_ms: int | None = None, calc: CostCalculator | None = None) -> list[LedgerRow]:
        """(Re)compute one hour, up to ``until_ms`` for the hour in progress; replaces its rows."""
        end = min(hour_ms + HOUR_MS, until_ms if until_ms is not None else hour_ms + HOUR_MS)
        end -= end % MINUTE_MS
        calc = calc if calc is not None else self.calc
        rows, usage = calc.window(hour_ms, end) if end > hour_ms else ([], [])
        with self.engine.begin() as conn:
            conn.execute(sa.delete(cost_ledger).where(cost_ledger.c.hour_ms == hour_ms))
            conn.execute(sa.delete(usage_hourly).where(usage_hourly.c.hour_ms == hour_ms))
            if rows:
                conn.execute(sa.insert(cost_ledger), [{"hour_ms": hour_ms, **r.__dict__} for r in rows])
            if usage:
                conn.execute(sa.insert(usage_hourly), [{"hour_ms": hour_ms, **u.__dict__} for u in usage])
        return rows

    def recompute(self, since_ms: int, until_ms: int | None = None) -> int:
        """Re-price every hour from ``since`` with today's price book; returns hours done."""
        now = self.clock.now_ms() if until_ms is None else until_ms
        hour = since_ms - since_ms % HOUR_MS
        done = 0
        while hour < now:
            self.reprice_hour(hour, now)
            hour += HOUR_MS
            done += 1
        return done

    # -- queries -----------------------------------------------------------------------------
    def spend(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
        cols = [cost_ledger.c[name] for name in by]
        query = (
            sa.select(*cols, sa.func.sum(cost_ledger.c.dollars).label("dollars"),
                      sa.func.sum(cost_ledger.c.gpu_seconds).label("gpu_seconds"),
                      sa.func.sum(cost_ledger.c.energy_joules).label("energy_joules"))
            .where(cost_ledger.c.hour_ms >= start_ms, cost_ledger.c.hour_ms < end_ms)
            .group_by(*cols)
            .order_by(*cols)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def tokens(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
        cols = [usage_hourly.c[name] for name in by]
        query = (
            sa.select(*cols, sa.func.sum(usage_hourly.c.prompt_tokens).label("prompt_tokens"),
                      sa.func.sum(usage_hourly.c.generated_tokens).label("generated_tokens"),
                      sa.func.sum(usage_hourly.c.requests).label("requests"))
            .where(usage_hourly.c.hour_ms >= start_ms, usage_hourly.c.hour_ms < end_ms)
            .group_by(*cols)
            .order_by(*cols)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def hourly_series(self, start_ms: int, end_ms: int, model: str | None = None) -> dict[str, dict[int, float]]:
        """hour → spend, generated tokens (for the forecaster), fleet or one model."""
        spend_q = sa.select(cost_ledger.c.hour_ms, sa.func.sum(cost_ledger.c.dollars)).where(
            cost_ledger.c.hour_ms >= start_ms, cost_ledger.c.hour_ms < end_ms
        )
        tok_q = sa.select(usage_hourly.c.hour_ms, sa.func.sum(usage_hourly.c.generated_tokens)).where(
            usage_hourly.c.hour_ms >= start_ms, usage_hourly.c.hour_ms < end_ms
        )
        if model is not None:
            spend_q = spend_q.where(cost_ledger.c.model == model)
            tok_q = tok_q.where(usage_hourly.c.model == model)
        with self.engine.connect() as conn:
            spend = {int(h): float(v) for h, v in conn.execute(spend_q.group_by(cost_ledger.c.hour_ms))}
            tokens = {int(h): float(v) for h, v in conn.execute(tok_q.group_by(usage_hourly.c.hour_ms))}
        return {"spend": spend, "tokens": tokens}

    # -- the minute tick ---------------------------------------------------------------------
    def tick(self) -> list[Sample]:
        now = self.clock.now_ms()
        minute = now - now % MINUTE_MS
        hour = minute - minute % HOUR_MS
        if minute - hour < 5 * MINUTE_MS and hour > 0:
            self.reprice_hour(hour - HOUR_MS)  # late samples of the hour just closed
        self.reprice_hour(hour, minute, self.live)
        samples = self.live_series(minute)
        if self.append is not None and samples:
            self.append(SampleBatch.from_samples(samples))
        return samples

    def live_series(self, minute: int) -> list[Sample]:
        rows, usage = self.live.window(minute - HOUR_MS, minute)
        out: list[Sample] = []

        def put(name: str, labels: dict[str, str], value: float) -> None:
            out.append(Sample(SeriesKey.of(name, labels), minute, float(value)))

        dollars: dict[str, float] = defaultdict(float)
        idle: dict[str, float] = defaultdict(float)
        for r in rows:
            for scope in ("", r.model) if r.model else ("",):
                dollars[scope] += r.dollars
                if r.component == "idle":
                    idle[scope] += r.dollars
        generated: dict[str, float] = defaultdict(float)
        total: dict[str, float] = defaultdict(float)
        for u in usage:
            for scope in ("", u.model) if u.model else ("",):
                generated[scope] += u.generated_tokens
                total[scope] += u.generated_tokens + u.prompt_tokens
        for scope in set(dollars) | set(generated):
            labels = _scope_labels(scope)
            put("infermeter_cost_dollars_per_hour", labels, dollars.get(scope, 0.0))
            put("infermeter_idle_cost_dollars_per_hour", labels, idle.get(scope, 0.0))
            if generated.get(scope, 0) > 0:
                put("infermeter_cost_per_million_tokens_dollars", labels, dollars.get(scope, 0.0) / generated[scope] * 1e6)
            if total.get(scope, 0) > 0:
                put("infermeter_cost_per_million_total_tokens_dollars", labels, dollars.get(scope, 0.0) / total[scope] * 1e6)
        out.extend(self._budget_series(minute, put))
        out.extend(self._gpu_tokens(minute))
        return out

    def _budget_series(self, minute: int, put: Callable[[str, dict[str, str], float], None]) -> list[Sample]:
        for budget in self.book.settings.budgets:
            labels = _scope_labels(budget.model if budget.scope == "model" else "")
            if budget.cost_per_million_tokens is not None:
                put("infermeter_budget_cost_per_million_tokens_dollars", labels, budget.cost_per_million_tokens)
            if budget.spend_per_period is not None:
                start = period_start_ms(minute, budget.period)
                by_model = {str(r["model"]): float(r["dollars"] or 0) for r in self.spend(start, minute + HOUR_MS, ["model"])}
                spent = sum(by_model.values()) if budget.scope == "fleet" else by_model.get(budget.model, 0.0)
                put("infermeter_spend_period_dollars", labels, spent)
                put("infermeter_budget_spend_period_dollars", labels, budget.spend_per_period)
        return []

    def _gpu_tokens(self, minute: int) -> list[Sample]:
        """Tokens/s per GPU over the last 5 minutes: an engine target known to run on certain
        GPUs (cost.attribution) has its tokens/s split over those; the rest of a node's tokens
        of a model over the node's other GPUs that serve that model."""
        detail = self.live.window_detail(minute - 5 * MINUTE_MS, minute)
        rows, recent = detail.rows, detail.usage
        placed = {ref for refs in detail.assigned.values() for ref in refs}
        gpus_of: dict[tuple[str, str], set[str]] = defaultdict(set)
        for r in rows:
            if r.gpu and r.model and r.gpu != CPU and GpuRef(r.node, r.gpu) not in placed:
                gpus_of[(r.node, r.model)].add(r.gpu)
        tokens: dict[tuple[str, str], float] = defaultdict(float)
        for u in recent:
            tokens[(u.node, u.model)] += u.generated_tokens
        per_gpu_acc: dict[tuple[str, str, str], float] = defaultdict(float)
        serving: dict[tuple[str, str, str], dict[str, str]] = {}
        for (job, instance), refs in detail.assigned.items():
            node = self.calc.node_of(instance)
            for model, n in detail.target_tokens.get((job, instance), {}).items():
                tokens[(node, model)] -= n  # placed: not spread over the node's other GPUs
                for ref in refs:
                    per_gpu_acc[(ref.host, ref.gpu, model)] += n / 300.0 / len(refs)
                    serving.setdefault((ref.host, ref.gpu, model), {"job": job, "instance": instance})
        # The serving target's job and instance ride along, so "target down" can inhibit the
        # throughput alert of the GPUs it serves.
        target: dict[tuple[str, str], dict[str, str]] = {}
        for (job, instance), models in sorted(detail.target_tokens.items(), key=lambda kv: kv[0] in detail.assigned):
            for model in models:
                target.setdefault((self.calc.node_of(instance), model), {"job": job, "instance": instance})
        out = []
        for (node, model), gpus in gpus_of.items():
            per_gpu = max(0.0, tokens.get((node, model), 0.0)) / 300.0 / len(gpus)
            for gpu in gpus:
                if (node, gpu, model) in per_gpu_acc:
                    continue
                labels = {**target.get((node, model), {}), "host": node, "gpu": gpu, "model": model}
                out.append(Sample(SeriesKey.of("gpu_generation_tokens_per_second", labels), minute, per_gpu))
        for (host, gpu, model), rate in per_gpu_acc.items():
            labels = {**serving[(host, gpu, model)], "host": host, "gpu": gpu, "model": model}
            out.append(Sample(SeriesKey.of("gpu_generation_tokens_per_second", labels), minute, rate))
        return out


__all__ = ["CostLedger", "LedgerRow", "UsageRow", "HOUR_MS", "period_start_ms"]
