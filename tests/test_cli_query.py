"""`infermeter query` prints a readable table from a store another process writes."""

from __future__ import annotations

import time
from io import StringIO
from pathlib import Path

import numpy as np

from infermeter import db
from infermeter.cli import main
from store import SampleBatch, SeriesKey, StoreOptions, SystemClock, TimeSeriesStore, create_store_engine


def test_query_table_from_unflushed_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"store:\n  url: {url}\n")
    engine = create_store_engine(url)
    db.upgrade(engine)
    writer = TimeSeriesStore(engine, SystemClock(), StoreOptions())
    writer.open()
    now = int(time.time() * 1000) // 60_000 * 60_000
    keys = [SeriesKey.of("gpu_util", gpu="0"), SeriesKey.of("gpu_util", gpu="1")]
    for i in range(20):
        writer.append(SampleBatch.one_per_key(keys, now - 19 * 60_000 + i * 60_000, np.asarray([i, 100 - i], float)))
    out, err = StringIO(), StringIO()
    code = main(["--config", str(cfg), "query", "gpu_util", "--since", "10m", "--step", "1m", "--fn", "last"], out, err)
    assert code == 0, err.getvalue()
    text = out.getvalue().splitlines()
    assert text[0] == "# last per 1m, last 10m, 2 series"
    assert text[1].split() == ["TIME", "(UTC)", "gpu=0", "gpu=1"]
    assert text[-1].split()[-2:] == ["19", "81"]
    out, err = StringIO(), StringIO()
    assert main(["--config", str(cfg), "query", "gpu_util", "--match", "gpu=1", "--since", "5m", "--step", "5m", "--fn", "max"], out, err) == 0
    assert out.getvalue().splitlines()[1].split()[-1] == "gpu=1"
    out, err = StringIO(), StringIO()
    assert main(["--config", str(cfg), "query", "gpu_util", "--match", "gpu~1"], out, err) == 2
    assert "bad label matcher" in err.getvalue()
    writer.close()
    engine.dispose()
