"""``infermeter forecast [--series ...] [--horizon 72h] [--refresh] [--every N] [--plot FILE]``.

Prints, per series, a header (model, backtest error, flags) and a table of hourly values with
the 80 % and 95 % bounds; ``--plot`` also writes a chart (``.html``, or ``.png`` with
matplotlib). The composition root passes ``service_factory(args) -> ForecastService`` to
:func:`register`; this module never builds engines or settings itself.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from forecast.ids import parse_horizon, parse_series_list

if TYPE_CHECKING:
    from forecast.record import StoredForecast
    from forecast.service import ForecastService

# The service and its models load when the command runs, not when the parser is built (every
# `infermeter` command builds it, the node agent included).
ServiceFactory = Callable[[argparse.Namespace], "ForecastService"]
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(sub: argparse._SubParsersAction, service_factory: ServiceFactory) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    parser: argparse.ArgumentParser = sub.add_parser(
        "forecast", help="forecast spend, tokens and cost per 1M tokens (72 h ahead by default)"
    )
    parser.add_argument(
        "--series",
        action="append",
        default=[],
        help="quantity:scope, e.g. spend:fleet, tokens:model=NAME, cost_per_mtok:fleet; repeat or comma-separate "
        "(default: every configured series)",
    )
    parser.add_argument("--horizon", default="72h", help="hours or days ahead, e.g. 72h or 3d (default 72h)")
    parser.add_argument(
        "--refresh", action="store_true", help="recompute now instead of reading the stored forecast"
    )
    parser.add_argument("--every", type=int, default=1, metavar="N", help="print every Nth hour (default 1)")
    parser.add_argument(
        "--plot", metavar="FILE", help="also write a chart: FILE.html (plotly) or FILE.png (matplotlib)"
    )

    def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        return cmd_forecast(args, out, err, service_factory)

    parser.set_defaults(func=run)
    return parser


def cmd_forecast(args: argparse.Namespace, out: TextIO, err: TextIO, service_factory: ServiceFactory) -> int:
    from forecast.plot import PlotError, write_plot
    from forecast.service import ForecastUnavailable

    try:
        series = parse_series_list(args.series)
        hours = parse_horizon(args.horizon)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    if args.every < 1:
        print("error: --every must be >= 1", file=err)
        return EXIT_USAGE
    if args.plot and Path(args.plot).suffix.lower() not in (".html", ".htm", ".png"):
        print(f"error: --plot {args.plot}: use a .html or .png file name", file=err)
        return EXIT_USAGE
    try:
        service = service_factory(args)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_FAILED
    wanted = series or list(service.series)
    if not wanted:
        print("error: no series given and none configured (use --series spend:fleet ...)", file=err)
        return EXIT_USAGE
    results: list[StoredForecast] = []
    failed = 0
    for sid in wanted:
        try:
            results.append(service.get_or_compute(sid, hours, refresh=args.refresh))
        except ForecastUnavailable as exc:
            print(f"error: {exc}", file=err)
            failed += 1
    for f in results:
        print_table(f, out, every=args.every)
    if args.plot and results:
        try:
            write_plot(results, Path(args.plot))
        except PlotError as exc:
            print(f"error: {exc}", file=err)
            return EXIT_FAILED
        print(f"chart written to {args.plot}", file=out)
    return EXIT_FAILED if failed else EXIT_OK


def _cell(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.6g}"


def print_table(f: StoredForecast, out: TextIO, every: int = 1) -> None:
    generated = datetime.fromtimestamp(f.generated_at_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    wape = "-" if f.backtest_wape is None else f"{f.backtest_wape:.3f}"
    mase = "-" if f.backtest_mase is None else f"{f.backtest_mase:.3f}"
    held = "  ".join(
        f"{level} % band held {c:.0%}" for level, c in ((80, f.backtest_coverage80), (95, f.backtest_coverage95)) if c is not None
    )
    print(f"# {f.series} ({f.series.unit})  model {f.model}", file=out)
    print(
        f"# generated {generated} UTC  backtest WAPE {wape} MASE {mase}  {held or 'coverage -'}  "
        f"flags {','.join(f.flags) or '-'}",
        file=out,
    )
    cols = ("mean", "lo80", "hi80", "lo95", "hi95")
    print("TIME (UTC)         " + "".join(c.rjust(13) for c in cols), file=out)
    for i in range(0, f.horizon, every):
        when = datetime.fromtimestamp((f.start_ms + i * f.step_ms) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")
        cells = (f.mean[i], f.lo80[i], f.hi80[i], f.lo95[i], f.hi95[i])
        print(f"{when}   " + "".join(_cell(float(c)).rjust(13) for c in cells), file=out)
    print(file=out)
