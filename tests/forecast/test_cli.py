"""``infermeter forecast`` as registered into an argparse parser with a test service factory."""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from forecast.cli import register
from forecast.ids import HOUR_MS, SeriesId
from forecast.service import ForecastService, ServiceConfig
from store.clock import ManualClock
from tests.forecast.synthetic import SyntheticHistory

T0 = 1_800_000_000_000


def run(sqlite_url: str, *argv: str) -> tuple[int, str, str]:
    def factory(args: argparse.Namespace) -> ForecastService:
        history = SyntheticHistory(T0 - 20 * 24 * HOUR_MS)
        return ForecastService(
            history,
            create_engine(sqlite_url),
            ManualClock(T0),
            [SeriesId.parse("spend:fleet")],
            ServiceConfig(history_h=240),
        )

    parser = argparse.ArgumentParser(prog="infermeter")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub, factory)
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out, err)
    return code, out.getvalue(), err.getvalue()


def test_table(sqlite_url: str) -> None:
    code, out, err = run(
        sqlite_url, "forecast", "--series", "tokens:fleet,cost_per_mtok:fleet", "--horizon", "6h"
    )
    assert code == 0, err
    assert "# tokens:fleet (tokens/h)  model " in out and "# cost_per_mtok:fleet ($ per 1M tokens)" in out
    assert "backtest WAPE" in out
    assert re.search(r"80 % band held \d+%  95 % band held \d+%", out), out  # the coverage they achieved
    rows = [line for line in out.splitlines() if line.startswith("2027-01-15")]
    assert len(rows) == 12 and rows[0].startswith("2027-01-15 08:00")
    assert len(rows[0].split()) == 7  # date, time, mean, lo80, hi80, lo95, hi95


def test_default_series_every_and_html_plot(sqlite_url: str, tmp_path: Path) -> None:
    chart = tmp_path / "f.html"
    code, out, _ = run(sqlite_url, "forecast", "--every", "24", "--plot", str(chart))
    assert code == 0
    assert "# spend:fleet" in out and len([x for x in out.splitlines() if x.startswith("2027")]) == 3
    assert chart.exists() and "plotly" in chart.read_text()[:5000].lower()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--horizon", "10y"], "not a horizon"),
        (["--series", "power:fleet"], "unknown quantity"),
        (["--plot", "chart.svg"], "use a .html or .png"),
        (["--every", "0"], "--every"),
    ],
)
def test_usage_errors(sqlite_url: str, argv: list[str], message: str) -> None:
    code, _, err = run(sqlite_url, "forecast", *argv)
    assert code == 2 and message in err


def test_png_without_matplotlib_says_so(sqlite_url: str, tmp_path: Path) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        code, _, err = run(sqlite_url, "forecast", "--horizon", "3h", "--plot", str(tmp_path / "f.png"))
        assert code == 1 and "matplotlib" in err
    else:
        code, _, _ = run(sqlite_url, "forecast", "--horizon", "3h", "--plot", str(tmp_path / "f.png"))
        assert code == 0 and (tmp_path / "f.png").exists()
