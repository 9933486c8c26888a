"""Changing the price book through the API: a price entry effective from now (or a given time),
a budget set or removed. Each change is validated against the whole book before it is stored,
applied at once to pricing, budgets and forecast warnings, and written to the audit log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from cost.changes import PRICE_KINDS, budget_key
from cost.prices import Budget
from infermeter.api.deps import ActorDep, RuntimeDep
from infermeter.runtime import Runtime

router = APIRouter(prefix="/api/v1", tags=["cost"])


class PriceChange(BaseModel):
    """One new entry of the price book; the fields its kind needs (see GET /api/v1/prices)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["gpu", "electricity", "overhead"]
    effective_from: AwareDatetime | None = Field(None, description="default: now")
    gpu_model: str | None = Field(None, description="gpu: substring of the NVML name, or '*'")
    purchase_class: str | None = Field(None, description="gpu: on_demand, spot or reserved")
    dollars_per_gpu_hour: float | None = Field(None, ge=0)
    dollars_per_kwh: float | None = Field(None, ge=0)
    pue: float | None = Field(None, ge=1)
    dollars_per_node_hour: float | None = Field(None, ge=0)


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())


def _dump(values: list[Any]) -> list[dict[str, Any]]:
    return [v.model_dump(mode="json") for v in values]


def _change(runtime: Runtime, kind: str, body: dict[str, Any], who: ActorDep, section: str) -> tuple[Any, Any]:
    live = runtime.live_cost
    live.refresh()
    before = getattr(runtime.settings.cost, section)
    try:
        live.change(kind, body, who.principal.name)
    except ValidationError as exc:
        raise HTTPException(422, _errors(exc)) from None
    after = getattr(runtime.settings.cost, section)
    return before, after


@router.post("/prices", status_code=201)
async def add_price(body: PriceChange, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """Add a price effective from ``effective_from`` (default now); earlier hours keep their
    prices until `POST /api/v1/cost/recompute` re-prices them."""
    section, model = PRICE_KINDS[body.kind]
    fields = body.model_dump(exclude={"kind"}, exclude_none=True)
    fields["effective_from"] = (body.effective_from or _now(runtime)).isoformat()
    try:
        entry = model.model_validate(fields)
    except ValidationError as exc:
        raise HTTPException(422, _errors(exc)) from None
    stored = entry.model_dump(mode="json")

    def apply() -> None:
        before, after = _change(runtime, body.kind, stored, who, section)
        runtime.access.audit.record(who, "price.set", f"prices/{body.kind}", _dump(before), _dump(after))

    await run_in_threadpool(apply)
    return {"status": "success", "data": {"kind": body.kind, **stored}}


@router.put("/budgets")
async def set_budget(body: Budget, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """Set the budget of the fleet or of one model (replaces the one of the same scope and model)."""
    key = budget_key(body)

    def apply() -> None:
        before, after = _change(runtime, "budget", body.model_dump(mode="json"), who, "budgets")
        old = next((b.model_dump(mode="json") for b in before if budget_key(b) == key), None)
        runtime.access.audit.record(who, "budget.set", _budget_name(*key), old, body.model_dump(mode="json"))

    await run_in_threadpool(apply)
    return {"status": "success", "data": body.model_dump(mode="json")}


@router.delete("/budgets", responses={404: {"description": "No such budget."}})
async def remove_budget(runtime: RuntimeDep, who: ActorDep, scope: Literal["fleet", "model"] = "fleet",
                        model: str = "") -> dict[str, Any]:
    """Remove the budget of the fleet (``scope=fleet``) or of a model (``scope=model&model=M``)."""
    key = (scope, model if scope == "model" else "")

    def apply() -> dict[str, Any]:
        runtime.live_cost.refresh()
        old = next((b for b in runtime.settings.cost.budgets if budget_key(b) == key), None)
        if old is None:
            raise HTTPException(404, f"no budget for {_budget_name(*key)}")
        _change(runtime, "budget_removed", {"scope": key[0], "model": key[1]}, who, "budgets")
        runtime.access.audit.record(who, "budget.delete", _budget_name(*key), old.model_dump(mode="json"), None)
        return old.model_dump(mode="json")

    return {"status": "success", "data": await run_in_threadpool(apply)}


def _budget_name(scope: str, model: str) -> str:
    return f"budgets/{scope}" + (f"/{model}" if model else "")


def _now(runtime: Runtime) -> datetime:
    return datetime.fromtimestamp(runtime.clock.now_ms() / 1000, UTC)
