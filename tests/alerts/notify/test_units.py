"""Pure parts: config, matchers, routing, inhibition, dedup, signing, retry policy, payloads."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from standardwebhooks import Webhook, WebhookVerificationError

from alerts.model import Alert
from alerts.notify.config import NotifyConfig, RetryConfig
from alerts.notify.dedup import LogEntry, Reason, decide
from alerts.notify.dispatcher import backoff_ms
from alerts.notify.inhibit import Inhibitor, InhibitRule
from alerts.notify.matchers import Matcher, parse_matcher
from alerts.notify.payloads import Notification, rfc3339, slack_text, webhook_body
from alerts.notify.routing import compile_routes
from alerts.notify.signing import SignatureError, sign, signature_headers, verify
from alerts.notify.sinks import classify, parse_retry_after
from tests.alerts.notify.conftest import alert
from tests.conftest import T0


def test_config_defaults_and_durations() -> None:
    cfg = NotifyConfig()
    assert (cfg.route.group_wait, cfg.route.group_interval, cfg.route.repeat_interval) == (30_000, 300_000, 14_400_000)
    assert [r.name for r in cfg.receivers] == ["default"] and cfg.route.receiver == "default"
    [rule] = cfg.inhibit_rules
    assert rule.source_matchers == ('alertname="TargetDown"',) and rule.equal == ("instance", "job")
    cfg = NotifyConfig.model_validate({"route": {"group_wait": "1m30s", "repeat_interval": "1d"}, "resolve_timeout": 90})
    assert (cfg.route.group_wait, cfg.route.repeat_interval, cfg.resolve_timeout) == (90_000, 86_400_000, 90_000)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"route": {"group_wait": "soon"}}, ("route", "group_wait")),
        ({"route": {"receiver": "nobody"}}, ()),
        ({"route": {"routes": [{"receiver": "nobody"}]}}, ()),
        ({"receivers": [{"name": "default", "webhook_configs": [{"url": "ftp://x"}]}]}, ("receivers", 0, "webhook_configs", 0, "url")),
        ({"receivers": [{"name": "default", "webhook_configs": [{"url": "http://x", "secret": "plain"}]}]},
         ("receivers", 0, "webhook_configs", 0, "secret")),
        ({"inhibit_rules": [{"source_matchers": ["a=~\"(\""], "target_matchers": ["b=1"]}]},
         ("inhibit_rules", 0, "source_matchers")),
        ({"receivers": [{"name": "default"}, {"name": "default"}]}, ()),
        ({"route": {"colour": "red"}}, ("route", "colour")),
    ],
)
def test_config_errors_name_the_field(data: dict[str, object], where: tuple[object, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        NotifyConfig.model_validate(data)
    [error] = caught.value.errors()
    assert error["loc"] == where
    if not where:
        assert "receiver" in error["msg"]


def test_matchers() -> None:
    assert parse_matcher('severity="critical"') == Matcher("severity", "=", "critical")
    assert parse_matcher("job!~node.*") == Matcher("job", "!~", "node.*")
    assert parse_matcher('a="x\\"y"').value == 'x"y'
    m = parse_matcher('instance=~"n[12]"')
    assert m.matches({"instance": "n1"}) and not m.matches({"instance": "n12"}) and not m.matches({})
    assert parse_matcher('team=""').matches({}) and parse_matcher('team!=""').matches({"team": "a"})
    assert Matcher.from_api("a", "b", is_regex=True, is_equal=False).op == "!~"
    for bad in ("=x", "1a=b", 'a=~"("', "a~b"):
        with pytest.raises(ValueError):
            parse_matcher(bad)


def test_routing_first_match_continue_and_inheritance() -> None:
    cfg = NotifyConfig.model_validate({
        "route": {"receiver": "all", "group_by": ["alertname"], "routes": [
            {"matchers": ['team="ml"'], "receiver": "ml", "continue": True, "group_wait": "5s"},
            {"matchers": ['severity="critical"'], "receiver": "pager", "group_by": ["..."],
             "routes": [{"matchers": ['alertname="XidError"'], "receiver": "hw"}]},
            {"matchers": ['severity="critical"'], "receiver": "never"},
        ]},
        "receivers": [{"name": n} for n in ("all", "ml", "pager", "hw", "never")],
    })
    root = compile_routes(cfg.route)

    def route_of(**labels: str) -> list[tuple[str, int]]:
        return [(r.receiver, r.group_wait_ms) for r in root.match(labels)]

    assert route_of(alertname="X") == [("all", 30_000)]
    assert route_of(alertname="X", team="ml") == [("ml", 5_000)]
    assert route_of(alertname="X", team="ml", severity="critical") == [("ml", 5_000), ("pager", 30_000)]
    [hw] = root.match({"alertname": "XidError", "severity": "critical", "gpu": "1"})
    assert hw.receiver == "hw" and hw.group_by_all
    assert hw.group_key({"alertname": "XidError", "severity": "critical", "gpu": "1"}) == (
        '{}/{severity="critical"}/{alertname="XidError"}:{alertname="XidError", gpu="1", severity="critical"}'
    )


def _rule(source: str, target: str, *equal: str) -> InhibitRule:
    return InhibitRule((parse_matcher(source),), (parse_matcher(target),), equal)


def test_inhibition_semantics() -> None:
    rules = [_rule('alertname="TargetDown"', 'alertname=~".*Throughput.*"', "instance", "job")]
    down = alert("TargetDown", instance="n1", job="vllm")
    inh = Inhibitor(rules, [down])
    assert inh.muted(alert("GpuThroughputLow", instance="n1", job="vllm"))
    assert not inh.muted(alert("GpuThroughputLow", instance="n2", job="vllm"))
    assert not inh.muted(alert("GpuThroughputLow", instance="n1", job="sglang"))
    assert not inh.muted(alert("GpuMemoryHigh", instance="n1", job="vllm"))
    resolved = alert("TargetDown", "resolved", ends=T0, instance="n1", job="vllm")
    assert not Inhibitor(rules, [resolved]).muted(alert("GpuThroughputLow", instance="n1", job="vllm"))
    # Missing equal labels compare as empty on both sides.
    assert Inhibitor(rules, [alert("TargetDown")]).muted(alert("WorkerThroughputLow"))
    # An alert matching both sides does not inhibit itself, only its peers that are one-sided.
    both = [_rule('severity=~"critical|warning"', 'severity="warning"', "alertname")]
    warn = alert("GpuHot", instance="a")  # severity=warning matches both sides
    assert not Inhibitor(both, [warn]).muted(warn)
    crit = Alert({"alertname": "GpuHot", "severity": "critical"}, {}, "firing", T0)
    assert Inhibitor(both, [warn, crit]).muted(warn)


def test_dedup_decisions() -> None:
    def d(entry: LogEntry | None, firing: set[str], resolved: set[str] = set(), now: int = 10,  # noqa: B006
          send_resolved: bool = True) -> Reason:
        decision = decide(entry, firing, resolved, now_ms=now, repeat_ms=100, send_resolved=send_resolved)
        assert decision.notify == (decision.reason not in (Reason.NO_CHANGE, Reason.NOTHING_FIRING))
        return decision.reason

    e = LogEntry(0, frozenset({"a", "b"}), frozenset())
    assert decide(None, {"a"}, set(), now_ms=0, repeat_ms=1, send_resolved=True).reason is Reason.FIRST
    assert not decide(None, set(), {"a"}, now_ms=0, repeat_ms=1, send_resolved=True).notify
    assert d(e, {"a", "b", "c"}) is Reason.NEW_ALERTS
    assert d(e, {"a", "b"}) is Reason.NO_CHANGE
    assert d(e, {"a"}, {"b"}) is Reason.SOME_RESOLVED
    assert d(e, {"a"}, {"b"}, send_resolved=False) is Reason.NO_CHANGE
    assert d(e, {"a"}, {"z"}) is Reason.NO_CHANGE  # never told about z
    assert d(LogEntry(0, frozenset({"a"}), frozenset({"b"})), {"a"}, {"b"}) is Reason.NO_CHANGE
    assert d(e, set(), {"a", "b"}) is Reason.ALL_RESOLVED
    assert d(e, set(), set(), send_resolved=False) is Reason.ALL_RESOLVED  # clears the log
    assert d(LogEntry(0, frozenset(), frozenset({"a"})), set()) is Reason.NOTHING_FIRING
    assert d(e, {"a", "b"}, now=100) is Reason.REPEAT


def test_standard_webhooks_reference_vector() -> None:
    secret, msg_id, body = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", b'{"test": 2432232314}'
    signature = sign(secret, msg_id, 1614265330, body)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    headers = {"webhook-id": msg_id, "webhook-timestamp": "1614265330", "webhook-signature": f"v1,bm9wZQ== {signature}"}
    assert verify(secret, headers, body, now_s=1614265330) == msg_id
    for broken, now in [({**headers, "webhook-id": "msg_other"}, 1614265330), (headers, 1614265330 + 301)]:
        with pytest.raises(SignatureError):
            verify(secret, broken, body, now_s=now)
    with pytest.raises(SignatureError):
        verify(secret, headers, body + b" ", now_s=1614265330)


def test_our_signatures_pass_the_reference_verifier() -> None:
    """The package's own ``Webhook.verify`` (wall clock, 5-minute window) accepts what we send,
    and rejects a tampered body, another id and a timestamp outside the window; ours agrees."""
    secret, body = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", '{"alerts": ["é"]}'.encode()
    now = int(time.time())
    headers = signature_headers(secret, "msg_1", now, body)
    assert Webhook(secret).verify(body, headers) == {"alerts": ["é"]}
    assert verify(secret, headers, body, now_s=now) == "msg_1"
    stale = signature_headers(secret, "msg_1", now - 3600, body)
    future = signature_headers(secret, "msg_1", now + 3600, body)
    for bad_headers, bad_body in [(headers, body + b" "), (headers, body.replace(b"alerts", b"alertz")),
                                  ({**headers, "webhook-id": "msg_2"}, body), (stale, body), (future, body)]:
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(bad_body, bad_headers)
        with pytest.raises(SignatureError):
            verify(secret, bad_headers, bad_body, now_s=now)
    # and the other way round: a signature made by the package passes our verify
    theirs = Webhook(secret).sign("msg_3", datetime.fromtimestamp(now, tz=UTC), body.decode())
    assert verify(secret, {"webhook-id": "msg_3", "webhook-timestamp": str(now), "webhook-signature": theirs},
                  body, now_s=now) == "msg_3"


def test_secret_formats() -> None:
    bare = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    assert sign(bare, "m", 1, b"{}") == sign("whsec_" + bare, "m", 1, b"{}")  # the prefix is optional
    for bad in ["whsec_MfKQ9r8G!YqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_abc"]:  # not base64 / empty
        with pytest.raises(ValueError):
            sign(bad, "m", 1, b"{}")
    headers = signature_headers(None, "m", 1, b"{}")
    assert headers == {"webhook-id": "m", "webhook-timestamp": "1"}  # unsigned without a secret
    with pytest.raises(SignatureError):
        verify(bare, {**signature_headers(bare, "m", 1, b"{}"), "webhook-signature": "garbage"}, b"{}", now_s=1)


def test_retry_after_and_classification() -> None:
    assert parse_retry_after("120", 0) == 120_000
    assert parse_retry_after("Thu, 01 Jan 1970 00:02:00 GMT", 60_000) == 60_000
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", 60_000) == 0
    assert parse_retry_after("soon", 0) is None and parse_retry_after(None, 0) is None
    req = httpx.Request("POST", "http://x")

    def answer(status: int, **headers: str) -> tuple[bool, bool, str, int | None]:
        r = classify(httpx.Response(status, headers=headers, content=b"why", request=req), 0)
        return r.ok, r.retryable, r.reason, r.retry_after_ms

    assert answer(204) == (True, False, "ok", None)
    assert answer(503, **{"retry-after": "7"}) == (False, True, "http_5xx", 7000)
    assert answer(429) == (False, True, "http_429", None)
    assert answer(408) == (False, True, "http_408", None)
    assert answer(404) == (False, False, "http_4xx", None)
    assert answer(301) == (False, False, "http_3xx", None)


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=0, max_value=2**32))
def test_backoff_is_full_jitter_under_the_cap(attempt: int, seed: int) -> None:
    retry = RetryConfig.model_validate({"initial_backoff": "500ms", "max_backoff": "1m"})
    delay = backoff_ms(attempt, retry, random.Random(seed))
    assert 0 <= delay <= min(60_000, 500 * 2 ** (attempt - 1))


def test_payload_details() -> None:
    resolved = alert("GpuHot", "resolved", ends=T0 + 60_000, instance="a", runbook_url="http://rb")
    note = Notification("r", "{}:{}", {}, [alert("GpuHot", instance="b"), resolved], "http://im", "x", T0)
    body = webhook_body(note)
    assert '"endsAt":"2027-01-15T08:01:00.000Z"' in body and '"externalURL":"http://im"' in body
    assert rfc3339(T0 + 1) == "2027-01-15T08:00:00.001Z"
    text = slack_text(note)
    assert text.splitlines()[0] == "[FIRING:1] r" and "<http://im|open infermeter>" in text
