"""Serving the dashboard on the API's port: Dash's Flask server under FastAPI at /dashboard/.

``mount(app, runtime)`` is the one entry point the composition root calls. The Flask (WSGI)
server runs behind a2wsgi's WSGI-to-ASGI adapter, gzip, and the token gate of
:mod:`dashboard.auth`; ``/`` redirects to ``/dashboard/`` (keeping its query, so
``/?token=...`` signs in too).
"""

from __future__ import annotations

import json
from functools import partial

import flask
from a2wsgi import WSGIMiddleware
from dash import Dash
from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse
from prometheus_client import CollectorRegistry
from starlette.middleware.gzip import GZipMiddleware

from dashboard.app import create_dash
from dashboard.auth import TokenGate
from dashboard.sources import RuntimeLike, dashboard_settings, sources_from_runtime

PREFIX = "/dashboard"


def _refuse_malformed_updates(dash_app: Dash) -> flask.Response | None:
    """A callback request that is not one (no body, no ``output``, an output no callback has)
    is a 400 naming the problem, not a 500 from inside Dash."""
    request = flask.request
    if request.method != "POST" or not request.path.endswith("/_dash-update-component"):
        return None
    body = request.get_json(silent=True)
    problem = None
    if not isinstance(body, dict):
        problem = "the body is not a JSON object"
    elif not isinstance(body.get("output"), str):
        problem = "the body has no output (the callback's output id)"
    elif body["output"] not in dash_app.callback_map:
        problem = f"no callback has the output {body['output'][:200]!r}"
    elif not isinstance(body.get("inputs", []), list) or not isinstance(body.get("state", []), list):
        problem = "inputs and state must be lists"
    else:
        declared = dash_app.callback_map[body["output"]]
        for part in ("inputs", "state"):
            want, got = len(declared.get(part, [])), len(body.get(part, []))
            if want != got:
                problem = f"the callback of {body['output'][:200]!r} takes {want} {part}, the body has {got}"
                break
    if problem is None:
        return None
    return flask.Response(json.dumps({"status": "error", "errorType": "bad_data", "error": problem}), status=400,
                          mimetype="application/json")


def mount(app: FastAPI, runtime: RuntimeLike) -> None:
    """Serve the dashboard at ``/dashboard/`` of ``app`` and redirect ``/`` to it."""
    settings = dashboard_settings(runtime)
    if not settings.enabled:
        return
    registry = getattr(runtime, "registry", None)
    dash_app = create_dash(
        sources_from_runtime(runtime),
        settings,
        requests_prefix=f"{PREFIX}/",
        registry=registry if isinstance(registry, CollectorRegistry) else None,
    )
    dash_app.server.before_request(partial(_refuse_malformed_updates, dash_app))
    served = GZipMiddleware(WSGIMiddleware(dash_app.server), minimum_size=1024, compresslevel=6)  # type: ignore[arg-type]
    app.mount(PREFIX, TokenGate(served, runtime.access.auth, PREFIX), name="dashboard")
    app.state.dashboard = dash_app  # for tests and benchmarks: the Flask routes, the callback map

    async def to_dashboard(request: Request) -> RedirectResponse:
        query = request.url.query
        return RedirectResponse(f"{PREFIX}/" + (f"?{query}" if query else ""), status_code=307)

    app.add_api_route("/", to_dashboard, methods=["GET"], include_in_schema=False)


__all__ = ["mount", "PREFIX"]
