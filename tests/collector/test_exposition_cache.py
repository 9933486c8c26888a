"""collector.exposition.parser with a SeriesCache and keep_family: a warm parse or a family filter
changes nothing but what it should (including property tests on mutated bodies)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.exposition import ParseError, SeriesCache
from store.types import SeriesKey
from tests.collector.fixtures import DCGM, OPENMETRICS, TGI, TRITON, VLLM, parse, triples

# --- the series cache -----------------------------------------------------------------------

def test_warm_cache_gives_same_result_as_cold() -> None:
    for body in (VLLM, DCGM, TGI, TRITON, OPENMETRICS):
        cache = SeriesCache()
        cold = parse(body, cache=cache)
        assert cache.misses == len(cold.batch) and cold.new_series == len(cold.batch)
        warm = parse(body, cache=cache)
        assert warm.new_series == 0 and cache.hits == len(warm.batch)
        assert triples(warm) == triples(cold)
        assert warm.batch.ts_ms.tolist() == cold.batch.ts_ms.tolist()
        assert warm.families == cold.families
        assert all(a is b for a, b in zip(warm.batch.keys, cold.batch.keys))  # interned


def test_a_changed_body_after_the_layout_parses_only_its_new_series() -> None:
    """With a layout kept the series maps are dropped; a body that no longer fits rebuilds them
    from the layout, so only its new series are parsed in full, its other keys are the same
    objects as before, and equal keys met again are still interned."""
    for body in (VLLM, DCGM, TGI, TRITON):
        cache = SeriesCache()
        first = parse(body, cache=cache)
        parse(body, cache=cache)  # through the layout
        added = 'brand_new_series{model_name="m",tp_rank="3"} 7\nbare_new_series 8\nm2{b="2",a="1"} 9\n'
        changed = parse(body + added + 'm2{a="1",b="2"} 10\n', cache=cache)
        assert changed.new_series == 4, body[:40]  # the three lines added and m2's other label order
        assert len(changed.batch.keys) == len(first.batch.keys) + 3
        assert all(a is b for a, b in zip(changed.batch.keys, first.batch.keys))
        assert changed.batch.key_index.tolist()[-2:] == [len(first.batch.keys) + 2] * 2
        assert len({k.name for k in changed.batch.keys if k.name.startswith("brand_new")}) == 1
        again = parse(body + added, cache=cache)  # the first layout's shape is gone: a full parse
        assert again.new_series == 0 and triples(again) == triples(changed)[:-1]


def test_cache_hit_still_validates_value_part() -> None:
    cache = SeriesCache()
    parse('m{a="b"} 1\nn 1\n', cache=cache)
    assert cache.get('m{a="b"}') == SeriesKey.of("m", a="b") and cache.get("n") == SeriesKey("n")
    for bad, reason in [('m{a="b"} x', "invalid value"), ('m{a="b"}1', "expected blank"),
                        ('m{a="b"} 1 2 3', "unexpected text"), ("n 1_0", "invalid value"),
                        ("n} 1", "invalid metric name"), ('m{a="b" 1', "expected ','"),
                        ('m{a="b"', "unterminated label set")]:
        with pytest.raises(ParseError) as info:
            parse(f"n 2\n{bad}\n", cache=cache)
        assert info.value.line == 2 and reason in info.value.reason, bad
    assert parse('m{a="b"} 5 1234\n', cache=cache).batch.ts_ms.tolist() == [1234]


def test_cached_series_with_stray_hash_in_openmetrics_matches_cold() -> None:
    body = 'm{a="b"} # 5.5\n# EOF\n'  # ' # ' outside a label set starts an exemplar in OM
    with pytest.raises(ParseError) as cold:
        parse(body)
    cache = SeriesCache()
    parse('m{a="b"} 1\n', cache=cache)
    with pytest.raises(ParseError) as warm:
        parse(body, cache=cache)
    assert cold.value.reason == warm.value.reason == "missing value"


def test_cache_interns_equal_keys_and_is_bounded() -> None:
    cache = SeriesCache(max_entries=3)
    res = parse('m{a="1",b="2"} 1\nm{b="2",a="1"} 2\n', cache=cache)
    assert len(res.batch.keys) == 1 and res.batch.key_index.tolist() == [0, 0]
    parse("x 1\ny 1\nz 1\n", cache=cache)
    assert len(cache) >= 3
    parse("x 1\n", cache=cache)  # full at the start of this parse: cleared, then refilled
    assert len(cache) == 1
    parse("# a\n# b\n# c\nx 1\n", cache=cache)
    parse("# d\nx 1\n", cache=cache)
    assert len(cache._comments) == 1  # remembered comment lines are bounded the same way
    with pytest.raises(ValueError):
        SeriesCache(max_entries=0)


# --- keep_family ------------------------------------------------------------------------------

def test_keep_family_skips_families() -> None:
    asked: list[str] = []

    def keep(family: str) -> bool:
        asked.append(family)
        return family.startswith("vllm:time_to_first_token") or family == "vllm:prompt_tokens_total"

    for cache in (None, SeriesCache()):
        res = parse(VLLM, keep_family=keep, cache=cache)
        res = parse(VLLM, keep_family=keep, cache=cache) if cache else res  # warm path too
        names = {n for n, _, _ in triples(res)}
        assert names == {"vllm:prompt_tokens_total", "vllm:time_to_first_token_seconds_bucket",
                         "vllm:time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_sum"}
        assert res.skipped_samples == 7
    assert "vllm:time_to_first_token_seconds" in asked  # _bucket/_sum/_count stripped (TYPE'd)
    assert "vllm:time_to_first_token_seconds_bucket" not in asked
    assert len(asked) == len(set(asked)) * 3  # once per family per parse (three parses)


def test_keep_family_suffix_rules_and_unparsed_labels() -> None:
    body = ("# TYPE c counter\nc_total 1\nc_created 2\n# TYPE g gauge\ng_total 3\n"
            "untyped_bucket 4\n# TYPE i info\ni_info{v=\"1\"} 1\n")
    seen: list[str] = []

    def keep_all(family: str) -> bool:
        seen.append(family)
        return True

    parse(body, keep_family=keep_all)
    assert seen == ["c", "g_total", "untyped_bucket", "i"]
    # a dropped family's labels are not parsed, so their defects go unnoticed
    res = parse('drop{bad label} 1\nkeep 2\n', keep_family=lambda f: f == "keep")
    assert triples(res) == [("keep", (), "2.0")] and res.skipped_samples == 1
    with pytest.raises(ParseError):
        parse('keep{bad label} 1\n', keep_family=lambda f: f == "keep")


def test_keep_family_with_warm_cache_and_changing_verdicts() -> None:
    cache = SeriesCache()
    drop_ttft = lambda f: f != "vllm:time_to_first_token_seconds"  # noqa: E731
    cold = parse(VLLM, keep_family=drop_ttft)
    parse(VLLM, keep_family=drop_ttft, cache=cache)
    warm = parse(VLLM, keep_family=drop_ttft, cache=cache)
    assert triples(warm) == triples(cold) and warm.skipped_samples == cold.skipped_samples == 7
    everything = parse(VLLM, keep_family=lambda f: True, cache=cache)  # dropped before, kept now
    assert triples(everything) == triples(parse(VLLM)) and everything.skipped_samples == 0
    # a remembered dropped text never excuses a different, malformed line
    om_cache = SeriesCache()
    drop = parse("foo # x\n# EOF\n", keep_family=lambda f: False, cache=om_cache, openmetrics=True)
    assert drop.skipped_samples == 1
    with pytest.raises(ParseError, match="missing value"):
        parse("foo\n# EOF\n", keep_family=lambda f: False, cache=om_cache, openmetrics=True)


# --- property: cold and warm parses agree; keep_family keeps exactly the chosen samples -------

VALID = VLLM + DCGM + TGI + TRITON


def _odd(family: str) -> bool:
    return len(family) % 2 == 1


def _outcome(body: str, cache: SeriesCache | None, keep: Callable[[str], bool] | None = None) -> object:
    try:
        res = parse(body, cache=cache, keep_family=keep)
    except ParseError as err:
        return ("error", err.line, err.reason)
    return (triples(res), res.batch.ts_ms.tolist(), res.batch.key_index.tolist(), res.skipped_samples)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    lines = (VALID if draw(st.booleans()) else OPENMETRICS).split("\n")
    start = draw(st.integers(0, len(lines) - 3))
    body = "\n".join(lines[start : start + draw(st.integers(1, 12))])
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(body)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = draw(st.text(alphabet=st.sampled_from(list('{}",=\\ #\t\r\nabc_:.0159+-eEInfNa\u00e9\x00')),
                             min_size=1, max_size=4))
        if action == "insert":
            body = body[:pos] + chunk + body[pos:]
        elif action == "delete":
            body = body[:pos] + body[pos + len(chunk):]
        else:
            body = body[:pos] + chunk + body[pos + len(chunk):]
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_bodies_parse_or_raise_and_warm_equals_cold(body: str) -> None:
    for keep in (None, _odd):
        cold = _outcome(body, None, keep)
        cache = SeriesCache()
        _outcome(VALID, cache, keep)
        _outcome(OPENMETRICS, cache, keep)
        assert _outcome(body, cache, keep) == cold  # a primed cache changes nothing


def _even_initial(family: str) -> bool:
    return ord(family[0]) % 2 == 0  # a family and its samples' names share the first character


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_keep_family_keeps_exactly_the_chosen_samples(body: str) -> None:
    try:
        full = parse(body)
    except ParseError:
        return  # dropped lines are not validated, so only accepted bodies have an oracle
    for cache in (None, SeriesCache()):
        for _ in range(2):
            kept = parse(body, keep_family=_even_initial, cache=cache)
            assert triples(kept) == [t for t in triples(full) if _even_initial(t[0])]
            assert kept.skipped_samples == len(full.batch) - len(kept.batch)


# --- the layout fast path: a body of the same shape as the last one -----------------------------

_VALUE_TEXTS = ["0", "1", "-2.5e3", "12.75", "NaN", "+Inf", "-Inf", "nan", "1e400", "0x10", "1_0", "\u0663",
                "x", "", " 7", "7 ", "7\r", "\t7", "7 1234", "7 1.5", '7 # {a="b"} 1', "7  8", "+1", ".5"]


@st.composite
def same_shape(draw: st.DrawFn) -> tuple[str, str, bool | None]:
    """A valid body, and the same body with some values (or, now and then, anything) changed."""
    base = draw(st.sampled_from([VALID, OPENMETRICS, DCGM, VLLM]))
    lines = base.split("\n")
    out = []
    for line in lines:
        cut = line.rfind(" ")
        if line and not line.startswith("#") and cut > 0 and draw(st.integers(0, 3)) == 0:
            line = line[: cut + 1] + draw(st.sampled_from(_VALUE_TEXTS))
        out.append(line)
    body = "\n".join(out)
    if draw(st.integers(0, 4)) == 0:
        pos = draw(st.integers(0, len(body)))
        body = body[:pos] + draw(st.sampled_from(["\n", " ", "#", "x", "{", '"', "\r\n"])) + body[pos:]
    openmetrics = draw(st.sampled_from([None, True])) if base is OPENMETRICS else None
    return base, body, openmetrics


def _full_outcome(body: str, cache: SeriesCache | None, openmetrics: bool | None) -> tuple[object, ...]:
    try:
        res = parse(body, cache=cache, openmetrics=openmetrics)
    except ParseError as err:
        return ("error", err.line, err.reason)
    return (triples(res), res.batch.ts_ms.tolist(), res.batch.key_index.tolist(), res.skipped_samples,
            res.families, res.openmetrics)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(same_shape())
def test_layout_fast_path_equals_a_cold_parse(case: tuple[str, str, bool | None]) -> None:
    base, body, openmetrics = case
    cold = _full_outcome(body, None, openmetrics)
    cache = SeriesCache()
    for _ in range(2):  # the second parse of the base body already goes through its layout
        assert _full_outcome(base, cache, openmetrics) == _full_outcome(base, None, openmetrics)
    assert _full_outcome(body, cache, openmetrics) == cold
    assert _full_outcome(base, cache, openmetrics) == _full_outcome(base, None, openmetrics)


def test_layout_reuses_the_keys_and_only_parses_values() -> None:
    cache = SeriesCache()
    first = parse(DCGM, cache=cache)
    second = parse(DCGM.replace(" 1", " 2"), cache=cache)  # values only
    assert second.batch.keys is first.batch.keys and second.new_series == 0
    assert cache.hits == len(second.batch)
    changed = parse(DCGM + 'DCGM_FI_DEV_GPU_TEMP{gpu="9"} 40\n', cache=cache)  # a new series
    assert changed.new_series == 1 and changed.batch.keys is not first.batch.keys
    parse(DCGM, cache=cache)
    with pytest.raises(ParseError, match="line 3: invalid value"):
        parse(DCGM.replace(" 1980", " two"), cache=cache)  # same shape, a bad value: the full parse says why
