"""Postings: for each label pair, the sorted ids of the series that carry it, so that a
selector such as ``{Hostname="node-7"}`` over a metric of 30 k series looks at the few series
of that host instead of testing every series of the metric (as Prometheus's inverted index).

Regular expressions are tested once per distinct value of their label, not once per series.
Matchers that can match a missing label (``!=``, ``!~``, or a regex that matches "") are left to
the caller's per-series test on the narrowed candidates.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Iterable

from store.regex import label_regex

NAME = "__name__"


class Postings:
    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], list[int]] = defaultdict(list)
        self._values: dict[str, set[str]] = defaultdict(set)

    def add(self, sid: int, pairs: Iterable[tuple[str, str]]) -> None:
        for name, value in pairs:
            ids = self._ids[(name, value)]
            if ids and sid < ids[-1]:
                insort(ids, sid)  # ids usually arrive in order; a reload from SQL may not
            else:
                ids.append(sid)
            self._values[name].add(value)

    def narrow(self, label: str, op: str, value: str) -> list[int] | None:
        """The sorted ids a matcher can match, or None when it can match series without the
        label (those are not in any posting list)."""
        if op == "=" and value != "":
            return self._ids.get((label, value), [])
        if op == "=~":
            regex = label_regex(value)
            if regex.fullmatch(""):
                return None
            hits = [v for v in self._values.get(label, ()) if regex.fullmatch(v)]
            if len(hits) == 1:
                return self._ids[(label, hits[0])]
            return sorted(sid for v in hits for sid in self._ids[(label, v)])
        return None


def intersect(lists: list[list[int]]) -> list[int]:
    """Ids in every sorted list, in order: the shortest is filtered by binary search in the
    others (a set is built instead when that is cheaper)."""
    if not lists:
        return []
    lists = sorted(lists, key=len)
    out = lists[0]
    for other in lists[1:]:
        if not out:
            break
        if len(out) * 16 < len(other):
            out = [sid for sid in out if _contains(other, sid)]
        else:
            members = set(other)
            out = [sid for sid in out if sid in members]
    return out


def _contains(ids: list[int], sid: int) -> bool:
    at = bisect_left(ids, sid)
    return at < len(ids) and ids[at] == sid
