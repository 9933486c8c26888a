"""Prometheus remote-write 1.0 bodies written straight to protobuf wire format, vectorised.

Building ``WriteRequest`` messages through the protobuf library costs a Python call per label and
per sample (20 µs a sample was measured in an agent, 70 % of its CPU). The schema is tiny and
fixed, so the bytes are written here instead:

- WriteRequest: ``timeseries`` = field 1, length-delimited (tag ``0x0a``), repeated;
- TimeSeries: ``labels`` = field 1 (``0x0a``), ``samples`` = field 2 (``0x12``), both repeated;
- Label: ``name`` = field 1 (``0x0a``), ``value`` = field 2 (``0x12``), strings;
- Sample: ``value`` = field 1, fixed64 double (``0x09``); ``timestamp`` = field 2, varint int64 (``0x10``).

A series' label bytes (its own labels, the external ones it lacks, sorted by name as receivers
require) are the same at every scrape and are kept per series; the samples of a whole batch are
written as one numpy array of fixed-width rows. Every field is written even when it holds its
default (a 0 value, a 0 timestamp), which protobuf decoders accept as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cramjam
import numpy as np

from store.types import SampleBatch, SeriesKey

_MAX_CACHED = 1_000_000  # series whose label bytes are kept; past it the cache starts over
_TEMPLATE_BUDGET = 32 * 1024 * 1024  # bytes of scrape templates kept (least recently used go first)
_KEY_COST = 200  # rough bytes of one SeriesKey a template keeps alive


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 as protobuf writes it: negatives take ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_SMALL = [varint(i) for i in range(1 << 14)]  # lengths of most series messages: a list lookup


def _length(n: int) -> bytes:
    return _SMALL[n] if n < 16384 else varint(n)


def _field(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + varint(len(payload)) + payload


def _sample_rows(ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every sample as a length-prefixed ``Sample`` field, all in one uint8 buffer, and where
    each row starts (rows differ in width only when timestamps need different varint lengths)."""
    n = len(ts)
    if n and ts.min() == ts.max():  # one timestamp for all, as in a scrape: its varint once
        return _fixed_rows(values, np.frombuffer(varint(int(ts[0])), np.uint8))
    unsigned = ts.astype(np.uint64)  # two's complement, as protobuf encodes a negative int64
    bits = np.zeros(n, np.int64)
    rest = unsigned.copy()
    while rest.any():
        bits += rest > 0
        rest >>= np.uint64(7)
    widths = np.maximum(bits, 1)  # varint bytes of each timestamp
    if n and int(widths.min()) == int(widths.max()):
        w = int(widths[0])
        stamps = np.empty((n, w), np.uint8)
        for j in range(w):
            part = (unsigned >> np.uint64(7 * j)) & np.uint64(0x7F)
            stamps[:, j] = part.astype(np.uint8) | (0x80 if j < w - 1 else 0)
        return _fixed_rows(values, stamps)
    parts = [_field(0x12, b"\x09" + np.float64(v).astype("<f8").tobytes() + b"\x10" + varint(int(t)))
             for t, v in zip(ts.tolist(), values.tolist())]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return np.frombuffer(b"".join(parts), np.uint8), offsets


def _fixed_rows(values: np.ndarray, stamps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of one width: ``stamps`` holds each row's timestamp varint (n x w), or one for all (w)."""
    n, w = len(values), stamps.shape[-1]
    rows = np.empty((n, 12 + w), np.uint8)
    rows[:, 0] = 0x12
    rows[:, 1] = 10 + w
    rows[:, 2] = 0x09
    rows[:, 3:11] = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(n, 8)
    rows[:, 11] = 0x10
    rows[:, 12:] = stamps
    return rows.reshape(-1), np.arange(n + 1, dtype=np.int64) * (12 + w)


class _Template:
    """A scrape loop's whole body with its sample rows left blank: every series' head in key
    order, each followed by room for one ``width``-byte sample row. Encoding a scrape of that
    key list is a copy of ``buffer`` and one scatter of the rows into ``slots``."""

    __slots__ = ("keys", "width", "buffer", "row_starts", "cost")

    def __init__(self, keys: Sequence[SeriesKey], width: int, heads: list[bytes]) -> None:
        self.keys = keys  # held, so the list's id stays its own while this template lives
        self.width = width
        self.buffer = np.frombuffer(b"".join(h + bytes(width) for h in heads), np.uint8)
        self.row_starts = np.cumsum([len(h) for h in heads], dtype=np.intp) + np.arange(len(heads), dtype=np.intp) * width
        # what keeping it costs: its bytes and, roughly, the keys it keeps alive
        self.cost = self.buffer.nbytes + self.row_starts.nbytes + _KEY_COST * len(keys)

    def fill(self, rows: np.ndarray) -> memoryview:
        out = self.buffer.copy()
        # slots are computed per call: kept, they would cost 8 bytes per body byte they address
        out[(self.row_starts[:, None] + np.arange(self.width, dtype=np.intp)).reshape(-1)] = rows
        return out.data


class WriteRequestEncoder:
    """Encodes batches for one set of external labels, remembering each series' label bytes."""

    def __init__(self, external: Mapping[str, str] | None = None, *, reused_key_lists: bool = False) -> None:
        """``reused_key_lists``: the caller hands over the same key list object batch after
        batch and never changes one in place (scrape loops do), so heads are kept per list."""
        self.external = dict(external or {})
        self.reused_key_lists = reused_key_lists
        self._labels: dict[SeriesKey, bytes] = {}
        self._heads: dict[SeriesKey, tuple[int, bytes]] = {}  # TimeSeries head for one sample of a row width
        self._by_list: dict[int, _Template] = {}  # in order of use, least recent first
        self._template_bytes = 0

    def label_bytes(self, key: SeriesKey, keep: bool = True) -> bytes:
        """A series' Label fields (its labels and the external ones it lacks, sorted by name),
        kept unless ``keep`` is False."""
        found = self._labels.get(key)
        if found is None:
            labels = {**self.external, **dict(key.labels), "__name__": key.name}
            found = b"".join(
                _field(0x0A, _field(0x0A, name.encode()) + _field(0x12, labels[name].encode())) for name in sorted(labels)
            )
            if not keep:
                return found
            if len(self._labels) >= _MAX_CACHED:
                self._labels.clear()
            self._labels[key] = found
        return found

    def encode(self, batch: SampleBatch) -> bytes:
        """The batch as a snappy-compressed WriteRequest: one TimeSeries per series, its samples
        in time order."""
        if not len(batch):
            return bytes(cramjam.snappy.compress_raw(b""))
        index = np.asarray(batch.key_index, np.int64)
        ts = np.asarray(batch.ts_ms, np.int64)
        values = np.asarray(batch.values, np.float64)
        if len(index) > 1 and not (np.all(np.diff(index) > 0) or _sorted_pairs(index, ts)):
            order = np.lexsort((ts, index))
            index, ts, values = index[order], ts[order], values[order]
        rows, offsets = _sample_rows(ts, values)
        width = int(offsets[1] - offsets[0])
        if len(index) == 1 or (np.all(np.diff(index) > 0) and width * len(index) == len(rows)):
            return bytes(cramjam.snappy.compress_raw(self._one_sample_each(batch.keys, index, rows, width)))
        bounds = np.flatnonzero(np.diff(index)) + 1
        starts = np.concatenate(([0], bounds)).tolist()
        ends = np.concatenate((bounds, [len(index)])).tolist()
        keys = batch.keys
        offs = offsets.tolist()
        data = rows.tobytes()
        out = []
        for lo, hi, k in zip(starts, ends, index[starts].tolist()):
            labels = self.label_bytes(keys[k])
            body = data[offs[lo]:offs[hi]]
            out.append(b"\x0a" + _length(len(labels) + len(body)) + labels + body)
        return bytes(cramjam.snappy.compress_raw(b"".join(out)))


    def _one_sample_each(self, keys: Sequence[SeriesKey], index: np.ndarray, rows: np.ndarray,
                         width: int) -> bytes | memoryview:
        """The common case of a scrape: every series once, every row ``width`` bytes. Each
        series' whole head (tag, length, labels) is kept, so a series costs two list appends;
        when the batch is a scrape loop's key list in order (the same list object scrape after
        scrape), the body of that whole list is kept as a template and filled in one scatter."""
        if self.reused_key_lists and len(index) == len(keys) and int(index[-1]) == len(keys) - 1:  # 0..n-1
            return self._template(keys, width).fill(rows)
        data = rows.tobytes()
        out: list[bytes] = []
        append = out.append
        pos = 0
        for k in index.tolist():
            append(self._head(keys[k], width))
            append(data[pos:pos + width])
            pos += width
        return b"".join(out)

    def _head(self, key: SeriesKey, width: int, keep: bool = True) -> bytes:
        """A TimeSeries' tag, length and labels, for one sample row of ``width`` bytes; kept
        unless ``keep`` is False (a template holds its heads itself; rebuilding one, when a
        target's series change, encodes its labels again: rare, and cheaper than a second copy)."""
        found = self._heads.get(key)
        if found is None or found[0] != width:
            labels = self.label_bytes(key, keep)
            found = (width, b"\x0a" + _length(len(labels) + width) + labels)
            if not keep:
                return found[1]
            if len(self._heads) >= _MAX_CACHED:
                self._heads.clear()
            self._heads[key] = found
        return found[1]

    def _template(self, keys: Sequence[SeriesKey], width: int) -> _Template:
        """The template of ``keys``, kept per list object (scrape loops reuse theirs while a
        target's series stay the same)."""
        found = self._by_list.pop(id(keys), None)
        if found is not None and found.keys is keys and found.width == width:
            self._by_list[id(keys)] = found  # now the most recently used
            return found
        if found is not None:
            self._template_bytes -= found.cost
        made = _Template(keys, width, [self._head(key, width, keep=False) for key in keys])
        # A target whose series change makes a new list each time: the old ones' templates
        # are never asked for again and leave, oldest first, once the budget is spent.
        while self._by_list and self._template_bytes + made.cost > _TEMPLATE_BUDGET:
            self._template_bytes -= self._by_list.pop(next(iter(self._by_list))).cost
        self._by_list[id(keys)] = made
        self._template_bytes += made.cost
        return made


def _sorted_pairs(index: np.ndarray, ts: np.ndarray) -> bool:
    """Whether (series, time) pairs are already in order (series may repeat, in runs)."""
    di = np.diff(index)
    return bool(np.all((di > 0) | ((di == 0) & (np.diff(ts) >= 0))))


__all__ = ["WriteRequestEncoder", "varint"]
