"""The role each route needs: one table, read by the one authorization dependency and by the
test that walks every route. Routes not in the table are safe by default: a GET is a read
(viewer), anything else needs an admin."""

from __future__ import annotations

from access.principal import Role

OPEN = None  # answers without credentials: liveness and readiness probes

_READ_BY_POST = ("/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels",
                 "/api/v1/query_exemplars", "/api/v1/format_query")

_POLICY: dict[tuple[str, str], Role | None] = {
    ("GET", "/health"): OPEN,
    ("GET", "/ready"): OPEN,
    ("GET", "/"): OPEN,  # only redirects to /dashboard/ (keeping ?token=), whose gate checks
    **{("POST", path): Role.VIEWER for path in _READ_BY_POST},
    ("POST", "/api/v1/write"): Role.OPERATOR,
    ("POST", "/api/v1/samples"): Role.OPERATOR,
    ("POST", "/api/v1/silences"): Role.OPERATOR,
    ("DELETE", "/api/v1/silence/{silence_id}"): Role.OPERATOR,
    ("POST", "/api/v1/events"): Role.OPERATOR,
    ("GET", "/api/v1/audit"): Role.ADMIN,
    ("GET", "/api/v1/tokens"): Role.ADMIN,
}


def required_role(method: str, path: str) -> Role | None:
    """The role ``method`` on the route template ``path`` needs; None: open to anyone."""
    method = "GET" if method == "HEAD" else method
    if (method, path) in _POLICY:
        return _POLICY[(method, path)]
    return Role.VIEWER if method == "GET" else Role.ADMIN


def rate_class(method: str, path: str) -> str | None:
    """Which rate limit a route counts against: "write" (ingest and changes), "query" (reads of
    samples), or None (cheap reads, probes)."""
    if path in ("/health", "/ready", "/metrics"):
        return None
    needed = required_role(method, path)
    if needed is not None and needed >= Role.OPERATOR:
        return "write"
    if path.startswith(("/api/v1/query", "/api/v1/series", "/api/v1/label", "/api/v1/federate")):
        return "query"
    return None
