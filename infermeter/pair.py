"""An HA pair's parts, built by the composition root when ``ha.enabled``: the elector, the fence
and the engine of the leader-only parts, and the role's metrics (see :mod:`ha`)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from ha.elector import Elector
from ha.fence import Fence
from ha.lease import LeaseStore
from infermeter.settings import Settings
from store.engine import create_store_engine


@dataclass(frozen=True)
class Pair:
    elector: Elector
    fence: Fence
    # The leader-only parts' engine: every writing transaction on it is fenced.
    leader_engine: Engine

    def describe(self) -> dict[str, object]:
        role = self.elector.role()
        return {"role": "leader" if role.leading else "follower", "holder": self.elector.holder,
                "token": role.token, "since_ms": role.since_ms, "last_error": self.elector.last_error}


def build_pair(settings: Settings, engine: Engine) -> Pair | None:
    ha = settings.ha
    if not ha.enabled:
        return None
    holder = ha.holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    leases = LeaseStore(engine, ha.name, ha.lease_duration)
    elector = Elector(leases, holder)
    fence = Fence(elector, leases)
    # A leader stopped inside a fenced transaction holds the lease row; the server ends such a
    # session well before the lease runs out, so the other process can take over.
    idle_ms = max(500, ha.lease_duration // 2)
    leader_engine = create_store_engine(
        settings.store.url, pg_settings={"idle_in_transaction_session_timeout": str(idle_ms)}
    )
    return Pair(elector, fence, fence.install(leader_engine))


class PairCollector(Collector):
    def __init__(self, pair: Pair) -> None:
        self.pair = pair

    def collect(self) -> Iterator[Metric]:
        role = self.pair.elector.role()
        leader = GaugeMetricFamily("infermeter_ha_leader", "1 while this process leads its HA pair, 0 while it follows.",
                                   labels=["holder"])
        leader.add_metric([self.pair.elector.holder], 1.0 if role.leading else 0.0)
        yield leader
        yield GaugeMetricFamily("infermeter_ha_lease_token", "The lease token this process leads under (0: following).",
                                value=float(role.token))
        yield CounterMetricFamily("infermeter_ha_role_changes_total", "Times this process took or lost the lead.",
                                  value=float(self.pair.elector.changes))
        yield CounterMetricFamily("infermeter_ha_fenced_writes_refused_total",
                                  "Leader-only writes refused because this process did not hold the lease.",
                                  value=float(self.pair.fence.refused))
