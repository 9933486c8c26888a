"""Plotly Dash app factory, pages and pure figure builders.

Entry points: :func:`mount` (serve at ``/dashboard/`` of the API), :func:`dashboard.app.create_dash`
(the app from explicit sources), :class:`DashboardSettings` (the ``dashboard:`` config
section) and :class:`ForecastSource` (what the forecast panels read). Importing this package
does not import Dash; :func:`mount` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_attributes

if TYPE_CHECKING:
    from fastapi import FastAPI

    from dashboard.settings import DashboardSettings
    from dashboard.sources import ForecastPoints, ForecastSource, RuntimeLike, Sources, sources_from_runtime

# Loaded on first use: reading the config (``dashboard.settings``) must not load the dashboard's
# data layer, which pulls in the whole store.
_WHERE = {"DashboardSettings": "dashboard.settings", "ForecastPoints": "dashboard.sources",
          "ForecastSource": "dashboard.sources", "RuntimeLike": "dashboard.sources", "Sources": "dashboard.sources",
          "sources_from_runtime": "dashboard.sources"}


__getattr__ = lazy_attributes('dashboard', _WHERE, globals())


def mount(app: FastAPI, runtime: RuntimeLike) -> None:
    """Serve the dashboard at ``/dashboard/`` of ``app`` and redirect ``/`` to it
    (:func:`dashboard.serve.mount`; raises ImportError when Dash is not installed)."""
    from dashboard.serve import mount as serve

    serve(app, runtime)


__all__ = ["DashboardSettings", "ForecastPoints", "ForecastSource", "RuntimeLike", "Sources", "mount", "sources_from_runtime"]
