"""CPU seconds by thread name, from /proc (infermeter.thread_cpu)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from infermeter.thread_cpu import ThreadCpuCollector, cpu_by_thread_name, task_cpu_s


def _spin(seconds: float, done: threading.Event, stop: threading.Event) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    done.set()
    stop.wait(10)  # alive while it is read


def test_a_busy_thread_shows_its_cpu_under_its_name() -> None:
    done, stop = threading.Event(), threading.Event()
    busy = threading.Thread(target=_spin, args=(0.3, done, stop), name="busy-loop")
    idle = threading.Thread(target=stop.wait, args=(10,), name="idle-loop")
    busy.start()
    idle.start()
    try:
        assert done.wait(10)
        seconds = cpu_by_thread_name([busy, idle])
        assert seconds["busy-loop"] >= 0.2
        assert seconds["idle-loop"] < 0.1
        registry = CollectorRegistry()
        registry.register(ThreadCpuCollector(lambda: [busy, idle]))
        text = generate_latest(registry).decode()
        line = next(x for x in text.splitlines() if x.startswith('infermeter_thread_cpu_seconds_total{thread="busy-loop"}'))
        assert float(line.split()[-1]) >= 0.2
    finally:
        stop.set()
        busy.join()
        idle.join()


def test_threads_of_one_name_are_summed_and_ended_ones_left_out() -> None:
    stop = threading.Event()
    done = [threading.Event() for _ in range(2)]
    workers = [threading.Thread(target=_spin, args=(0.1, d, stop), name="pool") for d in done]
    finished = threading.Thread(target=lambda: None, name="finished")
    for thread in (*workers, finished):
        thread.start()
    finished.join()
    try:
        assert all(d.wait(10) for d in done)
        seconds = cpu_by_thread_name([*workers, finished])
        assert set(seconds) == {"pool"}
        each = [task_cpu_s(w.native_id or 0) or 0.0 for w in workers]
        assert min(each) > 0.0
        assert abs(seconds["pool"] - sum(each)) < 1e-9
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def test_without_proc_there_is_nothing_to_report(tmp_path: Path) -> None:
    assert task_cpu_s(threading.get_native_id(), tmp_path) is None
    assert cpu_by_thread_name([threading.current_thread()], tmp_path) == {}
    registry = CollectorRegistry()
    registry.register(ThreadCpuCollector(proc=tmp_path))
    assert "infermeter_thread_cpu_seconds_total{" not in generate_latest(registry).decode()
