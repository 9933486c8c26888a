"""Packed head blocks: the head's large, older blocks kept at a few bytes a sample, not 16.

Why: at 100 k series scraped every second the head holds tens of millions of samples -- the
out-of-order window still unflushed plus the flushed samples kept for rules and live panels.
As plain int64/float64 columns that was most of the service's memory. The chunk codec
(:mod:`store.codec`) packs tighter but decodes a few million samples a second: too slow for a
head that rules read several times a minute. This packing is plain numpy, both ways: every
series' samples become small integers stored at the narrowest width that holds all of them.

* Timestamps: delta-of-delta (regular scrapes: zero, or a few ms of jitter). Per series the
  first timestamp and the first delta are kept apart, so the stream holds only the jitter.
* Values: where every value of a series is an integer once scaled by ``10**decimals`` (GPU and
  inference metrics mostly are; the same test as the chunk codec's), the first difference of
  the scaled integers (counters: their increments; gauges: their steps). Any other series
  keeps its raw float bits (8 bytes): NaN, staleness markers and arbitrary floats stay exact.
* Each series' residuals go, whole, into one of five pools by the width its largest needs
  (1, 2, 3, 4 or 8 bytes); a series whose residuals are all zero (a constant gauge, a perfectly
  regular clock) takes no pool bytes at all. Three bytes because the steps of a gauge with
  three decimals (a power draw of 245.123 W, a temperature, a utilisation) and the increments
  of an energy counter in mJ mostly pass 16 bits but not 24: at four bytes they were most of
  a packed head's bytes.

A read decodes only the series it asks for, from the start of the time piece its window begins
in (a running sum needs a start; a long block's series are cut into pieces of about 32 samples
and 5 minutes or more, :mod:`store.head_pieces`), and cuts its time window after. Decoding is a gather and two running sums per stream: tens of
millions of samples a second. Blocks are packed only where they hold enough samples a series
to pay for the per-series fields (``PACK_MIN_PER_SERIES``); the rest stay plain.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from store.codec_parts import decimals_per_segment, timestamp_dods
from store.flat_runs import segmented_cumsum_inplace, spread, starts_of
from store.head_blocks import Run, _Block, _concat, concat_offsets, ids_of, series_slices
from store.head_pieces import cut, overlapping, runs_of
from store.head_pieces import joined as joined_pieces
from store.types import Float64Array, Int64Array

PACK_MIN_SAMPLES = 1 << 18  # smaller blocks are short-lived: merged again soon
PACK_MIN_PER_SERIES = 32  # below this the per-series fields (~63 bytes) outweigh the saving

# Samples a single numpy call packs or unpacks when a whole block is: such calls hold the GIL,
# and a merge or checkpoint thread that held it for 50+ ms at a time stalled appends.
_SLICE = 1 << 18
# Modes 1..5: the pool's width. Mode 3 has no numpy type: its pool is the low three bytes of
# each residual's little-endian int32, read back through an int32 view with a stride of three
# (each element's fourth byte is the next one's first: shifting left and back by 8 bits drops
# it and restores the sign). len() counts residuals in every pool.
_WIDTHS: tuple[type[np.signedinteger], ...] = (np.int8, np.int16, np.int32, np.int32, np.int64)
_INT24, _WIDE = 3, 5
_INT24_MIN, _INT24_MAX = -(1 << 23), (1 << 23) - 1


def _int24_view(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.int32]:
    """The int32 view over ``packed`` (three bytes a residual, then one byte of padding)."""
    return np.ndarray(((len(packed) - 1) // 3,), "<i4", buffer=packed, strides=(3,))


def _to_int24(residual: Int64Array) -> npt.NDArray[np.int32]:
    """Residuals within 24 bits as a mode-3 pool."""
    packed = np.empty(3 * len(residual) + 1, np.uint8)
    packed[-1] = 0
    packed[:-1].reshape(-1, 3)[:] = residual.astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3]
    return _int24_view(packed)


def _int24_bytes(pool: npt.NDArray[np.int32]) -> npt.NDArray[np.uint8]:
    """A mode-3 pool's three bytes a residual, without the padding."""
    base = pool.base
    assert isinstance(base, np.ndarray) and base.dtype == np.uint8
    return base[:-1]


def _int24_concat(pools: list[npt.NDArray[np.int32]]) -> npt.NDArray[np.int32]:
    packed = np.zeros(3 * sum(len(p) for p in pools) + 1, np.uint8)
    np.concatenate([_int24_bytes(p) for p in pools], out=packed[:-1])
    return _int24_view(packed)


def _take_int24(pool: npt.NDArray[np.int32], src: Int64Array) -> npt.NDArray[np.int32]:
    """The residuals at ``src``: read through the view, the next residual's byte shifted out and
    the sign restored. ``np.take`` first copies the whole pool into an aligned array, which
    then gathers twice as fast as indexing the unaligned view: worth it only where most of the
    pool is read (120 k residuals of a 20 M pool: 16 ms against 0.5)."""
    values = np.take(pool, src) if 4 * len(src) >= len(pool) else pool[src]
    values <<= 8
    values >>= 8
    return values


def _bounds(m: int) -> tuple[int, int]:
    if m == _INT24:
        return _INT24_MIN, _INT24_MAX
    info = np.iinfo(_WIDTHS[m - 1])
    return int(info.min), int(info.max)


class _Residuals:
    """Per-sample int64 residuals of many series, each series' run stored at one width."""

    __slots__ = ("mode", "at", "pools")

    def __init__(self, residual: Int64Array, starts: Int64Array, counts: Int64Array,
                 wide: npt.NDArray[np.bool_] | None = None) -> None:
        hi = np.maximum.reduceat(residual, starts)
        lo = np.minimum.reduceat(residual, starts)
        mode = np.full(len(starts), _WIDE, np.uint8)
        for m in (4, 3, 2, 1):
            low, high = _bounds(m)
            mode[(lo >= low) & (hi <= high)] = m
        mode[(lo == 0) & (hi == 0)] = 0
        if wide is not None:
            mode[wide] = _WIDE
        at = np.zeros(len(starts), np.int64)
        present = set(np.unique(mode).tolist()) - {0}
        per_sample = np.repeat(mode, counts) if len(present) > 1 or 0 in mode else None
        pools: list[np.ndarray] = []
        for m in range(1, _WIDE + 1):
            chosen = mode == m
            if m not in present:
                pools.append(_to_int24(np.empty(0, np.int64)) if m == _INT24 else np.empty(0, _WIDTHS[m - 1]))
                continue
            at[chosen] = starts_of(counts[chosen])
            picked = residual if per_sample is None else residual[per_sample == m]
            pools.append(_to_int24(picked) if m == _INT24 else picked.astype(_WIDTHS[m - 1]))
        self.mode, self.pools = mode, pools
        self.at = at.astype(np.int32) if len(residual) < 2**31 else at

    def take(self, k: Int64Array, counts: Int64Array, out_starts: Int64Array, out: Int64Array) -> None:
        """The residuals of series (positions) ``k`` into ``out`` (zeros), run after run."""
        modes = self.mode[k]
        for m in np.unique(modes).tolist():
            if m == 0:
                continue
            chosen = modes == m
            pool = self.pools[m - 1]
            n = counts[chosen]
            src = spread(self.at[k[chosen]].astype(np.int64), n)
            out[spread(out_starts[chosen], n)] = _take_int24(pool, src) if m == _INT24 else pool[src]

    @classmethod
    def concat(cls, parts: list[_Residuals]) -> _Residuals:
        """The residuals of consecutive series ranges as one (each part's pool offsets moved
        past the parts before it in the same pool)."""
        if len(parts) == 1:
            return parts[0]
        out = cls.__new__(cls)
        base = np.zeros(_WIDE + 1, np.int64)  # per mode, the pool samples of the parts so far
        ats = []
        for part in parts:
            ats.append(part.at.astype(np.int64) + base[part.mode])
            base[1:] += [len(pool) for pool in part.pools]
        at = np.concatenate(ats)
        out.mode = np.concatenate([p.mode for p in parts])
        out.at = at.astype(np.int32) if int(base.max()) < 2**31 else at
        out.pools = [_int24_concat([p.pools[m] for p in parts]) if m + 1 == _INT24
                     else np.concatenate([p.pools[m] for p in parts]) for m in range(_WIDE)]
        return out

    @property
    def nbytes(self) -> int:
        pools = sum(_int24_bytes(p).nbytes + 1 if m + 1 == _INT24 else p.nbytes for m, p in enumerate(self.pools))
        return self.mode.nbytes + self.at.nbytes + pools


def _scaled_integers(val: Float64Array, starts: Int64Array, counts: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Per sample the value as an integer once scaled by its series' 10**decimals, or its raw
    bits (decimals -1) where no scale up to the chunk codec's maximum makes every value of the
    series exact. Exact means bit for bit: -0.0 and NaN take the raw path."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = val.astype(np.int64)
        exact = scaled.astype(np.float64).view(np.int64) == val.view(np.int64)
    decimals = np.where(np.logical_and.reduceat(exact, starts), 0, -1).astype(np.int64)
    rest = np.flatnonzero(decimals < 0)
    if len(rest):
        idx = spread(starts[rest], counts[rest])
        decimals[rest] = decimals_per_segment(val[idx], starts_of(counts[rest]))
        fractional = rest[decimals[rest] > 0]
        if len(fractional):
            idx = spread(starts[fractional], counts[fractional])
            scale = np.repeat(10.0 ** decimals[fractional], counts[fractional])
            scaled[idx] = np.round(val[idx] * scale).astype(np.int64)
        raw = rest[decimals[rest] < 0]
        if len(raw):
            idx = spread(starts[raw], counts[raw])
            scaled[idx] = val.view(np.int64)[idx]
    return scaled, decimals


def _cat(arrays: list[np.ndarray], dtype: type[np.generic]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays).astype(dtype, copy=False)


def _pack_series(offs: Int64Array, ts: Int64Array, val: Float64Array) -> tuple[
        Int64Array, Int64Array, _Residuals, Int64Array, np.ndarray, _Residuals]:
    """One slice of series packed: first timestamps, first deltas, timestamp residuals, first
    values, decimals, value residuals (see the module doc)."""
    starts, counts = offs[:-1], np.diff(offs)
    first_ts = ts[starts]
    dod = timestamp_dods(ts, starts)  # the first delta at each series' second sample: kept apart
    second = starts[counts > 1] + 1
    first_delta = np.zeros(len(starts), np.int64)
    first_delta[counts > 1] = dod[second]
    dod[second] = 0
    ts_residuals = _Residuals(dod, starts, counts)
    del dod
    scaled, decimals = _scaled_integers(val, starts, counts)
    raw = decimals < 0
    first_value = scaled[starts]
    step = scaled  # differences in place; raw series keep their bits, undifferenced
    raw_bits = scaled[spread(starts[raw], counts[raw])] if raw.any() else None
    with np.errstate(over="ignore"):
        step[1:] = np.diff(scaled)
    step[starts] = 0
    if raw_bits is not None:
        step[spread(starts[raw], counts[raw])] = raw_bits
    return first_ts, first_delta, ts_residuals, first_value, decimals.astype(np.int8), _Residuals(step, starts, counts, wide=raw)


class PackedBlock:
    """A head block (:class:`store.head_blocks._Block`) packed as the module doc says; the
    same reads, decoding what they touch."""

    __slots__ = ("usid", "offs", "min_ts", "max_ts", "_n", "_pieces", "_first_ts", "_first_delta", "_ts",
                 "_first_value", "_decimals", "_values")

    def __init__(self, block: _Block) -> None:
        usid, offs, ts, val = block.run()
        self.usid, self.offs = usid, offs
        self.min_ts, self.max_ts, self._n = block.min_ts, block.max_ts, len(ts)
        # Runs, not series, are packed: a long block's series are cut into time pieces
        # (store.head_pieces), each run with its own first timestamp, delta and value.
        self._pieces = cut(offs, ts, block.min_ts, block.max_ts)
        runs = self._pieces.offs
        parts = [_pack_series(runs[a : b + 1] - runs[a], ts[runs[a] : runs[b]], val[runs[a] : runs[b]])
                 for a, b in series_slices(runs, _SLICE)]
        self._first_ts = _cat([p[0] for p in parts], np.int64)
        self._first_delta = _cat([p[1] for p in parts], np.int64)
        self._ts = _Residuals.concat([p[2] for p in parts])
        self._first_value = _cat([p[3] for p in parts], np.int64)
        self._decimals = _cat([p[4] for p in parts], np.int8)
        self._values = _Residuals.concat([p[5] for p in parts])

    @classmethod
    def join(cls, pieces: list[PackedBlock]) -> PackedBlock:
        """Blocks of consecutive, disjoint id ranges (ascending) as one, without decoding them."""
        if len(pieces) == 1:
            return pieces[0]
        out = cls.__new__(cls)
        out.usid = np.concatenate([p.usid for p in pieces])
        out.offs = concat_offsets([p.offs for p in pieces])
        out.min_ts, out.max_ts = min(p.min_ts for p in pieces), max(p.max_ts for p in pieces)
        out._n = int(out.offs[-1])
        out._pieces = joined_pieces([p._pieces for p in pieces], [len(p.usid) for p in pieces])
        out._first_ts = np.concatenate([p._first_ts for p in pieces])
        out._first_delta = np.concatenate([p._first_delta for p in pieces])
        out._ts = _Residuals.concat([p._ts for p in pieces])
        out._first_value = np.concatenate([p._first_value for p in pieces])
        out._decimals = np.concatenate([p._decimals for p in pieces])
        out._values = _Residuals.concat([p._values for p in pieces])
        return out

    # -- the _Block interface ----------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def run(self) -> Run:
        ts, val = np.empty(self._n, np.int64), np.empty(self._n, np.float64)
        for a, b in series_slices(self.offs, _SLICE):  # slice by slice: see _SLICE
            lo, hi = int(self.offs[a]), int(self.offs[b])
            ts[lo:hi], val[lo:hi] = self._decode(np.arange(a, b, dtype=np.int64))
        return self.usid, self.offs, ts, val

    def sid(self) -> Int64Array:
        return np.repeat(self.usid, np.diff(self.offs))

    def series(self, lo: int, hi: int) -> tuple[Int64Array, Int64Array, Float64Array]:
        """(id, timestamp, value) of every sample of the series at positions [lo, hi), decoded."""
        ts, val = self._decode(np.arange(lo, hi, dtype=np.int64))
        return ids_of(self.usid, self.offs, lo, hi), ts, val

    def part(self, lo: int, hi: int) -> Run:
        """The series at positions [lo, hi) as a run of their own, decoded."""
        ts, val = self._decode(np.arange(lo, hi, dtype=np.int64))
        return self.usid[lo:hi], self.offs[lo : hi + 1] - self.offs[lo], ts, val

    segments = _Block.segments

    def firsts(self) -> Int64Array:
        starts = self._pieces.starts
        return self._first_ts if starts is None else self._first_ts[starts[:-1]]

    def slices(self, sids: Int64Array, start_ms: int, end_ms: int) -> tuple[Int64Array, Int64Array, Float64Array]:
        """(count per id, timestamps, values) of ``sids``' samples in [start, end], id after id."""
        usid = self.usid
        idx = np.searchsorted(usid, sids)
        found = idx < len(usid)
        found[found] = usid[idx[found]] == sids[found]
        k = idx[found]
        counts = np.zeros(len(sids), np.int64)
        if self.min_ts >= start_ms and self.max_ts <= end_ms:
            ts, val = self._decode(k)
            counts[found] = self.offs[k + 1] - self.offs[k]
            return counts, ts, val
        runs, per_series = overlapping(self._pieces, self._first_ts, k, start_ms, end_ms)
        ts, val = self._decode_runs(runs)
        # Samples decoded per series: its runs' samples, summed (a series may have none here).
        run_counts = self._pieces.offs[runs + 1] - self._pieces.offs[runs]
        decoded = np.bincount(np.repeat(np.arange(len(k)), per_series), weights=run_counts,
                              minlength=len(k)).astype(np.int64)
        ends = np.cumsum(decoded)
        inside = (ts >= start_ms) & (ts <= end_ms)
        kept = np.concatenate(([0], np.cumsum(inside)))
        counts[found] = kept[ends] - kept[ends - decoded]
        return counts, ts[inside], val[inside]

    @property
    def nbytes(self) -> int:
        fields = (self.usid, self.offs, self._first_ts, self._first_delta, self._first_value, self._decimals)
        return sum(a.nbytes for a in fields) + self._pieces.nbytes + self._ts.nbytes + self._values.nbytes

    # -- decoding ----------------------------------------------------------------------------
    def _decode(self, k: Int64Array) -> tuple[Int64Array, Float64Array]:
        """Timestamps and values of the series at positions ``k``, whole, series after series."""
        return self._decode_runs(runs_of(self._pieces, k)[0])

    def _decode_runs(self, k: Int64Array) -> tuple[Int64Array, Float64Array]:
        """Timestamps and values of the runs ``k`` (see store.head_pieces), run after run."""
        counts = self._pieces.offs[k + 1] - self._pieces.offs[k]
        out_starts = starts_of(counts)
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        ts = np.zeros(total, np.int64)
        self._ts.take(k, counts, out_starts, ts)
        two = counts > 1
        ts[out_starts[two] + 1] = self._first_delta[k[two]]
        segmented_cumsum_inplace(ts, out_starts)  # the deltas
        ts[out_starts] = self._first_ts[k]  # a run's first "delta" is its first timestamp
        segmented_cumsum_inplace(ts, out_starts)
        scaled = np.zeros(total, np.int64)
        self._values.take(k, counts, out_starts, scaled)
        decimals = self._decimals[k]
        raw = decimals < 0
        raw_at = spread(out_starts[raw], counts[raw]) if raw.any() else None
        raw_bits = scaled[raw_at] if raw_at is not None else None
        scaled[out_starts] = self._first_value[k]
        segmented_cumsum_inplace(scaled, out_starts)
        val = scaled.astype(np.float64)
        fractional = decimals > 0
        if fractional.any():
            at = spread(out_starts[fractional], counts[fractional])
            val[at] /= np.repeat(10.0 ** decimals[fractional], counts[fractional])
        if raw_at is not None and raw_bits is not None:
            val[raw_at] = raw_bits.view(np.float64)
        return ts, val


Block: TypeAlias = "_Block | PackedBlock"  # what the head's block list holds


def pack_if_large(block: Block) -> Block:
    """``block`` packed where that pays (see the module doc), else as it is."""
    if isinstance(block, PackedBlock) or not packable(len(block), len(block.usid)):
        return block
    return PackedBlock(block)


def packable(samples: int, series: int) -> bool:
    """Whether a block of this many samples and series is worth packing."""
    return samples >= PACK_MIN_SAMPLES and samples >= PACK_MIN_PER_SERIES * series


def pack_dense(block: Block) -> Block:
    """``block`` packed where it holds enough samples a series, however few in all: a piece
    that :func:`joined` puts together with others (which unpacks them again if the whole is
    small)."""
    if isinstance(block, PackedBlock) or not len(block) or len(block) < PACK_MIN_PER_SERIES * len(block.usid):
        return block
    return PackedBlock(block)


def joined(pieces: list[Block]) -> Block:
    """Blocks of consecutive, disjoint id ranges (ascending) as one block, packed as
    :func:`pack_if_large` would pack the whole."""
    pieces = [p for p in pieces if len(p)]
    if not packable(sum(map(len, pieces)), sum(len(p.usid) for p in pieces)):
        return _concat([p.run() for p in pieces])
    return PackedBlock.join([p if isinstance(p, PackedBlock) else PackedBlock(p) for p in pieces])
