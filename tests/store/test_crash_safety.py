"""A service ingesting through its API is SIGKILLed at a random moment; nothing acknowledged
is lost, nothing is stored twice, and the SQLite file passes its integrity check."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlalchemy import text

from store import Reader, Selector, StoreOptions, SystemClock, TimeSeriesStore, create_store_engine
from tests.service import free_port

SERIES = 50
BATCHES_PER_SENDER = 400


def _start(config: Path, cwd: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERMETER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", "--config", str(config), "up", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"service exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("service did not become ready")


def _body(sender: int, batch: int) -> tuple[str, int]:
    # Each batch is 4 timestamps of data; data time advances 20 min per batch so
    # checkpoints (chunks + rollups + write-ahead rewrite) keep happening while we kill.
    base_ts = 1_800_000_000_000 + batch * 1_200_000
    lines = []
    for step in range(4):
        ts = base_ts + step * 300_000
        for s in range(SERIES):
            value = sender * 1_000_000 + batch * 10 + step
            lines.append(f'crash_metric{{sender="{sender}",s="{s}"}} {value} {ts}')
    return "\n".join(lines) + "\n", base_ts


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint_on_stop", [False, True], ids=["stop_replays", "stop_checkpoints"])
def test_sigkill_loses_nothing_acknowledged(store_url: str, tmp_path: Path, checkpoint_on_stop: bool) -> None:
    config = tmp_path / "infermeter.yaml"
    config.write_text(
        # data time runs 20 min a batch from 2027 on (checkpoints all the time): no future limit here
        f"store:\n  url: {store_url}\n  checkpoint_grace: 0s\n  max_future: 3650d\n"
        f"  checkpoint_on_stop: {str(checkpoint_on_stop).lower()}\n"
        "logging:\n  level: WARNING\nworker:\n  embedded: false\n"
    )
    proc, base = _start(config, tmp_path)
    acked: dict[int, set[int]] = {0: set(), 1: set()}
    stop = threading.Event()

    def send(sender: int) -> None:
        with httpx.Client(timeout=10) as client:
            for batch in range(BATCHES_PER_SENDER):
                if stop.is_set():
                    return
                body, _ = _body(sender, batch)
                try:
                    reply = client.post(f"{base}/api/v1/samples", content=body, headers={"content-type": "text/plain"})
                except httpx.HTTPError:
                    return  # the service died under us: this batch was never acknowledged
                if reply.status_code == 200:
                    assert reply.json()["data"]["accepted"] == 4 * SERIES
                    acked[sender].add(batch)

    threads = [threading.Thread(target=send, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    time.sleep(random.uniform(1.5, 4.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    stop.set()
    for t in threads:
        t.join(30)
    assert sum(len(v) for v in acked.values()) > 10, "too few batches before the kill to mean anything"

    # Restart: the head is rebuilt from the write-ahead table; a clean stop then writes what is
    # due (the rest stays in write-ahead rows, replayed by the reader's open below) or, with
    # checkpoint_on_stop, everything.
    proc, base = _start(config, tmp_path)
    proc.send_signal(signal.SIGTERM)
    # uvicorn re-raises the signal after its graceful shutdown, so -SIGTERM is a clean exit.
    assert proc.wait(60) in (0, -signal.SIGTERM)

    engine = create_store_engine(store_url)
    store = TimeSeriesStore(engine, SystemClock(), StoreOptions(), read_only=True)
    store.open()
    series = Reader(store).raw(Selector("crash_metric"), 0, 2**62)
    for item in series:
        sender = int(item.key.get("sender"))
        assert np.all(np.diff(item.ts_ms) > 0), "a sample was stored twice"
        batches = {int(v) % 1_000_000 // 10 for v in item.values}
        missing = acked[sender] - batches
        assert not missing, f"acknowledged batches lost for sender {sender}: {sorted(missing)[:5]}"
        for ts, value in zip(item.ts_ms.tolist(), item.values.tolist()):
            batch = int(value) % 1_000_000 // 10
            step = int(value) % 10
            assert ts == 1_800_000_000_000 + batch * 1_200_000 + step * 300_000
    assert {int(s.key.get("sender")) for s in series} >= {k for k, v in acked.items() if v}
    with engine.connect() as conn:
        left = conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one()
    if checkpoint_on_stop:
        assert left == 0  # the graceful stop wrote everything into chunks
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    engine.dispose()
