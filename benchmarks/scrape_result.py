"""What :mod:`benchmarks.scrape_bench` measures of one system and prints: CPU, samples stored
and scraped over back-to-back windows, RSS, failed scrapes, and where our RSS goes."""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

from benchmarks._common import MIB, spread
from benchmarks.scrape_measure import Point


# -- one system's result -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Result:
    name: str
    cpu_s: float
    samples: float
    wall_s: float
    rss: int
    failed_share: float
    scraped: float  # samples read from the targets in the span (successful scrapes x series)
    note: str
    window_cpu_per_m: list[float] = field(default_factory=list)  # CPU s per M stored, window by window
    # RSS every half second of the last window: merges and checkpoints come and go in it
    rss_window: list[int] = field(default_factory=list)

    @property
    def rss_median(self) -> int:
        """The median RSS over the last window (the RSS at the end where none was sampled)."""
        ordered = sorted(self.rss_window)
        return ordered[len(ordered) // 2] if ordered else self.rss

    @classmethod
    def over(
        cls, name: str, edges: list[Point], rss: int, failed_share: float, scraped: float, note: str,
        rss_window: list[int] | None = None,
    ) -> Result:
        """The result of back-to-back windows from their edges (the figures of the whole span,
        and CPU per million samples stored of each window)."""
        p0, p1 = edges[0], edges[-1]
        per_window = [
            (b.cpu - a.cpu) / ((b.samples - a.samples) / 1e6) if b.samples > a.samples else float("inf")
            for a, b in zip(edges, edges[1:])
        ]
        return cls(
            name,
            p1.cpu - p0.cpu,
            p1.samples - p0.samples,
            p1.wall - p0.wall,
            rss,
            failed_share,
            scraped,
            note,
            per_window,
            list(rss_window or []),
        )

    @property
    def cpu_per_m(self) -> float:
        """CPU seconds per million samples stored."""
        return self.cpu_s / (self.samples / 1e6) if self.samples > 0 else float("inf")

    @property
    def cpu_per_m_scraped(self) -> float:
        return self.cpu_s / (self.scraped / 1e6) if self.scraped > 0 else float("inf")

    def print(self, total_series: int) -> None:
        print(f"  windows together               {self.wall_s:10.1f} s")
        print(
            f"  CPU (user+system)              {self.cpu_s:10.2f} s  ({100 * self.cpu_s / self.wall_s:.0f}% of one core)"
        )
        print(
            f"  samples stored                 {self.samples:12,.0f}  ({self.samples / self.wall_s:,.0f} samples/s)"
        )
        print(
            f"  samples scraped                {self.scraped:12,.0f}  (stored / scraped = {self.samples / self.scraped:.2f})"
        )
        print(f"  CPU per million samples stored {self.cpu_per_m:10.2f} s")
        if len(self.window_cpu_per_m) > 1:
            print(f"    window by window             {spread(self.window_cpu_per_m)} s")
        print(f"  CPU per million scraped        {self.cpu_per_m_scraped:10.2f} s")
        print(
            f"  RSS at the end                 {self.rss / MIB:10.1f} MiB  ({self.rss / total_series:,.0f} B per scraped series)"
        )
        if self.rss_window:
            print(f"  RSS over the last window       {self.rss_median / MIB:10.1f} MiB median, "
                  f"{min(self.rss_window) / MIB:.1f}..{max(self.rss_window) / MIB:.1f} MiB range "
                  f"({len(self.rss_window)} readings)")
        print(f"  scrapes failed                 {100 * self.failed_share:10.2f} %")
        if self.note:
            print(f"  {self.note}")



def print_memory(rss: int, series: float, metrics: list[str]) -> None:
    """Where the RSS is: the store's parts from ``infermeter_store_memory_bytes`` (numpy
    exact, Python objects estimated), the rest as what they do not cover (interpreter,
    imported libraries, parser caches, SQLAlchemy, allocator slack)."""
    parts = {line.split('part="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
             for line in metrics if line.startswith("infermeter_store_memory_bytes{")}
    print(f"  memory at the end: RSS {rss / MIB:.1f} MiB, {series:,.0f} series")
    for part, size in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"    {part:<28} {size / MIB:9.1f} MiB  {size / max(series, 1):8.0f} B/series")
    head = [float(line.rsplit(" ", 1)[1]) for line in metrics if line.startswith("infermeter_store_head_samples ")]
    if head and head[0] > 0:
        in_head = parts.get("head_samples", 0.0) + parts.get("head_samples_packed", 0.0)
        print(f"    ({head[0]:,.0f} samples in the head: {in_head / head[0]:.2f} B a sample, packed and plain together)")
    rest = rss - sum(parts.values())
    print(f"    {'everything else':<28} {rest / MIB:9.1f} MiB  {rest / max(series, 1):8.0f} B/series "
          "(interpreter and libraries, scrape caches, SQLAlchemy, allocator slack)")


def rss_by_mapping(ps: psutil.Process) -> dict[str, int]:
    """The process's resident bytes by the kind of mapping they are in: the main heap (the
    allocator's main arena: SQLite pages, small buffers and containers), anonymous mappings (the
    other arena, buffers over the allocator's mmap threshold such as the head's blocks, Python's
    object arenas), and files (code of the interpreter and libraries)."""
    out = {"heap": 0, "anonymous": 0, "files": 0, "stacks and other": 0}
    for m in ps.memory_maps(grouped=True):
        path = m.path
        kind = ("heap" if path == "[heap]" else "anonymous" if path in ("", "[anon]")
                else "stacks and other" if path.startswith("[") else "files")
        out[kind] += m.rss
    return out


def print_mappings(ps: psutil.Process) -> None:
    try:
        parts = rss_by_mapping(ps)
    except (psutil.Error, OSError) as exc:  # the process gone, or its maps not readable
        print(f"  RSS by mapping: not read ({exc})")
        return
    print("  RSS by mapping: " + ", ".join(f"{k} {v / MIB:.1f} MiB" for k, v in parts.items()))


def print_thread_cpu(start: dict[str, float], end: dict[str, float], process_cpu_s: float) -> None:
    """Where the CPU of the windows went, by thread (``infermeter_thread_cpu_seconds_total``
    at their two edges); threads that came or went between them show what they had at the end."""
    spent = {name: end[name] - start.get(name, 0.0) for name in end}
    if not spent:
        return
    print(f"  CPU over the windows by thread ({process_cpu_s:.1f} s in all):")
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        if seconds >= 0.05:
            print(f"    {name:<28} {seconds:9.1f} s  {seconds / max(process_cpu_s, 1e-9):6.1%}")
