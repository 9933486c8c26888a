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

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, model_validator

from alerts.notify.matchers import parse_matcher
from store.durations import DurationMs


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


Matchers = Annotated[tuple[str, ...], AfterValidator(_check_matchers)]
Url = Annotated[str, AfterValidator(_check_url)]
WebhookSecret = Annotated[SecretStr | None, AfterValidator(_check_secret)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RouteConfig(_Model):
    """A child route. Unset fields inherit from the parent route."""

    receiver: str | None = Field(None, description="receiver of the alerts this route takes; null: the parent's")
    matchers: Matchers = Field((), description='the alerts this route takes, e.g. severity="critical" (all must match)')
    group_by: tuple[str, ...] | None = Field(None, description='labels to group by; ["..."] groups by every label; null: as the parent route')
    group_wait: DurationMs | None = Field(None, description="group_wait of this route; null: the parent's")
    group_interval: DurationMs | None = Field(None, description="group_interval of this route; null: the parent's")
    repeat_interval: DurationMs | None = Field(None, description="repeat_interval of this route; null: the parent's")
    continue_: bool = Field(False, alias="continue", description="keep matching the following sibling routes")
    routes: tuple[RouteConfig, ...] = Field((), description="child routes")


# Info-level notices that are not pages (unused MoE experts: pruning candidates) repeat weekly.
WEEKLY_NOTICES = RouteConfig.model_validate({"matchers": ['notice="weekly"'], "repeat_interval": "7d"})


class RootRouteConfig(_Model):
    """The root route: every alert enters here; the first matching child (depth first) takes it."""

    receiver: str = Field("default", description="receiver of the alerts no child route takes")
    group_by: tuple[str, ...] = Field(("alertname",), description='labels to group by; ["..."] groups by every label')
    group_wait: DurationMs = Field(30_000, description="how long a new group waits for more alerts before the first notification")
    group_interval: DurationMs = Field(300_000, description="how long to wait before notifying about changes in a group")
    repeat_interval: DurationMs = Field(4 * 3_600_000, description="how long to wait before repeating an unchanged notification")
    routes: tuple[RouteConfig, ...] = Field(
        default_factory=lambda: (WEEKLY_NOTICES,),
        description="child routes; the first matching one (depth first) takes an alert (default: alerts labelled "
        'notice="weekly", such as MoeExpertsUnused, repeat once a week; a list given here replaces it)',
    )


class WebhookConfig(_Model):
    """POSTs Alertmanager's version-4 webhook JSON; signed when ``secret`` is set."""

    url: Url = Field(description="http(s) URL the payload is POSTed to")
    secret: WebhookSecret = Field(None, description="whsec_<base64 key>: sign the requests (Standard Webhooks)")
    timeout: DurationMs = Field(10_000, description="limit of one request")
    max_alerts: int = Field(0, ge=0, description="alerts per payload; 0 = all; the rest are counted in truncatedAlerts")
    send_resolved: bool = Field(True, description="also notify when alerts resolve")


class AlertmanagerConfig(_Model):
    """Pushes the group's alerts to an Alertmanager (``POST {url}/api/v2/alerts``).

    Firing alerts are re-pushed on every group_interval with ``endsAt`` three intervals ahead,
    so that Alertmanager resolves them on its own if this service stops.
    """

    url: Url = Field(description="base URL of the Alertmanager")
    timeout: DurationMs = Field(10_000, description="limit of one request")


class SlackConfig(_Model):
    """Slack-style incoming webhook (``{"text": ...}``); also Mattermost and Rocket.Chat."""

    url: Url = Field(description="the incoming webhook's URL")
    channel: str | None = Field(None, description="channel override; null: the webhook's own")
    username: str | None = Field(None, description="user name override; null: the webhook's own")
    send_resolved: bool = Field(False, description="also notify when alerts resolve")
    timeout: DurationMs = Field(10_000, description="limit of one request")


class ReceiverConfig(_Model):
    name: str = Field(min_length=1, description="the name routes refer to")
    webhook_configs: tuple[WebhookConfig, ...] = Field((), description=WebhookConfig.__doc__)
    alertmanager_configs: tuple[AlertmanagerConfig, ...] = Field(
        (), description="pushes the group's alerts to an existing Alertmanager (API v2)"
    )
    slack_configs: tuple[SlackConfig, ...] = Field((), description=SlackConfig.__doc__)


class InhibitRuleConfig(_Model):
    """While an alert matching ``source_matchers`` fires, alerts matching ``target_matchers``
    that carry the same values of the ``equal`` labels (missing counts as empty) are muted."""

    source_matchers: Matchers = Field(min_length=1, description="alerts that mute others while they fire")
    target_matchers: Matchers = Field(min_length=1, description="alerts that are muted")
    equal: tuple[str, ...] = Field((), description="labels whose values must be the same in both")


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

    initial_backoff: DurationMs = Field(1_000, description="the first wait before a retry")
    max_backoff: DurationMs = Field(300_000, description="the longest wait between retries")
    max_retry_after: DurationMs = Field(3_600_000, description="a receiver's Retry-After is honoured up to this")
    max_age: DurationMs = Field(24 * 3_600_000, description="an undelivered notification older than this fails")


class DeliveryConfig(_Model):
    workers: int = Field(4, ge=1, le=64, description="concurrent sends (at most one per integration)")
    poll_interval: DurationMs = Field(1_000, description="longest sleep of the loops between checks")
    probe_interval: DurationMs = Field(
        15_000, description="while a receiver fails, its oldest notification is tried this often whatever its backoff; "
        "once it answers, everything queued for it goes at once (0: off)")
    keep_sent: DurationMs = Field(24 * 3_600_000, description="sent notifications are kept this long")
    keep_failed: DurationMs = Field(7 * 86_400_000, description="failed notifications are kept this long")


class NotifyConfig(_Model):
    external_url: str = Field("", description="externalURL in webhook payloads: where a person sees the alerts")
    resolve_timeout: DurationMs = Field(
        300_000, description="a firing alert not re-submitted for this long resolves"
    )
    route: RootRouteConfig = Field(RootRouteConfig(), description=RootRouteConfig.__doc__)
    receivers: tuple[ReceiverConfig, ...] = Field(
        (ReceiverConfig(name="default"),),
        description="where notifications go; a receiver without integrations delivers nowhere",
    )
    inhibit_rules: tuple[InhibitRuleConfig, ...] = Field(
        DEFAULT_INHIBIT_RULES,
        description="by default a target that is down inhibits the throughput alerts of the GPUs it serves",
    )
    retry: RetryConfig = Field(RetryConfig(), description=RetryConfig.__doc__)
    delivery: DeliveryConfig = Field(DeliveryConfig(), description="the delivery loops")
    silence_retention: DurationMs = Field(5 * 86_400_000, description="expired silences are kept this long")
    log_retention: DurationMs = Field(
        5 * 86_400_000, description="what was last sent per group is kept this long, for repeat_interval"
    )

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
