"""Value types shared by every stage: series identity, samples, columnar batches.

Timestamps are integer milliseconds since the Unix epoch, UTC, everywhere in the store.
Values are float64; NaN is a legal value (Prometheus exports it), and one particular NaN bit
pattern, :data:`STALE_NAN`, marks a series as stale the way Prometheus does.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

# Prometheus's naming rules for metric and label names.
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# Prometheus's staleness marker: a signalling NaN with this exact bit pattern.
STALE_NAN_BITS = 0x7FF0000000000002
STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]

Int64Array = npt.NDArray[np.int64]
Float64Array = npt.NDArray[np.float64]


def is_stale_marker(values: Float64Array) -> npt.NDArray[np.bool_]:
    """True where a value carries the exact staleness NaN bit pattern."""
    marked: npt.NDArray[np.bool_] = values.view(np.uint64) == np.uint64(STALE_NAN_BITS)
    return marked


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """A metric name plus its label set; labels kept sorted so equal sets compare equal."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Sorting here makes every constructor canonical; the hash is cached because
        # series keys are dictionary keys on the ingest hot path.
        ordered = tuple(sorted(self.labels))
        if ordered != self.labels:
            object.__setattr__(self, "labels", ordered)
        object.__setattr__(self, "_hash", hash((self.name, ordered)))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def of(cls, name: str, labels: Mapping[str, str] | None = None, /, **kw: str) -> SeriesKey:
        merged = dict(labels or {})
        merged.update(kw)
        return cls(name, tuple(merged.items()))

    def get(self, label: str, default: str = "") -> str:
        for key, value in self.labels:
            if key == label:
                return value
        return default

    def labels_dict(self) -> dict[str, str]:
        return dict(self.labels)

    def canonical(self) -> str:
        """`name{a="x",b="y"}` with sorted labels: the text the label hash is taken over."""
        if not self.labels:
            return self.name
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels)
        return f"{self.name}{{{inner}}}"

    def hash64(self) -> int:
        """Stable signed 64-bit hash of :meth:`canonical` (stored, so never Python's `hash`)."""
        digest = hashlib.blake2b(self.canonical().encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little", signed=True)


class Sample(NamedTuple):
    series: SeriesKey
    ts_ms: int
    value: float


@dataclass(slots=True)
class SampleBatch:
    """Columnar samples: `keys[key_index[i]]` is the series of sample i.

    Columnar because the ingest path handles millions of samples a second; a Python object
    per sample would cost more than the database write itself.
    """

    keys: Sequence[SeriesKey]
    key_index: npt.NDArray[np.int64]
    ts_ms: Int64Array
    values: Float64Array
    # Optional store ids of ``keys`` (from ``TimeSeriesStore.resolve``): a scrape loop that
    # caches them skips one dictionary lookup per sample, as Prometheus's series refs do.
    key_ids: Int64Array | None = None

    def __post_init__(self) -> None:
        n = len(self.key_index)
        if len(self.ts_ms) != n or len(self.values) != n:
            raise ValueError("key_index, ts_ms and values must have the same length")

    def __len__(self) -> int:
        return len(self.key_index)

    def select(self, keep: npt.NDArray[np.bool_]) -> SampleBatch:
        """The samples where ``keep`` is true, with only the keys they still use."""
        used, index = np.unique(np.asarray(self.key_index, np.int64)[keep], return_inverse=True)
        ids = np.asarray(self.key_ids, np.int64)[used] if self.key_ids is not None else None
        return SampleBatch([self.keys[i] for i in used.tolist()], index.astype(np.int64),
                           np.asarray(self.ts_ms)[keep], np.asarray(self.values)[keep], ids)

    @classmethod
    def empty(cls) -> SampleBatch:
        return cls([], np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))

    @classmethod
    def from_samples(cls, samples: Iterable[Sample]) -> SampleBatch:
        index_of: dict[SeriesKey, int] = {}
        keys: list[SeriesKey] = []
        idx: list[int] = []
        ts: list[int] = []
        values: list[float] = []
        for sample in samples:
            position = index_of.get(sample.series)
            if position is None:
                position = index_of[sample.series] = len(keys)
                keys.append(sample.series)
            idx.append(position)
            ts.append(sample.ts_ms)
            values.append(sample.value)
        return cls(
            keys,
            np.asarray(idx, dtype=np.int64),
            np.asarray(ts, dtype=np.int64),
            np.asarray(values, dtype=np.float64),
        )

    @classmethod
    def one_per_key(
        cls,
        keys: Sequence[SeriesKey],
        ts_ms: int,
        values: Float64Array,
        key_ids: Int64Array | None = None,
    ) -> SampleBatch:
        """One scrape: every key once, all at the same timestamp."""
        n = len(keys)
        return cls(
            keys,
            np.arange(n, dtype=np.int64),
            np.full(n, ts_ms, dtype=np.int64),
            np.asarray(values, dtype=np.float64),
            key_ids,
        )

    def samples(self) -> list[Sample]:
        return [
            Sample(self.keys[int(k)], int(t), float(v))
            for k, t, v in zip(self.key_index, self.ts_ms, self.values)
        ]
