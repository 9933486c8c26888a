"""Tokenizers: byte-level by default (token id = byte value; 256 <s>, 257 </s>, 258 <pad>).

A checkpoint directory with a ``tokenizer.json`` uses it through the ``tokenizers`` package
when that is installed; otherwise the byte tokenizer is used and the model's extra ids decode
to nothing.  Decoding is incremental: a multi-byte UTF-8 character split over tokens comes out
whole once its last byte arrives.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any, Protocol

from worker.shapes import BOS_ID, EOS_ID, PAD_ID


class StreamDecoder(Protocol):
    def feed(self, token_ids: list[int]) -> str: ...

    def flush(self) -> str: ...


class Tokenizer(Protocol):
    name: str
    eos_id: int
    # ids that must never be sampled (BOS, PAD): sampling masks them out
    banned_ids: tuple[int, ...]

    def encode(self, text: str) -> list[int]: ...

    def decoder(self) -> StreamDecoder: ...

    def decode(self, token_ids: list[int]) -> str: ...


class _ByteStream:
    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_ids: list[int]) -> str:
        return self._utf8.decode(bytes(t for t in token_ids if 0 <= t < 256))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)


class ByteTokenizer:
    name = "bytes"

    def __init__(self, eos_id: int = EOS_ID, banned_ids: tuple[int, ...] = (BOS_ID, PAD_ID)) -> None:
        self.eos_id = eos_id
        self.banned_ids = banned_ids

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decoder(self) -> StreamDecoder:
        return _ByteStream()

    def decode(self, token_ids: list[int]) -> str:
        stream = _ByteStream()
        return stream.feed(token_ids) + stream.flush()


class _HfStream:
    """Incremental detokenisation: decode the running ids and emit the new suffix (the text of
    a token can depend on its neighbours, so a prefix is only emitted once it is stable)."""

    def __init__(self, tok: Any) -> None:
        self._tok = tok
        self._ids: list[int] = []
        self._emitted = 0

    def feed(self, token_ids: list[int]) -> str:
        self._ids.extend(token_ids)
        text = str(self._tok.decode(self._ids, skip_special_tokens=True))
        if text.endswith("\ufffd"):
            return ""
        new, self._emitted = text[self._emitted :], len(text)
        return new

    def flush(self) -> str:
        text = str(self._tok.decode(self._ids, skip_special_tokens=True))
        new, self._emitted = text[self._emitted :], len(text)
        return new


class HfTokenizer:
    name = "tokenizer.json"

    def __init__(self, path: Path, eos_id: int, bos_id: int | None) -> None:
        from tokenizers import Tokenizer as _Tok  # optional dependency

        self._tok = _Tok.from_file(str(path))
        self.eos_id = eos_id
        self.banned_ids = tuple(i for i in (bos_id,) if i is not None and i != eos_id)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decoder(self) -> StreamDecoder:
        return _HfStream(self._tok)

    def decode(self, token_ids: list[int]) -> str:
        return str(self._tok.decode(token_ids, skip_special_tokens=True))


def load_tokenizer(model_dir: Path | None, eos_id: int, bos_id: int | None) -> Tokenizer:
    """The checkpoint's ``tokenizer.json`` when usable, else the byte tokenizer."""
    if model_dir is not None and (model_dir / "tokenizer.json").is_file():
        try:
            return HfTokenizer(model_dir / "tokenizer.json", eos_id, bos_id)
        except Exception:  # tokenizers missing or the file unreadable: fall back, stay up
            pass
    if eos_id == EOS_ID:
        return ByteTokenizer()
    return ByteTokenizer(eos_id, tuple(i for i in (bos_id,) if i is not None and i != eos_id))
