"""Fast parser for the Prometheus text (0.0.4) and OpenMetrics 1.0 exposition formats.

Design: a target returns almost the same text on every scrape; the series part of a sample
line (``name{labels}``) repeats verbatim and only the value changes.  The body is split into
lines once; per sample line one C-level call (``rpartition('}')``, or a search for the first
space when there are no labels) separates series text from value text, and the series text
is looked up in a per-target :class:`SeriesCache`.  Only on a miss is the line parsed in full
and the key stored.  A hit is sound because the cache holds only texts that parsed completely
as a series (labelled texts and bare names in separate maps, so a malformed line cannot alias
an entry of the other shape).  The value text is checked on every line: ``float()`` plus
cheap character checks; anything else (tabs, timestamps, junk) goes through the one reference
routine :func:`_value_ts`, so cold and warm parses accept the same lines with the same
results.  Comment lines are memoised in the cache too.  Samples go into lists that become
numpy arrays at the end; keys are interned, so ``key_index`` follows from object identity
(``arange(n)`` when every series appears once).

The first malformed line raises :class:`ParseError`; nothing partial is returned.  Tolerated:
blank lines, leading/trailing blanks, CRLF, a UTF-8 BOM, ``name{}``, a trailing comma and
blanks in a label set, several blanks between tokens, repeated HELP/TYPE lines (first wins),
unknown escapes in HELP text.  ``keep_family`` is asked once per family and body; a line it
drops is checked only up to the metric name (once the name's verdict is known, by looking
at the text before the first '{').  OpenMetrics (``openmetrics=True``, or when ``None`` a
body with a ``# EOF`` or ``# UNIT`` line): float-second timestamps, exemplars (validated,
then dropped), nothing but blank lines after ``# EOF``; a missing ``# EOF`` is an error only
with ``openmetrics=True``.  Family of a sample, for ``keep_family``: its name, less a
``_bucket``/``_count``/``_sum``/``_total``/``_created``/``_info`` (or ``_gcount``/``_gsum``)
suffix when a TYPE line declared the shorter name with a type that has that suffix.

Same body shape, values only: a target usually answers with the same lines in the same order,
only the numbers changing. After a full parse the cache keeps the body's *layout* -- every
comment and blank line verbatim, and each sample line's text up to its value -- and the next
parse first tries it: split the lines, compare the non-sample lines as one tuple, check each
sample line starts with its remembered prefix and convert the rest with ``float``, all as
C-level ``map`` calls with no Python code per line. It applies only when everything matches
and every value passes the same checks as in the full parse (so the two accept exactly the
same bodies with the same results); otherwise the full parse runs, and records a new layout.
The batch it returns reuses the previous keys list (so later stages can tell "same series"
by identity).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from collector.exposition.layout import Layout
from collector.exposition.lines import (
    _Bad,
    _check_exemplar,
    _detect,
    _family_of,
    _meta,
    _parse_series,
    _value_ts,
)
from store.types import SampleBatch, SeriesKey

__all__ = ["FamilyMeta", "ParseError", "ParseResult", "SeriesCache", "is_openmetrics_content_type",
           "parse_exposition"]


class ParseError(ValueError):
    """The first malformed line of a body; ``str(err) == f"line {line}: {reason}: {excerpt!r}"``."""

    line: int  # 1-based
    excerpt: str  # the offending line, truncated to 120 characters
    reason: str

    def __init__(self, line: int, reason: str, excerpt: str) -> None:
        excerpt = excerpt.rstrip("\r")
        excerpt = excerpt if len(excerpt) <= 120 else excerpt[:117] + "..."
        super().__init__(f"line {line}: {reason}: {excerpt!r}")
        self.line, self.reason, self.excerpt = line, reason, excerpt

    def __reduce__(self) -> tuple[type[ParseError], tuple[int, str, str]]:
        return (ParseError, (self.line, self.reason, self.excerpt))




@dataclass(frozen=True, slots=True)
class FamilyMeta:
    """What the ``# HELP`` / ``# TYPE`` / ``# UNIT`` lines said about one family name."""

    name: str
    type: str
    help: str
    unit: str


@dataclass(slots=True)
class ParseResult:
    """One parsed body: samples (explicit timestamps in ms, else ``default_ts_ms``) and metadata."""

    batch: SampleBatch
    families: dict[str, FamilyMeta]  # names that had HELP/TYPE/UNIT lines
    skipped_samples: int = 0  # sample lines dropped by keep_family
    new_series: int = 0  # sample lines whose series text missed the cache
    openmetrics: bool = False  # the dialect the body was read as


class SeriesCache:
    """Maps the raw series text (everything before the value, e.g.
    ``'vllm:num_requests_running{model_name="x"}'``) to its :class:`SeriesKey` so labels are
    parsed only for series not seen before.  One per scrape target; not thread-safe.
    Bounded: holding ``max_entries`` series (or remembered comment lines) at the start of a
    parse, it is cleared, so it exceeds the bound by at most one body's worth (so size it
    above the target's series count, or every parse of that target starts cold).
    Keys are interned: equal keys are the same object.

    Once a body's layout is kept, the series maps are dropped (:meth:`_keep_layout`): the layout's
    prefixes and keys hold the same texts and keys, and the maps, another copy of every series
    text, were about 300 bytes a series read by nothing while bodies fit the layout. A body
    that does not fit rebuilds them from the layout first (:meth:`_maps`), so a changed body
    still parses only its new series in full.
    """

    __slots__ = ("max_entries", "hits", "misses", "_labelled", "_plain", "_comments", "_intern", "_pairs",
                 "_names", "_layout", "_layout_misses", "_compacted")

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self.max_entries = max_entries
        self.hits = self.misses = 0
        self._labelled: dict[str, SeriesKey] = {}  # series text minus its closing '}'
        self._plain: dict[str, SeriesKey] = {}  # bare metric names
        self._comments: dict[str, tuple[str, ...]] = {}  # validated comment lines
        self._intern: dict[SeriesKey, SeriesKey] = {}
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}  # shared label pairs
        self._names: dict[str, str] = {}  # shared metric names (each series had its own copy)
        self._layout: Layout | None = None  # the last fully parsed body's shape
        self._layout_misses = 0  # bodies in a row that did not fit the layout
        self._compacted = False  # the series maps are dropped: the layout holds them

    def __len__(self) -> int:
        if self._compacted and self._layout is not None:
            return self._layout.n
        return len(self._labelled) + len(self._plain)

    def get(self, series_text: str) -> SeriesKey | None:
        """The cached key for a series text such as ``'up'`` or ``'up{job="x"}'``."""
        labelled, plain, _ = self._maps()
        if series_text.endswith("}"):
            return labelled.get(series_text[:-1])
        return plain.get(series_text)

    def clear(self) -> None:
        for part in (self._labelled, self._plain, self._comments, self._intern, self._pairs, self._names):
            part.clear()
        self._layout = None
        self._compacted = False

    def _keep_layout(self, layout: Layout | None) -> None:
        """``layout`` (of the body just parsed in full) is tried first from now on; with one
        kept, the series maps are dropped (see the class doc)."""
        self._layout = layout
        if layout is not None:
            self._labelled.clear()
            self._plain.clear()
            self._intern.clear()
            self._compacted = True

    def _maps(self) -> tuple[dict[str, SeriesKey], dict[str, SeriesKey], dict[SeriesKey, SeriesKey]]:
        """(labelled, plain, intern), rebuilt from the layout where they were dropped: each
        sample line's prefix, cut as the full parse cuts a line, maps to that line's key."""
        if self._compacted:
            self._compacted = False
            layout = self._layout
            if layout is not None:
                labelled, plain, intern = self._labelled, self._plain, self._intern
                keys = layout.keys
                for prefix, at in zip(layout.prefixes, layout.key_index.tolist()):
                    key = keys[at]
                    series, brace, _ = prefix.rpartition("}")
                    if brace:
                        labelled[series] = key
                    else:
                        plain[prefix[: prefix.find(" ")]] = key
                    intern[key] = key
        return self._labelled, self._plain, self._intern

    def _bound(self) -> SeriesCache:
        if max(len(self), len(self._comments)) >= self.max_entries:
            self.clear()
        return self


def is_openmetrics_content_type(content_type: str | None) -> bool:
    """True for ``application/openmetrics-text`` (any parameters, any case)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/openmetrics-text"


def _decode(body: str | bytes) -> str:
    if isinstance(body, str):
        text = body
    else:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            start, end = body.rfind(b"\n", 0, exc.start) + 1, body.find(b"\n", exc.start)
            excerpt = body[start : end if end >= 0 else len(body)].decode("utf-8", "replace")
            raise ParseError(body.count(b"\n", 0, exc.start) + 1, "invalid UTF-8", excerpt) from None
    return text[1:] if text.startswith("\ufeff") else text




def parse_exposition(
    body: str | bytes,
    *,
    default_ts_ms: int,
    openmetrics: bool | None = None,
    cache: SeriesCache | None = None,
    keep_family: Callable[[str], bool] | None = None,
) -> ParseResult:
    """Parse one scrape body into a columnar batch; raises :class:`ParseError` on the first
    malformed line.  ``keep_family(family)`` returning False drops that family's samples."""
    text = _decode(body)
    om = openmetrics  # None: undecided until a line needs it or the loop has seen every line
    cached = cache is not None and keep_family is None
    cache = SeriesCache() if cache is None else cache._bound()
    if cached and (layout := cache._layout) is not None and layout.openmetrics_arg == openmetrics:
        fast = layout.parse(text, default_ts_ms)
        if fast is not None:
            batch, families, is_om = fast
            cache._layout_misses = 0
            cache.hits += len(batch)
            return ParseResult(batch, families, 0, 0, is_om)
    if cached:
        cache._layout_misses += 1
    labelled, plain, intern = cache._maps()
    comments = cache._comments
    labelled_get, plain_get, comments_get = labelled.get, plain.get, comments.get
    pairs_setdefault, names_setdefault = cache._pairs.setdefault, cache._names.setdefault
    lines = text.split("\n")
    keys_seq, values, ts_pos, ts_val = list[SeriesKey](), list[float](), list[int](), list[int]()
    add_key, add_value = keys_seq.append, values.append
    sample_lines = list[int]()  # 0-based line numbers of the samples, for the layout
    add_line = sample_lines.append
    types, helps, units = dict[str, str](), dict[str, str](), dict[str, str]()  # from metadata lines
    decided, by_family = dict[str, bool](), dict[str, bool]()  # keep_family verdicts: by name, family
    decided_get = decided.get
    skipped = misses = eof_line = lineno = 0
    keep: Callable[[str], bool] | None = None
    if keep_family is not None:
        want = keep_family

        def keep(name: str) -> bool:
            verdict = decided_get(name)
            if verdict is None:
                family = _family_of(name, types)
                verdict = by_family.get(family)
                if verdict is None:
                    verdict = by_family[family] = bool(want(family))
                decided[name] = verdict
            return verdict

    try:
        for lineno, line in enumerate(lines, 1):
            if not line:
                continue
            if line[0] <= "#":  # comment, blank or indented line (names start above '#')
                if line[0] != "#":
                    line = line.strip(" \t\r")
                    if not line:
                        continue
                if line[0] == "#":
                    line = line.rstrip(" \t\r")
                    meta = comments_get(line)
                    if meta is None:
                        meta = comments[line] = _meta(line)
                    if not meta:
                        continue
                    kind = meta[0]
                    if kind == "TYPE":
                        types.setdefault(meta[1], meta[2])
                    elif kind == "HELP":
                        helps.setdefault(meta[1], meta[2])
                    elif kind == "UNIT":
                        units.setdefault(meta[1], meta[2])
                        om = True if om is None else om
                    elif om is not False:  # "# EOF"
                        om, eof_line = True, lineno
                        break
                    continue
            if keep is not None and (b := line.find("{")) > 0 and decided_get(line[:b]) is False:
                skipped += 1  # a name already dropped (decided holds valid names only), then '{'
                continue
            head, exemplar = line, None
            if om and (h := line.find(" # ")) >= 0:
                exemplar, head = line[h + 3 :], line[:h]
            series, brace, rest = head.rpartition("}")
            if brace:
                key = labelled_get(series)
            else:
                sp = head.find(" ")
                series, rest = (head[:sp], head[sp:]) if sp >= 0 else (head, "")
                key = plain_get(series)
            if key is None:  # new series text: full parse
                parsed = _parse_series(line, keep)
                if parsed is None:
                    skipped += 1
                    continue
                has_labels, series, key, end = parsed
                found = intern.get(key)
                if found is None:
                    # a new key shares its (name, value) pairs with the keys before it: a
                    # target's series repeat the same few label pairs many times over
                    name = names_setdefault(key.name, key.name)
                    key = SeriesKey(name, tuple([pairs_setdefault(p, p) for p in key.labels]))
                    intern[key] = key
                else:
                    key = found
                (labelled if has_labels else plain)[series] = key
                misses += 1
                rest, exemplar = line[end:], None
                if " # " in rest and (om if om is not None else (om := _detect(text, lines))):
                    h = rest.find(" # ")
                    exemplar, rest = rest[h + 3 :], rest[:h]
            elif keep is not None:
                verdict = decided_get(key.name)
                if not (keep(key.name) if verdict is None else verdict):
                    skipped += 1
                    continue
            try:  # the usual value text (' 12.5'), else the reference routine
                value = float(rest)
                if rest[0] != " " or "_" in rest or not rest.isascii():
                    raise ValueError(rest)
            except ValueError:
                if om is None:
                    om = _detect(text, lines)
                if om and exemplar is None and (h := rest.find(" # ")) >= 0:
                    exemplar, rest = rest[h + 3 :], rest[:h]  # not cut while undecided
                value, ts = _value_ts(rest, om)
                if ts is not None:
                    ts_pos.append(len(values))
                    ts_val.append(ts)
            if exemplar is not None:
                _check_exemplar(exemplar)
            add_key(key)
            add_value(value)
            add_line(lineno)
    except _Bad as exc:
        raise ParseError(lineno, exc.args[0], lines[lineno - 1]) from None

    if eof_line:
        for j in range(eof_line, len(lines)):
            if lines[j].strip(" \t\r"):
                raise ParseError(j + 1, "content after # EOF", lines[j])
    elif openmetrics:
        last = max((i for i, ln in enumerate(lines) if ln.strip(" \t\r")), default=-1)
        raise ParseError(last + 2, "missing '# EOF' at end of OpenMetrics body", "")
    cache.hits += len(keys_seq) - misses
    cache.misses += misses
    default_type = "unknown" if om else "untyped"  # undecided still: no EOF/UNIT line, 0.0.4
    families = {n: FamilyMeta(n, types.get(n, default_type), helps.get(n, ""), units.get(n, ""))
                for n in dict.fromkeys([*types, *helps, *units])}
    result = ParseResult(_build_batch(keys_seq, values, ts_pos, ts_val, default_ts_ms), families,
                         skipped, misses, bool(om))
    misses_in_a_row = cache._layout_misses
    if cached and not ts_pos and not skipped and (misses_in_a_row <= 2 or misses_in_a_row % 16 == 0):
        # (a target whose body changes shape every time tries a new layout only now and then)
        cache._keep_layout(Layout.build(lines, sample_lines, result.batch, result.families, result.openmetrics,
                                        openmetrics))
    return result


def _build_batch(keys_seq: list[SeriesKey], values: list[float], ts_pos: list[int],
                 ts_val: list[int], default_ts_ms: int) -> SampleBatch:
    n = len(keys_seq)
    keys: list[SeriesKey] = keys_seq
    key_index = np.arange(n, dtype=np.int64)
    if len(set(map(id, keys_seq))) != n:  # a series repeats; keys are interned: identity is equality
        position: dict[int, int] = {}
        keys = []
        for i, key in enumerate(keys_seq):
            p = position.get(id(key))
            if p is None:
                p = position[id(key)] = len(keys)
                keys.append(key)
            key_index[i] = p
    ts = np.full(n, default_ts_ms, dtype=np.int64)
    if ts_pos:
        ts[np.array(ts_pos, dtype=np.int64)] = np.array(ts_val, dtype=np.int64)
    return SampleBatch(keys, key_index, ts, np.array(values, dtype=np.float64))
