"""What is taken from the head to work on off the store's lock: a checkpoint's frozen head
(:class:`Frozen`) and a seal or merge (:class:`SealWork`). See :mod:`store.head`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from store.head_blocks import _Block, _csr, _merge
from store.head_packed import Block, PackedBlock
from store.types import Float64Array, Int64Array


class Frozen:
    """The head's blocks and pending batches at one moment. Neither is ever changed in place
    (seals, merges and trims build new ones), so a checkpoint can merge them off the store's
    lock while appends go on."""

    __slots__ = ("blocks", "pending", "ordered")

    def __init__(self, blocks: tuple[Block, ...], pending: tuple[tuple[Int64Array, Int64Array, Float64Array], ...],
                 ordered: bool) -> None:
        self.blocks, self.pending, self.ordered = blocks, pending, ordered

    def merged_slices(self, upto: int, budget: int) -> Iterator[_Block]:
        """The first ``upto`` blocks and the pending batches merged (sorted by series, then
        time) as blocks of consecutive id ranges of about ``budget`` samples each (a series is
        never cut), merged one at a time: see :func:`store.checkpoint.write_checkpoint`."""
        sources: list[Block] = [*self.blocks[:upto], *(_Block.of(*p) for p in self.pending)]
        sources = [b for b in sources if len(b)]
        if not sources:
            return
        cap = max(int(b.usid[-1]) for b in sources) + 1
        per_series = np.zeros(cap, np.int64)
        for b in sources:
            per_series[b.usid] += np.diff(b.offs)
        cuts = np.searchsorted(np.cumsum(per_series), np.arange(budget, int(per_series.sum()), budget), side="left")
        bounds = sorted({0, cap, *(int(c) + 1 for c in cuts if int(c) + 1 < cap)})
        for lo_id, hi_id in zip(bounds[:-1], bounds[1:]):
            parts = []  # pending batches are sorted by (id, time) as the head's add() takes them
            for b in sources:
                lo, hi = np.searchsorted(b.usid, (lo_id, hi_id)).tolist()
                if hi > lo:
                    usid, offs, ts, val = b.part(lo, hi)
                    parts.append((usid - lo_id, offs, ts, val))  # ids from 0: counting sizes by the range
            if not parts:
                continue
            block = _merge(parts, self.ordered)
            block.usid = block.usid + lo_id
            yield block

    def untouched_tail(self, below: Int64Array) -> tuple[Block, ...]:
        """The newest blocks in which no series has a sample older than ``below[sid]``: a
        checkpoint that flushes or drops only such samples keeps them as they are, without
        merging (or unpacking) them."""
        if self.pending or not self.ordered:
            return ()
        first = len(self.blocks)
        while first > 0:
            block = self.blocks[first - 1]
            sids = block.usid
            inside = sids < len(below)
            if bool(np.any(block.firsts()[inside] < below[sids[inside]])):
                break
            first -= 1
        return self.blocks[first:]


@dataclass(frozen=True)
class SealWork:
    """A merge taken from the head to run off the store's lock: the pending batches into a
    block, or a run of blocks of one size class into one (never both)."""

    pending: tuple[tuple[Int64Array, Int64Array, Float64Array], ...] = ()
    blocks: tuple[Block, ...] = ()
    pack: bool = False  # the merged blocks are the head's plain tail, grown large enough to pack

    def merge(self) -> Block:
        """The merged block (needs no lock: what it reads is never changed in place)."""
        if self.pending:
            return _merge([(*_csr(sid), ts, val) for sid, ts, val in self.pending], True)
        merged = _merge([b.run() for b in self.blocks], True)
        return PackedBlock(merged) if self.pack and len(merged) else merged
