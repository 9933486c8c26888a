"""Prices and budgets changed through the API or dashboard, kept in the database.

The config file's ``cost:`` section is the base; each change row, in order, is applied on top:
a price entry is added to its list (effective-dated, so history keeps its old prices until a
recompute asks otherwise), a budget replaces the one of the same scope and model, a budget
removal drops it. Every process re-reads the rows when their newest id moves, so both processes
of a pair, and a restart, see the same book.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from cost.prices import Budget, CostSettings, ElectricityPrice, GpuPrice, OverheadPrice
from cost.schema import cost_changes
from store.clock import Clock

PRICE_KINDS: dict[str, tuple[str, type[BaseModel]]] = {
    "gpu": ("gpu_prices", GpuPrice),
    "electricity": ("electricity", ElectricityPrice),
    "overhead": ("overhead", OverheadPrice),
}
KINDS = (*PRICE_KINDS, "budget", "budget_removed")


@dataclass(frozen=True, slots=True)
class CostChange:
    id: int
    at_ms: int
    actor: str
    kind: str
    body: dict[str, Any]


def budget_key(budget: Budget) -> tuple[str, str]:
    return budget.scope, budget.model if budget.scope == "model" else ""


def apply_changes(base: CostSettings, changes: list[CostChange]) -> CostSettings:
    """The price book in effect: ``base`` with every change applied in order."""
    lists: dict[str, list[Any]] = {}
    budgets = {budget_key(b): b for b in base.budgets}
    for change in changes:
        if change.kind in PRICE_KINDS:
            field, model = PRICE_KINDS[change.kind]
            lists.setdefault(field, list(getattr(base, field))).append(model.model_validate(change.body))
        elif change.kind == "budget":
            budget = Budget.model_validate(change.body)
            budgets[budget_key(budget)] = budget
        elif change.kind == "budget_removed":
            budgets.pop((change.body["scope"], change.body.get("model", "")), None)
    if any(c.kind.startswith("budget") for c in changes):
        lists["budgets"] = list(budgets.values())
    # Only what changed is updated: an untouched section keeps reading as "not set by the user".
    return base.model_copy(update=lists) if lists else base


class CostChanges:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    def add(self, kind: str, body: dict[str, Any], actor: str) -> CostChange:
        if kind not in KINDS:
            raise ValueError(f"unknown cost change {kind!r}: one of {', '.join(KINDS)}")
        at_ms = self.clock.now_ms()
        row = {"at_ms": at_ms, "actor": actor[:255], "kind": kind, "body": json.dumps(body, default=str)}
        with self.engine.begin() as conn:
            change_id = conn.execute(sa.insert(cost_changes).values(**row).returning(cost_changes.c.id)).scalar_one()
        return CostChange(change_id, at_ms, actor, kind, body)

    def all(self) -> list[CostChange]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(cost_changes).order_by(cost_changes.c.id)).mappings().all()
        return [CostChange(r["id"], r["at_ms"], r["actor"], r["kind"], json.loads(r["body"])) for r in rows]

    def newest_id(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(cost_changes.c.id), 0))).scalar_one())
