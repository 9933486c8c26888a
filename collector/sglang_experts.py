"""SGLang's expert distribution recorder as a :class:`~collector.source.Source`.

SGLang counts the tokens routed to each expert when started with
``--expert-distribution-recorder-mode stat`` (or ``stat_approx``, ``per_pass``) and answers three
endpoints (GET or POST): ``/start_expert_distribution_record``, ``/stop_expert_distribution_record``
and ``/dump_expert_distribution_record``. A dump does not come back over HTTP: the server writes it
with ``torch.save`` into ``SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR`` (default ``/tmp``) and resets
its counts. So each collect dumps, restarts the recording (a restarted server forgets it was
recording) and reads the new files from that directory, which must be readable here (the agent on
the SGLang node, or a shared volume):

* ``expert_distribution_recorder_<time>.pt`` (stat modes, rank 0): ``{"rank", "logical_count",
  "average_utilization_rate_over_window"}``, ``logical_count`` shaped ``[steps, layers, experts]``
  (a circular buffer: summed over steps) or ``[layers, experts]``;
* ``expert_distribution_recorder_<time>_<rank>.pt`` (per_pass): ``{"records": [{"global_physical_count":
  [layers, physical experts], ...}], "last_physical_to_logical_map": [layers, physical experts]}``;
* ``expert_distribution_rank<r>_timestamp<t>.csv`` (older SGLang): ``layer_id,expert_id,count``.

Each dump adds to running totals, exported as the counter ``moe_expert_tokens_total{model,layer,
expert}`` (reset when this process restarts, as any counter may). Files read are deleted unless
``keep_dumps``; a file that cannot be read fails that collect naming it, is renamed ``*.bad`` and
not read again, and what was already counted stays. Reading ``.pt`` files needs torch (the
``worker`` extra).
"""

from __future__ import annotations

import asyncio
import csv
import io
import logging
from pathlib import Path
from typing import Any

import httpx

from collector.scrape_auth import CredentialError, ScrapeAuth
from collector.source import Health, ScrapeResult
from store.clock import Clock
from store.types import Sample, SampleBatch, SeriesKey

log = logging.getLogger(__name__)

METRIC = "moe_expert_tokens_total"
PATTERNS = ("expert_distribution_recorder_*.pt", "expert_distribution_rank*_timestamp*.csv")
Counts = dict[tuple[int, int], float]  # (layer, expert) -> tokens


class DumpError(ValueError):
    pass


def read_dump(path: Path) -> Counts:
    """The per-(layer, expert) token counts of one dump file; DumpError names what is wrong."""
    if path.suffix == ".csv":
        return _read_csv(path.read_text(encoding="utf-8"))
    try:
        import torch
    except ImportError as exc:
        raise DumpError("reading SGLang's .pt dumps needs torch (pip install 'infermeter[worker]')") from exc
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a file that is not a checkpoint
        raise DumpError(f"not a torch file: {type(exc).__name__}: {str(exc)[:200]}") from exc
    if not isinstance(data, dict):
        raise DumpError(f"expected a dict, found {type(data).__name__}")
    if "logical_count" in data:
        return _from_matrix(data["logical_count"])
    if "records" in data:
        return _from_records(data)
    raise DumpError(f"no logical_count or records in the dump (keys: {sorted(map(str, data))[:8]})")


def _from_matrix(tensor: Any) -> Counts:
    dims = getattr(tensor, "dim", lambda: -1)()
    if dims == 3:
        tensor = tensor.sum(dim=0)
    elif dims != 2:
        raise DumpError(f"logical_count must be [steps, layers, experts] or [layers, experts], not {dims}-D")
    rows = tensor.double().tolist()
    return {(layer, expert): float(v) for layer, row in enumerate(rows) for expert, v in enumerate(row) if v >= 0}


def _from_records(data: dict[str, Any]) -> Counts:
    mapping = data.get("last_physical_to_logical_map")
    counts: Counts = {}
    for record in data["records"]:
        physical = record.get("global_physical_count") if isinstance(record, dict) else None
        if physical is None:
            raise DumpError("per_token dumps are not read; start SGLang with --expert-distribution-recorder-mode stat")
        for layer, row in enumerate(physical.tolist()):
            for slot, v in enumerate(row):
                expert = int(mapping[layer][slot]) if mapping is not None else slot
                counts[(layer, expert)] = counts.get((layer, expert), 0.0) + float(v)
    return counts


def _read_csv(text: str) -> Counts:
    counts: Counts = {}
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or not {"layer_id", "expert_id", "count"} <= set(reader.fieldnames):
        raise DumpError("expected the columns layer_id,expert_id,count")
    for line, row in enumerate(reader, start=2):
        try:
            key = (int(row["layer_id"]), int(row["expert_id"]))
            counts[key] = counts.get(key, 0.0) + float(row["count"])
        except (TypeError, ValueError) as exc:
            raise DumpError(f"line {line}: {exc}") from exc
    return counts


class SglangExpertSource:
    def __init__(self, base_url: str, client: httpx.AsyncClient, clock: Clock, dump_dir: str | Path, *,
                 model: str | None = None, keep_dumps: bool = False, auth: ScrapeAuth | None = None) -> None:
        self.base = base_url.rstrip("/")
        self.client, self.clock = client, clock
        self.dump_dir = Path(dump_dir)
        self.model = model
        self.keep_dumps = keep_dumps
        self.auth = auth
        self.headers: dict[str, str] = {}
        self.totals: Counts = {}
        self._read: set[str] = set()  # files counted (kept dumps are not counted twice)

    async def _post(self, path: str, timeout: float) -> None:
        response = await self.client.post(self.base + path, headers=self.headers, timeout=timeout)
        if response.status_code != 200:
            hint = " (is SGLang started with --expert-distribution-recorder-mode stat?)" if response.status_code >= 500 else ""
            raise _Refused(f"{self.base}{path}: HTTP {response.status_code}: {response.text[:200]!r}{hint}")

    async def _model(self, timeout: float) -> str:
        if self.model is None:
            response = await self.client.get(self.base + "/get_server_info", headers=self.headers, timeout=timeout)
            try:
                info = response.json() if response.status_code == 200 else {}
            except ValueError:  # not JSON: the counts are still worth having, under an unknown model
                info = {}
            name = (info.get("served_model_name") or info.get("model_path")) if isinstance(info, dict) else None
            self.model = str(name) if name else "unknown"
        return self.model

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        ts = self.clock.now_ms() if ts_ms is None else ts_ms
        loop = asyncio.get_running_loop()
        try:
            value = self.auth.header() if self.auth is not None else ""
        except CredentialError as exc:
            return self._result(ScrapeResult.failed("auth", f"{self.base}: {exc}"), ts)
        self.headers = {"Authorization": value} if value else {}
        try:
            async with asyncio.timeout_at(deadline):
                timeout = max(0.001, deadline - loop.time())
                model = await self._model(timeout)
                await self._post("/dump_expert_distribution_record", timeout)
                await self._post("/start_expert_distribution_record", timeout)
        except TimeoutError:
            return self._result(ScrapeResult.failed("timeout", f"{self.base}: the recorder did not answer in time"), ts)
        except _Refused as exc:
            return self._result(ScrapeResult.failed("http_status", str(exc)), ts)
        except httpx.HTTPError as exc:
            return self._result(ScrapeResult.failed("connect", f"{self.base}: {type(exc).__name__}: {exc}"), ts)
        problems = await asyncio.to_thread(self._read_new)
        result = ScrapeResult(self._batch(model, ts), Health.ok())
        if problems:
            result.health = Health.down("parse", "; ".join(problems))
        return result

    def _result(self, failed: ScrapeResult, ts: int) -> ScrapeResult:
        """A failed collect still reports what was counted (a counter must not vanish)."""
        if self.totals and self.model:
            failed.batch = self._batch(self.model, ts)
        return failed

    def _read_new(self) -> list[str]:
        problems = []
        files = sorted({p for pattern in PATTERNS for p in self.dump_dir.glob(pattern)}, key=lambda p: p.name)
        for path in files:
            if path.name in self._read:
                continue
            self._read.add(path.name)
            try:
                counts = read_dump(path)
            except (DumpError, OSError, UnicodeDecodeError) as exc:
                problems.append(f"{path}: {exc}")
                log.warning("SGLang expert dump %s not read: %s", path, exc)
                _aside(path)
                continue
            for key, value in counts.items():
                self.totals[key] = self.totals.get(key, 0.0) + value
            if not self.keep_dumps:
                path.unlink(missing_ok=True)
        if len(self._read) > 100_000:
            self._read = {p.name for p in files}
        return problems

    def _batch(self, model: str, ts: int) -> SampleBatch:
        return SampleBatch.from_samples(
            Sample(SeriesKey.of(METRIC, model=model, layer=str(layer), expert=str(expert)), ts, value)
            for (layer, expert), value in sorted(self.totals.items())
        )

    async def close(self) -> None:
        await self.client.aclose()


class _Refused(Exception):
    pass


def _aside(path: Path) -> None:
    try:
        path.rename(path.with_name(path.name + ".bad"))
    except OSError:
        pass
