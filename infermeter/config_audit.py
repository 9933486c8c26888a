"""What a reload changed, as the audit log records it: per section, the value before and after.
Rule files are recorded by content digest (the files themselves are the history's source);
tokens by name and role only."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from collector.scrape_auth import split_userinfo
from infermeter.alerting import rule_paths
from infermeter.settings import Settings


def rule_file_digests(settings: Settings, config_path: str | None) -> dict[str, str]:
    digests = {}
    for path in rule_paths(settings, config_path):
        try:
            digests[str(path)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError as exc:
            digests[str(path)] = f"unreadable: {exc.strerror}"
    return digests


def _scrape(settings: Settings) -> dict[str, Any]:
    """The scrape section with passwords written into URLs replaced (SecretStr fields dump as stars)."""
    scrape = settings.scrape.model_dump(mode="json")
    for target in scrape["targets"]:
        target["urls"] = [_redacted(url) for url in target["urls"]]
        target["gpus"] = {_redacted(url): gpus for url, gpus in target["gpus"].items()}
    return scrape


def _redacted(url: str) -> str:
    bare, user, _password = split_userinfo(url)
    if user is None:
        return url
    scheme, rest = bare.split("://", 1) if "://" in bare else ("", bare)
    return f"{scheme}://{user}:<secret>@{rest}" if scheme else f"{user}:<secret>@{rest}"


def _sections(settings: Settings) -> dict[str, Any]:
    alerts = settings.alerts.model_dump(mode="json")
    return {
        "scrape": _scrape(settings),
        "nccl": settings.nccl.model_dump(mode="json"),
        "alerts.thresholds": alerts.pop("thresholds"),
        "alerts": alerts,
        "security.tokens": [{"name": t.name, "role": t.role} for t in settings.security.tokens],
        "security": settings.security.model_dump(mode="json", exclude={"tokens"}),
    }


def config_changes(before: Settings, after: Settings, rules_before: dict[str, str],
                   rules_after: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    old, new = _sections(before), _sections(after)
    changed = {name: (old[name], new[name]) for name in old if old[name] != new[name]}
    if rules_before != rules_after:
        changed["rule_files"] = (rules_before, rules_after)
    return changed
