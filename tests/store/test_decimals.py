"""The search for the fewest decimals that make a segment's values integers (store.codec_parts),
checked against the plain definition on every kind of value a scrape brings."""

from __future__ import annotations

import numpy as np
import pytest

from store.codec_parts import MAX_DECIMALS, decimals_per_segment


def by_definition(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The smallest k <= MAX_DECIMALS with round(v * 10**k) / 10**k == v bit for bit for every
    value of the segment (its scaled values inside the exact range), else -1. Negative zero
    has no integer of its own (it would decode as +0.0): it takes the raw path."""
    ends = np.append(starts[1:], len(values))
    out = []
    for lo, hi in zip(starts, ends):
        seg = values[lo:hi]
        found = -1
        for k in range(MAX_DECIMALS + 1):
            scale = 10.0**k
            with np.errstate(invalid="ignore", over="ignore"):
                scaled = seg * scale
                back = np.round(scaled) / scale
            exact = np.isfinite(seg) & (np.abs(scaled) < 2.0**52) & (back.view(np.int64) == seg.view(np.int64))
            exact &= ~((seg == 0) & np.signbit(seg))
            if exact.all():
                found = k
                break
        out.append(found)
    return np.asarray(out)


def segments(rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for k in range(MAX_DECIMALS + 1):  # parsed from text with k decimals: correctly rounded m / 10**k
        out.append(np.round(rng.normal(0, 10.0 ** rng.integers(0, 8), 40) * 10**k) / 10**k)
    out += [
        rng.normal(50, 10, 40),  # arbitrary floats (a KV-cache usage ratio)
        np.round(rng.normal(0, 1, 40), 9),  # more decimals than the codec takes
        np.cumsum(rng.integers(0, 10**9, 40)).astype(np.float64) * 1e4,  # byte counters past 2**52 / 1e6
        np.array([2.0**53 + 2, 2.0**60, 1e300]),  # integers beyond the exact range
        np.array([2670368948187136.0, 1269464878282957.0]),  # integers whose millionths do not come back
        np.array([0.25, 0.5, 0.1234567891]),  # the first value has decimals, a later one too many
        np.array([0.1234567891, 0.25]),  # the first value has too many
        np.array([1.5, np.nan, 2.5]),
        np.array([1.0, np.inf]),
        np.array([0.0, -0.0, 3.0]),  # negative zero: bit for bit only on the raw path
        np.array([-0.0]),
        np.array([5e-324]),
        np.array([7.0]),
        np.array([0.001, 123456.5, -42.125]),
    ]
    return out


@pytest.mark.parametrize("seed", range(5))
def test_decimals_agree_with_the_definition_on_every_kind_of_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = segments(rng)
    order = rng.permutation(len(parts))  # segments of every kind side by side, in any order
    parts = [parts[i] for i in order]
    values = np.concatenate(parts)
    starts = np.concatenate(([0], np.cumsum([len(p) for p in parts])[:-1])).astype(np.int64)
    got = decimals_per_segment(values, starts)
    assert got.tolist() == by_definition(values, starts).tolist()


def test_each_k_is_found_and_floats_have_none() -> None:
    starts = np.array([0, 3, 6, 9], np.int64)
    values = np.array([3.0, 7.0, 1e12, 0.5, 1.25, 2.0, 0.001, 0.002, 7.0, 0.1, 0.2, 1 / 3])
    assert decimals_per_segment(values, starts).tolist() == [0, 2, 3, -1]
    assert decimals_per_segment(np.empty(0), np.empty(0, np.int64)).tolist() == []
