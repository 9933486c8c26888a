"""CPU seconds of this process's threads, by thread name (Linux ``/proc``; nothing elsewhere).

Why: the process's CPU alone does not say which loop spends it. A notification pipeline that
ticked without pause cost a quarter of the service's CPU at 100 targets, and showed only as a
higher CPU per sample in the scrape benchmark until a profiler named the thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

PROC_SELF = Path("/proc/self")


def task_cpu_s(native_id: int, proc: Path = PROC_SELF) -> float | None:
    """User plus system CPU seconds of one thread of this process; None when it is gone (or
    there is no ``/proc``)."""
    try:
        text = (proc / "task" / str(native_id) / "stat").read_text()
    except OSError:
        return None
    # The name in parentheses may hold spaces: the fields count from the last ')'.
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_by_thread_name(threads: Iterable[threading.Thread], proc: Path = PROC_SELF) -> dict[str, float]:
    """CPU seconds of the live ``threads``, summed per name (a pool's workers share one)."""
    out: dict[str, float] = {}
    for thread in threads:
        native_id = thread.native_id
        if native_id is None:
            continue
        seconds = task_cpu_s(native_id, proc)
        if seconds is not None:
            out[thread.name] = out.get(thread.name, 0.0) + seconds
    return out


class ThreadCpuCollector(Collector):
    """``infermeter_thread_cpu_seconds_total{thread}``, read at scrape time. A thread that ends
    takes its seconds with it: for a pool whose workers come and go, rate() sees a reset."""

    def __init__(self, threads: Callable[[], Iterable[threading.Thread]] = threading.enumerate,
                 proc: Path = PROC_SELF) -> None:
        self._threads = threads
        self._proc = proc

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "infermeter_thread_cpu_seconds", "CPU (user + system) of the process's live threads, by thread name.",
            labels=["thread"],
        )
        for name, seconds in sorted(cpu_by_thread_name(self._threads(), self._proc).items()):
            family.add_metric([name], seconds)
        yield family
