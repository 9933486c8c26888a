"""Series each tenant's pushes created, against ``server.ingest.max_series_per_tenant``
(counted since the process started)."""

from __future__ import annotations

import threading


class TenantOverLimit(ValueError):
    pass


class TenantSeries:
    """Series each tenant's pushes created, against ``max_series_per_tenant``."""

    def __init__(self) -> None:
        self._created: dict[str, int] = {}
        self._lock = threading.Lock()

    def admit(self, tenant: str, new: int, limit: int) -> None:
        """Count ``new`` series to ``tenant``; raises TenantOverLimit when they would pass ``limit``."""
        if not limit:
            return
        with self._lock:
            have = self._created.get(tenant, 0)
            if have + new > limit:
                raise TenantOverLimit(f"tenant {tenant!r} has created {have} series; {new} more exceed the limit "
                                      f"of {limit} (server.ingest.max_series_per_tenant)")
            self._created[tenant] = have + new
