"""``POST /api/v1/samples``: JSON batches or Prometheus text, acknowledged only after commit."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from access.principal import Principal
from infermeter.api.deps import PrincipalDep, RuntimeDep, address
from infermeter.api.ingest import BadPayload, BodyTooLarge, decode_exposition, decode_json, decompress
from infermeter.api.ingest_limits import check_batch
from infermeter.api.remote_write import decode_remote_write
from infermeter.runtime import Runtime
from infermeter.tenant_series import TenantOverLimit
from store.tsdb import RejectReason
from store.types import SampleBatch

router = APIRouter(prefix="/api/v1", tags=["ingest"])

_TEXT_TYPES = ("text/plain", "application/openmetrics-text")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, where: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"status": "error", "errorType": "bad_data", "where": where, "error": f"{where}: {message}"},
        status_code=status,
    )


@router.post(
    "/write",
    summary="Prometheus remote write (snappy-compressed protobuf WriteRequest)",
    responses={200: {"description": "Committed."}, 400: {"description": "Malformed body; nothing stored."}},
)
async def remote_write(request: Request, runtime: RuntimeDep, _auth: PrincipalDep) -> JSONResponse:
    """Point Prometheus's ``remote_write`` here; the same as POST /api/v1/samples with
    ``Content-Type: application/x-protobuf``."""
    return await push_samples(request, runtime, _auth)


@router.post(
    "/samples",
    responses={
        200: {"description": "Committed; counts of accepted, duplicate and rejected samples."},
        400: {"description": "Malformed body; the error names the line or field. Nothing stored."},
        401: {"description": "Missing or wrong bearer token."},
        413: {"description": "Body over server.max_body_bytes. Nothing stored."},
        422: {"description": "JSON that does not match the schema; names the field. Nothing stored."},
    },
)
async def push_samples(request: Request, runtime: RuntimeDep, _auth: PrincipalDep) -> JSONResponse:
    """Push samples. ``Content-Type: application/json`` takes ``{"samples": [...]}`` or
    ``{"series": [...]}``; ``text/plain`` (or ``application/openmetrics-text``) takes the
    Prometheus exposition format. ``Content-Encoding: gzip`` is accepted."""
    limit = runtime.settings.server.max_body_bytes
    metrics = runtime.api_metrics
    try:
        body = await _read_body(request, limit)
        content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        now = runtime.clock.now_ms()
        if content_type == "application/x-protobuf":
            # Prometheus remote write: snappy is part of the protocol, not an HTTP encoding.
            batch = await run_in_threadpool(decode_remote_write, body, limit)
        elif content_type in _TEXT_TYPES:
            body = decompress(body, request.headers.get("content-encoding"), limit)

            def parse() -> SampleBatch:
                with runtime.push_lock:
                    return decode_exposition(body, request.headers.get("content-type"), now, runtime.push_cache)

            batch = await run_in_threadpool(parse)
        elif content_type in ("application/json", ""):
            body = decompress(body, request.headers.get("content-encoding"), limit)
            batch = await run_in_threadpool(decode_json, body, now)
        else:
            raise BadPayload(
                "Content-Type",
                f"unsupported {content_type!r}: use application/json, text/plain or application/x-protobuf",
                415,
            )
    except BodyTooLarge:
        metrics.ingest_errors.labels("too_large").inc()
        return _error(413, "body", f"larger than the limit of {limit} bytes")
    except BadPayload as exc:
        metrics.ingest_errors.labels("bad_payload").inc()
        return _error(exc.status, exc.where, exc.message)
    try:
        await run_in_threadpool(_within_limits, runtime, batch, tenant(request, _auth))
    except BadPayload as exc:
        metrics.ingest_errors.labels("limit").inc()
        return _error(exc.status, exc.where, exc.message)
    result = await run_in_threadpool(runtime.store.append, batch)
    refused = result.rejected.get(RejectReason.SERIES_LIMIT, 0)
    if refused:
        metrics.ingest_errors.labels("series_limit").inc()
        limit = runtime.settings.store.max_series
        return JSONResponse({"status": "error", "errorType": "bad_data", "where": "body",
                             "error": f"body: {refused} samples of new series refused: the store holds its limit of "
                                      f"{limit} active series (store.max_series); the other samples were stored",
                             "data": result.as_dict()}, status_code=422)
    return JSONResponse({"status": "success", "data": result.as_dict()})


def tenant(request: Request, principal: Principal) -> str:
    """Whose series budget a push counts against: the token's name, or the address of an
    anonymous (or unauthenticated) sender."""
    if principal.via in ("token", "oidc"):
        return principal.name
    return f"anonymous@{address(request)}"


def _within_limits(runtime: Runtime, batch: SampleBatch, who: str) -> None:
    """Refuse a push over a limit (BadPayload, 422). On the embedded store only the series it does
    not hold yet are checked (the ones it holds passed when they were created): one dictionary
    lookup per key, shared by the label checks and the tenant's series budget."""
    limits = runtime.settings.server.ingest
    tsdb = runtime.tsdb
    new = batch.keys if tsdb is None else [key for key in batch.keys if tsdb.index.get(key) is None]
    check_batch(batch, new, limits)
    if tsdb is not None:
        try:
            runtime.tenant_series.admit(who, len(new), limits.max_series_per_tenant)
        except TenantOverLimit as exc:
            raise BadPayload("body", str(exc), 422) from None
