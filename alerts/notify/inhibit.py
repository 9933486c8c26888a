"""Inhibition: a firing source alert mutes matching target alerts with the same ``equal`` labels.

Alertmanager semantics, including its one subtlety: an alert that matches both the source and
the target side of a rule is only inhibited by sources that do not also match the target side,
so a rule like "critical inhibits warning of the same alertname" cannot mute its own source.
Inhibition does not chain: a source that is itself inhibited still inhibits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from alerts.model import Alert
from alerts.notify.config import InhibitRuleConfig
from alerts.notify.matchers import Matcher, matches_all, parse_matcher


@dataclass(frozen=True)
class InhibitRule:
    source: tuple[Matcher, ...]
    target: tuple[Matcher, ...]
    equal: tuple[str, ...]

    @classmethod
    def from_config(cls, cfg: InhibitRuleConfig) -> InhibitRule:
        return cls(
            tuple(parse_matcher(m) for m in cfg.source_matchers),
            tuple(parse_matcher(m) for m in cfg.target_matchers),
            tuple(cfg.equal),
        )

    def _equal_key(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        return tuple(labels.get(name, "") for name in self.equal)


class Inhibitor:
    """Built once per evaluation from the firing alerts; answers ``muted(alert)`` in O(rules)."""

    def __init__(self, rules: Sequence[InhibitRule], firing: Iterable[Alert]) -> None:
        self._rules = tuple(rules)
        # Per rule: equal-label values of firing sources -> whether one of those sources does
        # not also match the rule's target side.
        self._sources: list[dict[tuple[str, ...], bool]] = [{} for _ in self._rules]
        for alert in firing:
            if alert.status != "firing":
                continue
            for index, rule in enumerate(self._rules):
                if matches_all(rule.source, alert.labels):
                    key = rule._equal_key(alert.labels)
                    one_sided = not matches_all(rule.target, alert.labels)
                    seen = self._sources[index]
                    seen[key] = seen.get(key, False) or one_sided

    def inhibited_by(self, alert: Alert) -> int | None:
        """The index of the first rule that mutes this alert, or None."""
        for index, rule in enumerate(self._rules):
            if not matches_all(rule.target, alert.labels):
                continue
            key = rule._equal_key(alert.labels)
            if key not in self._sources[index]:
                continue
            two_sided = matches_all(rule.source, alert.labels)
            if not two_sided or self._sources[index][key]:
                return index
        return None

    def muted(self, alert: Alert) -> bool:
        return self.inhibited_by(alert) is not None
