"""Grouping, repeat, inhibition, silences and restarts, on a fake clock (ticks driven by hand)."""

from __future__ import annotations

import json
from typing import Any

from alerts.notify.config import NotifyConfig
from alerts.notify.matchers import Matcher
from alerts.notify.service import Notifier
from alerts.notify.silences import SilenceSpec
from store import ManualClock
from tests.alerts.notify.conftest import NotifierFactory, alert, config
from tests.conftest import T0

S, M, H = 1000, 60_000, 3_600_000


def bodies(n: Notifier) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in n.outbox.rows()]


def names(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(a["labels"]["alertname"], a["labels"].get("instance", ""), a["status"]) for a in body["alerts"]]


def step(n: Notifier, clock: ManualClock, ms: int) -> None:
    clock.advance(ms)
    n.pipeline.tick()


def test_group_wait_interval_repeat_and_resolve(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    n = make_notifier()
    n.submit([alert("GpuMemoryHigh", instance="a")])
    n.pipeline.tick()
    step(n, clock, 29 * S)
    assert bodies(n) == []  # group_wait 30s not over
    n.submit([alert("GpuMemoryHigh", instance="b", starts=T0 + 29 * S)])  # joins the waiting group
    step(n, clock, 1 * S)
    [first] = bodies(n)
    assert first["version"] == "4" and first["status"] == "firing" and first["receiver"] == "hook"
    assert first["groupKey"] == '{}:{alertname="GpuMemoryHigh"}'
    assert first["groupLabels"] == {"alertname": "GpuMemoryHigh"}
    assert first["commonLabels"] == {"alertname": "GpuMemoryHigh", "severity": "warning"}
    assert first["truncatedAlerts"] == 0 and first["notification_reason"] == "first notification"
    assert names(first) == [("GpuMemoryHigh", "a", "firing"), ("GpuMemoryHigh", "b", "firing")]
    assert first["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert first["alerts"][0]["startsAt"] == "2027-01-15T08:00:00.000Z"
    assert len(first["alerts"][0]["fingerprint"]) == 16

    # A third alert waits for the group's next interval (5m after the flush), not group_wait.
    n.submit([alert("GpuMemoryHigh", instance="c", starts=T0 + 31 * S)])
    step(n, clock, 1 * S)
    step(n, clock, 4 * M)
    assert len(bodies(n)) == 1
    step(n, clock, 59 * S)
    assert len(bodies(n)) == 2 and bodies(n)[1]["notification_reason"] == "new alerts added"

    # Nothing new: no notification at the next intervals, but one when repeat_interval (4h) is up.
    for _ in range(47):
        n.submit([alert("GpuMemoryHigh", instance=i) for i in "abc"])  # the rules engine re-submits
        step(n, clock, 5 * M)
    assert len(bodies(n)) == 2
    n.submit([alert("GpuMemoryHigh", instance=i) for i in "abc"])
    step(n, clock, 5 * M)
    assert len(bodies(n)) == 3 and bodies(n)[2]["notification_reason"] == "repeat interval elapsed"

    # One resolves: reported as resolved at the next interval, then dropped.
    now = clock.now_ms()
    n.submit([alert("GpuMemoryHigh", "resolved", ends=now, instance="a")])
    n.submit([alert("GpuMemoryHigh", instance=i) for i in "bc"])
    step(n, clock, 5 * M)
    last = bodies(n)[3]
    assert last["status"] == "firing" and last["notification_reason"] == "some alerts resolved"
    assert names(last) == [("GpuMemoryHigh", "b", "firing"), ("GpuMemoryHigh", "c", "firing"),
                           ("GpuMemoryHigh", "a", "resolved")]
    assert last["alerts"][2]["endsAt"] != "0001-01-01T00:00:00Z"
    # All resolve: one "resolved" notification, then the group is gone.
    now = clock.now_ms()
    n.submit([alert("GpuMemoryHigh", "resolved", ends=now, instance=i) for i in "bc"])
    step(n, clock, 5 * M)
    final = bodies(n)[4]
    assert final["status"] == "resolved" and final["notification_reason"] == "all alerts resolved"
    assert names(final) == [("GpuMemoryHigh", "b", "resolved"), ("GpuMemoryHigh", "c", "resolved")]
    assert n.pipeline.groups() == []
    step(n, clock, 5 * H)
    assert len(bodies(n)) == 5
    assert {r.id for r in n.outbox.rows()} == {f"msg_{i:04d}" for i in range(1, 6)}


def test_groups_by_labels_and_routes(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    cfg = config(
        route={"group_by": ["alertname", "instance"], "routes": [
            {"matchers": ['severity="critical"'], "receiver": "pager", "group_wait": "5s", "group_by": ["..."]},
        ]},
        receivers=[
            {"name": "hook", "webhook_configs": [{"url": "http://127.0.0.1:9/a"}]},
            {"name": "pager", "slack_configs": [{"url": "http://127.0.0.1:9/b", "channel": "#oncall"}]},
        ],
    )
    n = make_notifier(cfg)
    crit = alert("XidError", instance="a", gpu="0", severity="critical")
    n.submit([alert("GpuHot", instance="a"), alert("GpuHot", instance="b"), crit])
    n.pipeline.tick()
    step(n, clock, 5 * S)
    [slack] = n.outbox.rows()
    assert slack.integration == "pager/slack/0" and slack.kind == "slack"
    text = json.loads(slack.body)
    assert text["channel"] == "#oncall" and text["text"].startswith("[FIRING:1] ")
    assert "*XidError* `critical` (gpu=0, instance=a): XidError on a" in text["text"]
    assert slack.group_key.startswith('{}/{severity="critical"}:{alertname="XidError", gpu="0"')
    step(n, clock, 25 * S)
    keys = sorted(r.group_key for r in n.outbox.rows() if r.kind == "webhook")
    assert keys == ['{}:{alertname="GpuHot", instance="a"}', '{}:{alertname="GpuHot", instance="b"}']


def test_target_down_inhibits_throughput_of_same_target(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    n = make_notifier(config(route={"group_by": ["instance"]}))  # default inhibit rules
    n.submit([
        alert("TargetDown", instance="n1:8000", job="vllm"),
        alert("GpuThroughputLow", instance="n1:8000", job="vllm", gpu="0"),
        alert("GpuThroughputLow", instance="n2:8000", job="vllm", gpu="0"),  # its target is up
    ])
    n.pipeline.tick()
    step(n, clock, 30 * S)
    got = {b["groupLabels"]["instance"]: names(b) for b in bodies(n)}
    assert got == {
        "n1:8000": [("TargetDown", "n1:8000", "firing")],
        "n2:8000": [("GpuThroughputLow", "n2:8000", "firing")],
    }
    # The target comes back: the throughput alert (still firing) is now news.
    n.submit([alert("TargetDown", "resolved", ends=clock.now_ms(), instance="n1:8000", job="vllm"),
              alert("GpuThroughputLow", instance="n1:8000", job="vllm", gpu="0"),
              alert("GpuThroughputLow", instance="n2:8000", job="vllm", gpu="0")])
    step(n, clock, 5 * M)
    last = [b for b in bodies(n) if b["groupLabels"]["instance"] == "n1:8000"][-1]
    assert names(last) == [("GpuThroughputLow", "n1:8000", "firing"), ("TargetDown", "n1:8000", "resolved")]
    assert last["notification_reason"] == "new alerts added"


def test_silence_mutes_until_it_expires(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    n = make_notifier()
    silence_id = n.silences.upsert(SilenceSpec(
        (Matcher("alertname", "=~", "Gpu.*"), Matcher("instance", "!=", "b")),
        clock.now_ms(), clock.now_ms() + 1 * H, "ops@example.com", "maintenance on a",
    ))
    n.submit([alert("GpuHot", instance="a"), alert("GpuHot", instance="b")])
    n.pipeline.tick()
    step(n, clock, 30 * S)
    [first] = bodies(n)
    assert names(first) == [("GpuHot", "b", "firing")]
    for _ in range(11):
        n.submit([alert("GpuHot", instance="a"), alert("GpuHot", instance="b")])
        step(n, clock, 5 * M)
    assert len(bodies(n)) == 1  # a stays muted
    n.silences.expire(silence_id)
    assert n.silences.get(silence_id).state(clock.now_ms()) == "expired"
    n.submit([alert("GpuHot", instance="a"), alert("GpuHot", instance="b")])
    step(n, clock, 5 * M)
    assert names(bodies(n)[1]) == [("GpuHot", "a", "firing"), ("GpuHot", "b", "firing")]


def test_pending_silence_and_silences_survive_restart(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    n = make_notifier()
    later = n.silences.upsert(SilenceSpec(
        (Matcher("alertname", "=", "GpuHot"),), clock.now_ms() + 10 * M, clock.now_ms() + 2 * H, "me", "later",
    ))
    assert n.silences.get(later).state(clock.now_ms()) == "pending"
    again = make_notifier()
    assert [s.id for s in again.silences.all()] == [later]
    clock.advance(10 * M)
    assert again.silences.muted_by({"alertname": "GpuHot"}, clock.now_ms()) == [later]


def test_unresubmitted_alert_resolves_after_resolve_timeout(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    n = make_notifier(config(resolve_timeout="5m"))
    n.submit([alert("GpuHot", instance="a")])
    n.pipeline.tick()
    step(n, clock, 30 * S)
    for _ in range(5):
        step(n, clock, 1 * M)  # the rules engine stopped sending it
    step(n, clock, 5 * M)
    last = bodies(n)[-1]
    assert last["status"] == "resolved"
    assert last["alerts"][0]["endsAt"] == "2027-01-15T08:05:00.000Z"  # last seen + resolve_timeout


def test_restart_neither_repeats_nor_forgets(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    first = make_notifier()
    first.submit([alert("GpuHot", instance="a"), alert("GpuHot", instance="b")])
    first.pipeline.tick()
    step(first, clock, 30 * S)
    assert len(bodies(first)) == 1
    # Resolved, then the process stops before the group's next flush.
    first.submit([alert("GpuHot", "resolved", ends=clock.now_ms(), instance="a")])
    first.stop()  # the final tick stores the resolution

    clock.advance(1 * M)
    second = make_notifier()
    second.submit([alert("GpuHot", instance="b")])  # the rules engine, after its own restart
    second.pipeline.tick()
    # The group was notified before: no fresh "first notification"; the resolution is reported.
    [sent] = bodies(second)[1:]
    assert sent["notification_reason"] == "some alerts resolved"
    assert names(sent) == [("GpuHot", "b", "firing"), ("GpuHot", "a", "resolved")]
    for _ in range(12 * 3):
        second.submit([alert("GpuHot", instance="b")])
        step(second, clock, 5 * M)
    assert len(bodies(second)) == 2  # nothing new, repeat_interval not over
    for _ in range(13):
        second.submit([alert("GpuHot", instance="b")])
        step(second, clock, 5 * M)
    assert bodies(second)[-1]["notification_reason"] == "repeat interval elapsed"


def test_max_alerts_truncates_and_alertmanager_push_repeats(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    cfg = config(
        route={"group_interval": "1m"},
        receivers=[{"name": "hook", "webhook_configs": [{"url": "http://127.0.0.1:9/a", "max_alerts": 2}],
                    "alertmanager_configs": [{"url": "http://127.0.0.1:9"}]}],
    )
    n = make_notifier(cfg)
    n.submit([alert("GpuHot", instance=i) for i in "abcd"])
    n.pipeline.tick()
    step(n, clock, 30 * S)
    hook = [json.loads(r.body) for r in n.outbox.rows() if r.kind == "webhook"]
    assert len(hook) == 1 and len(hook[0]["alerts"]) == 2 and hook[0]["truncatedAlerts"] == 2
    step(n, clock, 1 * M)
    step(n, clock, 1 * M)
    pushes = [json.loads(r.body) for r in n.outbox.rows() if r.kind == "alertmanager"]
    assert len(pushes) == 3  # re-pushed every group_interval while firing
    assert pushes[0][0]["endsAt"] == "2027-01-15T08:03:30.000Z"  # 3 intervals after the flush
    assert {p["labels"]["instance"] for p in pushes[0]} == set("abcd")
    assert len([r for r in n.outbox.rows() if r.kind == "webhook"]) == 1


def test_submit_is_cheap_and_thread_safe(make_notifier: NotifierFactory, clock: ManualClock) -> None:
    import threading

    n = make_notifier()

    def rules_engine(k: int) -> None:
        for i in range(200):
            n.submit([alert(f"A{k}", instance=str(i))])

    threads = [threading.Thread(target=rules_engine, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n.pipeline.tick()
    assert sum(len(a) for _, _, a in n.pipeline.groups()) == 800


def test_a_flush_with_nothing_new_waits_for_the_next_interval(make_notifier: NotifierFactory,
                                                               clock: ManualClock) -> None:
    """Alertmanager: a group is looked at every group_interval, news or not. A flush that had
    nothing to send once left its group due, so the pipeline's thread ticked without pause and
    the next alert of the group went out at once."""
    n = make_notifier()
    n.submit([alert("GpuMemoryHigh", instance="a")])
    n.pipeline.tick()
    step(n, clock, 30 * S)
    assert len(bodies(n)) == 1
    n.submit([alert("GpuMemoryHigh", instance="a")])  # the rules engine re-submits: no news
    step(n, clock, 5 * M)
    assert len(bodies(n)) == 1
    assert n.pipeline.tick() > 0  # nothing is due: the thread sleeps until something is
    n.submit([alert("GpuMemoryHigh", instance=i, starts=clock.now_ms()) for i in "ab"])
    step(n, clock, 1 * M)
    assert len(bodies(n)) == 1  # b waits for the group's next interval
    step(n, clock, 4 * M)
    assert len(bodies(n)) == 2 and bodies(n)[1]["notification_reason"] == "new alerts added"


def test_a_receiver_without_integrations_does_not_keep_its_groups_due(make_notifier: NotifierFactory,
                                                                      clock: ManualClock) -> None:
    n = make_notifier(NotifyConfig())  # the default: one receiver that delivers nowhere
    n.submit([alert("GpuMemoryHigh", instance="a")])
    n.pipeline.tick()
    step(n, clock, 31 * S)
    assert n.pipeline.groups() and bodies(n) == []
    for _ in range(3):
        assert n.pipeline.tick() == NotifyConfig().delivery.poll_interval
