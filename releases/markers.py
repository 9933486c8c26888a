"""Deploy and config-change markers: recorded with who made them, listed by time and model, and
the nearest one before a moment (what the cost-spike alert names).

A marker without a model applies to every model (a fleet-wide config change); a query for a model
finds its own markers and those. ``at_ms`` is when the change happened (default: when it was
recorded); markers are never edited, a wrong one is deleted and recorded again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from releases.schema import events
from store.clock import Clock

Kind = Literal["deploy", "config", "software", "other"]
KINDS: tuple[str, ...] = ("deploy", "config", "software", "other")
MAX_TEXT = 255


@dataclass(frozen=True)
class Marker:
    id: int
    at_ms: int
    kind: str
    model: str
    version: str
    node: str
    message: str
    actor: str

    def describe(self) -> str:
        """"deploy llama-3-70b v2.1 on gpu-node-3" (what a person reads in an alert or a chart)."""
        parts = [self.kind, self.model or "all models", self.version]
        text = " ".join(p for p in parts if p)
        if self.node:
            text += f" on {self.node}"
        return text + (f": {self.message}" if self.message else "")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class MarkerError(ValueError):
    """A marker that cannot be recorded; the message names the field."""


class MarkerStore:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    def add(self, kind: str, *, model: str = "", version: str = "", node: str = "", message: str = "",
            at_ms: int | None = None, actor: str = "system") -> Marker:
        if kind not in KINDS:
            raise MarkerError(f"kind: must be one of {', '.join(KINDS)}, not {kind!r}")
        for name, value in (("model", model), ("version", version), ("node", node)):
            if len(value) > MAX_TEXT:
                raise MarkerError(f"{name}: at most {MAX_TEXT} characters")
        if kind == "deploy" and not (model and version):
            raise MarkerError("a deploy marker needs model and version")
        now = self.clock.now_ms()
        at = now if at_ms is None else at_ms
        if at > now + 60_000:
            raise MarkerError("at: a marker cannot be in the future")
        text, who = message[:4000], actor[:MAX_TEXT]
        row = {"at_ms": at, "kind": kind, "model": model, "version": version, "node": node, "message": text,
               "actor": who, "created_ms": now}
        with self.engine.begin() as conn:
            new_id = conn.execute(sa.insert(events).values(**row).returning(events.c.id)).scalar_one()
        return Marker(int(new_id), at, kind, model, version, node, text, who)

    def between(self, start_ms: int, end_ms: int, *, model: str | None = None, kind: str | None = None,
             limit: int = 1000) -> list[Marker]:
        """Markers in [start, end], oldest first; ``model`` also finds the fleet-wide ones."""
        query = (sa.select(events).where(events.c.at_ms >= start_ms, events.c.at_ms <= end_ms)
                 .order_by(events.c.at_ms, events.c.id).limit(limit))
        if model:
            query = query.where(events.c.model.in_([model, ""]))
        if kind:
            query = query.where(events.c.kind == kind)
        return self._fetch(query)

    def get(self, marker_id: int) -> Marker | None:
        found = self._fetch(sa.select(events).where(events.c.id == marker_id))
        return found[0] if found else None

    def nearest_before(self, at_ms: int, model: str = "", within_ms: int = 86_400_000) -> Marker | None:
        """The latest marker at or before ``at_ms`` (and not older than ``within_ms``)."""
        query = (sa.select(events).where(events.c.at_ms <= at_ms, events.c.at_ms >= at_ms - within_ms)
                 .order_by(events.c.at_ms.desc(), events.c.id.desc()).limit(1))
        if model:
            query = query.where(events.c.model.in_([model, ""]))
        found = self._fetch(query)
        return found[0] if found else None

    def delete(self, marker_id: int) -> bool:
        with self.engine.begin() as conn:
            return bool(conn.execute(sa.delete(events).where(events.c.id == marker_id)).rowcount)

    def _fetch(self, query: sa.Select[Any]) -> list[Marker]:
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [Marker(int(r["id"]), int(r["at_ms"]), r["kind"], r["model"], r["version"], r["node"], r["message"],
                       r["actor"]) for r in rows]
