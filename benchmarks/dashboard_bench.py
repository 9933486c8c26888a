"""Dashboard benchmark: 64 GPUs × 7 days of 15 s data in the store, every page of the mounted
dashboard measured three ways.

1. Server time of each callback (query + downsampling in the store + figure building + JSON),
   timed inside the Flask server around ``/_dash-update-component``: every callback of a page
   is called over HTTP one after the other, ``--repeats`` times after one cold call; p95 per
   callback. The points in each trace are counted on the replies.
2. Navigation to all graphs drawn in headless Chromium (selenium, Debian's chromium): the page
   is loaded by URL and a script in the page resolves when every panel has left its loading
   state and Dash has no callback in flight (``performance.now()`` from the navigation start).
   Measured with the browser cache warm (Dash's bundles are fingerprinted and cached for a year),
   median of ``--navigations``; the first, cold visit (bundles downloaded) is reported too.
3. Bytes sent to the browser per page, gzip-encoded as the server sends them: the Resource
   Timing ``transferSize`` of the navigation and every request of the page (warm cache);
   the one-off JS bundles of the first visit are reported apart.

The store is filled columnar (``SampleBatch`` per 240 scrapes, series ids resolved once), the
cost ledger priced for every hour, the live cost series written every ``--live-every``
minutes, and the default alert pack evaluated; then the service is started on that database
(two phases: nothing in the background races the seeding).

Run from the repository root:

    .venv/bin/python -m benchmarks.dashboard_bench [--quick] [--days 7] [--gpus 64] [--repeats 10] [--range 7d]

``--quick``: 16 GPUs x 1 day, range 1d, 3 runs per callback, 1 navigation per page. Already
repeated, so no median of three here: callback times are a p95 over ``--repeats`` runs,
navigation a median over ``--navigations``. Without chromium the browser targets print SKIP.
Ends with one ``target <name>: <measured> (goal <goal>) PASS|SHORT|SKIP`` line per target.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.dashboard_bench")

import gzip
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from selenium.webdriver.common.by import By

from benchmarks._common import Target, bench_parser, section, skipped
from dashboard.pages import PAGES
from dashboard.settings import duration_ms
from store import ManualClock
from tests.dashboard.browser import available, choose, chrome
from tests.dashboard.callbacks import calls, figure_facts
from tests.dashboard.fakes import FakeForecasts, flat_forecast
from tests.dashboard.service import make_settings, seed, serve_dashboard
from tests.dashboard.synthetic import FleetShape

END_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
CALLBACK_GOAL_MS = 200.0
DRAWN_GOAL_S = 1.0  # up to 64 GPUs
DRAWN_GOAL_LARGE_S = 1.5  # a larger fleet (512 GPUs x 7 days)
POINTS_GOAL = 2000
BYTES_GOAL_MB = 1.0

# Resolves with performance.now() once every panel of the page is drawn (run right after load).
DRAWN_ASYNC_JS = """
const done = arguments[arguments.length - 1];
const panels = arguments[0], graphs = arguments[1];
function check() {
  const gs = [...document.querySelectorAll('.js-plotly-plot')];
  const states = gs.map(g => (g.layout && g.layout.meta && g.layout.meta.state) || 'none');
  const tables = [...document.querySelectorAll('.panel-message, .panel-data')].map(e => e.className);
  const busy = document.querySelectorAll('[data-dash-is-loading="true"]').length;
  const ready = document.querySelectorAll('.panel').length === panels && gs.length === graphs && busy === 0
    && !states.includes('loading') && !tables.some(t => t.includes('loading'));
  if (ready) { done({t: performance.now(), states}); } else { requestAnimationFrame(check); }
}
check();
"""
TRANSFER_JS = """
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource');
const bundles = res.filter(r => r.name.includes('_dash-component-suites') || r.name.includes('.js'));
const data = res.filter(r => !bundles.includes(r));
const sum = list => list.reduce((a, r) => a + (r.transferSize || 0), 0);
return {nav: nav ? nav.transferSize : 0, data: sum(data), bundles: sum(bundles), requests: res.length,
        decoded: res.reduce((a, r) => a + (r.decodedBodySize || 0), 0)};
"""


@dataclass
class CallbackStats:
    seconds: list[float] = field(default_factory=list)
    cold_s: float = 0.0
    raw_bytes: int = 0
    gzip_bytes: int = 0
    points: int = 0
    state: str = ""


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95)) if values else float("nan")


def install_timer(server: Any, sink: dict[str, list[tuple[float, bytes]]]) -> None:
    """Flask hooks around /_dash-update-component: server time (JSON included) and reply body."""
    import flask

    @server.before_request
    def _start() -> None:
        flask.g.bench_t0 = time.perf_counter()

    @server.after_request
    def _stop(response: flask.Response) -> flask.Response:
        if flask.request.path.endswith("_dash-update-component") and hasattr(flask.g, "bench_t0"):
            try:
                body = flask.request.get_json(silent=True) or {}
            except Exception:  # the browser went away mid-request (it navigated on)
                return response
            sink[str(body.get("output", "?")).strip(".")].append(
                (time.perf_counter() - flask.g.bench_t0, response.get_data()))
        return response


def page_of(output: str) -> str:
    panel = output.split(".")[0]
    for page in PAGES:
        if any(p.id == panel for p in page.panels):
            return page.name
    return "shell"


def bench_callbacks(base: str, range_ms: int, repeats: int, sink: dict[str, list[tuple[float, bytes]]]) -> dict[str, CallbackStats]:
    deps = httpx.get(f"{base}/dashboard/_dash-dependencies").json()
    values = {"dash-range": range_ms, "dash-model": None, "dash-node": None, "dash-refresh": 0}
    plan = list(calls(deps, values))
    stats: dict[str, CallbackStats] = defaultdict(CallbackStats)
    with httpx.Client(timeout=120) as client:
        for round_ in range(repeats + 1):
            for call in plan:  # page by page, as registered
                reply = client.post(f"{base}/dashboard/_dash-update-component", json=call.body)
                reply.raise_for_status()
                seconds, body = sink[call.name].pop()
                s = stats[call.name]
                if round_ > 0:
                    s.seconds.append(seconds)
                    continue
                s.cold_s, s.raw_bytes, s.gzip_bytes = seconds, len(body), len(gzip.compress(body, 6))
                if reply.status_code == 204:  # nothing to update (an editor's button never pressed)
                    s.state = "no update"
                    continue
                response = json.loads(body)["response"]
                facts = [figure_facts(props.get("figure")) for props in response.values() if "figure" in props]
                s.points = max((f[1] for f in facts), default=0)
                s.state = ",".join(sorted({f[0] for f in facts})) or "table"
    return stats


@dataclass
class PageLoad:
    cold_s: float
    warm_s: list[float]
    cold_bundle_bytes: int
    cold_total_bytes: int
    warm_bytes: int
    warm_data_bytes: int
    states: list[str]


def bench_browser(base: str, range_label: str, navigations: int) -> dict[str, PageLoad]:
    driver = chrome(1400, 1600)
    driver.set_script_timeout(120)
    out: dict[str, PageLoad] = {}
    try:
        driver.get(f"{base}/dashboard/nccl")  # pick the range once; it is kept for the session
        choose(driver, "dash-range", range_label)
        for i, page in enumerate(PAGES):
            loads: list[float] = []
            first: dict[str, Any] = {}
            graphs = sum(1 for p in page.panels if p.kind == "graph")
            for n in range(navigations + 1):
                if i == 0 and n == 0:
                    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
                driver.get(f"{base}/dashboard/{page.path.lstrip('/')}")
                drawn = driver.execute_async_script(DRAWN_ASYNC_JS, len(page.panels), graphs)
                shown = driver.find_element(By.CSS_SELECTOR, "#dash-range .Select-value-label").text
                if shown != range_label:
                    raise SystemExit(f"the page was drawn for {shown!r}, not {range_label!r}")
                transfer = driver.execute_script(TRANSFER_JS)
                if n == 0:
                    first = {"t": drawn["t"] / 1000, "transfer": transfer, "states": drawn["states"]}
                else:
                    loads.append(drawn["t"] / 1000)
                    last = transfer
            out[page.name] = PageLoad(
                cold_s=first["t"], warm_s=loads,
                cold_bundle_bytes=first["transfer"]["bundles"],
                cold_total_bytes=first["transfer"]["nav"] + first["transfer"]["data"] + first["transfer"]["bundles"],
                warm_bytes=last["nav"] + last["data"] + last["bundles"], warm_data_bytes=last["data"],
                states=first["states"],
            )
    finally:
        driver.quit()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        __spec__.name, __doc__, "16 GPUs x 1 day, range 1d, 3 runs a callback, 1 navigation a page", whole_doc=True
    )
    parser.add_argument("--days", type=float, help="days of 15 s data (default 7, quick 1)")
    parser.add_argument("--gpus", type=int, help="a multiple of 8 (8 GPUs a node; default 64, quick 16)")
    parser.add_argument("--range", help="the dashboard's time range for the measurements (default 7d, quick 1d)")
    parser.add_argument("--repeats", type=int, help="runs of every callback after a cold one (default 10, quick 3)")
    parser.add_argument("--navigations", type=int, help="warm navigations to every page (default 3, quick 1)")
    parser.add_argument("--live-every", type=int, default=60, help="minutes between live cost series points")
    parser.add_argument("--scrape-seconds", type=int, default=15,
                        help="seconds between the seeded samples (default 15; the 512-GPU fleet is seeded at 300 to "
                             "seed in minutes: a 7-day view reads hourly rollups either way)")
    args = parser.parse_args(argv)
    for name, full, quick in (
        ("days", 7.0, 1.0), ("gpus", 64, 16), ("range", "7d", "1d"), ("repeats", 10, 3), ("navigations", 3, 1)
    ):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    range_ms = duration_ms(args.range)
    nodes = max(1, args.gpus // 8)
    drawn_goal = DRAWN_GOAL_S if nodes * 8 <= 64 else DRAWN_GOAL_LARGE_S

    with tempfile.TemporaryDirectory(prefix="dash-bench-") as tmp:
        section(f"seeding: {nodes * 8} GPUs × {args.days:g} days of {args.scrape_seconds} s data")
        settings, config = make_settings(Path(tmp))
        seeded = seed(settings, config, END_MS, hours=args.days * 24, shape=FleetShape(nodes=nodes, gpus_per_node=8, scrape_ms=args.scrape_seconds * 1000),

                      live_every_ms=args.live_every * 60_000, log=lambda text: print(text, flush=True))
        size = Path(tmp, "dashboard.db").stat().st_size
        print(f"{len(seeded.fleet.keys):,} series, {seeded.samples / 1e6:.1f} M samples "
              f"({seeded.samples / len(seeded.fleet.keys) / 1e3:.1f} k per series), seeded with ledger and alerts in "
              f"{seeded.seconds:.0f} s; database {size / 2**20:.0f} MiB")
        forecasts = FakeForecasts({"spend:fleet": flat_forecast(END_MS, 260.0, 30.0),
                                   "cost_per_mtok:fleet": flat_forecast(END_MS, 3.9, 0.3)})
        with serve_dashboard(settings, ManualClock(END_MS), config, forecast=forecasts) as (base, _runtime, app):
            sink: dict[str, list[tuple[float, bytes]]] = defaultdict(list)
            install_timer(app.state.dashboard.server, sink)

            section(f"1. callbacks, range {args.range}: server time (query + steps + figure + JSON), "
                    f"{args.repeats} runs after a cold one")
            stats = bench_callbacks(base, range_ms, args.repeats, sink)
            print(f"{'callback':58s} {'cold ms':>8s} {'p50 ms':>7s} {'p95 ms':>7s} {'points':>7s} {'KiB':>7s} {'gz KiB':>7s}  state")
            for name, s in stats.items():
                print(f"{name[:58]:58s} {s.cold_s * 1000:8.1f} {statistics.median(s.seconds) * 1000:7.1f} "
                      f"{p95(s.seconds) * 1000:7.1f} {s.points:7d} {s.raw_bytes / 1024:7.1f} {s.gzip_bytes / 1024:7.1f}  {s.state}")

            loads: dict[str, PageLoad] = {}
            if available():
                section(f"2-3. headless Chromium, range {args.range}: navigation to all graphs drawn, bytes per page")
                loads = bench_browser(base, f"last {args.range}", args.navigations)
            else:
                print("chromium / chromedriver not installed (Debian chromium, chromium-driver): browser figures skipped")

        section("per page")
        print(f"{'page':10s} {'callbacks':>9s} {'worst p95 ms':>12s} {'drawn s':>8s} {'first visit s':>13s} "
              f"{'gz KB/page':>10s} {'data gz KB':>10s} {'first visit KB':>14s} {'(bundles KB)':>12s}")
        worst_p95 = 0.0
        for page in PAGES:
            mine = [s for n, s in stats.items() if page_of(n) == page.name]
            page_p95 = max(p95(s.seconds) for s in mine) * 1000
            worst_p95 = max(worst_p95, page_p95)
            load = loads.get(page.name)
            if load is None:
                print(f"{page.name:10s} {len(mine):9d} {page_p95:12.1f}")
                continue
            print(f"{page.name:10s} {len(mine):9d} {page_p95:12.1f} {statistics.median(load.warm_s):8.2f} {load.cold_s:13.2f} "
                  f"{load.warm_bytes / 1000:10.1f} {load.warm_data_bytes / 1000:10.1f} {load.cold_total_bytes / 1000:14.1f} "
                  f"{load.cold_bundle_bytes / 1000:12.1f}")
        shell_p95 = max((p95(s.seconds) for n, s in stats.items() if page_of(n) == "shell"), default=0.0) * 1000
        worst_p95 = max(worst_p95, shell_p95)
        states = {s.state for s in stats.values()}
        print(f"(shell callbacks, p95 {shell_p95:.1f} ms; panel states seen: {', '.join(sorted(states))})")
        coldest = max(stats.items(), key=lambda item: item[1].cold_s)
        print(f"first call of a callback (the store's rollup cache still cold): worst {coldest[1].cold_s * 1000:.0f} ms "
              f"({coldest[0]})")
        if loads:
            first = max(load.cold_total_bytes for load in loads.values())
            bundles = max(load.cold_bundle_bytes for load in loads.values())
            print(f"first visit of the dashboard (JS bundles not cached yet): {first / 1e6:.2f} MB gzip, of which "
                  f"{bundles / 1e6:.2f} MB Dash / React / plotly.js bundles (cached for a year after)")

        print()
        print(Target(f"callback server time p95, worst of {len(stats)} callbacks (ms)", worst_p95, CALLBACK_GOAL_MS, False).line())
        print(Target("points per trace, most in any trace", float(max(s.points for s in stats.values())), POINTS_GOAL, False).line())
        if loads:
            drawn = max(statistics.median(load.warm_s) for load in loads.values())
            sent = max(load.warm_bytes for load in loads.values()) / 1e6
            print(Target(f"navigation to all graphs drawn, slowest page, warm cache, {nodes * 8} GPUs (s)", drawn,
                         drawn_goal, False).line())
            print(Target("bytes sent per page (gzip), largest page, warm cache (MB)", sent, BYTES_GOAL_MB, False).line())
        else:
            why = "chromium / chromedriver not installed"
            print(skipped(f"navigation to all graphs drawn, slowest page, warm cache, {nodes * 8} GPUs (s)", drawn_goal,
                          False, why))
            print(skipped("bytes sent per page (gzip), largest page, warm cache (MB)", BYTES_GOAL_MB, False, why))


if __name__ == "__main__":
    main()
