"""The Python objects the scrape path keeps per scraped series, by stage.

Part of the memory breakdown of ``scrape_bench`` (``infermeter_store_memory_bytes`` gives the
store's own parts): the same dcgm- and vLLM-shaped bodies as its targets
(:mod:`benchmarks.scrape_targets`) go through the real stages of ``infermeter up`` in this process
-- a :class:`~collector.scrape_loop.ScrapeLoop` per target with its parser cache and its canonical
mapper, as :mod:`collector.manager` builds them -- for a few scrapes with changing values; then
``tracemalloc`` counts what is still held, by the module that allocated it, per raw series
scraped. The store is left out (an appender that keeps nothing).

Run from the repository root: ``.venv/bin/python -m benchmarks.scrape_objects [--targets 20]
[--series 1000]`` (a few seconds); ``scrape_bench`` prints the same table before its runs.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.scrape_objects")

import argparse
import asyncio
import gc
import random
import tracemalloc
from collections.abc import Sequence

from benchmarks._common import section
from benchmarks.scrape_targets import dcgm_lines, render_bodies, vllm_lines
from collector.exposition import SeriesCache, parse_exposition
from collector.mapping import CanonicalMapper
from collector.scrape_loop import ScrapeLoop, TargetSpec
from collector.source import Health, ScrapeResult
from store import ManualClock
from store.types import SampleBatch

SCRAPES = 4  # the first parses in full, the rest through the layout, as in steady state

# module path prefix -> stage, first match wins
STAGES = (
    ("collector/exposition/", "parser cache and body layout"),
    ("collector/mapping/", "canonical mapping plans"),
    ("collector/scrape_loop.py", "scrape loop (target labels)"),
    ("store/types.py", "series keys (raw, canonical, labelled)"),
)


class _Bodies:
    """A target's source: its bodies in turn, parsed with its own cache, as the HTTP source does."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies, self.cache, self.at = bodies, SeriesCache(), 0

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        body = self.bodies[self.at % len(self.bodies)]
        self.at += 1
        parsed = parse_exposition(body, default_ts_ms=ts_ms or 0, cache=self.cache)
        return ScrapeResult(parsed.batch, Health.ok())

    async def close(self) -> None:
        return None


def _loops(targets: int, series: int) -> list[ScrapeLoop]:
    async def keep_nothing(_: SampleBatch) -> None:
        return None

    loops = []
    for t in range(targets):
        lines = (dcgm_lines if t % 2 == 0 else vllm_lines)(t, series)
        source = _Bodies(render_bodies(lines, SCRAPES, random.Random(t)))
        spec = TargetSpec(job="dcgm" if t % 2 == 0 else "vllm", url=f"http://127.0.0.1:{9000 + t}/metrics",
                          instance=f"127.0.0.1:{9000 + t}")
        mapper = CanonicalMapper()
        loops.append(ScrapeLoop(spec, source, keep_nothing, ManualClock(1_000), random.Random(t),
                                mapper.map))
    return loops


def measure(targets: int, series: int) -> dict[str, float]:
    """Bytes still held per raw series scraped, by stage (and "total")."""
    gc.collect()
    tracemalloc.start()
    try:
        loops = _loops(targets, series)

        async def scrape_all() -> None:
            for _ in range(SCRAPES):
                for loop in loops:
                    await loop.scrape_once()

        asyncio.run(scrape_all())
        scraped = sum(len(loop.last_scraped) for loop in loops)
        for loop in loops:  # the bodies are the targets' memory, not ours
            loop.source.bodies = []  # type: ignore[attr-defined]
        gc.collect()
        stats = tracemalloc.take_snapshot().statistics("filename")
    finally:
        tracemalloc.stop()
    out = {name: 0.0 for _, name in STAGES} | {"other": 0.0}
    for stat in stats:
        path = stat.traceback[0].filename
        stage = next((name for prefix, name in STAGES if prefix in path), "other")
        out[stage] += stat.size / scraped
    out["total"] = sum(out.values())
    return out


def report(targets: int = 20, series: int = 1000) -> dict[str, float]:
    section(f"scrape path: Python objects kept per raw series ({targets} targets x {series:,} series)")
    held = measure(targets, series)
    for name, size in held.items():
        print(f"  {name:40s} {size:8.0f} B")
    print(f"  (tracemalloc after {SCRAPES} scrapes per target, by the allocating module; 'other' is mostly"
          " the interpreter's own growth)")
    return held


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scrape_objects", description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--series", type=int, default=1000)
    args = parser.parse_args(argv)
    report(args.targets, args.series)


if __name__ == "__main__":
    main()
