"""Real `infermeter up` processes forming an HA pair on one PostgreSQL and one VictoriaMetrics,
with a webhook receiver on loopback that records every delivery (used by the tests and by
benchmarks/ha_bench.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from fastapi import FastAPI, Request, Response

from tests.service import free_port, run_app, wait_http

RULES = """
groups:
  - name: ha
    interval: {interval}
    rules:
      - alert: HaProbeFiring
        expr: ha_probe > 0
      - alert: HaProbePending
        expr: ha_probe > 0
        for: 10m
"""


@dataclass
class Deliveries:
    """What the receiver got: notification id -> arrival times (monotonic)."""

    got: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, note_id: str) -> None:
        with self.lock:
            self.got.setdefault(note_id, []).append(time.monotonic())

    def ids(self) -> Counter[str]:
        with self.lock:
            return Counter({k: len(v) for k, v in self.got.items()})


def receiver_app(deliveries: Deliveries) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics() -> Response:  # a central scrape target: only the leader scrapes it
        return Response("central_probe 1\n", media_type="text/plain; version=0.0.4")

    @app.post("/hook")
    async def hook(request: Request) -> dict[str, str]:
        deliveries.add(request.headers["webhook-id"])
        return {"status": "ok"}

    return app


def push_probe(vm_url: str, series: int, at_ms: int) -> None:
    """``ha_probe{n=...} 1`` at ``at_ms`` into the engine (each series one alert group)."""
    lines = "".join(f'ha_probe{{n="{i}"}} 1 {at_ms}\n' for i in range(series))
    httpx.post(f"{vm_url}/api/v1/import/prometheus", content=lines, timeout=30).raise_for_status()


def pair_config(tmp: Path, name: str, pg_url: str, vm_url: str, hook_url: str, port: int, *,
                interval_s: int = 2, lease_s: int = 2, repeat_s: int = 3) -> Path:
    rules = tmp / "rules.yaml"
    rules.write_text(RULES.format(interval=f"{interval_s}s"))
    config = {
        "server": {"port": port},
        "gpu": {"nvml": "off"},
        "worker": {"embedded": False},
        "logging": {"level": "INFO"},
        "store": {"backend": "remote", "url": pg_url,
                  "remote": {"write_url": f"{vm_url}/api/v1/write", "query_url": vm_url,
                             "queue_dir": str(tmp / f"{name}-queue"), "flush_interval": "200ms"}},
        "alerts": {"default_rules": False, "rule_files": [str(rules)], "evaluation_interval": f"{interval_s}s"},
        "ha": {"enabled": True, "lease_duration": f"{lease_s}s", "holder": name},
        "scrape": {"interval": "1s", "timeout": "800ms",
                   "targets": [{"job": "central", "urls": [hook_url.rsplit("/", 1)[0] + "/metrics"], "engine": "none"}]},
        "notify": {
            "route": {"receiver": "hook", "group_by": ["alertname", "n"], "group_wait": "0s",
                      "group_interval": "1s", "repeat_interval": f"{repeat_s}s"},
            "receivers": [{"name": "hook", "webhook_configs": [{"url": hook_url, "timeout": "5s"}]}],
            "inhibit_rules": [],
            "delivery": {"poll_interval": "200ms"},
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(config))
    return path


@contextlib.contextmanager
def logs_on_failure(*procs: UpProcess) -> Iterator[None]:
    """An assertion failing inside shows the end of each process's log (timing failures on a
    slow machine are otherwise impossible to read from CI output)."""
    try:
        yield
    except AssertionError as exc:
        tails = "\n".join(f"--- {p.name}.log ---\n{p.log.read_text()[-2500:]}" for p in procs if p.log.exists())
        raise AssertionError(f"{exc}\n{tails}") from None


class UpProcess:
    def __init__(self, tmp: Path, name: str, config: Path, port: int) -> None:
        self.tmp, self.name, self.config, self.port = tmp, name, config, port
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[str] | None = None
        self.log = tmp / f"{name}.log"

    def start(self, wait: bool = True) -> None:
        out = open(self.log, "a")
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "infermeter", "--config", str(self.config), "up",
                                      "--port", str(self.port)], stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout_s: float = 90) -> None:
        try:
            wait_http(f"{self.base}/health", timeout_s, None)
        except AssertionError:
            raise AssertionError(f"{self.name} did not start:\n{self.log.read_text()[-3000:]}") from None

    def scraped_targets(self) -> list[str]:
        """URLs of the targets this process scrapes (its /api/v1/targets)."""
        data = httpx.get(f"{self.base}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        return [t["scrapeUrl"] for t in data]

    def role(self) -> str:
        try:
            body = httpx.get(f"{self.base}/ready", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return "down"
        return str(body.get("ha", {}).get("role", "?"))

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(30)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
            self.proc = None


def start_pair(tmp: Path, pg_url: str, vm_url: str, hook_url: str, **timing: int) -> tuple[UpProcess, UpProcess]:
    """Both processes at once (neither waits for the other)."""
    procs = []
    for name in ("a", "b"):
        port = free_port()
        procs.append(UpProcess(tmp, name, pair_config(tmp, name, pg_url, vm_url, hook_url, port, **timing), port))
    for p in procs:
        p.start(wait=False)
    for p in procs:
        p.wait_ready()
    return procs[0], procs[1]


@contextlib.contextmanager
def running_pair(tmp: Path, pg_url: str, vm_url: str, probes: int, **timing: int
                 ) -> Iterator[tuple[Deliveries, UpProcess, UpProcess]]:
    """A receiver, ``probes`` firing alerts' series in the engine and a pair started at once;
    yields (deliveries, leader, follower) and stops both processes after."""
    deliveries = Deliveries()
    push_probe(vm_url, probes, int(time.time() * 1000))
    with run_app(receiver_app(deliveries)) as hook:
        pair = start_pair(tmp, pg_url, vm_url, f"{hook}/hook", **timing)
        try:
            leader = leader_of(pair)
            yield deliveries, leader, pair[1] if leader is pair[0] else pair[0]
        finally:
            for proc in pair:
                proc.stop()


def leader_of(pair: tuple[UpProcess, UpProcess], timeout_s: float = 30) -> UpProcess:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        roles = [p.role() for p in pair]
        if roles.count("leader") == 1 and "follower" in roles:
            return pair[roles.index("leader")]
        time.sleep(0.1)
    raise AssertionError(f"no single leader within {timeout_s} s: {[p.role() for p in pair]}")


def account(rows: dict[str, str], got: Counter[str]) -> tuple[int, int, int]:
    """(lost, duplicated, still pending) of the notifications ``rows`` (the outbox, read after
    both processes stopped) against ``got`` (what the receiver counted). Quiet the alerts
    (:func:`quiet`) and drain before stopping, so that a pending row means one not delivered."""
    sent = {i for i, state in rows.items() if state == "sent"}
    pending = sum(1 for state in rows.values() if state == "pending")
    lost = len(sent - set(got)) + sum(1 for state in rows.values() if state == "failed")
    duplicated = sum(n - 1 for n in got.values() if n > 1) + len(set(got) - set(rows))
    return lost, duplicated, pending


def quiet(proc: UpProcess) -> None:
    """Silence the probe alerts (through ``proc``'s API), so no new notification is made and the
    outbox can drain to the last row before the pair stops."""
    ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    httpx.post(f"{proc.base}/api/v1/silences", timeout=10, json={
        "matchers": [{"name": "alertname", "value": "HaProbe.*", "isRegex": True, "isEqual": True}],
        "endsAt": ends, "createdBy": "ha test", "comment": "drain the outbox"}).raise_for_status()


def wait_drained(pg_url: str, deliveries: Deliveries, timeout_s: float, settle_s: float = 6.0) -> dict[str, str]:
    """Until every notification enqueued is sent and received and no new one has been enqueued for
    ``settle_s`` (a silence reaches the leader's notifier within its refresh, and a repeat that was
    already due can still be enqueued before it does); returns the outbox."""
    from tests.engines import wait_until

    seen: dict[str, object] = {"rows": None, "since": time.monotonic()}

    def drained() -> bool:
        rows = outbox_ids(pg_url)
        if set(rows) != seen["rows"]:
            seen["rows"], seen["since"] = set(rows), time.monotonic()
        settled = time.monotonic() - float(seen["since"]) >= settle_s  # type: ignore[arg-type]
        return (settled and bool(rows) and all(state == "sent" for state in rows.values())
                and set(rows) <= set(deliveries.ids()))

    wait_until(drained, timeout_s, "every enqueued notification sent and received")
    return outbox_ids(pg_url)


def outbox_ids(pg_url: str) -> dict[str, str]:
    """Every notification the pair enqueued: id -> state."""
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            return {r.id: r.state for r in conn.execute(sa.text("SELECT id, state FROM notify_outbox"))}
    finally:
        engine.dispose()


class CuttableProxy:
    """A TCP proxy on loopback to ``target`` whose connections can be cut (a network partition
    between one process and the database)."""

    def __init__(self, target_port: int) -> None:
        import socket

        self.target_port = target_port
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self._conns: list[object] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            # Checked and registered under the lock `cut` takes: a connection accepted while the
            # cut happens is either cut with the others or refused, never left working.
            with self._lock:
                if not self.open.is_set():
                    client.close()
                    upstream.close()
                    continue
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: object, dst: object) -> None:
        try:
            while data := src.recv(65536):  # type: ignore[attr-defined]
                dst.sendall(data)  # type: ignore[attr-defined]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()  # type: ignore[attr-defined]
                except OSError:
                    pass

    def cut(self) -> None:
        import socket

        with self._lock:
            self.open.clear()
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # type: ignore[attr-defined]
            except OSError:
                pass

    def restore(self) -> None:
        with self._lock:
            self.open.set()

    def close(self) -> None:
        self.cut()
        self.server.close()
