"""Run the worker in the foreground (uvicorn) with a graceful drain on SIGTERM/SIGINT.

On the first signal the health path turns 503 (``draining``), new requests answer 503, uvicorn
stops listening and waits up to ``drain_timeout_ms`` (default ``timeout_ms``) for the requests
in flight, then the engine stops.  A second signal exits at once (uvicorn's behaviour).

Exit codes: 0 after a clean stop (also after SIGTERM: uvicorn would re-raise the signal); 78 (EX_CONFIG) when the worker refused to start (memory plan,
manifest, precision...; the message goes to stderr and a supervisor should not restart it).
"""

from __future__ import annotations

import logging
from typing import Any, TextIO

from worker.config import WorkerConfig

EXIT_REFUSED = 78


def serve(config: WorkerConfig, *, out: TextIO, err: TextIO, log_level: str = "info") -> int:
    import uvicorn

    from worker.api import create_app

    failures: list[str] = []
    holder: dict[str, Any] = {}

    def on_failed(message: str) -> None:
        failures.append(message)
        server = holder.get("server")
        if server is not None:
            server.should_exit = True

    app = create_app(config, on_failed=on_failed)
    svc = app.state.worker

    class _DrainingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            svc.runtime.begin_drain()
            super().handle_exit(sig, frame)
            # uvicorn re-raises the signal after its graceful shutdown (the process then dies
            # "by SIGTERM"); a drained worker exits 0 instead, so supervisors see a clean stop.
            self._captured_signals.clear()

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "httpcore"):  # one INFO line per HTTP request: only at debug
        logging.getLogger(name).setLevel(logging.NOTSET if log_level.lower() == "debug" else logging.WARNING)
    uv = uvicorn.Config(
        app, host=config.host, port=config.port, log_level=log_level.lower(), access_log=False,
        timeout_graceful_shutdown=max(1, config.drain_ms // 1000 + 1), lifespan="on",
    )
    server = _DrainingServer(uv)
    holder["server"] = server
    print(f"worker {config.model_name} on {config.url()} (health {config.health_check_path}); loading...",
          file=out, flush=True)
    server.run()
    if failures:
        print(f"refusing to start: {failures[0]}", file=err, flush=True)
        return EXIT_REFUSED
    return 0
