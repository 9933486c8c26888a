"""Every CLI command and subcommand, run once as its own process (``python -m infermeter``)
against a small real store, so a command that cannot even start (an import that only exists
for the type checker, a missing dependency) fails here.

The matrix is checked against the parser itself: a command added to the CLI without a row
here fails :func:`test_matrix_covers_every_command`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from infermeter import db
from infermeter.cli import build_parser
from store import SampleBatch, SeriesKey, StoreOptions, TimeSeriesStore, create_store_engine
from store.clock import SystemClock
from tests.service import free_port, wait_http

HOUR = 3_600_000
MINUTE = 60_000
HISTORY_H = 60


@dataclass(frozen=True)
class SmallStore:
    root: Path
    config: Path
    url: str


def _write_history(url: str, now_ms: int) -> None:
    """60 h of one node with two GPUs serving one model: a daily cycle in utilization and
    tokens, counters that first appear at a non-zero value, and a restart in the middle."""
    engine = create_store_engine(url)
    db.upgrade(engine)
    store = TimeSeriesStore(engine, SystemClock(), StoreOptions(out_of_order_window_ms=(HISTORY_H + 1) * HOUR))
    store.open()
    start = (now_ms - HISTORY_H * HOUR) // MINUTE * MINUTE
    stamps = np.arange(start, now_ms // MINUTE * MINUTE, 5 * MINUTE, dtype=np.int64)
    hours = (stamps - start) / HOUR
    daily = 0.55 + 0.35 * np.sin(2 * np.pi * hours / 24)
    gpu_keys = [
        SeriesKey.of("gpu_utilization_ratio", host="node-a", gpu=str(i), gpu_model="NVIDIA H100 80GB HBM3")
        for i in range(2)
    ]
    power_keys = [SeriesKey.of("gpu_power_watts", host="node-a", gpu=str(i)) for i in range(2)]
    tokens = SeriesKey.of("inference_generation_tokens_total", model="llama-8b", instance="node-a:8000", job="vllm")
    prompt = SeriesKey.of("inference_prompt_tokens_total", model="llama-8b", instance="node-a:8000", job="vllm")
    temp = SeriesKey.of("gpu_temperature_celsius", host="node-a", gpu="0", gpu_model="NVIDIA H100 80GB HBM3")
    generated = 125_000 + np.cumsum(daily * 300 * 400)  # first seen mid-life, not at zero
    generated[len(generated) // 2 :] -= generated[len(generated) // 2 - 1]  # the engine restarted
    for i, ts in enumerate(stamps.tolist()):
        keys = [*gpu_keys, *power_keys, tokens, prompt, temp]
        values = [daily[i], daily[i] * 0.6, 300 + 300 * daily[i], 280 + 300 * daily[i], generated[i], generated[i] * 3, 60.0]
        store.append(SampleBatch.one_per_key(keys, ts, np.asarray(values, float)))
    store.close(flush=True)
    engine.dispose()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> SmallStore:
    root = tmp_path_factory.mktemp("cli-smoke")
    url = f"sqlite:///{root / 'smoke.db'}"
    _write_history(url, SystemClock().now_ms())
    config = root / "infermeter.yaml"
    config.write_text(
        f"store:\n  url: {url}\n"
        "cost:\n  gpu_prices:\n    - gpu_model: H100\n      dollars_per_gpu_hour: 2.5\n"
        "  budgets:\n    - scope: fleet\n      spend_per_period: 500\n      period: month\n"
        f"worker:\n  embedded: false\n  model_dir: {root / 'models'}\n  port: {free_port()}\n"
    )
    assert _cli(config, "cost", "recompute", "--since", f"now-{HISTORY_H}h").returncode == 0
    return SmallStore(root, config, url)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERMETER_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _cli(config: Path, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infermeter", "--config", str(config), *argv],
        capture_output=True, text=True, timeout=timeout, env=_env(), cwd=config.parent,
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"did not stop on SIGTERM within 60 s:\n{out[-3000:]}") from None
    assert "Traceback" not in out, out[-3000:]
    return out


def smoke_up(s: SmallStore) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", "--config", str(s.config), "up", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=s.root,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/ready", 90, proc)
        body = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": "gpu_utilization_ratio"}).json()
        assert body["status"] == "success"
        maps = Path(f"/proc/{proc.pid}/maps")
        if maps.exists():  # Linux: the libraries a store without a cold tier, before any forecast, needs not load
            loaded = maps.read_text()
            assert "/pyarrow/" not in loaded and "/scipy/" not in loaded
    finally:
        out = _stop(proc)
    assert f"listening on http://127.0.0.1:{port}" in out


def smoke_agent(s: SmallStore) -> None:
    """The agent scrapes itself and queues for a receiver that is not there (durably)."""
    port = free_port()
    config = s.root / "agent.yaml"
    config.write_text(
        f"scrape:\n  targets:\n    - job: self\n      urls: [http://127.0.0.1:{port}/metrics]\n      interval: 1s\n"
        f"      timeout: 900ms\ngpu:\n  nvml: 'off'\nworker:\n  embedded: false\n"
        f"agent:\n  remote_write:\n    - url: http://127.0.0.1:{free_port()}/api/v1/write\n  queue_dir: {s.root / 'queue'}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", "--config", str(config), "agent", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=s.root,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 60, proc)
        deadline = time.monotonic() + 30
        queued = 0.0
        while time.monotonic() < deadline and queued == 0:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            queued = sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("infermeter_agent_queue_samples{"))
            time.sleep(0.3)
        assert queued > 0
    finally:
        out = _stop(proc)
    assert "infermeter agent on" in out
    # no receiver, or a receiver that is not a URL: refused at start, saying what to set
    nowhere = s.root / "agent-nowhere.yaml"
    nowhere.write_text("gpu:\n  nvml: 'off'\nworker:\n  embedded: false\n")
    refused = _cli(nowhere, "agent", "--port", str(free_port()))
    assert refused.returncode == 1 and "agent.remote_write: at least one receiver is needed" in refused.stderr
    bad = s.root / "agent-bad.yaml"
    bad.write_text("agent:\n  remote_write:\n    - url: vm:8428/api/v1/write\n")
    refused = _cli(bad, "agent")
    assert refused.returncode == 1 and f"{bad}:3: agent.remote_write.0.url" in refused.stderr


def smoke_check_config(s: SmallStore) -> None:
    assert f"{s.config}: OK" in _ok(_cli(s.config, "check-config", str(s.config)))
    bad = s.root / "bad.yaml"
    bad.write_text("server:\n  port: 99999\n")
    proc = _cli(s.config, "check-config", str(bad))
    assert proc.returncode == 1 and f"{bad}:2: server.port" in proc.stderr


def smoke_db_upgrade(s: SmallStore) -> None:
    assert "database at revision" in _ok(_cli(s.config, "db", "upgrade"))


def smoke_query(s: SmallStore) -> None:
    out = _ok(_cli(s.config, "query", "gpu_utilization_ratio", "--since", "2h", "--step", "30m", "--fn", "max"))
    assert out.splitlines()[0] == "# max per 30m, last 2h, 2 series"


def smoke_rules_check(s: SmallStore) -> None:
    rules = s.root / "rules.yml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - alert: Hot\n        expr: gpu_temperature_celsius > 50\n")
    assert "SUCCESS: 1 rules found" in _ok(_cli(s.config, "rules", "check", str(rules)))


def smoke_rules_test(s: SmallStore) -> None:
    (s.root / "t-rules.yml").write_text(
        "groups:\n  - name: g\n    rules:\n      - alert: Down\n        expr: up == 0\n        for: 1m\n"
    )
    test = s.root / "t.yml"
    test.write_text(
        "rule_files: [t-rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n"
        "      - series: 'up{instance=\"a\"}'\n        values: '0 0 0'\n    alert_rule_test:\n"
        "      - eval_time: 2m\n        alertname: Down\n        exp_alerts:\n          - exp_labels: {instance: a}\n"
    )
    _ok(_cli(s.config, "rules", "test", str(test)))


def smoke_rules_backtest(s: SmallStore) -> None:
    rules = s.root / "hot.yml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - alert: Hot\n        expr: gpu_temperature_celsius > 50\n")
    out = _ok(_cli(s.config, "rules", "backtest", "--since", "3h", "--step", "5m", "--rules", str(rules)))
    assert "firing" in out and "Hot" in out


def smoke_rules_export_prometheus(s: SmallStore) -> None:
    out = _ok(_cli(s.config, "rules", "export-prometheus"))
    assert "alert: GpuMemoryHigh" in out


def smoke_cost_recompute(s: SmallStore) -> None:
    out = _ok(_cli(s.config, "cost", "recompute", "--since", "now-6h"))
    assert out.startswith("re-priced ") and float(out.split(": ")[1].split()[0]) > 0


def smoke_forecast(s: SmallStore) -> None:
    out = _ok(_cli(s.config, "forecast", "--series", "spend:fleet", "--horizon", "24h", "--refresh", "--every", "6"))
    assert out.startswith("# spend:fleet") and len([ln for ln in out.splitlines() if ln[:2] == "20"]) == 4


def smoke_report(s: SmallStore) -> None:
    out = _ok(_cli(s.config, "report", "--format", "csv", "--out", "-"))
    assert "llama-8b" in out


def smoke_plan(s: SmallStore) -> None:
    out = _ok(_cli(s.config, "plan", "--model", "ref-7b", "--gpu", "H100 80GB", "--peak-qps", "5"))
    assert "fits" in out.lower()


def smoke_worker_and_load(s: SmallStore) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", "--config", str(s.config), "worker", "--port", str(port),
         "--device", "cpu", "--max-batch-size", "4", "--max-context-length", "256"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=s.root,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 180, proc)
        out = _ok(_cli(s.config, "load", "--url", f"http://127.0.0.1:{port}", "--concurrency", "2", "--requests", "6",
                       "--prompt-tokens", "8", "--output-tokens", "4", "--no-progress"))
        assert "6" in out and "P99" in out.upper()
        url = f"http://127.0.0.1:{port}"
        evaluated = _ok(_cli(s.config, "evaluate", "--endpoint", f"name=a,url={url},gpu=H100,gpus=1",
                             "--endpoint", f"name=b,url={url},gpu=H100,gpus=2,class=on_demand", "--requests", "4",
                             "--concurrency", "2", "--prompt-tokens", "8", "--output-tokens", "4", "--warmup", "1",
                             "--format", "markdown"))
        assert "| a | H100 | 1 | on_demand | 2.50 |" in evaluated and "| b | H100 | 2 | on_demand | 5.00 |" in evaluated
        assert "cheapest meeting the SLA: " in evaluated  # the ranking itself: tests/worker/test_evaluate.py
        assert "stored as evaluation 1" in evaluated
        assert ",evaluations," in _ok(_cli(s.config, "report", "--format", "csv"))  # the report of the period lists it
        assert _cli(s.config, "evaluate", "--endpoint", "url=x").returncode == 2  # gpu= is required
        validated = _ok(_cli(s.config, "validate", "--url", url, "--model", "ref-tiny", "--requests", "20",
                             "--load-requests", "6", "--load-concurrency", "2", "--ttft-p99", "60s", "--itl-p99", "10s"))
        assert "# Acceptance check: PASS" in validated and "stored as validation 1" in validated
        assert "| fleet: GPU utilization under load | not measurable |" in validated  # no GPU series for this host
        missing = _cli(s.config, "validate", "--url", url, "--trace", str(s.root / "no-such-trace.csv"))
        assert missing.returncode == 2 and "no-such-trace.csv" in missing.stderr
    finally:
        _stop(proc)


def smoke_tokens_and_audit(s: SmallStore) -> None:
    secret = _ok(_cli(s.config, "tokens", "create", "--name", "ci-bot", "--role", "operator")).strip()
    assert secret.startswith("imt_") and len(secret) > 40
    listed = _ok(_cli(s.config, "tokens", "list"))
    row = next(line for line in listed.splitlines() if "ci-bot" in line)
    token_id = row.split()[0]
    assert "operator" in row and secret not in listed
    rotated = _ok(_cli(s.config, "tokens", "rotate", token_id, "--grace", "1h")).strip()
    assert rotated.startswith("imt_") and rotated != secret
    assert _ok(_cli(s.config, "tokens", "revoke", token_id)).strip() == f"token {token_id} revoked"
    proc = subprocess.run([sys.executable, "-m", "infermeter", "tokens", "hash", "-"], input="abc\n",
                          capture_output=True, text=True, env=_env(), timeout=60)
    assert proc.stdout.strip() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    audit = _ok(_cli(s.config, "audit", "--action", "token.create"))
    assert "token.create" in audit and "cli:" in audit
    assert "token.rotate" in _ok(_cli(s.config, "audit"))
    assert _cli(s.config, "tokens", "revoke", "99999").returncode == 2


def smoke_mark_and_compare(s: SmallStore) -> None:
    made = _ok(_cli(s.config, "mark", "deploy", "--model", "llama-8b", "--version", "v2", "--at", "now-3h",
                    "--message", "new weights"))
    marker_id = made.split()[0]
    assert "deploy llama-8b v2: new weights" in made
    assert "config all models" in _ok(_cli(s.config, "mark", "config", "--message", "batch 64", "--at", "now-2h"))
    assert "other" in _ok(_cli(s.config, "mark", "other", "--node", "node-a"))
    listed = _ok(_cli(s.config, "mark", "list", "--model", "llama-8b"))
    assert "deploy llama-8b v2" in listed and "config all models" in listed and "other all models on node-a" in listed
    assert "llama-8b" not in _ok(_cli(s.config, "mark", "list", "--model", "qwen"))  # fleet-wide ones only
    compared = _ok(_cli(s.config, "compare", "--marker", marker_id, "--window", "30m"))
    assert "cost per 1M tokens" in compared and "GPU utilization" in compared and "verdict" in compared
    assert _ok(_cli(s.config, "compare", "--at", "now-90m", "--json")).startswith('{"after"')
    assert _cli(s.config, "mark", "deploy", "--model", "x").returncode == 2  # argparse: --version required
    assert _cli(s.config, "compare", "--at", "now-10m").returncode == 1  # the after window is not over yet
    assert _ok(_cli(s.config, "mark", "delete", marker_id)).strip() == f"marker {marker_id} deleted"
    assert _cli(s.config, "mark", "delete", marker_id).returncode == 1
    bad = s.root / "bad.yaml"
    bad.write_text("store:\n  url: 42\nserver:\n  port: 70000\n")
    for argv in (("mark", "list"), ("compare", "--at", "now-2h"), ("evaluate", "--endpoint", "url=x,gpu=H100"),
                 ("validate", "--url", "http://127.0.0.1:9")):
        refused = _cli(bad, *argv)
        assert refused.returncode == 1 and "server.port" in refused.stderr, argv  # the config's problem, named


SMOKE: dict[str, Callable[[SmallStore], None]] = {
    "up": smoke_up,
    "agent": smoke_agent,
    "check-config": smoke_check_config,
    "db upgrade": smoke_db_upgrade,
    "query": smoke_query,
    "rules check": smoke_rules_check,
    "rules test": smoke_rules_test,
    "rules backtest": smoke_rules_backtest,
    "rules export-prometheus": smoke_rules_export_prometheus,
    "cost recompute": smoke_cost_recompute,
    "forecast": smoke_forecast,
    "report": smoke_report,
    "plan": smoke_plan,
    "worker": smoke_worker_and_load,
    "load": smoke_worker_and_load,
    "evaluate": smoke_worker_and_load,
    "validate": smoke_worker_and_load,
    "tokens create": smoke_tokens_and_audit,
    "tokens list": smoke_tokens_and_audit,
    "tokens rotate": smoke_tokens_and_audit,
    "tokens revoke": smoke_tokens_and_audit,
    "tokens hash": smoke_tokens_and_audit,
    "audit": smoke_tokens_and_audit,
    "mark deploy": smoke_mark_and_compare,
    "mark config": smoke_mark_and_compare,
    "mark other": smoke_mark_and_compare,
    "mark list": smoke_mark_and_compare,
    "mark delete": smoke_mark_and_compare,
    "compare": smoke_mark_and_compare,
}


def _leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [prefix.strip()]
    return [leaf for name, child in subs[0].choices.items() for leaf in _leaf_commands(child, f"{prefix} {name}")]


def test_matrix_covers_every_command() -> None:
    assert sorted(_leaf_commands(build_parser())) == sorted(SMOKE)


@pytest.mark.parametrize("command", sorted(set(SMOKE.values()), key=lambda f: f.__name__), ids=lambda f: f.__name__)
def test_command_runs(command: Callable[[SmallStore], None], small_store: SmallStore) -> None:
    command(small_store)
