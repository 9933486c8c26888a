"""The engine client's failure paths, answered by an in-process transport that behaves like a
broken or refusing engine, and the remote backend's config checks: each failure names the
engine's URL (or the setting) and what went wrong."""

from __future__ import annotations

import httpx
import pytest

from infermeter.config_file import ConfigError, parse_config_text
from remote.client import EngineClient, EngineError
from store.series_index import Matcher, Selector


def _client(handler: object) -> EngineClient:
    return EngineClient("http://vm.example:8428/select/0/prometheus/", transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


def test_a_refusal_names_the_url_the_error_type_and_the_message() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "unknown function foo"})

    with pytest.raises(EngineError) as caught:
        _client(refuse).instant("foo(up)", 1_800_000_000_000)
    text = str(caught.value)
    assert "http://vm.example:8428/select/0/prometheus/api/v1/query" in text
    assert "400 bad_data" in text and "unknown function foo" in text


def test_an_answer_without_json_and_an_unreachable_engine_are_engine_errors() -> None:
    def gateway(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>Bad Gateway</html>")

    with pytest.raises(EngineError, match="answered 502 without JSON"):
        _client(gateway).series(Selector("up"), 0, 1)

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = _client(down)
    with pytest.raises(EngineError, match="unreachable: ConnectError"):
        client.raw(Selector("up"), 0, 60_000)
    assert "unreachable" in (client.healthy(0) or "")


def test_requests_are_form_posts_with_the_selector_and_raw_samples_keep_the_window() -> None:
    seen: list[dict[str, list[str]]] = []

    def engine(request: httpx.Request) -> httpx.Response:
        from urllib.parse import parse_qs

        seen.append(parse_qs(request.content.decode()))
        result = [{"metric": {"__name__": "up", "job": "a"}, "values": [[59.999, "1"], [60.0, "NaN"], [61.0, "+Inf"]]}]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": result}})

    found = _client(engine).raw(Selector("up", (Matcher("job", "=~", "a|b"),)), 0, 60_000)
    assert seen[0]["query"] == ['up{job=~"a|b"}[60001ms]']  # (end - range, end] holds [start, end]
    assert seen[0]["time"] == ["60.000"]
    assert found.ts[0].tolist() == [59_999, 60_000]  # the sample past the window is left out
    assert found.values[0][0] == 1.0 and found.values[0][1] != found.values[0][1]


@pytest.mark.parametrize(("text", "names"), [
    ("store:\n  backend: remote\n", "store.remote.write_url and store.remote.query_url"),
    ("store:\n  backend: remote\n  remote:\n    write_url: http://vm:8428/api/v1/write\n", "store.remote.query_url"),
    ("store:\n  backend: remote\n  remote:\n    write_url: vm:8428\n    query_url: http://vm:8428\n", "is not an http(s) URL"),
    ("store:\n  backend: prometheus\n", "store.backend"),
])
def test_a_remote_backend_without_usable_urls_is_refused_naming_the_setting(text: str, names: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, "c.yaml", environ={})
    assert names in "\n".join(str(p) for p in caught.value.problems)
