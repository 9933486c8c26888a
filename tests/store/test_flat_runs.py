"""Running sums over runs (store.flat_runs), against a per-run loop: empty runs, one run,
and sums that wrap int64 on the way (each run's own sums must still come out exact)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from store.flat_runs import range_breaks, segmented_cumsum, segmented_cumsum_inplace, starts_of

_INT64 = st.integers(-(2**63), 2**63 - 1)


def _per_run(values: list[int], lengths: list[int]) -> list[int]:
    out, at = [], 0
    for n in lengths:
        total = 0
        for v in values[at : at + n]:
            total = (total + v + 2**63) % 2**64 - 2**63  # int64 arithmetic
            out.append(total)
        at += n
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=12).flatmap(
    lambda lengths: st.tuples(st.just(lengths), st.lists(_INT64, min_size=sum(lengths), max_size=sum(lengths)))))
def test_running_sums_restart_at_every_run(case: tuple[list[int], list[int]]) -> None:
    lengths, values = case
    v, n = np.array(values, np.int64), np.array(lengths, np.int64)
    want = _per_run(values, lengths)
    assert segmented_cumsum(v, n).tolist() == want
    assert v.tolist() == values  # the copying form leaves its input alone
    nonempty = n > 0
    if nonempty.any():
        inplace = v.copy()
        assert segmented_cumsum_inplace(inplace, starts_of(n)[nonempty]) is inplace
        assert inplace.tolist() == want


def test_runs_are_cut_where_the_series_or_the_time_range_changes() -> None:
    sid = np.asarray([1, 1, 1, 1, 2, 2, 3], np.int64)
    ts = np.asarray([0, 99, 100, 250, 250, 260, 5], np.int64)
    assert range_breaks(sid, ts, 100).tolist() == [True, False, True, True, True, False, True]
    assert range_breaks(sid[:1], ts[:1], 100).tolist() == [True]
