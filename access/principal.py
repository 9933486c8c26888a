"""A principal is who sent a request (a named token, an OIDC subject, or nobody) and the role
it holds. Roles are ordered: each one may do everything the ones below it may."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Role(IntEnum):
    VIEWER = 1  # reads: queries, alerts, cost, forecasts, reports, the dashboard
    OPERATOR = 2  # day-to-day writes: push ingest, silences, acknowledgements, deploy markers
    ADMIN = 3  # prices, budgets, rules and config reload, tokens, the audit log

    @classmethod
    def named(cls, name: str) -> Role:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {name!r}: one of viewer, operator, admin") from None

    @property
    def label(self) -> str:
        return self.name.lower()


ROLE_NAMES = tuple(r.label for r in Role)


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    role: Role
    via: str  # "token", "oidc", "anonymous" (no credentials), "open" (no authentication configured)

    def may(self, needed: Role) -> bool:
        return self.role >= needed

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "role": self.role.label, "via": self.via}


ANONYMOUS_READER = Principal("anonymous", Role.VIEWER, "anonymous")
# Without any token or issuer configured the service is open, as it was before authentication
# existed (a single node on a trusted network); `up` warns when it listens beyond loopback so.
OPEN_ADMIN = Principal("anonymous", Role.ADMIN, "open")
