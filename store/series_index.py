"""Series ids in memory: key -> id for the ingest path, metric -> ids for selectors."""

from __future__ import annotations

import json
import re
from bisect import insort
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from store.backend import Backend
from store.postings import NAME, Postings, intersect
from store.regex import RegexError, label_regex
from store.sized_cache import SizedCache
from store.types import Int64Array, SeriesKey

MatchOp = Literal["=", "!=", "=~", "!~"]


REFUSED = 0  # the id of a key the series limit kept out (store ids start at 1)
SELECTED_IDS_KEPT = 500_000  # ids over all remembered selections (~70 B each); beyond, all are forgotten


@dataclass(frozen=True, slots=True)
class Matcher:
    """A label matcher as in PromQL; regexes are fully anchored."""

    label: str
    op: MatchOp
    value: str

    def __post_init__(self) -> None:
        if self.op not in ("=", "!=", "=~", "!~"):
            raise ValueError(f"unknown matcher operator {self.op!r}")
        if self.op in ("=~", "!~"):
            try:
                label_regex(self.value)
            except RegexError as exc:
                raise ValueError(f"bad regular expression for label {self.label!r}: {exc}") from exc

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = label_regex(self.value).fullmatch(value)
        return hit if self.op == "=~" else not hit

    @classmethod
    def parse(cls, text: str) -> Matcher:
        """``k=v``, ``k!=v``, ``k=~re``, ``k!~re`` (as typed on a command line)."""
        found = re.match(r"^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$", text)
        if not found:
            raise ValueError(f"bad label matcher {text!r}: expected label=value, !=, =~ or !~")
        value = found.group(3)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        return cls(found.group(1), found.group(2), value)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Selector:
    metric: str | None
    matchers: tuple[Matcher, ...] = ()

    def matches(self, key: SeriesKey) -> bool:
        if self.metric is not None and key.name != self.metric:
            return False
        for m in self.matchers:
            value = key.name if m.label == "__name__" else key.get(m.label)
            if not m.matches(value):
                return False
        return True


def labels_json(key: SeriesKey) -> str:
    return json.dumps(dict(key.labels), separators=(",", ":"), ensure_ascii=False)


class SeriesIndex:
    def __init__(self) -> None:
        self._ids: dict[SeriesKey, int] = {}
        self._keys: dict[int, SeriesKey] = {}
        self._by_metric: dict[str, list[int]] = defaultdict(list)
        self._postings = Postings()
        self._uncommitted: dict[SeriesKey, int] = {}
        self._max_id = 0
        # Selector -> what it matched, with the ids as an array. Rules and dashboards ask the
        # same selectors every cycle; the answer only changes when a series is added (the
        # index never removes one), so a new series empties the whole cache.
        self._selected: SizedCache[Selector, tuple[list[tuple[int, SeriesKey]], Int64Array]] = SizedCache(
            SELECTED_IDS_KEPT
        )

    def __len__(self) -> int:
        return len(self._ids)

    def load(self, rows: Iterable[tuple[int, str, str]]) -> None:
        for sid, metric, labels in rows:
            self._add(int(sid), SeriesKey(metric, tuple(json.loads(labels).items())))

    def _add(self, sid: int, key: SeriesKey) -> None:
        self._selected.clear()
        self._ids[key] = sid
        self._keys[sid] = key
        by_metric = self._by_metric[key.name]
        if by_metric and sid < by_metric[-1]:
            insort(by_metric, sid)
        else:
            by_metric.append(sid)
        self._postings.add(sid, key.labels)
        self._max_id = max(self._max_id, sid)

    def get(self, key: SeriesKey) -> int | None:
        return self._ids.get(key)

    def key(self, sid: int) -> SeriesKey:
        return self._keys[sid]

    def max_id(self) -> int:
        return self._max_id

    def resolve(self, keys: Sequence[SeriesKey], backend: Backend, cur: Any, now_ms: int,
                room: Callable[[], int | None] | None = None) -> Int64Array:
        """Ids for ``keys``, inserting unknown series through ``cur`` (caller commits).

        New ids are only remembered once the caller calls :meth:`commit_new` after its
        transaction commits, so a rolled-back batch leaves no phantom ids behind. ``room``
        (asked only when some key is new): how many series may still be created (None: any);
        keys beyond it get the id :data:`REFUSED`.
        """
        ids = np.empty(len(keys), dtype=np.int64)
        missing: list[int] = []
        get = self._ids.get
        for i, key in enumerate(keys):
            sid = get(key)
            if sid is None:
                missing.append(i)
            else:
                ids[i] = sid
        if missing:
            fresh: dict[SeriesKey, int] = {}
            todo = [keys[i] for i in missing if keys[i] not in fresh]
            unique = list(dict.fromkeys(todo))
            allowed = room() if room is not None else None
            if allowed is not None and len(unique) > allowed:
                for key in unique[max(allowed, 0):]:
                    fresh[key] = REFUSED
                unique = unique[: max(allowed, 0)]
            rows = [(k.name, labels_json(k), k.hash64(), now_ms) for k in unique]
            for key, sid in zip(unique, backend.insert_series(cur, rows)):
                fresh[key] = sid
            for i in missing:
                ids[i] = fresh[keys[i]]
            self._uncommitted = {k: v for k, v in fresh.items() if v != REFUSED}
        else:
            self._uncommitted = {}
        return ids

    def commit_new(self) -> list[int]:
        """Remember the series the committed transaction created; returns their ids."""
        created = list(self._uncommitted.values())
        for key, sid in self._uncommitted.items():
            self._add(sid, key)
        self._uncommitted = {}
        return created

    def forget_new(self) -> None:
        self._uncommitted = {}

    def select(self, selector: Selector) -> list[tuple[int, SeriesKey]]:
        """The series ``selector`` matches (see :meth:`selection`)."""
        return self.selection(selector)[0]

    def selection(self, selector: Selector) -> tuple[list[tuple[int, SeriesKey]], Int64Array]:
        """The series ``selector`` matches, by id, and their ids as an array. Until a series is
        added, the same selector gets the same (unchanged) list and array objects back, so
        callers may remember work per object; neither may be modified."""
        hit = self._selected.get(selector)
        if hit is None:
            found = self._match(selector)
            hit = self._selected.put(selector, (found, np.asarray([sid for sid, _ in found], np.int64)), len(found))
        return hit

    def _match(self, selector: Selector) -> list[tuple[int, SeriesKey]]:
        """Equality and regex matchers narrow through the postings; what they cannot decide is
        tested series by series."""
        lists: list[list[int]] = []
        if selector.metric is not None:
            lists.append(self._by_metric.get(selector.metric, []))
        rest: list[Matcher] = []
        for m in selector.matchers:
            narrowed = None
            if m.label == NAME:
                if m.op == "=":
                    narrowed = self._by_metric.get(m.value, [])
                elif m.op == "=~" and not label_regex(m.value).fullmatch(""):
                    regex = label_regex(m.value)
                    narrowed = sorted(sid for name, ids in self._by_metric.items() if regex.fullmatch(name) for sid in ids)
            else:
                narrowed = self._postings.narrow(m.label, m.op, m.value)
            if narrowed is None:
                rest.append(m)
            else:
                lists.append(narrowed)
        keys = self._keys
        candidates: Iterable[int] = intersect(lists) if lists else sorted(keys)
        if not rest:
            return [(sid, keys[sid]) for sid in candidates]
        check = Selector(None, tuple(rest))
        return [(sid, keys[sid]) for sid in candidates if check.matches(keys[sid])]

    def keys(self) -> list[SeriesKey]:
        return list(self._keys.values())

    def metrics(self) -> list[str]:
        return sorted(name for name, ids in self._by_metric.items() if ids)
