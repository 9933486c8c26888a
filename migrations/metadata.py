"""Every table the service owns, one MetaData per package, for Alembic and the drift test."""

from __future__ import annotations

from sqlalchemy import MetaData

from access.schema import metadata as access_metadata
from alerts.notify.schema import metadata as notify_metadata
from alerts.schema import metadata as alerts_metadata
from cost.schema import metadata as cost_metadata
from forecast.schema import metadata as forecast_metadata
from ha.schema import metadata as ha_metadata
from releases.schema import metadata as releases_metadata
from store.schema import metadata as store_metadata

ALL_METADATA: list[MetaData] = [store_metadata, notify_metadata, alerts_metadata, forecast_metadata, ha_metadata,
                                 access_metadata, cost_metadata, releases_metadata]
