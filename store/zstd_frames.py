"""Zstandard frames for the store's packed parts: a chunk's XOR values and rollup spans.

Why Zstandard where these parts were deflated: on float bytes whose low bits do not repeat
(power in mW, ratios, rates) deflate spent most of its time finding nothing, and its set-up
dominated on small parts. Measured on this machine: 30,000 chunks of 75 varying floats, the
XOR planes deflated (level 6, 4 KiB window) in 1.19 s CPU to 7.41 B a sample, and packed as
Zstandard frames at level 1 in 0.15 s to 7.27 B; a checkpoint's 509,000 rollup buckets
deflated (level 1) in 0.375 s to 9.7 MB, and at Zstandard level 2 took 0.138 s for 9.1 MB.

Frames carry their content size, so a reader checks what a frame claims before inflating it: a
few corrupt bytes cannot make it allocate gigabytes. Compressor and decompressor contexts are
kept per thread (a context may not be shared between threads; made once, they save a
context's set-up on each of the thousands of parts of a checkpoint).
"""

from __future__ import annotations

import threading

import zstandard

MAGIC = b"\x28\xb5\x2f\xfd"  # every frame starts with it; a zlib stream starts with 0x78


class FrameError(ValueError):
    """A frame that does not decode, or claims a size its reader cannot accept."""


class _Contexts(threading.local):
    def __init__(self) -> None:
        self.packers: dict[int, zstandard.ZstdCompressor] = {}
        self.unpacker = zstandard.ZstdDecompressor()


_contexts = _Contexts()


def pack(raw: bytes, level: int) -> bytes:
    """One frame of ``raw``, its content size in its header."""
    packer = _contexts.packers.get(level)
    if packer is None:
        packer = _contexts.packers[level] = zstandard.ZstdCompressor(level=level)
    return packer.compress(raw)


def frame_size(data: bytes | memoryview) -> int:
    """The content size a frame's header claims; -1 where it does not say."""
    try:
        return int(zstandard.frame_content_size(bytes(data[:18])))  # the longest frame header
    except zstandard.ZstdError as exc:
        raise FrameError(f"does not decompress: {exc}") from None


def unpack(data: bytes | memoryview, limit: int) -> bytes:
    """A frame's content, refused unread where it claims more than ``limit`` bytes (or does not
    say how many)."""
    size = frame_size(data)
    if size < 0:
        raise FrameError("does not decompress: the frame does not say its size")
    if size > limit:
        raise FrameError(f"does not decompress: it inflates past the {limit} bytes it can hold")
    try:
        return _contexts.unpacker.decompress(data)
    except zstandard.ZstdError as exc:
        raise FrameError(f"does not decompress: {exc}") from None
