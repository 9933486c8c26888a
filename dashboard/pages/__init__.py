"""The dashboard's pages, in navigation order. Each module holds its panels (ids, titles), the
thin callbacks that read data and call the pure builders, and a :class:`Page` spec that
:mod:`dashboard.app` registers with Dash Pages."""

from __future__ import annotations

from dashboard.pages import alerts, cost, drift, gpus, moe, nccl, overview, releases, requests
from dashboard.pages.common import Page

PAGES: tuple[Page, ...] = (overview.PAGE, gpus.PAGE, requests.PAGE, cost.PAGE, nccl.PAGE, moe.PAGE, drift.PAGE, releases.PAGE, alerts.PAGE)

__all__ = ["PAGES", "Page"]
