"""Writes the provisioned Grafana dashboards (deploy/grafana/dashboards/*.json) from the panel
lists below: ``python deploy/grafana/generate.py``. The JSON files are committed; a test checks
they match this script, that every query parses, and that every metric it names exists (our
canonical table, the cost and NCCL series we write, dcgm-exporter's names on /metrics).

Three dashboards, all on the datasource picked by ``$datasource`` (provisioned: uid
``prometheus``):
* infermeter / Cost   -- cost per 1M tokens vs budget, spend per hour, idle cost, period spend vs
                         budget, forecast crossing, the throughput behind the cost;
* infermeter / Fleet  -- tokens/s, P99 latencies, failure rate, queue, KV cache, per-GPU
                         utilization and tokens/s, NCCL, firing alerts (canonical names);
* infermeter / GPUs (DCGM) -- the dcgm-exporter names infermeter serves on /metrics, so the
                         same panels work against a real dcgm-exporter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
Json = dict[str, Any]

MODEL = '{model=~"$model"}'
RI = "[$__rate_interval]"


def q(expr: str, legend: str = "", instant: bool = False, ref: str = "A") -> Json:
    return {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend or "__auto",
            "range": not instant, "instant": instant}


def _thresholds(steps: list[tuple[float | None, str]]) -> Json:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]}


def panel(kind: str, title: str, targets: list[Json], unit: str = "short", w: int = 12, h: int = 8,
          description: str = "", thresholds: list[tuple[float | None, str]] | None = None,
          minimum: float | None = 0, maximum: float | None = None, show_thresholds: bool = False,
          **options: Any) -> Json:
    for i, t in enumerate(targets):
        t["refId"] = chr(ord("A") + i)
    defaults: Json = {"unit": unit, "thresholds": _thresholds(thresholds or [(None, "green")])}
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    if kind == "timeseries":
        defaults["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
                              "spanNulls": False,
                              "thresholdsStyle": {"mode": "dashed" if show_thresholds else "off"}}
        opts: Json = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                      "tooltip": {"mode": "multi", "sort": "desc"}}
    elif kind == "stat":
        opts = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "value", "graphMode": "area", "textMode": "auto", "justifyMode": "auto"}
    elif kind in ("gauge", "bargauge"):
        opts = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "showThresholdMarkers": True, "orientation": "horizontal"}
    else:  # table
        opts = {"showHeader": True}
    opts.update(options)
    return {"type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"w": w, "h": h}, "targets": targets,
            "fieldConfig": {"defaults": defaults, "overrides": []}, "options": opts}


def row(title: str) -> Json:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"w": 24, "h": 1}, "panels": []}


def var(name: str, query: str, label: str, multi: bool = True) -> Json:
    return {"name": name, "label": label, "type": "query", "datasource": DS, "definition": query,
            "query": {"query": query, "refId": f"{name}-values", "qryType": 1}, "refresh": 2, "sort": 1,
            "includeAll": multi, "multi": multi, "allValue": ".*" if multi else None,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]} if multi else {}, "hide": 0,
            "options": [], "regex": "", "skipUrlSync": False}


DATASOURCE_VAR = {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                  "current": {"selected": False, "text": "Prometheus", "value": "prometheus"}, "hide": 0,
                  "includeAll": False, "multi": False, "options": [], "refresh": 1, "regex": "", "skipUrlSync": False}


def layout(panels: list[Json]) -> list[Json]:
    """Ids and positions: panels flow left to right in rows of 24 columns."""
    x = y = row_h = 0
    for i, p in enumerate(panels, start=1):
        p["id"] = i
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if p["type"] == "row" or x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
        x += w
        row_h = max(row_h, h)
        if p["type"] == "row":
            x, y, row_h = 0, y + h, 0
    return panels


def dashboard(uid: str, title: str, description: str, panels: list[Json], variables: list[Json],
              time_from: str = "now-24h", refresh: str = "30s") -> Json:
    return {
        "uid": uid, "title": title, "description": description, "tags": ["infermeter"], "timezone": "utc",
        "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1, "refresh": refresh,
        "time": {"from": time_from, "to": "now"}, "timepicker": {}, "fiscalYearStartMonth": 0,
        "liveNow": False, "weekStart": "", "links": [],
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "templating": {"list": [DATASOURCE_VAR, *variables]},
        "panels": layout(panels),
    }


def cost() -> Json:
    fleet = '{scope="fleet"}'
    models = '{scope="model", model=~"$model"}'
    over = [(None, "green"), (1.0, "orange"), (1.15, "red")]
    panels = [
        row("Cost per 1M generated tokens"),
        panel("stat", "Cost per 1M tokens, fleet", [q(f"infermeter_cost_per_million_tokens_dollars{fleet}", "now")],
              "currencyUSD", w=6, h=5, description="All GPU, energy, idle and overhead cost of the trailing hour / "
              "tokens generated in it."),
        panel("stat", "Budget per 1M tokens", [q(f"infermeter_budget_cost_per_million_tokens_dollars{fleet}", "budget")],
              "currencyUSD", w=6, h=5, description="cost.budgets: cost_per_million_tokens of the fleet budget."),
        panel("stat", "Cost vs budget", [q(f"infermeter_cost_per_million_tokens_dollars{fleet} / "
                                           f"infermeter_budget_cost_per_million_tokens_dollars{fleet}", "ratio")],
              "percentunit", w=6, h=5, thresholds=over,
              description="TokenCostOverBudget warns 15 % above budget (alerts.thresholds.cost_over_budget_ratio)."),
        panel("stat", "Idle share of spend", [q(f"infermeter_idle_cost_dollars_per_hour{fleet} / "
                                                f"clamp_min(infermeter_cost_dollars_per_hour{fleet}, 1e-9)", "idle")],
              "percentunit", w=6, h=5, thresholds=[(None, "green"), (0.2, "orange"), (0.4, "red")],
              description="Cost of GPU-minutes below cost.idle_utilization, as a share of all cost, trailing hour."),
        panel("timeseries", "Cost per 1M tokens vs budget", [
            q(f"infermeter_cost_per_million_tokens_dollars{models}", "{{model}}"),
            q(f"infermeter_cost_per_million_tokens_dollars{fleet}", "fleet"),
            q("infermeter_budget_cost_per_million_tokens_dollars", "budget {{scope}} {{model}}"),
        ], "currencyUSD", w=24, h=9),
        row("Spend"),
        panel("timeseries", "Spend per hour", [
            q(f"infermeter_cost_dollars_per_hour{fleet}", "fleet"),
            q(f"infermeter_cost_dollars_per_hour{models}", "{{model}}"),
        ], "currencyUSD", description="Cost of the trailing hour ($/h), fleet and per model."),
        panel("timeseries", "Idle cost per hour", [
            q(f"infermeter_idle_cost_dollars_per_hour{fleet}", "fleet"),
            q(f"infermeter_idle_cost_dollars_per_hour{models}", "{{model}}"),
        ], "currencyUSD", description="Money spent on idle GPUs: release or consolidate (seed 004 §7)."),
        panel("bargauge", "Spend this period vs budget", [
            q("infermeter_spend_period_dollars / on(scope, model) infermeter_budget_spend_period_dollars",
              "{{scope}} {{model}}", instant=True)],
              "percentunit", w=8, thresholds=[(None, "green"), (0.8, "orange"), (1.0, "red")], displayMode="gradient",
              description="SpendBudgetWarning at 80 %, SpendBudgetExceeded at 100 %."),
        panel("timeseries", "Spend this period and budget", [
            q("infermeter_spend_period_dollars", "spent {{scope}} {{model}}"),
            q("infermeter_budget_spend_period_dollars", "budget {{scope}} {{model}}"),
        ], "currencyUSD", w=10),
        panel("stat", "Budget crossing ahead (forecast)", [
            q("infermeter_forecast_budget_crossing_hours", "{{kind}} {{bound}} {{scope}} {{model}}")],
              "h", w=6, thresholds=[(None, "red"), (24, "orange"), (72, "green")],
              description="Hours until the forecast crosses the budget (upper 80 % bound warns, mean is critical)."),
        row("What the cost buys"),
        panel("timeseries", "Generated tokens/s by model",
              [q(f"sum by (model) (rate(inference_generation_tokens_total{MODEL}{RI}))", "{{model}}")], "short"),
        panel("timeseries", "Fleet GPU utilization", [q("avg(gpu_utilization_ratio)", "fleet mean")], "percentunit",
              thresholds=[(None, "red"), (0.7, "green")], show_thresholds=True,
              description="Below 70 % money is idle (seed 000 §3.3)."),
    ]
    return dashboard("infermeter-cost", "infermeter / Cost",
                     "Cost per 1M tokens, spend and budgets from infermeter's cost ledger (federated series).",
                     panels, [var("model", 'label_values(infermeter_cost_dollars_per_hour{scope="model"}, model)', "Model")])


def fleet() -> Json:

    def p99(name: str) -> str:
        return f"histogram_quantile(0.99, sum by (le, model) (rate({name}_bucket{MODEL}{RI})))"

    fail = (f'sum by (model) (rate(inference_requests_total{{outcome="failure", model=~"$model"}}{RI})) / '
            f"sum by (model) (rate(inference_requests_total{MODEL}{RI}))")
    panels = [
        row("Serving"),
        panel("stat", "Tokens/s, fleet", [q(f"sum(rate(inference_generation_tokens_total{MODEL}{RI}))", "generated")],
              "short", w=5, h=5),
        panel("stat", "P99 inter-token latency", [q(
            f"histogram_quantile(0.99, sum by (le) (rate(inference_inter_token_latency_seconds_bucket{MODEL}{RI})))", "p99")],
              "s", w=5, h=5, thresholds=[(None, "green"), (0.05, "red")], description="SLA 50 ms (seed 000 §3.3)."),
        panel("stat", "Failure rate", [q(f'sum(rate(inference_requests_total{{outcome="failure", model=~"$model"}}{RI})) / '
                                         f"sum(rate(inference_requests_total{MODEL}{RI}))", "failures")],
              "percentunit", w=5, h=5, thresholds=[(None, "green"), (0.005, "red")], description="Alert above 0.5 %."),
        panel("stat", "GPU utilization", [q("avg(gpu_utilization_ratio)", "mean")], "percentunit", w=5, h=5,
              thresholds=[(None, "red"), (0.7, "green")], description="Target above 70 %."),
        panel("stat", "Targets down", [q("count(up == 0) or vector(0)", "down")], "short", w=4, h=5,
              thresholds=[(None, "green"), (1, "red")]),
        panel("timeseries", "Tokens/s by model", [
            q(f"sum by (model) (rate(inference_generation_tokens_total{MODEL}{RI}))", "{{model}} generated"),
            q(f"sum by (model) (rate(inference_prompt_tokens_total{MODEL}{RI}))", "{{model}} prompt"),
        ], "short"),
        panel("timeseries", "P99 latencies", [
            q(p99("inference_time_to_first_token_seconds"), "{{model}} TTFT"),
            q(p99("inference_inter_token_latency_seconds"), "{{model}} inter-token"),
            q(p99("inference_e2e_request_latency_seconds"), "{{model}} end-to-end"),
        ], "s", thresholds=[(None, "green"), (0.05, "red")]),
        panel("timeseries", "Failure rate by model", [q(fail, "{{model}}")], "percentunit",
              thresholds=[(None, "green"), (0.005, "red")], show_thresholds=True),
        panel("timeseries", "Requests/s by outcome",
              [q(f"sum by (outcome) (rate(inference_requests_total{MODEL}{RI}))", "{{outcome}}")], "reqps"),
        panel("timeseries", "Queue", [
            q(f"sum by (model) (inference_requests_waiting{MODEL})", "{{model}} waiting"),
            q(f"sum by (model) (inference_requests_running{MODEL})", "{{model}} running"),
        ], "short", thresholds=[(None, "green"), (1000, "red")], description="Above 1000 queued: add an instance."),
        panel("timeseries", "KV-cache usage", [q(f"inference_kv_cache_usage_ratio{MODEL}", "{{model}} {{instance}}")],
              "percentunit"),
        row("GPUs"),
        panel("timeseries", "GPU utilization", [q("gpu_utilization_ratio", "{{host}} GPU {{gpu}}")], "percentunit"),
        panel("timeseries", "Tokens/s per GPU vs its model's mean", [
            q(f"gpu_generation_tokens_per_second{MODEL}", "{{host}} GPU {{gpu}}"),
            q(f"avg by (model) (gpu_generation_tokens_per_second{MODEL})", "{{model}} mean"),
        ], "short", description="GpuThroughputLow fires more than 30 % below the mean."),
        panel("timeseries", "GPU memory used", [
            q("gpu_memory_used_bytes / (gpu_memory_used_bytes + gpu_memory_free_bytes)", "{{host}} GPU {{gpu}}")],
              "percentunit", thresholds=[(None, "green"), (0.9, "red")], show_thresholds=True),
        panel("timeseries", "GPU power", [q("gpu_power_watts", "{{host}} GPU {{gpu}}")], "watt"),
        row("NCCL and alerts"),
        panel("timeseries", "NCCL bus bandwidth", [
            q("nccl_collective_bus_bandwidth_bytes_per_second", "{{op}} {{rank}}")], "Bps"),
        panel("timeseries", "NCCL timeouts and warnings (15 min)", [
            q("sum by (job, instance) (increase(nccl_timeouts_total[15m]))", "timeouts {{instance}}"),
            q("sum by (job, instance) (increase(nccl_warnings_total[15m]))", "warnings {{instance}}"),
        ], "short"),
        panel("table", "Firing alerts", [q('ALERTS{alertstate="firing"}', "", instant=True)], "short", w=24,
              description="Alerts Prometheus evaluates from deploy/prometheus/infermeter-rules.yml."),
    ]
    return dashboard("infermeter-fleet", "infermeter / Fleet",
                     "Throughput, latency, failures, queues and GPUs on infermeter's canonical metrics.",
                     panels, [var("model", "label_values(inference_requests_total, model)", "Model")], time_from="now-6h")


def gpus() -> Json:
    sel = '{instance=~"$instance", gpu=~"$gpu"}'
    legend = "{{Hostname}} GPU {{gpu}}"
    panels = [
        row("Utilization"),
        panel("timeseries", "GPU utilization", [q(f"DCGM_FI_DEV_GPU_UTIL{sel}", legend)], "percent", w=18),
        panel("gauge", "Mean utilization", [q(f"avg(DCGM_FI_DEV_GPU_UTIL{sel})", "mean")], "percent", w=6,
              thresholds=[(None, "red"), (70, "green")], maximum=100),
        panel("timeseries", "Framebuffer used", [q(f"DCGM_FI_DEV_FB_USED{sel}", legend)], "decmbytes"),
        panel("timeseries", "Framebuffer used share",
              [q(f"DCGM_FI_DEV_FB_USED{sel} / (DCGM_FI_DEV_FB_USED{sel} + DCGM_FI_DEV_FB_FREE{sel})", legend)],
              "percentunit", thresholds=[(None, "green"), (0.9, "red")], show_thresholds=True),
        panel("timeseries", "Memory copy utilization", [q(f"DCGM_FI_DEV_MEM_COPY_UTIL{sel}", legend)], "percent"),
        panel("timeseries", "SM clock", [q(f"DCGM_FI_DEV_SM_CLOCK{sel} * 1000000", legend)], "hertz"),
        row("Power and temperature"),
        panel("timeseries", "Power draw", [q(f"DCGM_FI_DEV_POWER_USAGE{sel}", legend)], "watt", w=18),
        panel("stat", "Total power", [q(f"sum(DCGM_FI_DEV_POWER_USAGE{sel})", "total")], "watt", w=6),
        panel("timeseries", "Energy rate (from the energy counter)",
              [q(f"rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{sel}{RI}) / 1000", legend)], "watt"),
        panel("timeseries", "GPU temperature", [q(f"DCGM_FI_DEV_GPU_TEMP{sel}", legend)], "celsius",
              thresholds=[(None, "green"), (85, "red")], show_thresholds=True),
        row("Errors and PCIe"),
        panel("stat", "Last XID error", [q(f"DCGM_FI_DEV_XID_ERRORS{sel}", legend)], "none", w=8,
              thresholds=[(None, "green"), (1, "red")], description="Code of the last XID seen (0 = none)."),
        panel("stat", "Uncorrectable ECC errors (volatile)", [q(f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{sel}", legend)],
              "none", w=8, thresholds=[(None, "green"), (1, "red")]),
        panel("stat", "Correctable ECC errors (volatile)", [q(f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{sel}", legend)],
              "none", w=8, thresholds=[(None, "green"), (1, "orange")]),
        panel("timeseries", "PCIe traffic", [
            q(f"DCGM_FI_PROF_PCIE_TX_BYTES{sel}", "{{Hostname}} GPU {{gpu}} tx"),
            q(f"DCGM_FI_PROF_PCIE_RX_BYTES{sel}", "{{Hostname}} GPU {{gpu}} rx"),
        ], "Bps", w=24),
    ]
    variables = [var("instance", "label_values(DCGM_FI_DEV_GPU_TEMP, instance)", "Instance"),
                 var("gpu", "label_values(DCGM_FI_DEV_GPU_TEMP, gpu)", "GPU")]
    return dashboard("infermeter-gpus-dcgm", "infermeter / GPUs (DCGM)",
                     "GPU panels on dcgm-exporter's names: infermeter serves them on /metrics for its local GPUs, "
                     "and the same panels work against dcgm-exporter.", panels, variables, time_from="now-3h")


DASHBOARDS = {"infermeter-cost.json": cost, "infermeter-fleet.json": fleet, "infermeter-gpus-dcgm.json": gpus}


def render_all() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n" for name, build in DASHBOARDS.items()}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote {OUT / name}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
