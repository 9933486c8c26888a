"""The store benchmark's ingest section times the final forced checkpoint's CPU apart from the
appends (a small run of the same code)."""

from __future__ import annotations

from pathlib import Path

from benchmarks._common import mixed_fleet, recent_hour
from benchmarks.store_ingest import ingest_concurrent, ingest_ours


def test_the_ingest_section_reports_the_final_checkpoints_cpu(tmp_path: Path) -> None:
    fleet = mixed_fleet(30, 600, recent_hour(3))  # 2.5 h at 15 s: a chunk boundary and more
    one = ingest_ours(f"sqlite:///{tmp_path / 'one.sqlite'}", fleet, 1)
    grouped = ingest_concurrent(f"sqlite:///{tmp_path / 'group.sqlite'}", fleet, 3)
    for run in (one, grouped):
        assert run.samples == 30 * 600 and run.appends >= 600
        assert 0 < run.checkpoint_cpu_s and run.ack_s < run.durable_s
