"""Per-file parsing context and timeout records of the NCCL aggregator, with their JSON forms
(kept with the follower's offsets so a restart neither re-counts nor forgets)."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from collector.nccl.watchdog import format_ranks
from store.types import SeriesKey

TIMEOUT_EVENT = "nccl_timeout_event_timestamp_seconds"


@dataclass(slots=True)
class TestsRun:
    """One nccl-tests run of a file: its id and where it ran (from the header's ``Rank`` lines)."""

    run: str
    hosts: list[str] = _field(default_factory=list)  # distinct, in order of their first Rank line
    ranks: int = 0  # highest "Rank N" + 1
    header_ranks: int = 0  # nThread x nGpus
    rows: bool = False  # result rows seen: the next header line starts another run

    def labels(self) -> dict[str, str]:
        nranks = self.ranks or self.header_ranks
        return {"run": self.run, "host": self.hosts[0] if self.hosts else "unknown",
                "nranks": str(nranks) if nranks else "unknown", "nodes": str(len(self.hosts)) if self.hosts else "unknown"}

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "hosts": self.hosts, "ranks": self.ranks, "header_ranks": self.header_ranks,
                "rows": self.rows}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestsRun:
        return cls(str(data["run"]), [str(h) for h in data["hosts"]], int(data["ranks"]), int(data["header_ranks"]),
                   bool(data["rows"]))


@dataclass(slots=True)
class FileContext:
    """Per-file parsing context that must survive restarts (kept with the file's offset), plus
    where the line being applied is (``name``, ``offset``: set by the source, not persisted)."""

    tests_op: str = ""
    tests_run: TestsRun | None = None
    timeouts: dict[str, tuple[str, int]] = _field(default_factory=dict)  # rank ("" = any) -> (event id, offset)
    desync_rank: str = ""  # the rank whose desync report is being read
    name: str = ""  # the file's stem
    offset: int = 0  # byte offset of the current line
    host: str = ""  # the host the file's NCCL lines name (lines without one, e.g. PyTorch's, are its)

    def copy(self) -> FileContext:
        run = TestsRun.from_json(self.tests_run.to_json()) if self.tests_run else None
        return FileContext(self.tests_op, run, dict(self.timeouts), self.desync_rank, self.name, self.offset,
                           self.host)

    def run_id(self) -> str:
        name = self.name or "unknown"
        return name if self.offset == 0 else f"{name}@{self.offset}"

    def to_json(self) -> dict[str, Any]:
        return {"tests_op": self.tests_op, "tests_run": self.tests_run.to_json() if self.tests_run else None,
                "timeouts": {r: list(v) for r, v in self.timeouts.items()}, "desync_rank": self.desync_rank,
                "host": self.host}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileContext:
        """From a file entry of the state (entries written before these fields existed are fine)."""
        run = data.get("tests_run")
        timeouts = {str(r): (str(v[0]), int(v[1])) for r, v in (data.get("timeouts") or {}).items()}
        return cls(str(data.get("tests_op", "")), TestsRun.from_json(run) if run else None, timeouts,
                   str(data.get("desync_rank", "")), host=str(data.get("host", "")))


@dataclass(slots=True)
class TimeoutRecord:
    """One watchdog timeout as the NCCL page lists it."""

    op: str
    rank: str
    seq: int
    timeout_ms: int
    ran_for_ms: int | None
    pg: str
    logged: str
    seen_ms: int  # when the collector read it
    lagging: set[int] = _field(default_factory=set)

    @property
    def id(self) -> str:
        return f"{self.rank}|{self.pg}|{self.op}|{self.seq}|{self.logged}"

    def key(self) -> SeriesKey:
        labels = {"op": self.op, "rank": self.rank, "seq": str(self.seq), "timeout_ms": str(self.timeout_ms)}
        optional = {"ran_for_ms": "" if self.ran_for_ms is None else str(self.ran_for_ms), "pg": self.pg,
                    "logged": self.logged, "lagging_ranks": format_ranks(self.lagging)}
        labels.update((k, v) for k, v in optional.items() if v)
        return SeriesKey.of(TIMEOUT_EVENT, labels)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "rank": self.rank, "seq": self.seq, "timeout_ms": self.timeout_ms,
                "ran_for_ms": self.ran_for_ms, "pg": self.pg, "logged": self.logged, "seen_ms": self.seen_ms,
                "lagging": sorted(self.lagging)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TimeoutRecord:
        ran = d["ran_for_ms"]
        return cls(str(d["op"]), str(d["rank"]), int(d["seq"]), int(d["timeout_ms"]), None if ran is None else int(ran),
                   str(d["pg"]), str(d["logged"]), int(d["seen_ms"]), {int(r) for r in d["lagging"]})
