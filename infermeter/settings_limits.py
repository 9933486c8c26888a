"""Limits on what a push (``/api/v1/samples``, ``/api/v1/write``) may bring: series per request,
labels per series, label name and value lengths (VictoriaMetrics's and Mimir's defaults as a
guide), and series per tenant (the pushing token)."""

from __future__ import annotations

from pydantic import Field

from infermeter.settings_base import Strict


class IngestLimits(Strict):
    """Limits on every push (/api/v1/samples, /api/v1/write); over one, a 422 names it and nothing is stored."""

    max_series_per_request: int = Field(100_000, ge=1, description="distinct series in one push")
    max_labels_per_series: int = Field(30, ge=1, description="labels of a series, its name included")
    max_label_name_length: int = Field(256, ge=1, description="characters of a label name")
    max_label_value_length: int = Field(1024, ge=1, description="characters of a label value (metric names included)")
    max_series_per_tenant: int = Field(
        0, ge=0,
        description="series one token's pushes may create (anonymous pushes share one budget per address); "
        "0: no limit. Counted since the process started",
    )
