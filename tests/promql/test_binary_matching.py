"""Vector matching's row-by-row path (both sides list the same label sets in the same order, the
usual shape of ``used / (used + free)``) answers exactly what the signature dictionary answers,
and hands every other shape to it: another order, a missing row, duplicates."""

from __future__ import annotations

import pytest

from promql.evaluate import EvalContext
from promql.lexer import ExprError
from promql.parser import parse
from promql.sources import MemorySource
from promql.vector import Vector
from store.types import SeriesKey

T0 = 1_700_000_000_000


def _source(order_b: list[int], gpus: int = 4, extra_c: bool = False) -> MemorySource:
    source = MemorySource()
    for g in range(gpus):
        source.add(SeriesKey.of("mem_used", gpu=str(g), host="n1"), [(T0, float(g + 1))])
    for g in order_b:
        source.add(SeriesKey.of("mem_free", gpu=str(g), host="n1"), [(T0, float(10 - g))])
    if extra_c:  # the same labels as mem_used under another name
        for g in range(gpus):
            source.add(SeriesKey.of("mem_cached", gpu=str(g), host="n1"), [(T0, 0.5)])
    return source


def _eval(source: MemorySource, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
    value = EvalContext(source, T0).evaluate(parse(expr))
    assert isinstance(value, Vector)
    return {lab: float(v) for lab, v in zip(value.labels, value.values)}


def _gpu(g: int, name: str | None = None) -> tuple[tuple[str, str], ...]:
    head = (("__name__", name),) if name else ()
    return (*head, ("gpu", str(g)), ("host", "n1"))


@pytest.mark.parametrize("order_b", [[0, 1, 2, 3], [3, 1, 0, 2]], ids=["aligned", "shuffled"])
def test_arithmetic_and_comparisons_answer_the_same_in_any_order(order_b: list[int]) -> None:
    source = _source(order_b)
    ratio = _eval(source, "mem_used / (mem_used + mem_free)")
    assert ratio == {_gpu(g): (g + 1) / (g + 1 + 10 - g) for g in range(4)}
    # on() over every label is the dictionary path's answer for the same pairs
    assert ratio == _eval(source, "mem_used / on(gpu, host) (mem_used + on(gpu, host) mem_free)")
    # a filter keeps the left side's samples, name included; bool drops the name
    assert _eval(source, "mem_free > mem_used") == {_gpu(g, "mem_free"): 10.0 - g for g in range(4) if 10 - g > g + 1}
    assert _eval(source, "mem_free > bool mem_used") == {_gpu(g): float(10 - g > g + 1) for g in range(4)}


def test_a_missing_row_matches_what_is_there() -> None:
    source = _source([0, 1, 3])  # GPU 2 reports no free memory
    assert _eval(source, "mem_used + mem_free") == {_gpu(g): 11.0 for g in (0, 1, 3)}


def test_duplicate_label_sets_are_still_refused() -> None:
    source = _source([0, 1, 2, 3], extra_c=True)
    with pytest.raises(ExprError, match="match one on the right|many-to-many"):
        _eval(source, '{__name__=~"mem_used|mem_cached"} / mem_free')
    with pytest.raises(ExprError, match="many-to-many"):
        _eval(source, 'mem_free / {__name__=~"mem_used|mem_cached"}')
    # both sides the same list, duplicates included: row by row would pair them, matching refuses
    with pytest.raises(ExprError, match="many-to-many"):
        _eval(source, '{__name__=~"mem_used|mem_cached"} / {__name__=~"mem_used|mem_cached"}')
