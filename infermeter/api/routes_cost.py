"""Cost, cost per token, budgets and the price book; re-pricing history on request."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from cost.ledger import HOUR_MS, CostLedger, period_start_ms
from infermeter.api.deps import PrincipalDep, RuntimeDep
from infermeter.api.params import BadParam, parse_time_ms
from infermeter.runtime import Runtime

router = APIRouter(prefix="/api/v1", tags=["cost"])
SPEND_DIMENSIONS = ("model", "node", "gpu", "gpu_model", "purchase_class", "tenant", "component")
TOKEN_DIMENSIONS = ("model", "node", "tenant")
PER_TOKEN_DIMENSIONS = (*TOKEN_DIMENSIONS, "gpu")


def _ledger(runtime: Runtime) -> CostLedger:
    if runtime.alerting is None:
        raise HTTPException(503, "the cost ledger is not running")
    return runtime.alerting.ledger


def _dims(by: str | None, allowed: tuple[str, ...]) -> list[str]:
    dims = [d.strip() for d in (by or "").split(",") if d.strip()]
    for d in dims:
        if d not in allowed:
            raise BadParam("by", f"unknown dimension {d!r}; use {', '.join(allowed)}")
    return dims


def _window(runtime: Runtime, start: str | None, end: str | None) -> tuple[int, int]:
    now = runtime.clock.now_ms()
    end_ms = parse_time_ms("end", end, now, now)
    start_ms = parse_time_ms("start", start, now, period_start_ms(now, "month"))
    if start_ms >= end_ms:
        raise BadParam("start", "must be before end")
    # The ledger is hourly: a window covers the hours it touches.
    return start_ms - start_ms % HOUR_MS, end_ms - end_ms % HOUR_MS + HOUR_MS


@router.get("/cost")
async def cost(runtime: RuntimeDep, _auth: PrincipalDep, start: str | None = None, end: str | None = None, by: str | None = None) -> dict[str, Any]:
    """Spend in [start, end) (default: this month) grouped by any of model, node, gpu, gpu_model,
    purchase_class, tenant, component (gpu | energy | idle | overhead)."""
    dims = _dims(by, SPEND_DIMENSIONS)
    start_ms, end_ms = _window(runtime, start, end)
    rows = await run_in_threadpool(_ledger(runtime).spend, start_ms, end_ms, dims)
    total = sum(float(r["dollars"] or 0) for r in rows)
    return {"status": "success", "data": {"currency": runtime.settings.cost.currency, "start_ms": start_ms,
                                           "end_ms": end_ms, "by": dims, "rows": rows, "total_dollars": total}}


@router.get("/cost/per_token")
async def cost_per_token(runtime: RuntimeDep, _auth: PrincipalDep, start: str | None = None, end: str | None = None, by: str | None = None) -> dict[str, Any]:
    """Cost per 1M generated tokens and per 1M total (prompt + generated) tokens, by model, node,
    tenant or gpu (or for the fleet). Per GPU, a node's tokens of a model are shared equally
    among the GPUs serving that model there."""
    dims = _dims(by, PER_TOKEN_DIMENSIONS)
    start_ms, end_ms = _window(runtime, start, end)
    ledger = _ledger(runtime)
    if "gpu" in dims:
        return {"status": "success", "data": {"by": dims, "rows": await run_in_threadpool(_per_gpu, ledger, start_ms, end_ms)}}
    spend = await run_in_threadpool(ledger.spend, start_ms, end_ms, dims)
    tokens = await run_in_threadpool(ledger.tokens, start_ms, end_ms, dims)
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[d] for d in dims)

    by_key = {key(t): t for t in tokens}
    rows = []
    for s in spend:
        t = by_key.get(key(s), {})
        dollars = float(s["dollars"] or 0)
        gen = float(t.get("generated_tokens") or 0)
        total = gen + float(t.get("prompt_tokens") or 0)
        rows.append({**{d: s[d] for d in dims}, "dollars": dollars, "generated_tokens": gen, "total_tokens": total,
                     "dollars_per_million_generated": dollars / gen * 1e6 if gen else None,
                     "dollars_per_million_total": dollars / total * 1e6 if total else None})
    return {"status": "success", "data": {"by": dims, "rows": rows}}


def _per_gpu(ledger: CostLedger, start_ms: int, end_ms: int) -> list[dict[str, Any]]:
    spend = [r for r in ledger.spend(start_ms, end_ms, ["node", "gpu", "model"]) if r["gpu"]]
    tokens = {(t["node"], t["model"]): t for t in ledger.tokens(start_ms, end_ms, ["node", "model"])}
    gpus_serving: dict[tuple[str, str], int] = {}
    for r in spend:
        gpus_serving[(r["node"], r["model"])] = gpus_serving.get((r["node"], r["model"]), 0) + 1
    rows = []
    for r in spend:
        t = tokens.get((r["node"], r["model"]), {})
        share = 1 / gpus_serving[(r["node"], r["model"])]
        gen = float(t.get("generated_tokens") or 0) * share
        total = gen + float(t.get("prompt_tokens") or 0) * share
        dollars = float(r["dollars"] or 0)
        rows.append({"node": r["node"], "gpu": r["gpu"], "model": r["model"], "dollars": dollars,
                     "generated_tokens": gen, "total_tokens": total,
                     "dollars_per_million_generated": dollars / gen * 1e6 if gen else None,
                     "dollars_per_million_total": dollars / total * 1e6 if total else None})
    return rows


@router.get("/budgets")
async def budgets(runtime: RuntimeDep, _auth: PrincipalDep) -> dict[str, Any]:
    """Each budget in effect (config and API changes) with the spend of its period so far and
    cost per 1M tokens."""
    ledger = _ledger(runtime)
    await run_in_threadpool(runtime.live_cost.refresh)
    now = runtime.clock.now_ms()
    out = []
    for budget in runtime.settings.cost.budgets:
        start = period_start_ms(now, budget.period)
        spend = await run_in_threadpool(ledger.spend, start, now + HOUR_MS, ["model"])
        tokens = await run_in_threadpool(ledger.tokens, start, now + HOUR_MS, ["model"])
        if budget.scope == "model":
            spend = [r for r in spend if r["model"] == budget.model]
            tokens = [r for r in tokens if r["model"] == budget.model]
        dollars = sum(float(r["dollars"] or 0) for r in spend)
        gen = sum(float(r["generated_tokens"] or 0) for r in tokens)
        per_m = dollars / gen * 1e6 if gen else None
        out.append({**budget.model_dump(), "period_start_ms": start, "spend_dollars": dollars,
                    "spend_ratio": dollars / budget.spend_per_period if budget.spend_per_period else None,
                    "measured_cost_per_million_tokens": per_m,
                    "cost_ratio": per_m / budget.cost_per_million_tokens if per_m and budget.cost_per_million_tokens else None})
    return {"status": "success", "data": out}


@router.get("/prices")
async def prices(runtime: RuntimeDep, _auth: PrincipalDep) -> dict[str, Any]:
    """The price book in effect (config and API changes), each entry with the date it takes effect."""
    await run_in_threadpool(runtime.live_cost.refresh)
    return {"status": "success", "data": runtime.settings.cost.model_dump(mode="json", exclude={"budgets"})}


class RecomputeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    since: str
    until: str | None = None


@router.post("/cost/recompute")
async def recompute(runtime: RuntimeDep, body: RecomputeBody, _auth: PrincipalDep) -> dict[str, Any]:
    """Re-price every hour from ``since`` with the price book in effect now."""
    now = runtime.clock.now_ms()
    since_ms = parse_time_ms("since", body.since, now)
    until_ms = parse_time_ms("until", body.until, now, now)
    hours = await run_in_threadpool(_ledger(runtime).recompute, since_ms, until_ms)
    return {"status": "success", "data": {"hours": hours}}
