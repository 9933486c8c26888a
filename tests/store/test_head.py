"""The head's blocks against a plain reference: every read agrees, whatever the order of adds,
reads, out-of-order samples, flushes and trims."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import store.head as head_module
import store.head_blocks as head_blocks
from store.head import NEVER, Head
from store.head_packed import joined

Ref = dict[int, list[tuple[int, float]]]


def _batch(rng: random.Random, ref: Ref, head: Head, t: int, out_of_order: bool) -> None:
    sids = sorted(rng.sample(range(1, 40), rng.randint(1, 12)))
    rows: list[tuple[int, int, float]] = []
    for sid in sids:
        held = {ts for ts, _ in ref.get(sid, [])}
        for k in range(rng.choice([1, 1, 1, 2, 3])):
            ts = t + k
            if out_of_order and rng.random() < 0.3:
                ts = t - rng.randint(1, 50)
            if ts in held or any(r[0] == sid and r[1] == ts for r in rows):
                continue
            rows.append((sid, ts, rng.random()))
    rows.sort()
    for sid, ts, val in rows:
        ref.setdefault(sid, []).append((ts, val))
    if rows:
        cols = list(zip(*rows))
        head.add(np.asarray(cols[0], np.int64), np.asarray(cols[1], np.int64), np.asarray(cols[2], np.float64))


def _expected(ref: Ref, sids: list[int], start: int, end: int) -> list[list[tuple[int, float]]]:
    return [sorted((ts, v) for ts, v in ref.get(s, []) if start <= ts <= end) for s in sids]


def _check_window(head: Head, ref: Ref, sids: list[int], start: int, end: int) -> None:
    starts, counts, ts, val = head.window(np.asarray(sids, np.int64), start, end)
    got = [
        list(zip(ts[a : a + c].tolist(), val[a : a + c].tolist()))
        for a, c in zip(starts.tolist(), counts.tolist())
    ]
    assert got == _expected(ref, sids, start, end)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("small_blocks", [False, True])
def test_blocks_read_like_one_sorted_head(seed: int, small_blocks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if small_blocks:  # exercise size classes and the block cap with a few samples
        monkeypatch.setattr(head_blocks, "_BASE", 2)  # the size classes live with the blocks
        monkeypatch.setattr(head_module, "_MAX_BLOCKS", 6)
        monkeypatch.setattr(head_module, "_SEAL_PENDING", 20)  # adds seal too, not only reads
    rng = random.Random(seed)
    head, ref = Head(), Ref()
    t = 1000
    for _ in range(150):
        op = rng.random()
        if op < 0.55:
            t += rng.randint(1, 5)
            _batch(rng, ref, head, t, out_of_order=rng.random() < 0.1)
        elif op < 0.85:
            sids = [rng.randint(0, 45) for _ in range(rng.randint(0, 8))]
            start = rng.randint(900, t + 5)
            _check_window(head, ref, sids, start, start + rng.randint(0, 60))
        elif op < 0.92:
            sid = rng.randint(1, 39)
            held = ref.get(sid, [])
            if held:
                ts, val = rng.choice(held)
                assert head.value_at(sid, ts) == val
                assert head.bits_at(sid, ts) == int(np.float64(val).view(np.uint64))
            assert head.value_at(sid, -5) is None
            ts_all, _ = head.series(sid)
            assert ts_all.tolist() == sorted(ts for ts, _ in held)
        else:  # flush everything older than a cutoff, then trim what is older than keep_from
            head.ensure_capacity(45)
            cutoff = np.full(head.capacity, t - rng.randint(0, 40), np.int64)
            live = np.flatnonzero(head.last_ts != NEVER)
            head.mark_flushed(live, cutoff)
            keep_from = np.full(head.capacity, t - rng.randint(0, 60), np.int64)
            bound = np.minimum(keep_from, head.flushed_until)
            dropped = head.trim(keep_from)
            expected_drop = 0
            for sid in list(ref):
                kept = [(ts, v) for ts, v in ref[sid] if ts >= bound[sid]]
                expected_drop += len(ref[sid]) - len(kept)
                ref[sid] = kept
            assert dropped == expected_drop
            assert head.samples == sum(len(v) for v in ref.values())
    col_sid, col_ts, col_val = head.columns()
    flat = sorted((s, ts_, v) for s, rows in ref.items() for ts_, v in rows)
    assert list(zip(col_sid.tolist(), col_ts.tolist(), col_val.tolist())) == flat
    lo, hi = head.bounds(np.asarray([3, 7], np.int64))
    assert (hi - lo).tolist() == [len(ref.get(3, [])), len(ref.get(7, []))]


def test_first_ts_tells_a_checkpoint_it_has_nothing_to_do() -> None:
    head = Head()
    head.add(np.asarray([1, 2], np.int64), np.asarray([5000, 6000], np.int64), np.asarray([1.0, 2.0]))
    cutoff = np.full(head.capacity, NEVER, np.int64)
    cutoff[1] = cutoff[2] = 5000  # nothing below 5000 is held
    assert not head.may_hold_unflushed_below(cutoff)
    cutoff[2] = 6001
    assert head.may_hold_unflushed_below(cutoff)
    head.mark_flushed(np.asarray([2], np.int64), cutoff)  # 6000 of series 2 is flushed now
    assert not head.may_hold_unflushed_below(cutoff)


def test_many_pending_batches_and_a_wide_id_range() -> None:
    head, ref = Head(), Ref()
    for step in range(40):  # more runs than a counting merge takes, ids far apart
        sids = np.asarray([3, 500 + step, 100_000], np.int64)
        ts = np.full(3, 1000 + step, np.int64)
        vals = np.asarray([step, step + 0.5, -step], np.float64)
        head.add(sids, ts, vals)
        for s, t, v in zip(sids.tolist(), ts.tolist(), vals.tolist()):
            ref.setdefault(s, []).append((t, v))
    _check_window(head, ref, [100_000, 3, 520, 7], 0, 5000)
    _check_window(head, ref, [100_000, 3], 1010, 1020)
    assert len(head._blocks) == 1 and head.samples == 120


@pytest.mark.parametrize("seed", range(4))
def test_a_seal_of_hundreds_of_scrape_batches_counts_them_into_place(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hundreds of pending batches (a seal after ~10 s of a hundred targets) are merged by
    counting, not by a sort; batches of one sample a series and of several merge alike."""
    rng = np.random.default_rng(seed)
    targets = [np.arange(t * 300, t * 300 + 300, dtype=np.int64) for t in range(20)]
    runs: list[head_blocks.Run] = []
    ref: dict[int, list[tuple[int, float]]] = {}
    for step in range(240):
        chosen = np.sort(np.concatenate([targets[t] for t in rng.choice(20, int(rng.integers(1, 6)), replace=False)]))
        repeat = 1 + int(step % 7 == 0)  # now and then a batch of two samples a series
        sid = np.repeat(chosen, repeat)
        ts = np.tile(np.arange(repeat, dtype=np.int64), len(chosen)) + 10 * step
        val = rng.random(len(sid))
        for s, t, v in zip(sid.tolist(), ts.tolist(), val.tolist()):
            ref.setdefault(s, []).append((t, v))
        runs.append((*head_blocks._csr(sid), ts, val))
    sorts: list[int] = []
    real_argsort = np.argsort

    def counted_argsort(*args: Any, **kwargs: Any) -> Any:
        sorts.append(1)
        return real_argsort(*args, **kwargs)

    monkeypatch.setattr(np, "argsort", counted_argsort)
    block = head_blocks._merge(runs, True)
    assert not sorts  # counted
    got: dict[int, list[tuple[int, float]]] = {}
    for s, t, v in zip(block.sid().tolist(), block.ts.tolist(), block.val.tolist()):
        got.setdefault(s, []).append((t, v))
    assert got == ref
    assert block.usid.tolist() == sorted(ref)


def _scrape(head: Head, ts: int, sids: tuple[int, ...] = (1, 2, 3)) -> None:
    n = len(sids)
    head.add(np.asarray(sids, np.int64), np.full(n, ts, np.int64), np.full(n, float(ts)))


def test_a_frozen_head_is_replaced_by_its_trimmed_merge_and_what_came_after_stays() -> None:
    head = Head()
    for ts in range(10):
        _scrape(head, ts)
    head.seal()
    frozen = head.frozen()
    head.pin(frozen)  # as a checkpoint does
    for ts in range(10, 15):
        _scrape(head, ts)
    head.seal()  # a block sealed while the checkpoint wrote
    _scrape(head, 15)  # and a batch still pending
    merged = joined(list(frozen.merged_slices(len(frozen.blocks), 1 << 40)))
    sid, ts, val = merged.sid(), merged.ts, merged.val
    kept = ts >= 5
    trimmed = head_blocks._Block.of(sid[kept], ts[kept], val[kept])
    bound = np.full(head.capacity, 5, np.int64)
    assert head.replace_frozen(frozen, [trimmed], bound)
    sid, ts, val = head.columns()
    assert sid.tolist() == [s for s in (1, 2, 3) for _ in range(11)]
    assert ts.tolist() == list(range(5, 16)) * 3 and val.tolist() == [float(t) for t in range(5, 16)] * 3
    assert head.samples == 33
    assert head.first_ts[1:4].tolist() == [5, 5, 5] and head.head_start[1:4].tolist() == [5, 5, 5]

    frozen = head.frozen()
    _scrape(head, 16)
    head.compact()  # a read merged everything meanwhile: nothing to replace
    before = head.columns()[1].tolist()
    assert not head.replace_frozen(frozen, [trimmed], bound)
    assert head.columns()[1].tolist() == before
