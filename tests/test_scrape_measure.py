"""The scrape benchmark's readings of a /metrics page (benchmarks.scrape_measure)."""

from __future__ import annotations

import math

from benchmarks.scrape_measure import metric_by_label, page_value

PAGE = """# HELP infermeter_thread_cpu_seconds_total CPU by thread.
# TYPE infermeter_thread_cpu_seconds_total counter
infermeter_thread_cpu_seconds_total{thread="MainThread"} 12.5
infermeter_thread_cpu_seconds_total{thread="pool \\"a\\""} 1.0
infermeter_thread_cpu_seconds_total{thread="pool \\"a\\""} 2.0
infermeter_thread_cpu_seconds_total_extra{thread="x"} 99.0
infermeter_store_samples_appended_total 300.0
"""


def test_values_by_label_sum_equal_labels_and_keep_escapes() -> None:
    assert metric_by_label(PAGE, "infermeter_thread_cpu_seconds_total", "thread") == {
        "MainThread": 12.5,
        'pool \\"a\\"': 3.0,
    }
    assert metric_by_label(PAGE, "no_such_metric", "thread") == {}


def test_a_page_value_sums_label_sets_and_is_nan_when_absent() -> None:
    assert page_value(PAGE, "infermeter_store_samples_appended_total") == 300.0
    assert page_value(PAGE, "infermeter_thread_cpu_seconds_total") == 15.5
    assert math.isnan(page_value(PAGE, "no_such_metric"))
