"""Tables of stored forecasts (forecast); migrated by Alembic (migrations/versions)."""

from __future__ import annotations

from sqlalchemy import MetaData

metadata = MetaData()
