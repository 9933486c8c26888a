"""A durable first-in first-out queue of remote-write bodies on disk, one per receiver.

Layout: numbered segment files (``00000001.seg`` ...) of records, each a 20-byte header
(payload length, CRC-32 of the payload, samples in it, when it was put) and the payload; a ``cursor`` file with
the segment and offset of the oldest record not yet delivered, replaced atomically (write,
fsync, rename). ``put`` returns once the record is fsynced, so an agent acknowledges scraped
samples only when a kill -9 can no longer lose them.

Bounded in bytes: when the segments outgrow ``max_bytes`` the oldest whole segments are deleted
and what they held is counted as dropped (never silently). A torn record at the tail (the
process died mid-write) is cut off when the queue opens; a corrupt record elsewhere is skipped
and counted, so one bad sector cannot stop delivery.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct("<IIIq")  # payload bytes, crc32, samples, when it was put (ms)


@dataclass(frozen=True)
class Record:
    segment: int
    offset: int
    payload: bytes
    samples: int
    put_ms: int

    @property
    def end(self) -> int:
        return self.offset + HEADER.size + len(self.payload)


@dataclass
class QueueStats:
    records: int = 0
    samples: int = 0
    bytes: int = 0
    dropped_records: int = 0
    dropped_samples: int = 0
    corrupt_records: int = 0


class DiskQueue:
    def __init__(self, directory: Path, max_bytes: int = 512 * 1024 * 1024, segment_bytes: int = 8 * 1024 * 1024) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        self.segment_bytes = min(segment_bytes, max(max_bytes // 4, 64 * 1024))
        self.stats = QueueStats()
        self._lock = threading.Lock()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._segments = sorted(int(p.stem) for p in self.dir.glob("*.seg") if p.stem.isdigit())
        self._cursor = self._read_cursor()
        self._repair_tail()
        self._recount()
        # the newest segment's size, kept here: put_many runs per scrape and a stat each time showed
        self._tail_bytes = self._path(self._segments[-1]).stat().st_size if self._segments else 0

    # -- files ---------------------------------------------------------------------------------
    def _path(self, segment: int) -> Path:
        return Path(self._name(segment))

    def _name(self, segment: int) -> str:
        return os.path.join(self.dir, f"{segment:08d}.seg")  # a plain string: pathlib costs per scrape

    def _read_cursor(self) -> tuple[int, int]:
        try:
            segment, offset = (int(x) for x in (self.dir / "cursor").read_text().split())
            return segment, offset
        except (OSError, ValueError):
            return (self._segments[0] if self._segments else 1), 0

    def _write_cursor(self, sync: bool = True) -> None:
        """Replace the cursor file atomically. After a delivery it is not fsynced: a cursor lost
        to a power cut only sends some bodies again (receivers take duplicates), while an fsync
        per send would cost more than the send."""
        tmp = self.dir / "cursor.tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{self._cursor[0]} {self._cursor[1]}\n")
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, self.dir / "cursor")
        if sync:
            _fsync_dir(self.dir)

    def _repair_tail(self) -> None:
        """Cut a torn record off the newest segment (a write the process did not finish)."""
        if not self._segments:
            return
        path = self._path(self._segments[-1])
        good = 0
        with open(path, "rb") as fh:
            data = fh.read()
        while good + HEADER.size <= len(data):
            length = HEADER.unpack_from(data, good)[0]
            if good + HEADER.size + length > len(data):
                break
            good += HEADER.size + length
        if good < len(data):
            with open(path, "r+b") as fh:
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())

    def _records(self, segment: int, start: int, limit: int | None = None) -> list[Record]:
        """Records of ``segment`` from offset ``start`` (at most ``limit``), read record by
        record: the sender peeks one body at a time and must not reread a whole segment."""
        out: list[Record] = []
        try:
            fh = open(self._name(segment), "rb")
        except FileNotFoundError:
            return out
        with fh:
            fh.seek(start)
            pos = start
            while limit is None or len(out) < limit:
                header = fh.read(HEADER.size)
                if len(header) < HEADER.size:
                    break
                length, crc, samples, put_ms = HEADER.unpack(header)
                payload = fh.read(length)
                if len(payload) < length:
                    break
                out.append(Record(segment, pos, payload if zlib.crc32(payload) == crc else b"", samples, put_ms))
                pos += HEADER.size + length
        return out

    def _recount(self) -> None:
        records = samples = size = 0
        for segment in self._segments:
            if segment < self._cursor[0]:
                continue
            start = self._cursor[1] if segment == self._cursor[0] else 0
            for rec in self._records(segment, start):
                records += 1
                samples += rec.samples
            size += self._path(segment).stat().st_size - start
        self.stats.records, self.stats.samples, self.stats.bytes = records, samples, size

    # -- the queue -----------------------------------------------------------------------------
    def put(self, payload: bytes, samples: int, now_ms: int) -> None:
        """Append one body; returns once it is on disk (fsync)."""
        self.put_many([(payload, samples, now_ms)])

    def put_many(self, bodies: list[tuple[bytes, int, int]]) -> None:
        """Append bodies (payload, samples, when) in order with one fsync; returns once all are on disk."""
        if not bodies:
            return
        with self._lock:
            if not self._segments or self._tail_bytes >= self.segment_bytes:
                self._segments.append((self._segments[-1] + 1) if self._segments else max(1, self._cursor[0]))
                self._path(self._segments[-1]).touch()
                _fsync_dir(self.dir)
                self._tail_bytes = 0
            records = [HEADER.pack(len(p), zlib.crc32(p), n, t) + p for p, n, t in bodies]
            data = b"".join(records)
            with open(self._name(self._segments[-1]), "ab") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            self._tail_bytes += len(data)
            self.stats.records += len(bodies)
            self.stats.samples += sum(n for _, n, _ in bodies)
            self.stats.bytes += sum(len(r) for r in records)
            self._enforce_bound()

    def _enforce_bound(self) -> None:
        while self.stats.bytes > self.max_bytes and len(self._segments) > 1:
            oldest = self._segments[0]
            start = self._cursor[1] if oldest == self._cursor[0] else 0
            lost = self._records(oldest, start) if oldest >= self._cursor[0] else []
            self.stats.dropped_records += len(lost)
            self.stats.dropped_samples += sum(r.samples for r in lost)
            self.stats.records -= len(lost)
            self.stats.samples -= sum(r.samples for r in lost)
            self.stats.bytes -= max(0, self._path(oldest).stat().st_size - start)
            self._path(oldest).unlink(missing_ok=True)
            self._segments.pop(0)
            self._cursor = (self._segments[0], 0)
            self._write_cursor()

    def peek(self, limit: int = 1) -> list[Record]:
        """The oldest undelivered records, in order. A corrupt record is skipped (and counted)
        only once it is the oldest, so the cursor never passes a record not yet acked."""
        with self._lock:
            out: list[Record] = []
            for segment in list(self._segments):
                if segment < self._cursor[0]:
                    continue
                pos = self._cursor[1] if segment == self._cursor[0] else 0
                while len(out) < limit:
                    records = self._records(segment, pos, limit - len(out))
                    if not records:
                        break
                    for rec in records:
                        if rec.payload:
                            out.append(rec)
                        elif out:  # bodies before it still to deliver: skip it on a later peek
                            return out
                        else:  # failed its checksum and is the oldest: move past it
                            self.stats.corrupt_records += 1
                            self._advance(rec)
                            self._write_cursor()
                    pos = records[-1].end
                if len(out) >= limit:
                    break
            return out

    def ack(self, record: Record) -> None:
        """``record`` (the oldest) was delivered or given up on: move past it."""
        self.ack_all([record])

    def ack_all(self, records: list[Record]) -> None:
        """The oldest ``records``, in order, were delivered in one request: move past them all."""
        with self._lock:
            for record in records:
                self._advance(record)
            self._write_cursor(sync=False)

    def _advance(self, record: Record) -> None:
        if (record.segment, record.offset) < self._cursor:
            return  # already behind the cursor
        self._cursor = (record.segment, record.end)
        self.stats.records = max(0, self.stats.records - 1)
        self.stats.samples = max(0, self.stats.samples - record.samples)
        self.stats.bytes = max(0, self.stats.bytes - (record.end - record.offset))
        path = self._path(record.segment)
        if record.segment != self._segments[-1] and (not path.exists() or record.end >= path.stat().st_size):
            path.unlink(missing_ok=True)  # a whole segment delivered
            self._segments.remove(record.segment)
            self._cursor = (self._segments[0], 0)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
