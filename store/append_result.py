"""What an append did: counts of accepted and duplicate samples, and of rejected ones by reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class RejectReason(str, Enum):
    TOO_OLD = "too_old"  # older than the out-of-order window, or below flushed chunks
    CONFLICT = "duplicate_conflict"  # same series and timestamp, different value
    TOO_NEW = "too_far_in_future"  # stamped more than max_future_ms ahead of the store's clock
    SERIES_LIMIT = "series_limit"  # a new series beyond max_series active series


@dataclass(slots=True)
class AppendResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: dict[RejectReason, int] = field(default_factory=dict)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "rejected": {reason.value: n for reason, n in self.rejected.items()},
        }
