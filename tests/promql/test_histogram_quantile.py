"""histogram_quantile over many series at once: the same answer as interpolating each series
alone, whatever the mix of bucket layouts, missing ``le`` labels, gaps and shuffling."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from promql.evaluate import histogram_quantile
from promql.vector import Labels, Vector, drop_name
from store.quantile import bucket_quantile, parse_le

LAYOUTS = [
    ("0.005", "0.01", "0.025", "0.05", "0.1", "+Inf"),  # vLLM's time-to-first-token style
    ("1", "2.5", "5", "10", "+Inf"),
    ("-1", "0", "1", "+Inf"),  # a first bound that is not positive
    ("0.5", "1"),  # no +Inf bucket: no answer
]


def one_by_one(q: float, vec: Vector) -> dict[Labels, float]:
    """Each series (labels without ``le``) interpolated alone."""
    series: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in zip(vec.labels, vec.values.tolist()):
        le = dict(labels).get("le")
        if le is None:
            continue
        key = tuple(p for p in drop_name(labels) if p[0] != "le")
        series.setdefault(key, []).append((parse_le(le), value))
    out = {}
    for key, pairs in series.items():
        bounds = np.asarray([b for b, _ in pairs])
        counts = np.asarray([c for _, c in pairs]).reshape(-1, 1)
        value = float(bucket_quantile(q, bounds, counts)[0])
        if not np.isnan(value):
            out[key] = value
    return out


@st.composite
def bucket_vectors(draw: st.DrawFn) -> Vector:
    labels: list[Labels] = []
    values: list[float] = []
    for s in range(draw(st.integers(0, 12))):
        layout = LAYOUTS[draw(st.integers(0, len(LAYOUTS) - 1))]
        total = 0.0
        for le in layout:
            if draw(st.integers(0, 9)) == 0:
                continue  # a bucket missing from this scrape
            total += draw(st.sampled_from([0.0, 1.0, 3.0, 10.0, float("nan")]))
            labels.append(tuple(sorted((("__name__", "ttft_bucket"), ("pod", f"p{s}"), ("le", le)))))
            values.append(total)
    for _ in range(draw(st.integers(0, 2))):  # series without le: left out
        labels.append((("__name__", "ttft_count"), ("pod", f"x{len(labels)}")))
        values.append(5.0)
    order = draw(st.permutations(range(len(labels))))
    return Vector([labels[i] for i in order], np.asarray([values[i] for i in order], np.float64))


@settings(max_examples=300, deadline=None)
@given(bucket_vectors(), st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0, -0.1, 1.5]))
def test_many_series_answer_as_each_alone(vec: Vector, q: float) -> None:
    got = histogram_quantile(q, vec)
    assert len(set(got.labels)) == len(got.labels)
    assert dict(zip(got.labels, got.values.tolist())) == one_by_one(q, vec)


def test_a_fleet_of_histograms_in_one_call() -> None:
    pods = 2000
    layout = LAYOUTS[0]
    labels: list[Labels] = [(("__name__", "ttft_bucket"), ("le", le), ("pod", f"p{p}")) for p in range(pods) for le in layout]
    counts = np.tile(np.asarray([0.0, 10.0, 50.0, 90.0, 100.0, 100.0]), pods) * np.repeat(np.arange(1, pods + 1), 6)
    got = histogram_quantile(0.5, Vector(labels, counts))
    assert len(got) == pods
    # rank 50 of 100 (scaled): in the (0.01, 0.025] bucket, counts 10 -> 50: its upper bound
    assert np.allclose(got.values, 0.025)
    assert got.labels[0] == (("pod", "p0"),)
