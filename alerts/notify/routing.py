"""The route tree, compiled from config: which receiver(s) an alert goes to and with which timing.

Alertmanager semantics: an alert enters at the root; children are tried in order, depth first;
the first child that matches takes the alert unless it sets ``continue``; when no child matches,
the node itself does. Unset child fields inherit from the parent. The group key is the route path
plus the group labels (``{}/{severity="critical"}:{alertname="X"}``), stable across restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from alerts.notify.config import RootRouteConfig, RouteConfig
from alerts.notify.matchers import Matcher, format_labels, format_matchers, matches_all, parse_matcher


@dataclass(frozen=True)
class Route:
    route_id: str  # unique per node: "0", "0.1", "0.1.0" (child indexes)
    path: str  # the group-key prefix, from the matchers on the way down
    receiver: str
    matchers: tuple[Matcher, ...]
    group_by: tuple[str, ...]
    group_by_all: bool  # group_by: ["..."]
    group_wait_ms: int
    group_interval_ms: int
    repeat_interval_ms: int
    continue_: bool = False
    children: tuple[Route, ...] = ()

    def match(self, labels: Mapping[str, str]) -> list[Route]:
        """The routes (leaves of the match) this alert belongs to; empty if this node misses."""
        if not matches_all(self.matchers, labels):
            return []
        found: list[Route] = []
        for child in self.children:
            got = child.match(labels)
            if got:
                found.extend(got)
                if not child.continue_:
                    break
        return found or [self]

    def group_labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        if self.group_by_all:
            return dict(labels)
        return {name: labels[name] for name in self.group_by if labels.get(name, "") != ""}

    def group_key(self, labels: Mapping[str, str]) -> str:
        return f"{self.path}:{format_labels(self.group_labels(labels))}"

    def walk(self) -> list[Route]:
        nodes = [self]
        for child in self.children:
            nodes.extend(child.walk())
        return nodes


def compile_routes(root: RootRouteConfig) -> Route:
    children = tuple(
        _compile(child, parent_id="0", parent_path="{}", receiver=root.receiver, group_by=root.group_by,
                 wait=root.group_wait, interval=root.group_interval, repeat=root.repeat_interval, index=i)
        for i, child in enumerate(root.routes)
    )
    return Route(
        route_id="0",
        path="{}",
        receiver=root.receiver,
        matchers=(),
        group_by=tuple(n for n in root.group_by if n != "..."),
        group_by_all="..." in root.group_by,
        group_wait_ms=root.group_wait,
        group_interval_ms=root.group_interval,
        repeat_interval_ms=root.repeat_interval,
        children=children,
    )


def _compile(
    cfg: RouteConfig,
    *,
    parent_id: str,
    parent_path: str,
    receiver: str,
    group_by: tuple[str, ...],
    wait: int,
    interval: int,
    repeat: int,
    index: int,
) -> Route:
    matchers = tuple(parse_matcher(m) for m in cfg.matchers)
    route_id = f"{parent_id}.{index}"
    path = f"{parent_path}/{format_matchers(matchers)}"
    receiver = cfg.receiver if cfg.receiver is not None else receiver
    group_by = cfg.group_by if cfg.group_by is not None else group_by
    wait = cfg.group_wait if cfg.group_wait is not None else wait
    interval = cfg.group_interval if cfg.group_interval is not None else interval
    repeat = cfg.repeat_interval if cfg.repeat_interval is not None else repeat
    children = tuple(
        _compile(child, parent_id=route_id, parent_path=path, receiver=receiver, group_by=group_by,
                 wait=wait, interval=interval, repeat=repeat, index=i)
        for i, child in enumerate(cfg.routes)
    )
    return Route(
        route_id=route_id,
        path=path,
        receiver=receiver,
        matchers=matchers,
        group_by=tuple(n for n in group_by if n != "..."),
        group_by_all="..." in group_by,
        group_wait_ms=wait,
        group_interval_ms=interval,
        repeat_interval_ms=repeat,
        continue_=cfg.continue_,
        children=children,
    )
