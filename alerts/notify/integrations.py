"""Receivers from config, built into integrations: one sink plus how to render for it.

An integration is one entry of a receiver's ``*_configs`` lists; its key
``<receiver>/<kind>/<index>`` names it in the outbox, the notification log and the metrics,
and stays stable across restarts as long as the config keeps that entry in its place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from alerts.notify.config import NotifyConfig
from alerts.notify.payloads import Notification, alertmanager_body, slack_body, webhook_body
from alerts.notify.routing import Route
from alerts.notify.sinks import AlertmanagerSink, ClientFactory, Sink, SlackSink, WebhookSink, default_client
from store.clock import Clock

Kind = Literal["webhook", "alertmanager", "slack"]
Render = Callable[[Notification, Route], str]

# Pushed firing alerts stay valid for this many group intervals without a re-push.
ALERTMANAGER_VALIDITY_INTERVALS = 3


@dataclass(frozen=True)
class Integration:
    key: str
    receiver: str
    kind: Kind
    sink: Sink
    render: Render
    send_resolved: bool
    # Alertmanager forgets an alert whose endsAt passes: re-push firing alerts every
    # group_interval instead of every repeat_interval.
    repeat_every_interval: bool = False

    def repeat_ms(self, route: Route) -> int:
        return route.group_interval_ms if self.repeat_every_interval else route.repeat_interval_ms


def build_integrations(
    config: NotifyConfig, clock: Clock, client_factory: ClientFactory = default_client
) -> dict[str, list[Integration]]:
    """Receiver name -> its integrations (an empty list for a receiver that sends nowhere)."""
    out: dict[str, list[Integration]] = {}
    for receiver in config.receivers:
        items: list[Integration] = []
        for i, hook in enumerate(receiver.webhook_configs):
            secret = hook.secret.get_secret_value() if hook.secret is not None else None
            items.append(Integration(
                f"{receiver.name}/webhook/{i}", receiver.name, "webhook",
                WebhookSink(hook.url, hook.timeout / 1000, clock, secret, client_factory),
                _render_webhook(hook.max_alerts),
                hook.send_resolved,
            ))
        for i, am in enumerate(receiver.alertmanager_configs):
            items.append(Integration(
                f"{receiver.name}/alertmanager/{i}", receiver.name, "alertmanager",
                AlertmanagerSink(am.url, am.timeout / 1000, clock, client_factory),
                _render_alertmanager,
                send_resolved=True,
                repeat_every_interval=True,
            ))
        for i, slack in enumerate(receiver.slack_configs):
            items.append(Integration(
                f"{receiver.name}/slack/{i}", receiver.name, "slack",
                SlackSink(slack.url, slack.timeout / 1000, clock, client_factory),
                _render_slack(slack.channel, slack.username),
                slack.send_resolved,
            ))
        out[receiver.name] = items
    return out


def _render_webhook(max_alerts: int) -> Render:
    def render(n: Notification, _route: Route) -> str:
        return webhook_body(n, max_alerts)

    return render


def _render_alertmanager(n: Notification, route: Route) -> str:
    return alertmanager_body(n, ALERTMANAGER_VALIDITY_INTERVALS * route.group_interval_ms)


def _render_slack(channel: str | None, username: str | None) -> Render:
    def render(n: Notification, _route: Route) -> str:
        return slack_body(n, channel, username)

    return render
