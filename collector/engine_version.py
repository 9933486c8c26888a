"""Which engine and version a scraped server runs, from its own JSON endpoint.

No engine exports its version as a metric (vLLM has only ``vllm:cache_config_info``), but each
answers one small JSON document: vLLM ``GET /version`` (``{"version": ...}``), SGLang ``GET
/get_server_info`` (``version`` among the server args), TGI ``GET /info`` (``version``, ``sha``),
Triton ``GET /v2`` (``{"name": "triton", "version": ...}``); our worker answers ``/version`` as
vLLM does, naming itself in ``engine``. The probe asks at the first scrape and then every
``every_s`` (10 min), in the background, so a scrape never waits for it; an engine that answers
none of the paths is asked again after ``retry_s`` (1 h). What it found is one series that rides
with every scrape of the target: ``node_software_info{component="engine", engine, version} 1``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

from store.types import SeriesKey

log = logging.getLogger(__name__)

INFO = "node_software_info"
# engine option -> (path, engine named when the document does not name itself)
PATHS: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm": (("/version", "vllm"),),
    "sglang": (("/get_server_info", "sglang"),),
    "tgi": (("/info", "tgi"),),
    "triton": (("/v2", "triton"),),
}
PATHS["auto"] = tuple(p for engine in ("vllm", "sglang", "tgi", "triton") for p in PATHS[engine])
Get = Callable[[str, float], Awaitable[tuple[int, bytes]]]  # url, timeout -> status, body


def version_from(document: object, default_engine: str) -> tuple[str, str] | None:
    """(engine, version) from one endpoint's JSON, or None when it names no version."""
    if not isinstance(document, dict):
        return None
    version = document.get("version")
    if not isinstance(version, str) or not version.strip():
        return None
    engine = document.get("engine") or (document.get("name") if default_engine == "triton" else None) or default_engine
    return str(engine), version.strip()


class EngineVersionProbe:
    def __init__(self, metrics_url: str, engine: str, get: Get, *, every_s: float = 600.0, retry_s: float = 3600.0,
                 timeout_s: float = 5.0) -> None:
        parts = urlsplit(metrics_url)
        self.base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        self.paths = PATHS.get(engine, ())
        self.get = get
        self.every_s, self.retry_s, self.timeout_s = every_s, retry_s, timeout_s
        self.keys: tuple[SeriesKey, ...] = ()
        self.error = ""
        self._next_at = 0.0
        self._task: asyncio.Task[None] | None = None

    def poke(self, now: float) -> None:
        """Start a probe in the background when one is due (called after each good scrape)."""
        if not self.paths or now < self._next_at or (self._task is not None and not self._task.done()):
            return
        self._next_at = now + self.every_s
        self._task = asyncio.ensure_future(self._probe(now))

    async def _probe(self, now: float) -> None:
        problems = []
        for path, engine in self.paths:
            try:
                status, body = await asyncio.wait_for(self.get(self.base + path, self.timeout_s), self.timeout_s)
            except Exception as exc:  # a timeout or any transport trouble: try the next path
                problems.append(f"{path}: {type(exc).__name__}")
                continue
            if status != 200:
                problems.append(f"{path}: HTTP {status}")
                continue
            try:
                found = version_from(json.loads(body), engine)
            except ValueError:
                found = None
            if found is not None:
                self.keys = (SeriesKey.of(INFO, component="engine", engine=found[0], version=found[1]),)
                self.error = ""
                return
            problems.append(f"{path}: no version in the answer")
        self.error = f"{self.base}: no engine version ({'; '.join(problems)})"
        log.debug("%s", self.error)
        self._next_at = now + self.retry_s

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
