"""Decoding many chunks at once: the per-chunk work left in Python is inflating deflated parts.

A query over the last hour of 30 k series reads 100 k+ chunks; :func:`store.codec.decode`
costs ~30 us of numpy set-up per chunk (header unpacking, small accumulates, a division),
which made chunk decoding most of such a query's time. Here the chunks of each encoding
(:mod:`store.batch_decode_v1`, :mod:`store.batch_decode_v2`) are decoded together: headers
are gathered with fancy indexing, codes are read for all chunks at once, and the running sums
are one accumulate over everything, made per chunk by subtracting each chunk's prefix
(:func:`store.flat_runs.segmented_cumsum`).

The result is bit for bit what :func:`store.codec.decode` returns chunk by chunk (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from store.batch_decode_v1 import decode_v1_many
from store.batch_decode_v2 import decode_v2_many
from store.codec import ChunkDecodeError
from store.codec_v1 import ENCODING_V1
from store.codec_v2 import ENCODING_V2
from store.flat_runs import spread, starts_of
from store.types import Float64Array, Int64Array

_DECODERS = {ENCODING_V1: decode_v1_many, ENCODING_V2: decode_v2_many}


@dataclass(slots=True)
class DecodedChunks:
    """Chunk ``c``'s samples are ``ts[starts[c]:starts[c] + counts[c]]``."""

    ts: Int64Array
    values: Float64Array
    starts: Int64Array
    counts: Int64Array


def decode_many(datas: Sequence[bytes], counts: Sequence[int], encodings: Sequence[int]) -> DecodedChunks:
    """Decode every chunk of ``datas`` (``counts[c]`` samples each, in ``encodings[c]``). A chunk
    that does not decode raises :class:`ChunkDecodeError` naming its position in ``datas``."""
    n = np.asarray(counts, np.int64)
    kinds = np.asarray(encodings, np.int64)
    if len(n) != len(datas) or len(kinds) != len(datas):
        raise ValueError("decode_many needs one sample count and one encoding per chunk")
    if len(n) and n.min() < 1:
        raise ChunkDecodeError(f"chunk {int(np.argmin(n))} claims {int(n.min())} samples")
    unknown = np.flatnonzero(~np.isin(kinds, list(_DECODERS)))
    if len(unknown):
        raise ChunkDecodeError(f"chunk {int(unknown[0])}: unknown chunk encoding {int(kinds[unknown[0]])}")
    out_starts = starts_of(n)
    ts = np.empty(int(n.sum()), np.int64)
    values = np.empty(len(ts), np.float64)
    for kind in np.unique(kinds).tolist():
        rows = np.flatnonzero(kinds == kind)
        group_ts, group_values = _DECODERS[kind]([datas[i] for i in rows.tolist()], n[rows], rows)
        if len(rows) == len(n):
            return DecodedChunks(group_ts, group_values, out_starts, n)
        at = spread(out_starts[rows], n[rows])
        ts[at], values[at] = group_ts, group_values
    return DecodedChunks(ts, values, out_starts, n)
