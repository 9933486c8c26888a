"""The rollup cache (store.rollup_cache): a checkpoint's rows reach exactly the cached series."""

from __future__ import annotations

import numpy as np
import pytest

from store.rollup import Frame
from store.rollup_cache import RollupCache

MIN = 60_000


def _rows(sids: list[int], buckets: list[int]) -> Frame:
    """One row per (series, bucket), sorted by series then bucket, value = series * 1000 + bucket index."""
    sid = np.repeat(np.asarray(sids, np.int64), len(buckets))
    bucket = np.tile(np.asarray(buckets, np.int64), len(sids))
    val = (sid * 1000 + bucket // MIN).astype(np.float64)
    return Frame.from_samples(sid, bucket, val)


@pytest.mark.parametrize("written", [[3, 5], list(range(0, 400))], ids=["fewer-than-cached", "more-than-cached"])
def test_a_checkpoints_rows_extend_the_cached_series_only(written: list[int]) -> None:
    cache = RollupCache(max_rows=10_000)
    cached = [1, 3, 5, 7, 9, 11, 13, 17, 19, 23]
    for sid in cached:
        cache.fill(MIN, sid, 0, _rows([sid], [0, MIN]))
    cache.fill(3_600_000, 5, 0, _rows([5], [0]))  # another resolution: untouched
    before = cache.rows
    cache.extend(MIN, _rows(written, [2 * MIN, 3 * MIN]))
    for sid in cached:
        frame = cache.lookup(MIN, sid, 0)
        assert frame is not None
        expected = [0, MIN, 2 * MIN, 3 * MIN] if sid in written else [0, MIN]
        assert frame.bucket.tolist() == expected, sid
        assert frame.sum.tolist() == [sid * 1000 + b // MIN for b in expected]
    assert cache.lookup(MIN, 2, 0) is None  # written but not cached: not added
    hour = cache.lookup(3_600_000, 5, 0)
    assert hour is not None and hour.bucket.tolist() == [0]
    assert cache.rows == before + 2 * len(set(written) & set(cached))
