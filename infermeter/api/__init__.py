"""HTTP API: FastAPI app factory and routes (health, ingest, queries, own metrics)."""

from infermeter.api.app import create_app

__all__ = ["create_app"]
