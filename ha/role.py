"""A process's role in an HA pair, as the parts that lead ask for it (no database here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Role:
    leading: bool
    token: int  # the lease token while leading, else 0
    since_ms: int  # wall-clock ms of the last change of role


class Leadership(Protocol):
    def role(self) -> Role: ...

    def leading(self) -> bool: ...

    def term(self) -> int:
        """The lease token while leading, 0 while following: a part that sees a new term has
        just been handed the lead and reloads what the previous leader left."""
        ...


class AlwaysLeader:
    """One process alone: it leads, always (the default without ``ha.enabled``)."""

    def role(self) -> Role:
        return Role(True, 1, 0)

    def leading(self) -> bool:
        return True

    def term(self) -> int:
        return 1


ALONE = AlwaysLeader()
