"""Silences over HTTP, in Alertmanager API v2's JSON shapes, under /api/v1.

* ``POST /api/v1/silences`` — a postableSilence; with ``id`` it updates that silence. Answers
  ``{"silenceID": "..."}``.
* ``GET /api/v1/silences`` — gettableSilences (with ``status.state``), newest end first.
* ``GET /api/v1/silence/{id}`` — one of them.
* ``DELETE /api/v1/silence/{id}`` — expires it now (idempotent); answers the expired silence.

The router knows nothing of the runtime: the caller passes a dependency that yields the
:class:`SilenceStore` and one that enforces write access (it raises to refuse). Bad payloads
answer 422 with FastAPI's error list, whose ``loc`` names the field (``["body", "endsAt"]``).
"""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, HTTPException
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from alerts.notify.matchers import Matcher
from alerts.notify.payloads import rfc3339
from alerts.notify.silences import Silence, SilenceError, SilenceNotFound, SilenceSpec, SilenceStore
from store.regex import RegexError, label_regex


class MatcherIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Declared before ``value`` so the regex check below can see it.
    isRegex: bool = False
    isEqual: bool = True
    name: str = Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    value: str

    @field_validator("value")
    @classmethod
    def _valid_regex(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("isRegex"):
            try:
                label_regex(value, dot_nl=True)  # RE2, as the matcher compiles it (and caches it)
            except RegexError as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return value


class PostableSilence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    matchers: list[MatcherIn] = Field(min_length=1)
    startsAt: AwareDatetime | None = None  # default: now
    endsAt: AwareDatetime
    createdBy: str = ""  # ignored when the request is authenticated: the author is the token's identity
    comment: str = Field(min_length=1)


def _ms(value: datetime) -> int:
    return int(value.astimezone(UTC).timestamp() * 1000)


def silence_json(silence: Silence, now_ms: int) -> dict[str, Any]:
    return {
        "id": silence.id,
        "status": {"state": silence.state(now_ms)},
        "updatedAt": rfc3339(silence.updated_ms),
        "matchers": [m.to_api() for m in silence.matchers],
        "startsAt": rfc3339(silence.starts_at_ms),
        "endsAt": rfc3339(silence.ends_at_ms),
        "createdBy": silence.created_by,
        "comment": silence.comment,
    }


def _unprocessable(field: str, message: str, value: object = None) -> HTTPException:
    loc = ["body", *(int(p) if p.isdigit() else p for p in field.split("."))]
    return HTTPException(422, [{"type": "value_error", "loc": loc, "msg": message, "input": value}])


class Editor(Protocol):
    """Who changes silences: ``name`` is the authenticated identity (None: anonymous, then the
    body's createdBy is the author); ``record`` writes the change to the audit log."""

    name: str | None

    def record(self, action: str, target: str, before: Any, after: Any) -> None: ...


def silences_router(
    get_silences: Callable[..., SilenceStore], get_editor: Callable[..., Editor], prefix: str = "/api/v1"
) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=["silences"])
    Store = Annotated[SilenceStore, Depends(get_silences)]
    EditorDep = Annotated[Editor, Depends(get_editor)]

    @router.post(
        "/silences",
        responses={404: {"description": "No silence with that id."}, 422: {"description": "Names the bad field."}},
    )
    def post_silence(body: PostableSilence, store: Store, editor: EditorDep) -> dict[str, str]:
        """Create a silence, or update the one named by ``id``. The author is the caller's token
        identity when the request is authenticated, else ``createdBy``."""
        now = store.now_ms()
        try:
            matchers = tuple(Matcher.from_api(m.name, m.value, m.isRegex, m.isEqual) for m in body.matchers)
            spec = SilenceSpec(
                matchers=matchers,
                starts_at_ms=_ms(body.startsAt) if body.startsAt is not None else now,
                ends_at_ms=_ms(body.endsAt),
                created_by=editor.name or body.createdBy,
                comment=body.comment,
                id=body.id,
            )
            before = silence_json(store.get(body.id), now) if body.id else None
            silence_id = store.upsert(spec)
            editor.record("silence.update" if before else "silence.create", f"silence/{silence_id}", before,
                          silence_json(store.get(silence_id), now))
            return {"silenceID": silence_id}
        except SilenceError as exc:
            raise _unprocessable(exc.field, exc.message) from None
        except SilenceNotFound:
            raise HTTPException(404, f"silence {body.id!r} not found") from None
        except ValueError as exc:
            raise _unprocessable("matchers", str(exc)) from None

    @router.get("/silences")
    def list_silences(store: Store) -> list[dict[str, Any]]:
        """Every silence still remembered (expired ones for ``silence_retention``)."""
        now = store.now_ms()
        return [silence_json(s, now) for s in store.all()]

    @router.get("/silence/{silence_id}", responses={404: {"description": "No silence with that id."}})
    def get_silence(silence_id: str, store: Store) -> dict[str, Any]:
        try:
            return silence_json(store.get(silence_id), store.now_ms())
        except SilenceNotFound:
            raise HTTPException(404, f"silence {silence_id!r} not found") from None

    @router.delete("/silence/{silence_id}", responses={404: {"description": "No silence with that id."}})
    def expire_silence(silence_id: str, store: Store, editor: EditorDep) -> dict[str, Any]:
        """Expire a silence now."""
        try:
            before = silence_json(store.get(silence_id), store.now_ms())
            expired = store.expire(silence_id)
        except SilenceNotFound:
            raise HTTPException(404, f"silence {silence_id!r} not found") from None
        after = silence_json(expired, store.now_ms())
        editor.record("silence.expire", f"silence/{silence_id}", before, after)
        return after

    return router
