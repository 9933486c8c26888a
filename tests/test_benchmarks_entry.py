"""The benchmarks run one way, ``python -m benchmarks.<name>`` from the repository root: every
module imports, every entry point answers ``--help`` (without running anything), a direct
``python benchmarks/<name>.py`` says which command to use, and every target line comes from the
shared formatter in ``benchmarks._common``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._common import TARGET_LINE, Target, fmt_figure, skipped
from benchmarks.run_all import BENCHMARKS, Outcome

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO / "benchmarks"
MODULES = sorted(p.stem for p in BENCH_DIR.glob("*.py") if p.stem != "__init__")
ENTRY_POINTS = sorted(m for m in MODULES if 'if __name__ == "__main__":' in (BENCH_DIR / f"{m}.py").read_text())
BENCHES = sorted(m for m in MODULES if m.endswith("_bench"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_runner_knows_every_benchmark() -> None:
    assert BENCHES and sorted(BENCHMARKS) == BENCHES
    assert set(BENCHES) | {"run_all", "scrape_targets"} <= set(ENTRY_POINTS)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports(name: str) -> None:
    saved = dict(os.environ)  # forecast_bench pins BLAS threads for its own process
    try:
        if name == "locustfile" and importlib.util.find_spec("locust") is None:
            with pytest.raises(SystemExit, match="pip install locust"):
                importlib.import_module(f"benchmarks.{name}")
            return
        module = importlib.import_module(f"benchmarks.{name}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if name in ENTRY_POINTS:
        assert callable(getattr(module, "main", None))


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_help_in_the_module_form(name: str) -> None:
    done = run("-m", f"benchmarks.{name}", "--help")
    assert done.returncode == 0, done.stderr
    assert f"usage: python -m benchmarks.{name}" in done.stdout
    if name in BENCHES or name == "run_all":
        assert "--quick" in done.stdout
    if name in BENCHES:
        assert "--repeats" in done.stdout


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_a_direct_run_names_the_module_form(name: str) -> None:
    done = run(str(BENCH_DIR / f"{name}.py"), "--help")
    assert done.returncode != 0
    assert f".venv/bin/python -m benchmarks.{name}" in done.stderr


@pytest.mark.parametrize("name", [m for m in MODULES if m != "_common"])
def test_target_lines_come_from_the_shared_formatter(name: str) -> None:
    """No module writes a ``target ...`` line by hand (string or f-string)."""
    tree = ast.parse((BENCH_DIR / f"{name}.py").read_text())
    for node in ast.walk(tree):
        first = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else node
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            assert not first.value.startswith("target "), f"{name}.py:{first.lineno} formats a target line itself"
    if name in BENCHES:  # the bench, or a section module of its own, reports through the formatter
        sections = [
            node.module.split(".")[1]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchmarks.")
        ]
        trees = [tree] + [ast.parse((BENCH_DIR / f"{m}.py").read_text()) for m in sections if m != "_common"]
        used = {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)}
        assert "Target" in used or "skipped" in used


def test_target_line_median_and_range() -> None:
    line = Target.median_of("ingest_sqlite_vs_raw", [0.75, 0.69, 0.72], 0.7, True).line()
    assert line == "target ingest_sqlite_vs_raw: 0.72 [0.69..0.75, median of 3] (goal >= 0.7) PASS"
    match = TARGET_LINE.match(line)
    assert match and match["name"] == "ingest_sqlite_vs_raw" and match["verdict"] == "PASS"


def test_the_median_decides_not_the_best_run() -> None:
    assert Target.median_of("up", [0.5, 0.8, 0.6], 0.7, True).line().endswith(" SHORT")
    assert Target.median_of("down", [50.0, 70.0, 65.0], 60.0, False).line() == (
        "target down: 65.0 [50.0..70.0, median of 3] (goal <= 60) SHORT"
    )
    assert Target.median_of("down", [50.0, 70.0, 55.0], 60.0, False).met


def test_one_run_and_skipped_lines() -> None:
    assert Target("bytes_per_sample_sqlite", 2.537, 4.0, False).line() == (
        "target bytes_per_sample_sqlite: 2.54 (goal <= 4) PASS"
    )
    line = skipped("scrape_cpu_vs_prometheus", 1.5, False, "Prometheus not installed")
    assert line == "target scrape_cpu_vs_prometheus: n/a (goal <= 1.5) SKIP (Prometheus not installed)"
    match = TARGET_LINE.match(line)
    assert match and match["verdict"] == "SKIP" and match["why"] == "Prometheus not installed"
    spaced = Target("callback server time p95, worst of 38 callbacks (ms)", 89.6, 200.0, False).line()
    assert TARGET_LINE.match(spaced)


def test_bad_names_and_no_runs_are_refused() -> None:
    with pytest.raises(ValueError):
        Target("a: b", 1.0, 1.0, True).line()
    with pytest.raises(ValueError):
        Target.median_of("empty", [], 1.0, True)


def test_figures_keep_sensible_digits() -> None:
    assert [fmt_figure(v) for v in (779.4, 11.04, 0.719, 0.019, 0.0, float("inf"))] == [
        "779", "11.0", "0.72", "0.019", "0.00", "inf",
    ]  # fmt: skip


def test_a_short_target_is_not_a_crash() -> None:
    short = "target x: 0.5 (goal >= 1) SHORT"
    assert not Outcome("a", 0, 1.0, [short]).crashed
    assert Outcome("a", 1, 1.0, [short]).crashed
    assert Outcome("a", 0, 1.0, []).crashed
    assert Outcome("a", 0, 1.0, [short, "target y: n/a (goal <= 1) SKIP (why)"]).status() == "ok (1 SHORT, 1 SKIP)"
