"""Typed dependencies: routes ask for the runtime, never import a global."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from infermeter.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def require_writer(request: Request, runtime: RuntimeDep) -> None:
    """Write endpoints need ``Authorization: Bearer <token>`` when a token is configured."""
    token = runtime.settings.server.api_token
    if not token:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})


WriterDep = Annotated[None, Depends(require_writer)]


def require_reader(request: Request, runtime: RuntimeDep) -> None:
    """Reads are open unless ``server.open_reads`` is false; then they need the token too."""
    if runtime.settings.server.open_reads:
        return
    require_writer(request, runtime)


ReaderDep = Annotated[None, Depends(require_reader)]
