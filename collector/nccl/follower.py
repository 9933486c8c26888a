"""Follow growing log files by byte offset: only new complete lines, rotation- and truncation-aware.

A file is known by ``(path, inode, offset)`` where ``offset`` is just past the last newline
consumed, so a partial last line is simply read again next time (and survives a restart).
Each poll:

* a path whose inode was known under any path (this one, or another before a rename-style
  rotation such as ``app.log`` -> ``app.log.1``) continues at that inode's offset;
* otherwise (new file, or a new inode at a known path) reading starts at 0;
* a file smaller than its offset was truncated (copytruncate): reading starts at 0;
* at most ``max_bytes`` are consumed per file per poll; a chunk of ``max_bytes`` without any
  newline is consumed whole (one over-long line, counted as ignored by the caller).

Lines are split on ``\n`` only (a trailing ``\r`` is dropped) and come with the byte offset
they start at, so a position in the file (e.g. where an nccl-tests run starts) is stable.

Not detectable: a file truncated and re-grown past the old offset between two polls (the new
head is skipped), inode reuse by a new file at least as long as the old offset, and lines
appended to a rotated file whose new name no glob matches.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from collector.nccl.records import FileContext

Opener = Callable[[Path], IO[bytes]]
Line = tuple[int, str]  # (byte offset of the line's start, text without the newline)


def open_binary(path: Path) -> IO[bytes]:
    return path.open("rb")


@dataclass(slots=True)
class FileState:
    path: str
    inode: int
    offset: int
    ctx: FileContext = field(default_factory=FileContext)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "inode": self.inode, "offset": self.offset, **self.ctx.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileState:
        return cls(str(data["path"]), int(data["inode"]), int(data["offset"]), FileContext.from_json(data))


def expand(patterns: Iterable[str]) -> list[Path]:
    """Sorted, de-duplicated regular files matching any glob (``**`` allowed); none is fine."""
    found: set[str] = set()
    for pattern in patterns:
        found.update(glob.glob(os.path.expanduser(pattern), recursive=True))
    return [Path(p) for p in sorted(found) if os.path.isfile(p)]


class Follower:
    def __init__(self, *, max_bytes: int = 16 * 1024 * 1024, opener: Opener = open_binary) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes
        self.opener = opener
        self.files: dict[str, FileState] = {}

    def begin(self) -> dict[int, FileState]:
        """Snapshot of the known files by inode, taken before a poll looks at any path."""
        return {state.inode: state for state in self.files.values()}

    def read(self, path: Path, known: dict[int, FileState]) -> tuple[FileState, list[Line]]:
        """New complete lines of ``path`` with their offsets; raises ``OSError``. Commit the
        state with :meth:`commit`."""
        inode = os.stat(path).st_ino
        prior = known.get(inode)
        state = FileState(str(path), inode, prior.offset, prior.ctx.copy()) if prior else FileState(str(path), inode, 0)
        with self.opener(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < state.offset:
                state.offset, state.ctx = 0, FileContext()
            if size == state.offset:
                return state, []
            handle.seek(state.offset)
            chunk = handle.read(self.max_bytes)
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            if len(chunk) < self.max_bytes:
                return state, []  # a partial line only: wait for its newline
            end = len(chunk)
        start = state.offset
        state.offset += end
        lines: list[Line] = []
        at = 0
        for raw in chunk[:end].split(b"\n"):
            if at < end:
                lines.append((start + at, raw.removesuffix(b"\r").decode("utf-8", errors="replace")))
            at += len(raw) + 1
        return state, lines

    def commit(self, states: Sequence[FileState], keep: Iterable[str] = ()) -> None:
        """Replace the known files by ``states``, plus the old entries of paths in ``keep``."""
        kept = {p: self.files[p] for p in keep if p in self.files}
        self.files = {**kept, **{s.path: s for s in states}}

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.files.values()]

    def load(self, entries: Iterable[dict[str, Any]]) -> None:
        self.files = {s.path: s for s in (FileState.from_json(e) for e in entries)}
