"""``NcclLogSource``: a :class:`~collector.source.Source` over NCCL / PyTorch / nccl-tests files.

Every collect expands the globs, reads the new complete lines of each log file (see
:mod:`.follower`), feeds them through :func:`~collector.nccl.lines.parse_any` into one
:class:`~collector.nccl.metrics.NcclAggregator`, reads each ``*.prom`` file (NCCL Inspector
Prometheus mode) whole through :func:`~collector.exposition.parse_exposition`, and answers
with every series the aggregator holds plus the textfile samples, all stamped ``now`` (a
counter series new in this process also gets its 0 at ``now - 1 ms``, see :mod:`.metrics`).

The follower's offsets and the aggregator's state are written together, atomically (temp
file + ``os.replace``), after each collect that changed them, so a restart neither re-counts
nor skips a line and counters continue. No glob matching anything is an empty, healthy
scrape. A file that cannot be read or a ``.prom`` that does not parse makes the collect
``up=0`` naming the path (reason ``read`` / ``parse``); the other files are still read and
their events kept, and show on the next good collect. A state file that cannot be written
is ``up=0`` with reason ``state``. A corrupt state file at start is logged and ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.exposition import ParseError, parse_exposition
from collector.nccl.follower import FileState, Follower, Line, Opener, expand, open_binary
from collector.nccl.lines import parse_any
from collector.nccl.metrics import NcclAggregator
from collector.nccl.nccl_tests import op_from_name
from collector.source import Health, ScrapeResult
from store.clock import Clock
from store.types import Sample, SampleBatch

log = logging.getLogger(__name__)

STATE_VERSION = 1


class NcclLogSource:
    def __init__(
        self,
        globs: Sequence[str],
        state_path: str | Path,
        clock: Clock,
        *,
        max_bytes_per_file: int = 16 * 1024 * 1024,
        max_series: int = 20_000,
        opener: Opener = open_binary,
        host: str = "",
        watched: Sequence[str] = (),
    ) -> None:
        self.globs = list(globs)
        self.state_path = Path(state_path)
        self.clock = clock
        self.follower = Follower(max_bytes=max_bytes_per_file, opener=opener)
        self.host, self.watched = host, tuple(watched)
        self.aggregator = NcclAggregator(max_series, self.host, self.watched)
        self._max_series = max_series
        self._lock = threading.Lock()
        self._written = ""
        self._load()

    # -- persistence ---------------------------------------------------------------------
    def _load(self) -> None:
        try:
            text = self.state_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("%s: cannot read NCCL collector state, starting fresh: %s", self.state_path, exc)
            return
        try:
            data = json.loads(text)
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"unknown state version {data.get('version')!r}")
            aggregator = NcclAggregator.from_json(data["aggregate"], self._max_series, self.host, self.watched)
            self.follower.load(data["files"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s: corrupt NCCL collector state, starting fresh: %s", self.state_path, exc)
            return
        self.aggregator = aggregator
        self._written = text

    def _state_text(self) -> str:
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "files": self.follower.to_json(),
            "aggregate": self.aggregator.to_json(),
        }
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    def _save(self) -> None:
        text = self._state_text()
        if text == self._written:
            return
        tmp = self.state_path.with_name(f"{self.state_path.name}.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.state_path)
        self._written = text

    # -- collection ----------------------------------------------------------------------
    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        now_ms = self.clock.now_ms() if ts_ms is None else ts_ms
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return ScrapeResult.failed("timeout", "nccl logs: no time left before the scrape deadline")
        return await asyncio.to_thread(self.collect_sync, now_ms, time.monotonic() + remaining)

    def collect_sync(self, now_ms: int, stop_at: float = float("inf")) -> ScrapeResult:
        """Blocking collect (runs in a worker thread); stops starting new files after ``stop_at``."""
        with self._lock:
            return self._collect(now_ms, stop_at)

    def _collect(self, now_ms: int, stop_at: float) -> ScrapeResult:
        errors: list[tuple[str, str]] = []
        textfile: list[Sample] = []
        known = self.follower.begin()
        self.aggregator.now_ms = now_ms
        states: list[FileState] = []
        keep: list[str] = []
        for path in expand(self.globs):
            if time.monotonic() > stop_at:
                keep.append(str(path))
                continue
            if path.suffix == ".prom":
                textfile += self._read_prom(path, now_ms, errors)
                continue
            try:
                state, lines = self.follower.read(path, known)
            except OSError as exc:
                errors.append(("read", f"{path}: cannot read: {exc.strerror or exc}"))
                keep.append(str(path))
                continue
            state.ctx.name = path.stem
            if not state.ctx.tests_op:
                state.ctx.tests_op = op_from_name(path.name) or ""
            self._feed(lines, state)
            states.append(state)
        self.follower.commit(states, keep)
        try:
            self._save()
        except OSError as exc:
            errors.append(("state", f"{self.state_path}: cannot write state: {exc.strerror or exc}"))
        if errors:
            reason, _ = errors[0]
            return ScrapeResult.failed(reason, "; ".join(message for _, message in errors))
        batch = SampleBatch.from_samples(self.aggregator.samples(now_ms) + textfile)
        return ScrapeResult(batch, Health.ok())

    def _feed(self, lines: list[Line], state: FileState) -> None:
        parsed = ignored = 0
        for offset, line in lines:
            if not line.strip():
                continue
            event = parse_any(line)
            if event is None:
                ignored += 1
            else:
                parsed += 1
                state.ctx.offset = offset
                self.aggregator.apply(event, state.ctx)
        self.aggregator.count_lines(parsed, ignored)

    def _read_prom(self, path: Path, now_ms: int, errors: list[tuple[str, str]]) -> list[Sample]:
        try:
            with self.follower.opener(path) as handle:
                body = handle.read()
        except OSError as exc:
            errors.append(("read", f"{path}: cannot read: {exc.strerror or exc}"))
            return []
        try:
            return parse_exposition(body, default_ts_ms=now_ms).batch.samples()
        except ParseError as exc:
            errors.append(("parse", f"{path}: {exc}"))
            return []

    async def close(self) -> None:
        with self._lock:
            try:
                self._save()
            except OSError as exc:
                log.warning("%s: cannot write NCCL collector state: %s", self.state_path, exc)
