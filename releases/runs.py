"""The stored runs of the release procedures: ``infermeter validate`` (one row per run, its verdict
and whole result as JSON; the last passed run of a URL and model is the next run's cost baseline)
and ``infermeter evaluate`` (its ranked candidates, which the finance report lists)."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from releases.schema import evaluations, validations


class ValidationStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, result: dict[str, Any]) -> int:
        """``result``: a run as JSON (``infermeter.validate.Result.to_json``: started_ms, url,
        model, verdict, checks, ...)."""
        row = {"at_ms": int(result["started_ms"]), "url": str(result["url"])[:512], "model": str(result["model"])[:255],
               "verdict": str(result["verdict"]), "result": json.dumps(result, default=str)}
        with self.engine.begin() as conn:
            return int(conn.execute(sa.insert(validations).values(**row).returning(validations.c.id)).scalar_one())

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        query = sa.select(validations).order_by(validations.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [{"id": r["id"], **json.loads(r["result"])} for r in rows]

    def get(self, validation_id: int) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(validations).where(validations.c.id == validation_id)).mappings().first()
        return {"id": row["id"], **json.loads(row["result"])} if row else None

    def baseline(self, url: str, model: str) -> dict[str, Any] | None:
        """The newest passed run of this URL and model (the cost baseline)."""
        query = (sa.select(validations).where(validations.c.url == url[:512], validations.c.model == model[:255],
                                              validations.c.verdict == "pass")
                 .order_by(validations.c.id.desc()).limit(1))
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return {"id": row["id"], **json.loads(row["result"])} if row else None


class EvaluationStore:
    """``infermeter evaluate`` runs: their ranked rows (``infermeter.evaluate.summary_rows``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, at_ms: int, rows: list[dict[str, Any]], notes: list[str]) -> int:
        text = json.dumps({"rows": rows, "notes": notes}, default=str)
        with self.engine.begin() as conn:
            return int(conn.execute(sa.insert(evaluations).values(at_ms=at_ms, result=text)
                                    .returning(evaluations.c.id)).scalar_one())

    def between(self, start_ms: int, end_ms: int) -> list[tuple[int, int, dict[str, Any]]]:
        """(id, at_ms, {"rows", "notes"}) in [start, end), oldest first."""
        query = (sa.select(evaluations).where(evaluations.c.at_ms >= start_ms, evaluations.c.at_ms < end_ms)
                 .order_by(evaluations.c.at_ms, evaluations.c.id))
        with self.engine.connect() as conn:
            return [(int(r["id"]), int(r["at_ms"]), json.loads(r["result"])) for r in conn.execute(query).mappings()]
