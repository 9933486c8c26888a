"""scripts/fetch-bench-data.sh with a stand-in npm on PATH: a wrong file refused, no npm skipped."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fetch-bench-data.sh"


def _fake_npm(bin_dir: Path, payload: bytes) -> None:
    """An ``npm`` whose ``pack`` writes vega-datasets-3.2.1.tgz holding ``payload`` as the parquet."""
    source = bin_dir / "flights-3m.parquet"
    source.write_bytes(payload)
    tgz = bin_dir / "pack.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(source, arcname="package/data/flights-3m.parquet")
    npm = bin_dir / "npm"
    npm.write_text(f'#!/bin/sh\ncp "{tgz}" ./vega-datasets-3.2.1.tgz\n')
    npm.chmod(0o755)


def _run(dest: Path, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(["/bin/bash", str(SCRIPT), str(dest)], capture_output=True, text=True, env=env, timeout=60)


def test_a_file_with_the_wrong_checksum_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_npm(bin_dir, b"not the flights")
    done = _run(tmp_path / "data", f"{bin_dir}:/usr/bin:/bin")
    assert done.returncode == 1
    assert "unexpected checksum" in done.stderr
    assert not (tmp_path / "data" / "flights-3m.parquet").exists()


def test_without_npm_nothing_is_fetched_and_the_benchmark_is_told(tmp_path: Path) -> None:
    empty = tmp_path / "empty"  # a PATH with no npm on it
    empty.mkdir()
    done = _run(tmp_path / "data", str(empty))
    assert done.returncode == 0
    assert "npm not found" in done.stderr

