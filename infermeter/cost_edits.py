"""Changing prices and budgets, for the API and the dashboard alike: validated against the whole
book, stored (:mod:`cost.changes`), applied at once, and written to the audit log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from access.audit import Actor
from cost.changes import PRICE_KINDS, budget_key
from cost.prices import Budget

if TYPE_CHECKING:
    from infermeter.runtime import Runtime


class CostEditError(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())


def budget_name(scope: str, model: str) -> str:
    return f"budgets/{scope}" + (f"/{model}" if model else "")


def _dump(values: list[Any]) -> list[dict[str, Any]]:
    return [v.model_dump(mode="json") for v in values]


class CostEditor:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _apply(self, kind: str, body: dict[str, Any], actor: Actor, section: str) -> tuple[Any, Any]:
        live = self.runtime.live_cost
        live.refresh()
        before = getattr(live.current, section)
        try:
            live.change(kind, body, actor.principal.name)
        except ValidationError as exc:
            raise CostEditError(422, errors(exc)) from None
        return before, getattr(live.current, section)

    def add_price(self, kind: str, fields: dict[str, Any], actor: Actor) -> dict[str, Any]:
        """A price entry of ``kind`` (gpu, electricity, overhead), effective from now unless given."""
        if kind not in PRICE_KINDS:
            raise CostEditError(422, f"kind must be one of {', '.join(PRICE_KINDS)}")
        section, model = PRICE_KINDS[kind]
        fields = {k: v for k, v in fields.items() if v is not None}
        if "effective_from" not in fields:
            fields["effective_from"] = datetime.fromtimestamp(self.runtime.clock.now_ms() / 1000, UTC).isoformat()
        try:
            stored = model.model_validate(fields).model_dump(mode="json")
        except ValidationError as exc:
            raise CostEditError(422, errors(exc)) from None
        before, after = self._apply(kind, stored, actor, section)
        self.runtime.access.audit.record(actor, "price.set", f"prices/{kind}", _dump(before), _dump(after))
        return {"kind": kind, **stored}

    def set_budget(self, fields: dict[str, Any], actor: Actor) -> dict[str, Any]:
        try:
            budget = Budget.model_validate(fields)
        except ValidationError as exc:
            raise CostEditError(422, errors(exc)) from None
        key = budget_key(budget)
        stored = budget.model_dump(mode="json")
        before, _ = self._apply("budget", stored, actor, "budgets")
        old = next((b.model_dump(mode="json") for b in before if budget_key(b) == key), None)
        self.runtime.access.audit.record(actor, "budget.set", budget_name(*key), old, stored)
        return stored

    def remove_budget(self, scope: str, model: str, actor: Actor) -> dict[str, Any]:
        key = (scope, model if scope == "model" else "")
        self.runtime.live_cost.refresh()
        old = next((b for b in self.runtime.live_cost.current.budgets if budget_key(b) == key), None)
        if old is None:
            raise CostEditError(404, f"no budget for {budget_name(*key)}")
        self._apply("budget_removed", {"scope": key[0], "model": key[1]}, actor, "budgets")
        self.runtime.access.audit.record(actor, "budget.delete", budget_name(*key), old.model_dump(mode="json"), None)
        return old.model_dump(mode="json")


def edit_cost(runtime: Runtime, action: str, fields: dict[str, Any], actor: Actor) -> dict[str, Any]:
    """One change by name: "price" (fields hold ``kind``), "budget", "remove_budget"."""
    editor = CostEditor(runtime)
    if action == "price":
        rest = dict(fields)
        return editor.add_price(str(rest.pop("kind", "")), rest, actor)
    if action == "budget":
        return editor.set_budget(fields, actor)
    if action == "remove_budget":
        return editor.remove_budget(str(fields.get("scope", "")), str(fields.get("model", "")), actor)
    raise CostEditError(422, f"unknown change {action!r}")
