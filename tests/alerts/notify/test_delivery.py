"""Delivery through the outbox to a real webhook receiver on loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

import email.utils
import json
import random
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from alerts.notify.service import Notifier
from store import ManualClock, SystemClock, create_store_engine
from tests.alerts.notify.conftest import (
    NotifierFactory,
    Receiver,
    alert,
    config,
    free_port,
    sample,
    wait_until,
)

S = 1000


def test_every_notification_arrives_once_across_refusals_503s_and_a_restart(store_url: str, receiver: Receiver) -> None:
    """Nothing listens at first; the pipeline restarts while notifications are pending; then the
    receiver answers 503 with Retry-After twice, then accepts. Each notification arrives, once,
    signed, with its id; none is lost."""
    engine = create_store_engine(store_url)
    clock = SystemClock()
    cfg = config(
        receiver.url,
        route={"group_wait": "400ms", "group_interval": "300ms", "repeat_interval": "1h"},
        retry={"initial_backoff": "50ms", "max_backoff": "200ms"},
        delivery={"poll_interval": "50ms"},
    )
    first = Notifier(cfg, engine, clock, CollectorRegistry(), random.Random(1))
    first.start()
    first.submit([alert(f"Early{i}", instance="a", starts=clock.now_ms()) for i in range(6)])
    wait_until(lambda: sample(first, "retries", reason="connect") >= 4, what="refused attempts")
    # Submitted just before the stop: stored by the final tick, flushed by the next process.
    first.submit([alert(f"Late{i}", instance="a", starts=clock.now_ms()) for i in range(3)])
    assert first.stop(5)
    pending = first.outbox.rows()
    assert len(pending) == 6 and {r.state for r in pending} == {"pending"}
    assert all(r.attempts >= 1 and r.reason == "connect" for r in pending if r.attempts)

    receiver.script.extend([(503, {"retry-after": "1"}, b"busy")] * 2)
    receiver.start()
    second = Notifier(cfg, engine, clock, CollectorRegistry(), random.Random(2))
    second.start()
    try:
        wait_until(lambda: len(second.outbox.rows("sent")) == 9, what="all nine delivered")
    finally:
        assert second.stop(5)
    rows = {r.id: r for r in second.outbox.rows()}
    assert len(rows) == 9 and {r.state for r in rows.values()} == {"sent"}
    accepted = receiver.accepted()
    assert sorted(d.id for d in accepted) == sorted(rows)  # every notification, exactly once
    for d in accepted:
        assert d.body.decode() == rows[d.id].body  # same bytes as written to the outbox
        assert d.headers["webhook-signature"].startswith("v1,")
    names = sorted(d.json()["alerts"][0]["labels"]["alertname"] for d in accepted)
    assert names == sorted([f"Early{i}" for i in range(6)] + [f"Late{i}" for i in range(3)])
    assert receiver.bad_signatures == 0
    # Retry-After honoured: after each 503 the receiver heard nothing for a second.
    busy = [i for i, d in enumerate(receiver.deliveries) if d.answered == 503]
    assert len(busy) == 2
    for i in busy:
        after = receiver.deliveries[i + 1]
        assert after.at - receiver.deliveries[i].at >= 0.95
    assert {receiver.deliveries[i].id for i in busy} <= {d.id for d in accepted}  # refused ones came again
    assert sample(second, "sent") == 9
    assert sample(second, "retries", reason="http_5xx") == 2
    engine.dispose()


def test_client_errors_are_not_retried_and_are_reported(
    make_notifier: NotifierFactory, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.now_s = lambda: clock.now_ms() // 1000
    receiver.script.append((400, {}, b'{"error": "unknown field notification_reason"}'))
    receiver.start()
    n = make_notifier(config(receiver.url))
    n.submit([alert("GpuHot", instance="a")])
    n.pipeline.tick()
    clock.advance(30 * S)
    n.pipeline.tick()
    n.dispatcher.poll(wait=True)
    [row] = n.outbox.rows()
    assert (row.state, row.last_status, row.reason, row.attempts) == ("failed", 400, "http_4xx", 1)
    assert row.last_error is not None and "unknown field notification_reason" in row.last_error
    clock.advance(3_600 * S)
    n.dispatcher.poll(wait=True)
    assert len(receiver.deliveries) == 1
    assert sample(n, "failed", reason="http_4xx") == 1 and sample(n, "retries") == 0


def test_408_429_and_5xx_are_retried_honouring_an_http_date(
    make_notifier: NotifierFactory, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.now_s = lambda: clock.now_ms() // 1000
    later = email.utils.format_datetime(datetime.fromtimestamp(clock.now_ms() / 1000 + 150, UTC), usegmt=True)
    receiver.script.extend([(408, {}, b""), (500, {}, b"oops"), (429, {"retry-after": later}, b"slow down")])
    receiver.start()
    n = make_notifier(config(receiver.url, retry={"initial_backoff": "1s", "max_backoff": "4s"}))
    n.submit([alert("GpuHot", instance="a")])
    n.pipeline.tick()
    clock.advance(30 * S)
    n.pipeline.tick()
    for _ in range(3):
        n.dispatcher.poll(wait=True)
        clock.advance(4 * S)  # past any backoff (capped at 4 s)
    assert [d.answered for d in receiver.deliveries] == [408, 500, 429]
    n.dispatcher.poll(wait=True)
    clock.advance(100 * S)  # 30 + 104 s after the 429: still before its Retry-After date
    n.dispatcher.poll(wait=True)
    assert len(receiver.deliveries) == 3
    clock.advance(30 * S)
    n.dispatcher.poll(wait=True)
    assert [d.answered for d in receiver.deliveries] == [408, 500, 429, 200]
    assert len({d.id for d in receiver.deliveries}) == 1
    [row] = n.outbox.rows()
    assert (row.state, row.attempts) == ("sent", 4)
    assert sample(n, "retries", reason="http_408") == 1 and sample(n, "retries", reason="http_429") == 1


def test_an_attempt_cut_short_by_a_crash_is_retried_after_its_lease(
    make_notifier: NotifierFactory, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.now_s = lambda: clock.now_ms() // 1000
    receiver.start()
    n = make_notifier(config(receiver.url))
    n.submit([alert("GpuHot", instance="a")])
    n.pipeline.tick()
    clock.advance(30 * S)
    n.pipeline.tick()
    [row] = n.outbox.rows()
    assert n.outbox.claim(row, clock.now_ms() + 32 * S, clock.now_ms())  # then the process died
    after = make_notifier(config(receiver.url))
    after.dispatcher.poll(wait=True)
    assert receiver.deliveries == []
    clock.advance(32 * S)
    after.dispatcher.poll(wait=True)
    [delivery] = receiver.accepted()
    assert delivery.id == row.id
    assert after.outbox.rows()[0].attempts == 2


def test_gone_integrations_and_too_old_notifications_fail(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    n = make_notifier(config(retry={"max_age": "1h"}, resolve_timeout="1d"))
    n.submit([alert("GpuHot", instance="a"), alert("GpuCold", instance="a")])
    n.pipeline.tick()
    clock.advance(30 * S)
    n.pipeline.tick()
    assert len(n.outbox.rows("pending")) == 2
    clock.advance(2 * 3_600 * S)  # nothing could be delivered (nothing listens on port 9) for 2 h
    n.dispatcher.poll(wait=True)
    assert [r.reason for r in n.outbox.rows("failed")] == ["expired", "expired"]
    assert sample(n, "failed", reason="expired") == 2

    n.submit([alert("GpuWarm", instance="a")])
    n.pipeline.tick()
    clock.advance(30 * S)
    n.pipeline.tick()
    assert len(n.outbox.rows("pending")) == 1
    other = make_notifier(config(receivers=[{"name": "hook"}]))  # the webhook left the config
    other.dispatcher.poll(wait=True)
    assert [r.reason for r in other.outbox.rows("failed")] == ["expired", "expired", "unknown_integration"]
    assert sample(other, "failed", reason="unknown_integration") == 1


def test_unsigned_webhook_without_secret(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    plain = Receiver(free_port())
    plain.start()
    try:
        n = make_notifier(config(receivers=[{"name": "hook", "webhook_configs": [{"url": plain.url}]}]))
        n.submit([alert("GpuHot", instance="a")])
        n.pipeline.tick()
        clock.advance(30 * S)
        n.pipeline.tick()
        n.dispatcher.poll(wait=True)
        [d] = plain.accepted()
        assert "webhook-signature" not in d.headers and d.headers["webhook-id"] == n.outbox.rows()[0].id
        assert d.headers["webhook-timestamp"] == str(clock.now_ms() // 1000)
        assert json.loads(d.body)["receiver"] == "hook"
    finally:
        plain.stop()


def test_a_recovered_receiver_gets_its_backlog_within_a_probe_interval_not_a_backoff(
    make_notifier: NotifierFactory, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.now_s = lambda: clock.now_ms() // 1000
    receiver.script.extend([(503, {}, b"down")] * 3)  # then it answers 200: recovered
    receiver.start()
    n = make_notifier(config(receiver.url, retry={"initial_backoff": "10m", "max_backoff": "10m"},
                             delivery={"probe_interval": "15s"}))
    n.submit([alert("GpuHot", instance="a"), alert("GpuCold", instance="a"), alert("GpuIdle", instance="a")])
    n.pipeline.tick()
    clock.advance(30 * S)
    n.pipeline.tick()
    for _ in range(3):
        n.dispatcher.poll(wait=True)
    assert [d.answered for d in receiver.deliveries] == [503, 503, 503]
    now = clock.now_ms()
    waits = sorted(r.next_attempt_ms - now for r in n.outbox.rows(state="pending"))
    assert len(waits) == 3 and waits[-1] > 60 * S  # their backoffs alone would keep them waiting minutes
    clock.advance(14 * S)
    n.dispatcher.poll(wait=True)
    assert len(receiver.accepted()) == sum(1 for w in waits if w <= 14 * S)  # only what its own backoff allowed
    clock.advance(1 * S)
    for _ in range(4):  # the probe (the oldest row), then the released rest, one in flight at a time
        n.dispatcher.poll(wait=True)
    assert len(receiver.accepted()) == 3
    assert {r.state for r in n.outbox.rows()} == {"sent"}
    assert len({d.id for d in receiver.accepted()}) == 3  # each once
