"""`infermeter rules ...` and `cost recompute` end to end; promtool checks the exported rules."""

from __future__ import annotations

import shutil
import subprocess
from io import StringIO
from pathlib import Path

import pytest

from infermeter import db
from infermeter.cli import main
from promql import parse
from promql.promql import to_promql
from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine
from store.clock import SystemClock
from store.types import Sample, SampleBatch, SeriesKey

REPO = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_check_reports_file_line_column(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n")
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: sum(rate(x[5m])\n")
    code, out, _ = _run("rules", "check", str(good))
    assert code == 0 and "SUCCESS: 1 rules found" in out
    code, _, err = _run("rules", "check", str(good), str(bad))
    assert code == 1 and f"{bad}:5:30: expr: expected ')'" in err


def test_unit_tests_pass_and_fail(tmp_path: Path) -> None:
    (tmp_path / "r.yml").write_text(
        "groups:\n  - name: g\n    rules:\n      - alert: Down\n        expr: up == 0\n        for: 2m\n"
        "        labels: {severity: page}\n        annotations: {summary: '{{ $labels.instance }} down'}\n"
    )
    test = """rule_files: [r.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'up{job="a", instance="h:1"}'
        values: '1 1 0 0 0 0 0'
    alert_rule_test:
      - eval_time: 3m
        alertname: Down
        exp_alerts: []
      - eval_time: 4m
        alertname: Down
        exp_alerts:
          - exp_labels: {severity: page, job: a, instance: "h:1"}
            exp_annotations: {summary: "h:1 down"}
    promql_expr_test:
      - expr: sum(up)
        eval_time: 1m
        exp_samples:
          - labels: '{}'
            value: 1
"""
    (tmp_path / "ok.test.yml").write_text(test)
    code, out, err = _run("rules", "test", str(tmp_path / "ok.test.yml"))
    assert code == 0, err
    (tmp_path / "bad.test.yml").write_text(test.replace("eval_time: 4m", "eval_time: 3m30s"))
    code, _, err = _run("rules", "test", str(tmp_path / "bad.test.yml"))
    assert code == 1 and "alert Down at 3m30s" in err
    if shutil.which("promtool"):  # the same file means the same to Prometheus
        done = subprocess.run(["promtool", "test", "rules", "ok.test.yml"], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_export_passes_promtool_and_both_engines_agree(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is installed by the test setup"
    (tmp_path / "empty.yaml").write_text("")
    code, out, err = _run("--config", str(tmp_path / "empty.yaml"), "rules", "export-prometheus", "--out", str(tmp_path))
    assert code == 0, err
    check = subprocess.run([promtool, "check", "rules", "infermeter-rules.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "36 rules found" in check.stdout
    unit = subprocess.run([promtool, "test", "rules", "infermeter-rules.test.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    code, _, err = _run("rules", "test", str(tmp_path / "infermeter-rules.test.yml"))
    assert code == 0, err
    # the shipped copy is the current export
    for name in ("infermeter-rules.yml", "infermeter-rules.test.yml"):
        assert (REPO / "deploy" / "prometheus" / name).read_text() == (tmp_path / name).read_text(), f"regenerate {name}"
    config = subprocess.run([promtool, "check", "config", str(REPO / "deploy" / "prometheus.yml")], capture_output=True, text=True)
    assert config.returncode == 0, config.stdout + config.stderr


def test_exported_nccl_rule_counts_a_first_timeout_in_prometheus(tmp_path: Path) -> None:
    """Prometheus (promtool's engine) sees a federated NCCL counter born at 1: the exported rule
    still fires on the first timeout, through the timeout's event series."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is installed by the test setup"
    shutil.copy(REPO / "deploy" / "prometheus" / "infermeter-rules.yml", tmp_path / "rules.yml")
    (tmp_path / "t.yml").write_text(
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n"
        "      - series: 'nccl_timeouts_total{job=\"nccl\",instance=\"n1\",op=\"ALLREDUCE\",rank=\"3\"}'\n"
        "        values: '_ _ 1 1 1 1'\n"
        "      - series: 'nccl_timeout_event_timestamp_seconds{job=\"nccl\",instance=\"n1\",op=\"ALLREDUCE\",rank=\"3\",seq=\"9\"}'\n"
        "        values: '_ _ 120 120 120 120'\n"
        "    alert_rule_test:\n"
        "      - eval_time: 1m\n        alertname: NcclTimeouts\n        exp_alerts: []\n"
        "      - eval_time: 3m\n        alertname: NcclTimeouts\n        exp_alerts:\n"
        "          - exp_labels: {severity: critical, job: nccl, instance: n1}\n"
        "            exp_annotations:\n"
        "              summary: '1 NCCL timeouts in 15 min on n1'\n"
        "              runbook: '" + "{runbook}" + "'\n"
    )
    from alerts.runbooks import RUNBOOKS

    text = (tmp_path / "t.yml").read_text().replace("{runbook}", RUNBOOKS["NcclTimeouts"].replace("'", "''"))
    (tmp_path / "t.yml").write_text(text)
    unit = subprocess.run([promtool, "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    code, _, err = _run("rules", "test", str(tmp_path / "t.yml"))
    assert code == 0, err


@pytest.mark.parametrize(
    "expr",
    [
        'sum by (a) (rate(x{b="c", d=~"e.*"}[5m])) / ignoring(z) group_left(k) y > bool 0.5',
        "-x + 2 ^ 3 ^ y unless on(a) z",
        "histogram_quantile(0.9, sum without (i) (increase(h_bucket[1h] offset 1d)))",
        'topk(3, clamp_min(abs(x), 0)) or absent(nothing{job="j"})',
    ],
)
def test_promql_rendering_round_trips(expr: str) -> None:
    once = to_promql(parse(expr))
    assert to_promql(parse(once)) == once
    assert parse(once) == parse(expr) or to_promql(parse(expr)) == once


def test_backtest_and_cost_recompute(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    engine = create_store_engine(url)
    db.upgrade(engine)
    now = SystemClock().now_ms()
    start = now - 3 * 3_600_000
    store = TimeSeriesStore(engine, ManualClock(start), StoreOptions())
    store.open()
    key = SeriesKey.of("gpu_temperature_celsius", host="n1", gpu="0", gpu_model="H100")
    util = SeriesKey.of("gpu_utilization_ratio", host="n1", gpu="0", gpu_model="H100")
    for t in range(start, now, 60_000):
        hot = 95.0 if start + 3_600_000 <= t < start + 2 * 3_600_000 else 60.0
        store.clock.set(t)  # type: ignore[attr-defined]
        store.append(SampleBatch.from_samples([Sample(key, t, hot), Sample(util, t, 0.5)]))
    store.close(flush=True)
    engine.dispose()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"store:\n  url: {url}\ncost:\n  gpu_prices:\n    - gpu_model: H100\n      dollars_per_gpu_hour: 2.0\n")
    code, out, err = _run("--config", str(cfg), "rules", "backtest", "--since", "3h", "--step", "1m")
    assert code == 0, err
    fired = [line for line in out.splitlines() if "GpuTemperatureHigh" in line]
    assert [line.split()[2] for line in fired] == ["firing", "resolved"]
    code, out, err = _run("--config", str(cfg), "cost", "recompute", "--since", "now-3h")
    assert code == 0, err
    assert "re-priced 4 hour(s)" in out or "re-priced 3 hour(s)" in out
    total = float(out.split(": ")[1].split()[0])
    assert total == pytest.approx(2.0 * 3, rel=0.05)  # one H100 at $2/h for ~3 h (+ default energy at 0 W)
