"""Imports a lean process (the node agent) can do without."""

from __future__ import annotations

import sys


def skip_httpx_cli() -> None:
    """httpx's package imports its command-line client, and with it click, rich and pygments
    (about 5 MiB of RSS), whenever those are installed. Marked absent before httpx is first
    imported, the import fails the way httpx expects when its CLI extras are not installed; the
    HTTP client itself is untouched. No effect once httpx is loaded."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
