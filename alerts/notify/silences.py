"""Silences: matchers plus a time window, stored in the database, cached in memory for matching.

Alertmanager semantics: a silence is *pending* before ``startsAt``, *active* until ``endsAt``,
then *expired*; expiring sets ``endsAt`` to now (and ``startsAt`` too when it was pending).
Creating one that starts in the past starts it now. At least one matcher must not match the
empty string, so a silence can never mute everything by accident. Updating an unexpired
silence with the same matchers keeps its id; any other update expires the old one and creates a
new one (new id), so the history of what muted what stays truthful.

Errors are :class:`SilenceError` with ``field`` naming the offending field (``matchers.0.value``)
so the API can answer 422 pointing at it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqlalchemy import Engine, delete, insert, select, update

from alerts.notify.matchers import Matcher
from alerts.notify.schema import silences as silences_table
from store.clock import Clock

SilenceState = Literal["pending", "active", "expired"]


class SilenceError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class SilenceNotFound(KeyError):
    pass


@dataclass(frozen=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    starts_at_ms: int
    ends_at_ms: int
    updated_ms: int
    created_by: str
    comment: str

    def state(self, now_ms: int) -> SilenceState:
        if now_ms >= self.ends_at_ms:
            return "expired"
        if now_ms < self.starts_at_ms:
            return "pending"
        return "active"

    def mutes(self, labels: Mapping[str, str], now_ms: int) -> bool:
        return self.state(now_ms) == "active" and all(m.matches(labels) for m in self.matchers)


@dataclass(frozen=True)
class SilenceSpec:
    """What a client asks for; ``id`` set means update that silence."""

    matchers: tuple[Matcher, ...]
    starts_at_ms: int
    ends_at_ms: int
    created_by: str
    comment: str
    id: str | None = None


class SilenceStore:
    """Thread-safe: the API writes, the pipeline thread reads a snapshot per flush."""

    def __init__(self, engine: Engine, clock: Clock, new_id: Callable[[], str] | None = None,
                 max_age_ms: int = 0) -> None:
        """``max_age_ms`` > 0: reads reload from the database when the copy in memory is older
        (an HA pair: the other process may have set a silence)."""
        self._engine = engine
        self._clock = clock
        self._max_age_ms = max_age_ms
        self._loaded_ms = 0
        self._new_id = new_id or (lambda: str(uuid.uuid4()))
        self._lock = threading.Lock()
        self._by_id: dict[str, Silence] = {}
        self._snapshot: tuple[Silence, ...] = ()
        self.load()

    def load(self) -> None:
        with self._engine.connect() as conn:
            rows = conn.execute(select(silences_table)).mappings().all()
        with self._lock:
            self._by_id = {str(row["id"]): _from_row(dict(row)) for row in rows}
            self._snapshot = tuple(self._by_id.values())
            self._loaded_ms = self._clock.now_ms()

    def _fresh(self) -> None:
        if self._max_age_ms and self._clock.now_ms() - self._loaded_ms >= self._max_age_ms:
            self.load()

    # -- reads --------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return self._clock.now_ms()

    def all(self) -> list[Silence]:
        self._fresh()
        return sorted(self._snapshot, key=lambda s: (s.ends_at_ms, s.id), reverse=True)

    def get(self, silence_id: str) -> Silence:
        self._fresh()
        found = self._by_id.get(silence_id)
        if found is None:
            raise SilenceNotFound(silence_id)
        return found

    def muted_by(self, labels: Mapping[str, str], now_ms: int) -> list[str]:
        self._fresh()
        return [s.id for s in self._snapshot if s.mutes(labels, now_ms)]

    def snapshot(self) -> tuple[Silence, ...]:
        self._fresh()
        return self._snapshot

    # -- writes -------------------------------------------------------------------------------
    def upsert(self, spec: SilenceSpec) -> str:
        """Create (or update, when ``spec.id`` is set) a silence; returns its id."""
        now = self._clock.now_ms()
        validate(spec, now)
        with self._lock:
            previous = self._by_id.get(spec.id) if spec.id is not None else None
            if spec.id is not None and previous is None:
                raise SilenceNotFound(spec.id)
            starts = max(spec.starts_at_ms, now)
            if previous is not None and previous.state(now) != "expired" and previous.matchers == spec.matchers:
                # In place: an active silence keeps its start (it has muted since then).
                starts = previous.starts_at_ms if previous.state(now) == "active" else starts
                changed = replace(
                    previous, starts_at_ms=starts, ends_at_ms=spec.ends_at_ms, updated_ms=now,
                    created_by=spec.created_by, comment=spec.comment,
                )
                with self._engine.begin() as conn:
                    conn.execute(update(silences_table).where(silences_table.c.id == changed.id).values(_to_row(changed)))
                self._put(changed)
                return changed.id
            created = Silence(self._new_id(), spec.matchers, starts, spec.ends_at_ms, now, spec.created_by, spec.comment)
            expired = _expired(previous, now) if previous is not None and previous.state(now) != "expired" else None
            with self._engine.begin() as conn:
                if expired is not None:
                    conn.execute(update(silences_table).where(silences_table.c.id == expired.id).values(_to_row(expired)))
                conn.execute(insert(silences_table).values(_to_row(created)))
            if expired is not None:
                self._put(expired)
            self._put(created)
            return created.id

    def expire(self, silence_id: str) -> Silence:
        """Ends a silence now; expiring an expired silence changes nothing (idempotent)."""
        now = self._clock.now_ms()
        with self._lock:
            found = self._by_id.get(silence_id)
            if found is None:
                raise SilenceNotFound(silence_id)
            if found.state(now) == "expired":
                return found
            expired = _expired(found, now)
            with self._engine.begin() as conn:
                conn.execute(update(silences_table).where(silences_table.c.id == silence_id).values(_to_row(expired)))
            self._put(expired)
            return expired

    def gc(self, retention_ms: int) -> int:
        """Forgets silences expired longer than ``retention_ms`` ago."""
        horizon = self._clock.now_ms() - retention_ms
        with self._lock:
            with self._engine.begin() as conn:
                gone = conn.execute(delete(silences_table).where(silences_table.c.ends_at_ms < horizon)).rowcount
            if gone:
                self._by_id = {k: s for k, s in self._by_id.items() if s.ends_at_ms >= horizon}
                self._snapshot = tuple(self._by_id.values())
            return int(gone or 0)

    def _put(self, silence: Silence) -> None:
        self._by_id[silence.id] = silence
        self._snapshot = tuple(self._by_id.values())


def validate(spec: SilenceSpec, now_ms: int) -> None:
    if not spec.matchers:
        raise SilenceError("matchers", "at least one matcher is required")
    if all(m.matches({}) for m in spec.matchers):
        raise SilenceError("matchers", "at least one matcher must not match the empty string (it would mute everything)")
    if spec.ends_at_ms <= spec.starts_at_ms:
        raise SilenceError("endsAt", "endsAt must be after startsAt")
    if spec.ends_at_ms <= now_ms:
        raise SilenceError("endsAt", "endsAt is in the past: the silence would be expired already")
    if not spec.created_by.strip():
        raise SilenceError("createdBy", "createdBy must not be empty")
    if not spec.comment.strip():
        raise SilenceError("comment", "comment must not be empty")


def _expired(silence: Silence, now_ms: int) -> Silence:
    starts = min(silence.starts_at_ms, now_ms)
    return replace(silence, starts_at_ms=starts, ends_at_ms=now_ms, updated_ms=now_ms)


def _to_row(s: Silence) -> dict[str, object]:
    return {
        "id": s.id,
        "matchers": json.dumps([m.to_api() for m in s.matchers]),
        "starts_at_ms": s.starts_at_ms,
        "ends_at_ms": s.ends_at_ms,
        "updated_ms": s.updated_ms,
        "created_by": s.created_by,
        "comment": s.comment,
    }


def _from_row(row: Mapping[str, Any]) -> Silence:
    raw: Sequence[dict[str, object]] = json.loads(str(row["matchers"]))
    matchers = tuple(
        Matcher.from_api(str(m["name"]), str(m["value"]), bool(m["isRegex"]), bool(m.get("isEqual", True))) for m in raw
    )
    return Silence(
        id=str(row["id"]),
        matchers=matchers,
        starts_at_ms=int(row["starts_at_ms"]),
        ends_at_ms=int(row["ends_at_ms"]),
        updated_ms=int(row["updated_ms"]),
        created_by=str(row["created_by"]),
        comment=str(row["comment"]),
    )
