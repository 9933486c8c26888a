"""Golomb-Rice coding of many runs of unsigned integers at once (numpy, no per-value Python).

A run of residuals is coded with one parameter k: each value's quotient ``z >> k`` in unary
(that many zero bits, then a one: the ``unary`` part) and its low k bits as they are
(bit-packed: the ``lows`` part). With k chosen per run this is within a few hundredths of a bit
of the entropy of the geometric-like residuals of real series, where a Huffman coder (deflate)
pays for its code table in every small block and rounds each code to whole bits: for GPU power
and energy series, ~0.5 bit a sample. A quotient of :data:`ESCAPE` or more (a counter reset, a
spike) is written as ESCAPE in unary and the whole value as 64 bits in the lows, so one
outlier costs ~11 bytes, not a unary code as long as the outlier.

Each run's unary and lows parts start on byte boundaries, so runs are cut out by offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.flat_runs import spread, starts_of
from store.types import Int64Array

MAX_K = 56  # a value's bits plus its offset inside a byte must fit one 64-bit word
ESCAPE = 24


def bit_lengths(z: np.ndarray) -> Int64Array:
    """Each value's bit length (0 for 0, floor(log2 z) + 1 otherwise, a bit more near powers of
    two): the exponent of its float32, no logarithm taken."""
    exponent = (z.astype(np.float32).view(np.int32) >> 23) - 126
    # float32 rounds values just below 2**64 up to it: clip to 64 bits
    out: Int64Array = np.clip(exponent, 0, 64).astype(np.int64)
    return out


def _approximate_costs() -> np.ndarray:
    """``[b, k]``: roughly the bits a value of bit length b costs coded with parameter k (its
    quotient averages 0.75 * 2**(b - k) when b > k; an escape costs ESCAPE + 65)."""
    b = np.arange(65, dtype=np.float64)[:, None]
    k = np.arange(MAX_K + 1, dtype=np.float64)[None, :]
    quotient = np.where(b > k, 0.75 * np.exp2(np.minimum(b - k, 60.0)), 0.0)
    return np.where(quotient >= ESCAPE, ESCAPE + 65.0, quotient + 1.0 + k)


_APPROXIMATE_COSTS = _approximate_costs()


def choose_k(z: np.ndarray, counts: Int64Array, bits: Int64Array | None = None) -> Int64Array:
    """Per run, the k that codes it in the fewest bits. A histogram of the run's bit lengths
    prices every k roughly (mixed runs, say zeros at a floor and large steps off it, are not
    served by a k near their mean); the best of that k and its neighbours is then priced exactly
    (the smallest of equal prices wins). ``bits``: the values' :func:`bit_lengths`, where the
    caller has them already.

    The exact prices come from one shift of every value, by the lowest neighbour's k: the next
    two k's quotients are that one halved, then halved again (in place), and a run's price is
    the sum of its quotients capped at :data:`ESCAPE` plus a fixed cost per value -- 1 + k, or
    64 + 1 for an escaped one. Shifting and pricing each neighbour apart took three times the
    passes over the values (a quarter of a checkpoint's chunk encoding)."""
    if not z.any():
        return np.zeros(len(counts), np.int64)
    if bits is None:
        bits = bit_lengths(z)
    run = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    histogram = np.bincount(run * 65 + bits, minlength=len(counts) * 65).reshape(len(counts), 65)
    guess = np.argmin(histogram @ _APPROXIMATE_COSTS, axis=1).astype(np.int64)
    lowest = np.maximum(guess - 1, 0)
    quotient = z >> np.repeat(lowest, counts).astype(np.uint64)
    escapes = bool((quotient >= ESCAPE).any())  # shifting further only lowers the quotients
    capped = np.empty(len(z), np.uint64)
    best = np.zeros(len(counts), np.int64)
    best_bits = np.full(len(counts), np.iinfo(np.int64).max)
    for step in range(3):
        k = lowest + step
        if step:
            quotient >>= np.uint64(1)
        np.minimum(quotient, np.uint64(ESCAPE), out=capped)
        total = run_int_sums(capped.view(np.int64), counts) + counts * (1 + k)
        if escapes:  # an escape costs ESCAPE + 1 unary bits and 64 bits in place of k
            total += run_int_sums((capped == ESCAPE).astype(np.int64), counts) * (64 - k)
        better = (k <= np.minimum(guess + 1, MAX_K)) & (total < best_bits)
        best[better], best_bits[better] = k[better], total[better]
    return best


def run_int_sums(values: Int64Array, counts: Int64Array) -> Int64Array:
    """Per run, the sum of its integer values (runs may be empty)."""
    out = np.zeros(len(counts), np.int64)
    nonempty = np.flatnonzero(counts > 0)
    if len(nonempty):
        out[nonempty] = np.add.reduceat(values, starts_of(counts)[nonempty])
    return out


@dataclass(frozen=True)
class Packed:
    """Bytes of many runs back to back; run i is ``data[at[i]:at[i] + size[i]]``."""

    data: np.ndarray
    at: Int64Array
    size: Int64Array

    @classmethod
    def empty(cls, runs: int) -> Packed:
        none = np.zeros(runs, np.int64)
        return cls(np.zeros(0, np.uint8), none, none)

    def run(self, i: int) -> bytes:
        a = int(self.at[i])
        return self.data[a : a + int(self.size[i])].tobytes()


def encode_runs(z: np.ndarray, counts: Int64Array, k: Int64Array) -> tuple[Packed, Packed]:
    """(unary parts, lows parts) of every run."""
    per_k = np.repeat(k, counts)
    quotient = z >> per_k.astype(np.uint64)
    escaped = quotient >= ESCAPE
    quotient[escaped] = ESCAPE
    return _pack_unary(quotient.astype(np.int64), counts), _pack_lows(z, counts, per_k, escaped)


def _pack_unary(quotient: Int64Array, counts: Int64Array) -> Packed:
    """Each quotient q as q zero bits and a one: only the ones are set, at the end of each code
    (in bits, run by run from byte boundaries), and the bits packed into bytes at once."""
    width = quotient + 1
    code_bits = run_int_sums(width, counts)
    size = (code_bits + 7) // 8
    at = starts_of(size)
    ones = np.cumsum(width) - 1 + np.repeat(at * 8 - starts_of(code_bits), counts)
    bits = np.zeros(int(size.sum()) * 8, np.uint8)
    bits[ones] = 1
    return Packed(np.packbits(bits, bitorder="little"), at, size)


def _pack_lows(z: np.ndarray, counts: Int64Array, per_k: Int64Array, escaped: np.ndarray) -> Packed:
    mask = (np.uint64(1) << per_k.astype(np.uint64)) - np.uint64(1)
    value = np.where(escaped, z, z & mask)
    width = np.where(escaped, 64, per_k)
    run_bits = run_int_sums(width, counts)
    size = (run_bits + 7) // 8
    at = starts_of(size)
    bit = np.cumsum(width) - width + np.repeat(at * 8 - starts_of(run_bits), counts)
    return Packed(or_pack(value, width, bit, int(size.sum())), at, size)


def or_pack(value: np.ndarray, width: Int64Array, bit: Int64Array, size: int) -> np.ndarray:
    """``size`` bytes holding each value's ``width`` low bits from bit offset ``bit`` (offsets
    increasing, pieces not overlapping). Each value lands in the 64-bit word its offset falls in
    and, past that word's end, in the next; the values sharing a word are OR-ed together in
    one reduction (they are adjacent, as the offsets increase)."""
    words = np.zeros(size // 8 + 2, "<u8")
    if len(value):
        word = bit >> 6
        shift = (bit & 63).astype(np.uint64)
        firsts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        words[word[firsts]] = np.bitwise_or.reduceat(value << shift, firsts)
        # A value spilling into the next word ends there; the next spilling one starts later,
        # so the next words of spilling values are distinct.
        spill = np.flatnonzero((bit & 63) + width > 64)
        words[word[spill] + 1] |= value[spill] >> (np.uint64(64) - shift[spill])
    return words.view(np.uint8)[:size].copy()


def decode_unary(buf: np.ndarray, at: Int64Array, size: Int64Array, counts: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Quotients of runs whose unary parts are ``buf[at[i]:at[i] + size[i]]`` (runs joined), and
    the runs that do not hold exactly ``counts[i]`` codes (corrupt; the quotients are then empty)."""
    bits = np.unpackbits(buf[spread(at, size)], bitorder="little")
    ones = np.flatnonzero(bits)
    section_bits = starts_of(size) * 8
    found = np.diff(np.append(np.searchsorted(ones, section_bits), len(ones)))
    bad = np.flatnonzero(found != counts)
    if len(bad):
        return np.empty(0, np.int64), bad
    previous = np.empty(len(ones), np.int64)
    previous[1:] = ones[:-1]
    nonempty = counts > 0
    previous[starts_of(counts)[nonempty]] = section_bits[nonempty] - 1
    return ones - previous - 1, bad


def unary_limit(counts: Int64Array) -> Int64Array:
    """The most bytes the unary part of a run of ``counts`` values can take (every code escaped)."""
    out: Int64Array = (counts * (ESCAPE + 1) + 7) // 8
    return out


def lows_sizes(quotient: Int64Array, counts: Int64Array, k: Int64Array) -> Int64Array:
    """Bytes of each run's lows part, from its quotients (escapes take 64 bits)."""
    escapes = run_int_sums((quotient >= ESCAPE).astype(np.int64), counts)
    return (k * (counts - escapes) + 64 * escapes + 7) // 8


def decode_lows(buf: np.ndarray, at: Int64Array, counts: Int64Array, k: Int64Array, quotient: Int64Array) -> np.ndarray:
    """The values of runs whose lows parts start at ``at`` in ``buf`` (which must hold
    :func:`lows_sizes` bytes from each), given their quotients: uint64, runs joined."""
    per_k = np.repeat(k, counts)
    escaped = quotient >= ESCAPE
    out: np.ndarray = quotient.astype(np.uint64) << per_k.astype(np.uint64)
    stored = np.flatnonzero((k > 0) | (run_int_sums(escaped.astype(np.int64), counts) > 0))
    if not len(stored):  # every run is its quotients alone (k = 0): nothing to read
        return out
    padded = np.concatenate((buf, np.zeros(8, np.uint8)))
    # Every byte offset as the start of a little-endian 64-bit word (an unaligned, overlapping view).
    words = np.ndarray((len(padded) - 7,), "<u8", padded, 0, (1,))

    def read(at_bit: Int64Array, bits: Int64Array) -> np.ndarray:
        mask = (np.uint64(1) << bits.astype(np.uint64)) - np.uint64(1)
        got: np.ndarray = (words[at_bit >> 3] >> (at_bit & 7).astype(np.uint64)) & mask
        return got

    mine: Int64Array | slice = spread(starts_of(counts)[stored], counts[stored]) if len(stored) < len(counts) else slice(None)
    if escaped.any():
        width = np.where(escaped[mine], 64, per_k[mine])
        run_bits = run_int_sums(width, counts[stored])
        bit = np.cumsum(width) - width + np.repeat(at[stored] * 8 - starts_of(run_bits), counts[stored])
    else:  # every value takes k bits: no running sum needed
        index = np.arange(int(counts[stored].sum()), dtype=np.int64) - np.repeat(starts_of(counts[stored]), counts[stored])
        bit = np.repeat(at[stored] * 8, counts[stored]) + index * per_k[mine]
    out[mine] |= read(bit, np.where(escaped[mine], 0, per_k[mine]))
    if escaped.any():
        e_bit = bit[escaped[mine]]
        thirty_two = np.full(len(e_bit), 32, np.int64)
        where = np.flatnonzero(escaped) if isinstance(mine, slice) else mine[escaped[mine]]
        out[where] = read(e_bit, thirty_two) | (read(e_bit + 32, thirty_two) << np.uint64(32))
    return out
