"""Config files: every problem as file:line: field: message; env overrides; the shipped sample."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from infermeter.cli import main
from infermeter.config_file import ConfigError, load_settings, parse_config_text

ROOT = Path(__file__).resolve().parent.parent


def test_sample_config_is_valid_and_matches_defaults() -> None:
    settings, source = load_settings(str(ROOT / "infermeter.example.yaml"), environ={})
    assert source.endswith("infermeter.example.yaml")
    assert settings.store.url == "sqlite:///./data/infermeter.db"
    assert settings.server.port == 8000
    assert settings.store.retention.raw == 7 * 86_400_000
    assert settings.store.retention.rollup_1m == 35 * 86_400_000


def test_every_problem_is_reported_with_its_line() -> None:
    text = (
        "server:\n"
        "  port: 99999\n"          # line 2
        "  host: 127.0.0.1\n"
        "store:\n"
        "  out_of_order_window: soon\n"  # line 5
        "  retention:\n"
        "    raw: 7d\n"
        "    5m: 1d\n"             # line 8: unknown key
        "unknown_section: 1\n"     # line 9
    )
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, "conf.yaml", environ={})
    lines = sorted(str(p) for p in caught.value.problems)
    assert lines == sorted(
        [
            "conf.yaml:2: server.port: Input should be less than or equal to 65535",
            "conf.yaml:5: store.out_of_order_window: expected a duration like 15s, 5m, 2h or 7d, got 'soon'",
            "conf.yaml:8: store.retention.5m: Extra inputs are not permitted",
            "conf.yaml:9: unknown_section: Extra inputs are not permitted",
        ]
    )


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text("server:\n  port: 8000\n  host: [unclosed\n", "c.yaml", environ={})
    (problem,) = caught.value.problems
    assert problem.file == "c.yaml" and problem.line >= 3 and problem.field == "(yaml)"


def test_environment_overrides_and_blames_the_variable() -> None:
    settings = parse_config_text("store:\n  url: sqlite:///x.db\n", "c.yaml", environ={"INFERMETER_STORE_URL": "postgresql+psycopg://u@h/db", "INFERMETER_API_TOKEN": "t"})
    assert settings.store.url == "postgresql+psycopg://u@h/db"
    assert settings.server.api_token == "t"
    with pytest.raises(ConfigError) as caught:
        parse_config_text("", "c.yaml", environ={"INFERMETER_PORT": "eighty"})
    assert str(caught.value.problems[0]).startswith("$INFERMETER_PORT:0: server.port:")


def test_check_config_cli(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("server:\n  port: 8001\n")
    out, err = StringIO(), StringIO()
    assert main(["check-config", str(good)], out, err) == 0
    assert out.getvalue().strip() == f"{good}: OK"
    bad = tmp_path / "bad.yaml"
    bad.write_text("store:\n  chunk_range: 90m\n")
    out, err = StringIO(), StringIO()
    assert main(["check-config", str(bad)], out, err) == 1
    assert f"{bad}:2: store: chunk_range must be a whole number of hours" in err.getvalue() or (
        f"{bad}:1: store: chunk_range must be a whole number of hours" in err.getvalue()
    )
    assert main(["check-config", str(tmp_path / "missing.yaml")], out, err) == 1
    assert "no such config file" in err.getvalue()


def test_up_refuses_an_invalid_config(tmp_path: Path) -> None:
    bad = tmp_path / "infermeter.yaml"
    bad.write_text("server:\n  port: -1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERMETER_")}
    proc = subprocess.run(
        [sys.executable, "-m", "infermeter", "up"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert "infermeter.yaml:2: server.port: Input should be greater than or equal to 1" in proc.stderr
    assert "refusing to start" in proc.stderr
    assert not (tmp_path / "data").exists()
