"""What the batch decoders of both chunk encodings share: inflating each chunk's deflated part
(with a limit), joining parts into one byte array, and naming a bad chunk (see
:mod:`store.batch_decode`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from store.codec_parts import ChunkDecodeError, inflate
from store.flat_runs import starts_of
from store.types import Int64Array


def inflate_each(datas: Sequence[bytes | memoryview], positions: Int64Array, limits: Sequence[int]) -> list[bytes]:
    """Each part inflated, at most ``limits[c]`` bytes of it (see :func:`store.codec_parts.inflate`)."""
    return [inflate(data, f"chunk {int(positions[c])}", limit) for c, (data, limit) in enumerate(zip(datas, limits))]


def joined(parts: Sequence[bytes]) -> tuple[np.ndarray, Int64Array, Int64Array]:
    """The parts back to back as one byte array, with each part's offset and size."""
    sizes = np.fromiter((len(p) for p in parts), np.int64, len(parts))
    return np.frombuffer(b"".join(parts), np.uint8), starts_of(sizes), sizes


def fail_where(checks: Sequence[tuple[np.ndarray, str]], positions: Int64Array) -> None:
    """Raise for the first check with a bad chunk, naming that chunk's position."""
    for bad, what in checks:
        if bad.any():
            raise ChunkDecodeError(f"chunk {int(positions[int(np.flatnonzero(bad)[0])])}: {what}")
