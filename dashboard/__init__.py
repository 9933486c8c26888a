"""Plotly Dash app factory, pages and pure figure builders.

Entry points: :func:`mount` (serve at ``/dashboard/`` of the API), :func:`dashboard.app.create_dash`
(the app from explicit sources), :class:`DashboardSettings` (the ``dashboard:`` config
section) and :class:`ForecastSource` (what the forecast panels read). Importing this package
does not import Dash; :func:`mount` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.settings import DashboardSettings
from dashboard.sources import ForecastPoints, ForecastSource, RuntimeLike, Sources, sources_from_runtime

if TYPE_CHECKING:
    from fastapi import FastAPI


def mount(app: FastAPI, runtime: RuntimeLike) -> None:
    """Serve the dashboard at ``/dashboard/`` of ``app`` and redirect ``/`` to it
    (:func:`dashboard.serve.mount`; raises ImportError when Dash is not installed)."""
    from dashboard.serve import mount as serve

    serve(app, runtime)


__all__ = ["DashboardSettings", "ForecastPoints", "ForecastSource", "RuntimeLike", "Sources", "mount", "sources_from_runtime"]
