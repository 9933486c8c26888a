"""The Dash app factory: the page shell (navigation, time range, model and node filters, live
refresh), Dash Pages registration and every panel's callback, built from what it is given.

Dash Pages keeps its page registry in a module global (``dash.page_registry``); the pages
registered here are static structure only (panel ids and titles), identical for every app
built in a process, so that global holds no state of ours. Callbacks are registered on the
app instance (``app.callback``), never on Dash's global callback list, so two apps built in
one process (tests, benchmarks) do not share data sources.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import parse_qs

import dash
from dash import Dash, Input, Output, dcc, html
from dash.exceptions import PreventUpdate
from prometheus_client import CollectorRegistry

from access.principal import Principal
from dashboard.auth import signed_in
from dashboard.pages import PAGES, Page
from dashboard.panel import MODEL_ID, NODE_ID, RANGE_ID, REFRESH_ID, PanelContext, PanelMetrics, grid
from dashboard.settings import DashboardSettings
from dashboard.sources import Sources
from dashboard.window import RANGES_MS, fitted_range, parse_range, range_options
from store.durations import parse_duration_ms

LINK = {"padding": "6px 10px", "borderRadius": "4px", "textDecoration": "none", "color": "#333", "fontSize": "14px"}
ACTIVE_LINK = {**LINK, "background": "#1f77b4", "color": "white"}
log = logging.getLogger(__name__)
OFF_MS = 24 * 3_600_000  # the interval's period when live refresh is off (it is also disabled)


def page_layout(page: Page, **_query: object) -> html.Div:
    body = grid(page.panels, page.intro)
    return html.Div([body, page.extra()]) if page.extra is not None else body


def page_href(prefix: str, page: Page) -> str:
    return prefix + page.path.lstrip("/")


def shell(settings: DashboardSettings, prefix: str, range_ms: int | None = None) -> html.Div:
    """Header (brand, page links, time range, filters, freshness), the refresh timer, the page;
    the range picker starts at ``range_ms`` (the configured default when None)."""
    links = [dcc.Link(p.name, href=page_href(prefix, p), id=f"nav-{p.module.rsplit('.', 1)[-1]}", style=LINK) for p in PAGES]
    controls = [
        dcc.Dropdown(id=RANGE_ID, options=range_options(settings.default_range), value=range_ms or settings.default_range,  # type: ignore[arg-type]
                     clearable=False, searchable=False, style={"width": "140px"}, persistence=True, persistence_type="session"),
        # The filters live in the header, outside the pages, so they hold while moving between
        # pages. (Not persisted over reloads: their options arrive by callback, after a
        # restored value would already have been dropped as unknown.)
        dcc.Dropdown(id=MODEL_ID, options=[], multi=True, placeholder="all models", style={"minWidth": "200px"}),
        dcc.Dropdown(id=NODE_ID, options=[], multi=True, placeholder="all nodes", style={"minWidth": "200px"}),
        html.Span(id="dash-role", style={"fontSize": "12px", "whiteSpace": "nowrap"}),
        html.Span(id="dash-user", style={"fontSize": "12px", "whiteSpace": "nowrap"}),
        html.Span(id="dash-updated", style={"color": "#777", "fontSize": "12px", "whiteSpace": "nowrap"}),
    ]
    header = html.Header(
        [html.B("infermeter", style={"fontSize": "18px", "marginRight": "12px"}),
         html.Nav(links, id="dash-nav", style={"display": "flex", "gap": "4px", "flexWrap": "wrap"}),
         html.Div(controls, style={"display": "flex", "gap": "8px", "alignItems": "center", "marginLeft": "auto", "flexWrap": "wrap"})],
        style={"display": "flex", "alignItems": "center", "gap": "8px", "padding": "8px 16px", "background": "white",
               "borderBottom": "1px solid #ddd", "position": "sticky", "top": "0", "zIndex": "10", "flexWrap": "wrap"},
    )
    refresh = settings.refresh_interval
    timer = dcc.Interval(id=REFRESH_ID, interval=refresh or OFF_MS, disabled=refresh == 0, n_intervals=0)
    main = html.Main(dash.page_container, style={"padding": "12px 16px"})
    return html.Div([header, timer, main], style={"background": "#f6f7f9", "minHeight": "100vh",
                                                  "fontFamily": "system-ui, -apple-system, Segoe UI, sans-serif"})


def create_dash(
    sources: Sources,
    settings: DashboardSettings,
    *,
    requests_prefix: str = "/dashboard/",
    registry: CollectorRegistry | None = None,
) -> Dash:
    """A Dash app whose Flask server answers at ``/`` and whose pages link under
    ``requests_prefix`` (where the API mounts it)."""
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        requests_pathname_prefix=requests_prefix,
        routes_pathname_prefix="/",
        suppress_callback_exceptions=True,
        title="infermeter",
        update_title=None,  # type: ignore[arg-type]
        serve_locally=True,
        use_async=False,
        compress=False,  # the mount gzips every response
    )
    for page in PAGES:
        dash.register_page(page.module, path=page.path, name=page.name, order=page.order,
                           title=f"infermeter · {page.name}", layout=partial(page_layout, page))  # type: ignore[no-untyped-call]
    ctx = PanelContext(sources, settings, PanelMetrics.register(registry) if registry is not None else None)
    app.layout = lambda: shell(settings, requests_prefix, initial_range(ctx))  # per page load: fits the data
    for page in PAGES:
        page.register(app, ctx)
    _register_shell(app, ctx, requests_prefix)
    return app


def initial_range(ctx: PanelContext) -> int:
    """The range a page load starts at: a configured ``dashboard.default_range``, else the
    smallest preset that covers the stored data (a fresh install's minutes are not squeezed
    into 6 h), at most the default. (The picker's choice, kept for the browser session, and a
    ``?range=`` in the URL win over it.)"""
    settings = ctx.settings
    if "default_range" in settings.model_fields_set:
        return settings.default_range
    now = ctx.sources.clock.now_ms()
    try:
        earliest = ctx.queries.earliest_sample(now, settings.default_range)
    except Exception:  # the page must load even when the store does not answer
        log.warning("dashboard: could not read the age of the stored data", exc_info=True)
        return settings.default_range
    return fitted_range(settings.default_range, None if earliest is None else now - earliest)


def range_from_url(search: str | None, default_ms: int) -> int | None:
    """``?range=1h`` (the config's duration syntax) as a preset of the picker; None without one."""
    values = parse_qs((search or "").lstrip("?")).get("range")
    if not values:
        return None
    try:
        wanted = parse_range(parse_duration_ms(values[-1]), default_ms)
    except ValueError:
        return None
    return next((r for r in sorted({*RANGES_MS, default_ms}) if r >= wanted), RANGES_MS[-1])


def _register_shell(app: Dash, ctx: PanelContext, prefix: str) -> None:
    def from_url(search: str | None) -> int:
        found = range_from_url(search, ctx.settings.default_range)
        if found is None:
            raise PreventUpdate
        return found

    app.callback(Output(RANGE_ID, "value"), Input("_pages_location", "search"))(from_url)

    def options(_n: object) -> tuple[list[dict[str, str]], list[dict[str, str]], str, str, str]:
        def read() -> tuple[list[str], list[str]]:
            return ctx.queries.models(), ctx.queries.nodes()

        models, nodes = ctx.run("filters", read, lambda _text: ([], []))
        now = datetime.fromtimestamp(ctx.sources.clock.now_ms() / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return ([{"label": m, "value": m} for m in models], [{"label": n, "value": n} for n in nodes],
                role_text(ctx.sources.role()), user_text(signed_in()), f"as of {now}")

    app.callback(Output(MODEL_ID, "options"), Output(NODE_ID, "options"), Output("dash-role", "children"),
                 Output("dash-user", "children"), Output("dash-updated", "children"),
                 Input(REFRESH_ID, "n_intervals"))(options)

    def highlight(pathname: str | None) -> list[dict[str, Any]]:
        path = (pathname or prefix).rstrip("/") + "/"
        return [ACTIVE_LINK if path == page_href(prefix, p).rstrip("/") + "/" else LINK for p in PAGES]

    app.callback([Output(f"nav-{p.module.rsplit('.', 1)[-1]}", "style") for p in PAGES],
                 Input("_pages_location", "pathname"))(highlight)


def user_text(principal: Principal | None) -> str:
    """Who is signed in, in the header ("open" when the service has no authentication)."""
    if principal is None or principal.via == "open":
        return "no sign-in configured"
    if principal.via == "anonymous":
        return "not signed in (read-only)"
    return f"signed in: {principal.name} ({principal.role.label})"


def role_text(role: dict[str, object]) -> str:
    """The header's word on this process's part in an HA pair (nothing when it runs alone)."""
    if role.get("role") == "leader":
        return f"HA leader · {role.get('holder', '')}"
    if role.get("role") == "follower":
        return f"HA follower · {role.get('holder', '')} (the other process leads)"
    return ""


__all__ = ["create_dash", "role_text", "user_text", "shell", "page_layout", "initial_range", "range_from_url"]
