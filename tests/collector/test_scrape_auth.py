"""Scrape credentials and TLS against real loopback targets: basic auth (password file rotated
between scrapes), bearer credentials, credentials in the URL, https with a private CA. The
secrets never show in the instance label, /api/v1/targets, stored series, /metrics or the
audit log."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from infermeter.config_file import load_settings
from tests.service import free_port, serve
from tests.tls_certs import self_signed

BODY = '# TYPE demo_up gauge\ndemo_up{model_name="m"} 1\n'
SECRETS = ("hunter2", "rotated-pw", "s3cr3t-bearer", "url-pass")


class Accepts:
    def __init__(self) -> None:
        self.basic = "hunter2"
        self.seen: list[str] = []


def _app(accepts: Accepts) -> Starlette:
    def check(request: Request, expected: str) -> Response:
        given = request.headers.get("authorization", "")
        accepts.seen.append(given)
        if given != expected:
            return PlainTextResponse("no", status_code=401)
        return PlainTextResponse(BODY, headers={"content-type": "text/plain; version=0.0.4"})

    def basic(request: Request) -> Response:
        token = base64.b64encode(f"scraper:{accepts.basic}".encode()).decode()
        return check(request, f"Basic {token}")

    def bearer(request: Request) -> Response:
        return check(request, "Bearer s3cr3t-bearer")

    def in_url(request: Request) -> Response:
        return check(request, "Basic " + base64.b64encode(b"u:url-pass").decode())

    def open_route(_: Request) -> Response:
        return PlainTextResponse(BODY)

    return Starlette(routes=[Route("/basic", basic), Route("/bearer", bearer), Route("/url", in_url),
                             Route("/open", open_route)])


@contextmanager
def _target(accepts: Accepts, cert: Path | None = None, key: Path | None = None) -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(_app(accepts), host="127.0.0.1", port=port, log_level="warning",
                            ssl_certfile=str(cert) if cert else None, ssl_keyfile=str(key) if key else None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def _wait_targets(base: str, jobs: int, rounds: int = 60) -> dict[str, dict[str, object]]:
    for _ in range(rounds):
        data = httpx.get(f"{base}/api/v1/targets").json()["data"]["activeTargets"]
        if len(data) == jobs and all(t["health"] != "unknown" for t in data):
            return {str(t["labels"]["job"]): t for t in data}
        time.sleep(0.2)
    raise AssertionError("targets were not scraped")


def test_credentials_and_tls_of_scrape_targets_work_and_never_leak(tmp_path: Path) -> None:
    accepts = Accepts()
    password = tmp_path / "password"
    password.write_text("hunter2\n")
    cert, key = self_signed(tmp_path)
    config = tmp_path / "infermeter.yaml"
    with _target(accepts) as port, _target(accepts, cert, key) as tls_port:
        config.write_text(
            f"store:\n  url: sqlite:///{tmp_path / 's.db'}\ngpu:\n  nvml: 'off'\nworker:\n  embedded: false\n"
            "scrape:\n  interval: 500ms\n  timeout: 400ms\n  targets:\n"
            f"    - job: basic\n      urls: [http://127.0.0.1:{port}/basic]\n"
            f"      basic_auth: {{username: scraper, password_file: {password}}}\n"
            f"    - job: bearer\n      urls: [http://127.0.0.1:{port}/bearer]\n"
            "      authorization: {credentials: s3cr3t-bearer}\n"
            f"    - job: url\n      urls: ['http://u:url-pass@127.0.0.1:{port}/url']\n"
            f"    - job: tls\n      urls: [https://127.0.0.1:{tls_port}/open]\n      tls_config: {{ca_file: {cert}}}\n"
            f"    - job: tls-name\n      urls: [https://127.0.0.1:{tls_port}/open]\n"
            f"      tls_config: {{ca_file: {cert}, server_name: metrics.internal}}\n"
            f"    - job: untrusted\n      urls: [https://127.0.0.1:{tls_port}/open]\n"
            f"    - job: lost-file\n      urls: [http://127.0.0.1:{port}/bearer]\n"
            f"      authorization: {{credentials_file: {tmp_path / 'missing'}}}\n"
        )
        settings, _ = load_settings(str(config))
        with serve(settings, config_path=str(config)) as (base, runtime):
            status = _wait_targets(base, 7)
            for job in ("basic", "bearer", "url", "tls", "tls-name"):
                assert status[job]["health"] == "up", (job, status[job])
            assert status["untrusted"]["health"] == "down" and "CERTIFICATE_VERIFY_FAILED" in str(status["untrusted"]["lastError"])
            assert status["lost-file"]["lastErrorReason"] == "auth" and "missing" in str(status["lost-file"]["lastError"])
            assert status["url"]["labels"]["instance"] == f"127.0.0.1:{port}"
            assert status["url"]["scrapeUrl"] == f"http://127.0.0.1:{port}/url"

            # the password file changes: the next scrapes use the new one, no reload
            accepts.basic = "rotated-pw"
            password.write_text("rotated-pw\n")
            time.sleep(1.5)
            assert _wait_targets(base, 7)["basic"]["health"] == "up"
            assert any("Basic " + base64.b64encode(b"scraper:rotated-pw").decode() == s for s in accepts.seen)

            shown = [httpx.get(f"{base}/api/v1/targets").text, httpx.get(f"{base}/metrics").text,
                     httpx.get(f"{base}/api/v1/series", params={"match[]": "demo_up"}).text,
                     httpx.get(f"{base}/api/v1/label/instance/values").text, repr(runtime.scrapes.statuses())]  # type: ignore[union-attr]
            config.write_text(config.read_text().replace("500ms", "450ms"))
            assert httpx.post(f"{base}/-/reload").status_code == 200
            shown.append(httpx.get(f"{base}/api/v1/audit").text)
            assert "scrape" in shown[-1]
            for text in shown:
                for secret in SECRETS:
                    assert secret not in text
