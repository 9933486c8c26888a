"""The conformance corpus: PromQL expressions of the kinds Grafana dashboards, recording and
alerting rules use, modelled on the query templates of the Prometheus project's PromQL
compliance tester (selectors, range functions over several windows, aggregations with and
without grouping, binary operators with vector matching, functions, subqueries, modifiers),
plus the expressions of our default rules' shape. Each is run as an instant query at several
times and as range queries, on infermeter and on Prometheus 2.42, over the same samples."""

from __future__ import annotations

CPU = "demo_cpu_seconds_total"
MEM = "demo_memory_used_bytes"
TEMP = "demo_temperature_celsius"
HIST = "demo_request_duration_seconds"

SELECTORS = [
    CPU, f'{CPU}{{mode="user"}}', f'{CPU}{{mode!="idle"}}', f'{CPU}{{mode=~"us.*|sys.*"}}', f'{CPU}{{mode!~"id.*"}}',
    '{__name__=~"demo_memory_.*"}', MEM, f"{MEM} offset 5m", f"{MEM} offset 1m", f'{TEMP}{{zone="gpu"}}',
    "demo_up", "demo_batch_last_success_seconds", "demo_errors_total", "nonexistent_metric", f'{MEM}{{instance=""}}',
    f'{CPU}{{instance=~".*:9100", mode="system"}}',
]

RANGE_FUNCS = ["rate", "increase", "irate", "resets", "changes"]
GAUGE_FUNCS = ["delta", "deriv", "idelta_unused"]
OVER_TIME = ["avg", "min", "max", "sum", "count", "last", "stddev", "stdvar", "present"]
RANGES = ["1m", "5m", "15m"]

AGGREGATIONS = ["sum", "avg", "min", "max", "count", "stddev", "stdvar", "group"]
GROUPINGS = ["", " by (instance)", " by (mode)", " without (mode)", " by (job, mode)", " without (instance, mode)"]


def corpus() -> list[str]:
    out: list[str] = list(SELECTORS)
    for fn in RANGE_FUNCS:
        for r in RANGES:
            out.append(f"{fn}({CPU}[{r}])")
    out += [f'rate({CPU}{{mode="user"}}[5m] offset 10m)', "rate(demo_errors_total[15m])", "increase(demo_errors_total[30m])"]
    for fn in ("delta", "deriv"):
        for r in ("5m", "15m"):
            out.append(f"{fn}({MEM}[{r}])")
    out += [f"predict_linear({MEM}[15m], 3600)", f"predict_linear({TEMP}[10m], 600)", f"holt_winters({MEM}[10m], 0.5, 0.5)",
            f"holt_winters({TEMP}[5m], 0.1, 0.9)"]
    for fn in OVER_TIME:
        for r in ("1m", "10m"):
            out.append(f"{fn}_over_time({TEMP}[{r}])")
    out += [f"quantile_over_time(0.5, {TEMP}[10m])", f"quantile_over_time(0.9, {TEMP}[5m])",
            f"quantile_over_time(0, {TEMP}[5m])", "absent_over_time(nonexistent_metric[5m])",
            f"absent_over_time({MEM}[5m])", "last_over_time(demo_batch_last_success_seconds[10m])"]
    for agg in AGGREGATIONS:
        for grouping in GROUPINGS:
            out.append(f"{agg}{grouping} (rate({CPU}[5m]))")
    for k in (1, 2):
        out += [f"topk({k}, rate({CPU}[5m]))", f"bottomk({k}, {MEM})", f"topk by (instance) ({k}, rate({CPU}[5m]))"]
    out += [f"quantile(0.9, rate({CPU}[5m]))", f"quantile by (mode) (0.5, rate({CPU}[5m]))",
            'count_values("value", demo_up)', 'count_values by (job) ("state", demo_up)',
            f"sum(rate({CPU}[5m])) by (instance)", f"avg without (zone) ({TEMP})"]
    # binary operators
    out += [
        f"{MEM} / 1024 / 1024", f"{MEM} * 2 + 1", f"-{MEM}", f"{MEM} % 7", "2 ^ 3", f"{TEMP} ^ 2", "1 + 2 * 3",
        f"{MEM} / demo_memory_total_bytes", f"{MEM} / on(instance) demo_memory_total_bytes",
        f"{MEM} / ignoring(job) demo_memory_total_bytes",
        f"rate({CPU}[5m]) / on(instance) group_left {MEM}",
        f"rate({CPU}[5m]) * on(instance) group_left(job) (demo_up)",
        f"{MEM} > 4e9", f"{MEM} > bool 4e9", f"{TEMP} < 50", f"{TEMP} <= bool 50", f"{TEMP} != 50", "demo_up == 0",
        "demo_up == bool 1", "1 < bool 2", f"{MEM} > on(instance) demo_memory_total_bytes / 2",
        f"{CPU} and {CPU}{{mode=\"user\"}}", f"{CPU} or {MEM}", f"{CPU} unless {CPU}{{mode=\"idle\"}}",
        f"{MEM} and on(instance) (demo_up == 1)", f"{MEM} unless on(instance) (demo_up == 0)",
        f"sum by (instance) (rate({CPU}[5m])) / on(instance) group_left sum by (instance) ({MEM})",
        f"rate({CPU}[5m]) > 0.5", f"sum(rate({CPU}[5m])) > bool 3",
    ]
    # functions
    out += [
        f"abs(-{MEM})", f"ceil({TEMP})", f"floor({TEMP})", f"round({TEMP})", f"round({TEMP}, 0.5)", f"round({TEMP}, 5)",
        f"clamp({TEMP}, 45, 55)", f"clamp_min({TEMP}, 50)", f"clamp_max({TEMP}, 50)", f"clamp({TEMP}, 55, 45)",
        f"sqrt({MEM})", f"exp({TEMP} / 100)", f"ln({MEM})", f"log2({MEM})", f"log10({MEM})", f"sgn({TEMP} - 50)",
        f"timestamp({MEM})", "timestamp(demo_batch_last_success_seconds)", "time()", "vector(1)", "vector(time())",
        f"scalar(sum({MEM}))", f"scalar({MEM})", f"{MEM} * scalar(demo_up{{instance=\"10.0.0.1:9100\"}})",
        "absent(nonexistent_metric)", 'absent(nonexistent_metric{job="x", instance="y"})', f"absent({MEM})",
        f"sort({MEM})", f"sort_desc({MEM})", f"sort(rate({CPU}[5m]))", f"sort_desc(sum by (instance) (rate({CPU}[5m])))",
        f'label_replace({MEM}, "host", "$1", "instance", "(.*):.*")',
        f'label_replace({MEM}, "instance", "", "instance", ".*")',
        f'label_replace({MEM}, "port", "${{2}}", "instance", "(.*):(.*)")',
        f'label_replace({MEM}, "x", "$1", "nonexistent", "(.*)")',
        f'label_join({MEM}, "id", "-", "job", "instance")', f'label_join({TEMP}, "z", "", "zone")',
        "day_of_week()", "hour()", "minute(vector(1700000000))", "month()", "year()", "day_of_month()",
        "days_in_month()", "day_of_year()", f"hour(timestamp({MEM}))", "pi()", f"{TEMP} * pi()",
        f"histogram_quantile(0.9, rate({HIST}_bucket[5m]))",
        f"histogram_quantile(0.5, sum by (le) (rate({HIST}_bucket[5m])))",
        f"histogram_quantile(0.99, sum by (instance, le) (rate({HIST}_bucket[10m])))",
        f"histogram_quantile(1, sum by (le) (rate({HIST}_bucket[5m])))",
        f"rate({HIST}_sum[5m]) / rate({HIST}_count[5m])",
    ]
    # subqueries and modifiers
    out += [
        f"max_over_time(rate({CPU}[1m])[10m:1m])", f"avg_over_time({MEM}[10m:30s])", f"rate({CPU}[5m:1m])",
        f"min_over_time(sum(rate({CPU}[5m]))[15m:])", f"max_over_time(deriv({MEM}[5m])[10m:2m])",
        "sum_over_time(demo_up[10m:1m])", f"count_over_time({TEMP}[5m:15s] offset 5m)",
        f"{MEM} @ end()", f"{MEM} @ start()", f"rate({CPU}[5m] @ end())", f"sum({MEM} @ start())",
        f"{MEM} offset -1m",
    ]
    return [e for e in out if "idelta_unused" not in e]
