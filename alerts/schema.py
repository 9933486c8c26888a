"""Tables of rule state and cost/budget tables (alerts, cost); migrated by Alembic (migrations/versions)."""

from __future__ import annotations

from sqlalchemy import MetaData

metadata = MetaData()
