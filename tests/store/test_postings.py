"""Selection through the postings returns exactly what testing every series returns, whatever
mix of matchers (equality, negation, regexes that do or do not match the empty value, on the
name too) and in whatever order the series ids were loaded."""

from __future__ import annotations

import json
import random

import pytest

from store.series_index import Matcher, Selector, SeriesIndex
from store.types import SeriesKey

HOSTS = [f"gpu-node-{i:03d}" for i in range(30)]


def _index(shuffled: bool) -> tuple[SeriesIndex, dict[int, SeriesKey]]:
    rng = random.Random(3)
    rows = []
    sid = 0
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "vllm:num_requests_running"):
        for host in HOSTS:
            for gpu in range(4):
                sid += 1
                labels = {"Hostname": host, "gpu": str(gpu), "UUID": f"GPU-{sid:08x}"}
                if gpu == 3:
                    labels["modelName"] = "NVIDIA H100 80GB HBM3"
                if sid % 7 == 0:
                    del labels["Hostname"]  # an exporter that forgot the label
                rows.append((sid, SeriesKey.of(name, labels)))
    if shuffled:
        rng.shuffle(rows)
    index = SeriesIndex()
    index.load((sid, key.name, json.dumps(dict(key.labels))) for sid, key in rows)
    return index, dict(rows)


SELECTORS = [
    Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher("Hostname", "=", "gpu-node-001"),)),
    Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher("Hostname", "=~", "gpu-node-00.*"), Matcher("gpu", "!=", "0"))),
    Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher("Hostname", "=", ""),)),  # series without the label
    Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher("Hostname", "=~", "gpu-node-01.*|"),)),  # regex matching ""
    Selector("DCGM_FI_DEV_POWER_USAGE", (Matcher("modelName", "!~", ".*H100.*"),)),
    Selector("DCGM_FI_DEV_POWER_USAGE", (Matcher("modelName", "=~", ".*H100.*"), Matcher("Hostname", "=", "gpu-node-029"))),
    Selector(None, (Matcher("__name__", "=~", "DCGM_.*"), Matcher("gpu", "=", "2"))),
    Selector(None, (Matcher("__name__", "=", "vllm:num_requests_running"), Matcher("Hostname", "!=", "gpu-node-003"))),
    Selector(None, (Matcher("gpu", "=", "1"),)),
    Selector(None, (Matcher("__name__", "!~", "DCGM.*"),)),
    Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher("Hostname", "=", "no-such-host"),)),
    Selector("no_such_metric", ()),
    Selector("DCGM_FI_DEV_GPU_UTIL", ()),
]


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("selector", SELECTORS, ids=[str(i) for i in range(len(SELECTORS))])
def test_postings_select_what_a_scan_selects(selector: Selector, shuffled: bool) -> None:
    index, keys = _index(shuffled)
    expected = sorted((sid, key) for sid, key in keys.items() if selector.matches(key))
    assert index.select(selector) == expected


def test_a_series_added_later_is_found() -> None:
    index, _ = _index(False)
    late = SeriesKey.of("DCGM_FI_DEV_GPU_UTIL", {"Hostname": "gpu-node-001", "gpu": "9"})
    index._add(10_000, late)
    found = index.select(Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher("Hostname", "=", "gpu-node-001"), Matcher("gpu", "=", "9"))))
    assert found == [(10_000, late)]
