"""Instant vectors (label sets + one float each) and the label arithmetic PromQL defines on them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from promql.identity_memo import IdentityMemo
from store.types import Float64Array

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs; "__name__" included when present
NAME = "__name__"


@dataclass(slots=True)
class Vector:
    labels: list[Labels]
    values: Float64Array

    @classmethod
    def empty(cls) -> Vector:
        return cls([], np.empty(0))

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, mask_or_index: np.ndarray) -> Vector:
        index = np.flatnonzero(mask_or_index) if mask_or_index.dtype == bool else mask_or_index
        return Vector([self.labels[i] for i in index.tolist()], self.values[index])

    def without_name(self) -> Vector:
        return Vector([drop_name(lab) for lab in self.labels], self.values)

    def as_dicts(self) -> list[tuple[dict[str, str], float]]:
        return [(dict(lab), float(v)) for lab, v in zip(self.labels, self.values.tolist())]


_DROPPED: IdentityMemo[Labels] = IdentityMemo(1_000_000)
_DROPPED_LISTS: IdentityMemo[list[Labels]] = IdentityMemo(256)


def drop_name(labels: Labels) -> Labels:
    """The labels without ``__name__`` (remembered per label tuple: see promql.identity_memo)."""
    hit = _DROPPED.get(labels)
    if hit is not None:
        return hit
    if labels and labels[0][0] == NAME:  # "__name__" sorts before lower-case label names
        return _DROPPED.put(labels, labels[1:])
    return _DROPPED.put(labels, tuple(p for p in labels if p[0] != NAME))


def drop_names(labels: list[Labels]) -> list[Labels]:
    """``drop_name`` of every element, the same list object for the same input list."""
    hit = _DROPPED_LISTS.get(labels)
    return hit if hit is not None else _DROPPED_LISTS.put(labels, [drop_name(lab) for lab in labels])


def keep_only(labels: Labels, names: Iterable[str]) -> Labels:
    wanted = set(names)
    return tuple(p for p in labels if p[0] in wanted)


def drop(labels: Labels, names: Iterable[str]) -> Labels:
    unwanted = set(names) | {NAME}
    return tuple(p for p in labels if p[0] not in unwanted)


def merge(labels: Labels, extra: dict[str, str]) -> Labels:
    merged = dict(labels)
    merged.update(extra)
    return tuple(sorted((k, v) for k, v in merged.items() if v != ""))


def group_index(keys: Sequence[Labels]) -> tuple[np.ndarray, list[Labels]]:
    """Dense group ids for ``keys`` (first-seen order) and the distinct keys."""
    seen: dict[Labels, int] = {}
    ids = np.empty(len(keys), np.int64)
    for i, key in enumerate(keys):
        gid = seen.get(key)
        if gid is None:
            gid = seen[key] = len(seen)
        ids[i] = gid
    return ids, list(seen)


def grouping_keys(labels: Sequence[Labels], grouping: Sequence[str], without: bool) -> list[Labels]:
    if without:
        return [drop(lab, grouping) for lab in labels]
    wanted = set(grouping)
    return [tuple(p for p in lab if p[0] in wanted) for lab in labels]
