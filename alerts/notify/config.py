"""Notification config (mounted as ``notify:`` in the service settings), validated at load.

Shaped like Alertmanager's ``route`` / ``receivers`` / ``inhibit_rules`` so an operator can carry
an existing config over; durations are strings (``30s``, ``5m``, ``4h``, compound ``1h30m``) held
as integer milliseconds. Every field has a default: an empty ``notify:`` section groups by
alertname and delivers nowhere (the implicit ``default`` receiver has no integrations).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, model_validator

from alerts.notify.matchers import parse_matcher
from store.durations import parse_duration_ms


def _check_matchers(values: tuple[str, ...]) -> tuple[str, ...]:
    for text in values:
        parse_matcher(text)  # raises ValueError naming the matcher
    return values


def _check_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {value!r}")
    return value


def _check_secret(value: SecretStr | None) -> SecretStr | None:
    if value is None:
        return None
    text = value.get_secret_value()
    if not text.startswith("whsec_"):
        raise ValueError("a webhook secret is written whsec_<base64 key> (Standard Webhooks)")
    try:
        key = base64.b64decode(text[len("whsec_") :], validate=True)
    except binascii.Error:
        raise ValueError("the part after whsec_ is not valid base64") from None
    if len(key) < 16:
        raise ValueError("a webhook secret key needs at least 16 bytes (24 base64 characters)")
    return value


DurationMs = Annotated[int, BeforeValidator(parse_duration_ms)]
Matchers = Annotated[tuple[str, ...], AfterValidator(_check_matchers)]
Url = Annotated[str, AfterValidator(_check_url)]
WebhookSecret = Annotated[SecretStr | None, AfterValidator(_check_secret)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RouteConfig(_Model):
    """A child route. Unset fields inherit from the parent route."""

    receiver: str | None = None
    matchers: Matchers = ()
    group_by: tuple[str, ...] | None = None  # ["..."] groups by every label
    group_wait: DurationMs | None = None
    group_interval: DurationMs | None = None
    repeat_interval: DurationMs | None = None
    continue_: bool = Field(False, alias="continue")
    routes: tuple[RouteConfig, ...] = ()


class RootRouteConfig(_Model):
    """The root route: every alert enters here; the first matching child (depth first) takes it."""

    receiver: str = "default"
    group_by: tuple[str, ...] = ("alertname",)
    group_wait: DurationMs = 30_000
    group_interval: DurationMs = 300_000
    repeat_interval: DurationMs = 4 * 3_600_000
    routes: tuple[RouteConfig, ...] = ()


class WebhookConfig(_Model):
    """POSTs Alertmanager's version-4 webhook JSON; signed when ``secret`` is set."""

    url: Url
    secret: WebhookSecret = None
    timeout: DurationMs = 10_000
    max_alerts: int = Field(0, ge=0)  # 0 = all; the rest are counted in truncatedAlerts
    send_resolved: bool = True


class AlertmanagerConfig(_Model):
    """Pushes the group's alerts to an Alertmanager (``POST {url}/api/v2/alerts``).

    Firing alerts are re-pushed on every group_interval with ``endsAt`` three intervals ahead,
    so that Alertmanager resolves them on its own if this service stops.
    """

    url: Url
    timeout: DurationMs = 10_000


class SlackConfig(_Model):
    """Slack-style incoming webhook (``{"text": ...}``); also Mattermost and Rocket.Chat."""

    url: Url
    channel: str | None = None
    username: str | None = None
    send_resolved: bool = False
    timeout: DurationMs = 10_000


class ReceiverConfig(_Model):
    name: str = Field(min_length=1)
    webhook_configs: tuple[WebhookConfig, ...] = ()
    alertmanager_configs: tuple[AlertmanagerConfig, ...] = ()
    slack_configs: tuple[SlackConfig, ...] = ()


class InhibitRuleConfig(_Model):
    """While an alert matching ``source_matchers`` fires, alerts matching ``target_matchers``
    that carry the same values of the ``equal`` labels (missing counts as empty) are muted."""

    source_matchers: Matchers = Field(min_length=1)
    target_matchers: Matchers = Field(min_length=1)
    equal: tuple[str, ...] = ()


DEFAULT_INHIBIT_RULES = (
    # A target that is down cannot report throughput: page about the target, not about its
    # throughput collapsing.
    InhibitRuleConfig(
        source_matchers=('alertname="TargetDown"',),
        target_matchers=('alertname=~".*Throughput.*"',),
        equal=("instance", "job"),
    ),
)


class RetryConfig(_Model):
    """Capped exponential backoff with full jitter: wait uniform(0, min(max, initial * 2**n))."""

    initial_backoff: DurationMs = 1_000
    max_backoff: DurationMs = 300_000
    max_retry_after: DurationMs = 3_600_000  # a receiver's Retry-After is honoured up to this
    max_age: DurationMs = 24 * 3_600_000  # an undelivered notification older than this fails


class DeliveryConfig(_Model):
    workers: int = Field(4, ge=1, le=64)  # concurrent sends (at most one per integration)
    poll_interval: DurationMs = 1_000  # longest sleep of the loops between checks
    keep_sent: DurationMs = 24 * 3_600_000
    keep_failed: DurationMs = 7 * 86_400_000


class NotifyConfig(_Model):
    external_url: str = ""  # externalURL in webhook payloads: where a person sees the alerts
    resolve_timeout: DurationMs = 300_000  # a firing alert not re-submitted for this long resolves
    route: RootRouteConfig = RootRouteConfig()
    receivers: tuple[ReceiverConfig, ...] = (ReceiverConfig(name="default"),)
    inhibit_rules: tuple[InhibitRuleConfig, ...] = DEFAULT_INHIBIT_RULES
    retry: RetryConfig = RetryConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    silence_retention: DurationMs = 5 * 86_400_000  # expired silences are kept this long
    log_retention: DurationMs = 5 * 86_400_000  # what was last sent per group, for repeat_interval

    @model_validator(mode="after")
    def _receivers_exist(self) -> NotifyConfig:
        names = [r.name for r in self.receivers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"receivers: duplicate names {duplicates}")
        known = set(names)
        if self.route.receiver not in known:
            raise ValueError(f"route.receiver: {self.route.receiver!r} is not among receivers {sorted(known)}")

        def walk(routes: tuple[RouteConfig, ...], where: str) -> None:
            for i, child in enumerate(routes):
                here = f"{where}.routes[{i}]"
                if child.receiver is not None and child.receiver not in known:
                    raise ValueError(f"{here}.receiver: {child.receiver!r} is not among receivers {sorted(known)}")
                walk(child.routes, here)

        walk(self.route.routes, "route")
        return self
