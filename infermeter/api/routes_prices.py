"""Changing the price book through the API (:mod:`infermeter.cost_edits`): a price entry
effective from now (or a given time), a budget set or removed; admins only (access.policy)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from cost.prices import Budget
from infermeter.api.deps import ActorDep, RuntimeDep
from infermeter.cost_edits import CostEditError, CostEditor

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


async def _run(call: Any) -> dict[str, Any]:
    try:
        return {"status": "success", "data": await run_in_threadpool(call)}
    except CostEditError as exc:
        raise HTTPException(exc.status, str(exc)) from None


@router.post("/prices", status_code=201)
async def add_price(body: PriceChange, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """Add a price effective from ``effective_from`` (default now); earlier hours keep their
    prices until `POST /api/v1/cost/recompute` re-prices them."""
    fields = body.model_dump(exclude={"kind"})
    if body.effective_from is not None:
        fields["effective_from"] = body.effective_from.isoformat()
    return await _run(lambda: CostEditor(runtime).add_price(body.kind, fields, who))


@router.put("/budgets")
async def set_budget(body: Budget, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """Set the budget of the fleet or of one model (replaces the one of the same scope and model)."""
    return await _run(lambda: CostEditor(runtime).set_budget(body.model_dump(mode="json"), who))


@router.delete("/budgets", responses={404: {"description": "No such budget."}})
async def remove_budget(runtime: RuntimeDep, who: ActorDep, scope: Literal["fleet", "model"] = "fleet",
                        model: str = "") -> dict[str, Any]:
    """Remove the budget of the fleet (``scope=fleet``) or of a model (``scope=model&model=M``)."""
    return await _run(lambda: CostEditor(runtime).remove_budget(scope, model, who))
