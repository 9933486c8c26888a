"""The scrape benchmark's RSS by mapping, read from a live process (this one)."""

from __future__ import annotations

import os

import numpy as np
import psutil
import pytest

from benchmarks.scrape_result import print_mappings, rss_by_mapping


def test_rss_by_mapping_adds_up_to_the_rss_and_sees_a_large_buffer() -> None:
    me = psutil.Process(os.getpid())
    before = rss_by_mapping(me)
    buffer = np.ones(64 << 20, np.uint8)  # 64 MiB touched: an anonymous mapping of its own
    after = rss_by_mapping(me)
    assert set(after) == {"heap", "anonymous", "files", "stacks and other"}
    assert after["files"] > 0 and after["heap"] + after["anonymous"] > 0
    assert after["anonymous"] - before["anonymous"] >= 60 << 20
    assert sum(after.values()) == pytest.approx(me.memory_info().rss, rel=0.05)
    del buffer


def test_a_process_gone_is_said_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    child = psutil.Popen(["true"])
    child.wait()
    print_mappings(child)
    assert "RSS by mapping: not read" in capsys.readouterr().out
