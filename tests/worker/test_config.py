"""The worker's config: seed 004's fields and defaults, the worker: section only, clear errors,
and no torch on import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from worker.config import WorkerConfig, WorkerConfigError, load_worker_config, parse_worker_config


def test_defaults_are_seed_004s() -> None:
    c = WorkerConfig()
    assert (c.model_path, c.tensor_parallel_size, c.max_context_length, c.max_batch_size) == ("ref-tiny", 1, 8192, 32)
    assert (c.timeout_ms, c.port, c.host, c.health_check_path) == (30000, 8080, "127.0.0.1", "/health")
    assert c.baseline.enabled and c.baseline.concurrency == 1
    assert c.tracing.exporter == "none"
    assert c.url() == "http://127.0.0.1:8080"


def test_reads_only_the_worker_section(tmp_path: Path) -> None:
    path = tmp_path / "infermeter.yaml"
    path.write_text(
        "store:\n  url: sqlite:///x.db\n  whatever_the_service_has: 1\n"
        "worker:\n  model_path: ref-small\n  max_batch_size: 8\n  baseline:\n    enabled: false\n"
    )
    c = load_worker_config(path)
    assert c.model_path == "ref-small" and c.max_batch_size == 8 and not c.baseline.enabled


def test_unknown_or_bad_fields_name_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("server:\n  port: 8000\nworker:\n  port: 8080\n  max_batch: 4\n  timeout_ms: -5\n")
    with pytest.raises(WorkerConfigError) as info:
        load_worker_config(path)
    problems = "\n".join(info.value.problems)
    assert f"{path}:5: worker.max_batch: Extra inputs are not permitted" in problems
    assert f"{path}:6: worker.timeout_ms" in problems


def test_missing_default_file_gives_defaults_but_a_named_one_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INFERMETER_CONFIG", raising=False)
    assert load_worker_config(None) == WorkerConfig()
    with pytest.raises(WorkerConfigError, match="no such config file"):
        load_worker_config(tmp_path / "nope.yaml")
    (tmp_path / "env.yaml").write_text("worker:\n  port: 9999\n")
    monkeypatch.setenv("INFERMETER_CONFIG", str(tmp_path / "env.yaml"))
    assert load_worker_config(None).port == 9999


def test_empty_and_invalid_yaml() -> None:
    assert parse_worker_config("") == WorkerConfig()
    assert parse_worker_config("worker:\n") == WorkerConfig()
    with pytest.raises(WorkerConfigError, match="not valid YAML"):
        parse_worker_config("worker: [\n")
    with pytest.raises(WorkerConfigError, match="tracing.endpoint"):
        parse_worker_config("worker:\n  tracing:\n    exporter: otlp\n")


def test_importing_the_config_cli_planner_and_child_does_not_import_torch() -> None:
    code = (
        "import sys, worker, worker.config, worker.cli, worker.planner, worker.child, worker.loadgen, worker.shapes; "
        "import argparse; p = argparse.ArgumentParser(); worker.cli.register(p.add_subparsers()); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"
