"""Cost of a window of whole minutes, from the store's per-minute rollups.

For each GPU and minute it was observed: GPU-minutes × the $/GPU-hour in effect for its model
and purchase class, plus energy (the NVML joule counter's increase, else mean power × 60 s) ×
$/kWh × PUE. A minute below ``idle_utilization`` is *idle* cost, its own line. Overhead per
node-hour is charged for minutes any GPU of the node was observed. Pricing is per minute, so a
price change inside the window applies from its minute on.

Attribution: a GPU an engine target is known to run on (``infermeter_target_gpu_info``, from the
config or NVML's processes; :mod:`cost.attribution`) serves that target's models; any other GPU
serves the model its node is configured with, else the models of the node's other engine
targets, else of all inference series from its host (``instance`` host part; loopback means this
host), split by generated-token share. A target that runs on a CPU node (``gpu="cpu"``, the
embedded worker without a GPU) is priced per node-hour at ``cpu_dollars_per_node_hour``, as a
compute line of GPU model "CPU". Busy cost of a model is split among tenants by token share where
token series carry a ``tenant`` label. Overhead is shared among a node's models by GPU-seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from cost.attribution import CPU, TARGET_GPU_INFO, GpuRef, Target, gpu_model_shares, resolve
from cost.prices import PriceBook
from store.reader import Fn, RangeQuery, SeriesResult
from store.series_index import Selector

MINUTE_MS = 60_000
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0")


@dataclass(frozen=True)
class LedgerRow:
    node: str
    gpu: str
    gpu_model: str
    purchase_class: str
    model: str
    tenant: str
    component: str  # gpu | energy | idle | overhead
    dollars: float
    gpu_seconds: float
    energy_joules: float


@dataclass(frozen=True)
class UsageRow:
    model: str
    node: str
    tenant: str
    prompt_tokens: float
    generated_tokens: float
    requests: float


@dataclass(frozen=True)
class WindowDetail:
    rows: list[LedgerRow]
    usage: list[UsageRow]
    assigned: dict[Target, set[GpuRef]]  # engine target -> the GPUs it runs on
    target_tokens: dict[Target, dict[str, float]]  # engine target -> model -> generated tokens


@dataclass
class _Gpu:
    host: str
    gpu: str
    gpu_model: str
    util: np.ndarray  # per minute, NaN where not observed
    energy: np.ndarray  # joules per minute
    uuid: str = ""


def instance_host(instance: str, local_host: str) -> str:
    host = instance.rsplit(":", 1)[0] if instance.count(":") == 1 or instance.startswith("[") else instance
    return local_host if host in LOOPBACK else host


class RangeReader(Protocol):
    """What the calculator reads through: any :class:`store.interfaces.SeriesReader`, or
    :class:`cost.settled_minutes.SettledMinutes` in front of one."""

    def range(self, query: RangeQuery) -> list[SeriesResult]: ...


class CostCalculator:
    def __init__(self, reader: RangeReader, book: PriceBook, local_host: str) -> None:
        self.reader = reader
        self.book = book
        self.local_host = local_host

    def node_of(self, instance: str) -> str:
        return instance_host(instance, self.local_host)

    def series(self, metric: str, start_ms: int, end_ms: int) -> list[tuple[dict[str, str], np.ndarray]]:
        """Per-minute increase of a counter, per series (labels included)."""
        return self._minutes(metric, start_ms, end_ms, "increase")

    def _minutes(self, metric: str, start_ms: int, end_ms: int, fn: Fn) -> list[tuple[dict[str, str], np.ndarray]]:
        query = RangeQuery(Selector(metric), start_ms, end_ms - 1, MINUTE_MS, fn)
        return [(r.labels, r.values) for r in self.reader.range(query)]

    def _gpus(self, start_ms: int, end_ms: int) -> list[_Gpu]:
        n = (end_ms - start_ms) // MINUTE_MS
        energy = {(lab.get("host", ""), lab.get("gpu", "")): v for lab, v in self._minutes("gpu_energy_joules_total", start_ms, end_ms, "increase")}
        power = {(lab.get("host", ""), lab.get("gpu", "")): v for lab, v in self._minutes("gpu_power_watts", start_ms, end_ms, "avg")}
        gpus = []
        for labels, util in self._minutes("gpu_utilization_ratio", start_ms, end_ms, "avg"):
            key = (labels.get("host", ""), labels.get("gpu", ""))
            joules = energy.get(key, np.full(n, np.nan))[:n]
            watts = power.get(key, np.full(n, np.nan))[:n]
            joules = np.where(np.isnan(joules), watts * 60.0, joules)
            # gpu_model since the canonical rename; model_name in series stored before it
            gpu_model = labels.get("gpu_model", "") or labels.get("model_name", "") or labels.get("modelName", "")
            gpus.append(_Gpu(key[0], key[1], gpu_model, util[:n], np.nan_to_num(joules), labels.get("uuid", "")))
        return gpus

    def assignments(
        self, start_ms: int, end_ms: int, gpus: list[_Gpu]
    ) -> tuple[dict[Target, set[GpuRef]], dict[Target, str]]:
        """Engine target -> the priced GPUs it runs on, and target -> host for CPU targets."""
        info = [labels for labels, _ in self._minutes(TARGET_GPU_INFO, start_ms, end_ms, "last")]
        return resolve(info, [(g.host, g.gpu, g.uuid) for g in gpus], self.node_of)

    def usage(self, start_ms: int, end_ms: int) -> tuple[list[UsageRow], dict[Target, dict[str, np.ndarray]]]:
        """Token and request totals per (model, node, tenant), and the generated tokens per
        minute of every engine target (job, instance) and model -- one read of each counter."""
        totals: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        per_target: dict[Target, dict[str, np.ndarray]] = defaultdict(dict)
        for slot, metric in enumerate(
            ("inference_prompt_tokens_total", "inference_generation_tokens_total", "inference_requests_total")
        ):
            for labels, inc in self._minutes(metric, start_ms, end_ms, "increase"):
                key = (labels.get("model", ""), instance_host(labels.get("instance", ""), self.local_host), labels.get("tenant", ""))
                totals[key][slot] += float(np.nansum(inc))
                if slot == 1:
                    models = per_target[(labels.get("job", ""), labels.get("instance", ""))]
                    prev = models.get(key[0])
                    models[key[0]] = inc if prev is None else np.where(np.isnan(prev), inc, np.nan_to_num(inc) + prev)
        rows = [UsageRow(m, node, t, *vals) for (m, node, t), vals in sorted(totals.items())]
        return rows, dict(per_target)

    def window(self, start_ms: int, end_ms: int) -> tuple[list[LedgerRow], list[UsageRow]]:
        """Ledger and usage rows for [start, end), both whole minutes."""
        detail = self.window_detail(start_ms, end_ms)
        return detail.rows, detail.usage

    def window_detail(self, start_ms: int, end_ms: int) -> WindowDetail:
        """:meth:`window` and which targets ran on which GPUs, with their tokens."""
        if start_ms % MINUTE_MS or end_ms % MINUTE_MS or end_ms <= start_ms:
            raise ValueError("a cost window is whole minutes")
        usage, per_target = self.usage(start_ms, end_ms)
        stamps = start_ms + np.arange((end_ms - start_ms) // MINUTE_MS, dtype=np.int64) * MINUTE_MS
        shares = self._model_shares(usage)
        tenant_shares = self._tenant_shares(usage)
        acc: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        node_seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        kwh_price = np.asarray([price * pue for price, pue in map(self.book.electricity, stamps.tolist())])
        gpus = self._gpus(start_ms, end_ms)
        assigned, cpu_targets = self.assignments(start_ms, end_ms, gpus)
        totals = {t: {m: float(np.nansum(v)) for m, v in models.items()} for t, models in per_target.items()}
        gpu_shares = gpu_model_shares(assigned, totals)
        others = self._node_shares({t: m for t, m in totals.items() if t not in assigned and t not in cpu_targets})
        # Per host and per (GPU model, purchase class), not per GPU: a price book lookup is a
        # scan of its entries, and a fleet window asked for one per GPU and minute.
        hosts = {g.host for g in gpus}
        pclass_of = {host: self.book.purchase_class(host) for host in hosts}
        facts_of = {host: self.book.node(host) for host in hosts}
        price_of: dict[tuple[str, str], np.ndarray] = {}
        for gpu in gpus:
            pclass = pclass_of[gpu.host]
            price = price_of.get((gpu.gpu_model, pclass))
            if price is None:
                price = np.asarray([self.book.gpu_price(gpu.gpu_model, pclass, int(t)) for t in stamps]) / 60.0
                price_of[(gpu.gpu_model, pclass)] = price
            seen = ~np.isnan(gpu.util)
            idle = seen & (gpu.util < self.book.settings.idle_utilization)
            busy = seen & ~idle
            energy_cost = gpu.energy / 3.6e6 * kwh_price
            models = shares.get(gpu.host) or {"": 1.0}
            facts = facts_of[gpu.host]
            if facts is not None and facts.model:
                models = {facts.model: 1.0}
            elif gpu.host in others:
                models = others[gpu.host]
            models = gpu_shares.get(GpuRef(gpu.host, gpu.gpu)) or models
            base = (gpu.host, gpu.gpu, gpu.gpu_model, pclass)
            for model, share in models.items():
                node_seconds[gpu.host][model] += share * seen.sum() * 60.0
                for tenant, t_share in tenant_shares.get(model, {"": 1.0}).items():
                    f = share * t_share
                    for component, mask, dollars in (("gpu", busy, price), ("energy", busy, energy_cost)):
                        row = acc[(*base, model, tenant, component)]
                        row[0] += f * float(dollars[mask].sum())
                        row[1] += f * float(mask.sum()) * 60.0 if component == "gpu" else 0.0
                        row[2] += f * float(gpu.energy[mask].sum()) if component == "energy" else 0.0
                idle_row = acc[(*base, model, "", "idle")]
                idle_row[0] += share * float(price[idle].sum() + energy_cost[idle].sum())
                idle_row[1] += share * float(idle.sum()) * 60.0
                idle_row[2] += share * float(gpu.energy[idle].sum())
        self._cpu_nodes(acc, node_seconds, cpu_targets, per_target, tenant_shares, stamps)
        overhead = np.asarray([self.book.overhead_per_node_hour(int(t)) for t in stamps]) / 60.0
        mean_overhead_per_s = float(overhead.mean()) / 60.0 if len(overhead) else 0.0
        devices: dict[str, set[str]] = defaultdict(set)  # per host, its GPUs (and CPU) priced above
        for key in acc:
            devices[key[0]].add(key[1])
        for host, per_model in node_seconds.items():
            gpus_on_node = max(1, len(devices[host]))
            pclass = pclass_of[host] if host in pclass_of else self.book.purchase_class(host)  # CPU nodes: not yet
            for model, seconds in per_model.items():
                # Node-time is GPU-seconds / GPUs on the node; shared among its models.
                row = acc[(host, "", "", pclass, model, "", "overhead")]
                row[0] += seconds / gpus_on_node * mean_overhead_per_s
        rows = [LedgerRow(*key, *vals) for key, vals in sorted(acc.items()) if vals[0] or vals[1] or vals[2]]  # type: ignore[arg-type]
        return WindowDetail(rows, usage, assigned, totals)

    def _node_shares(self, tokens: dict[Target, dict[str, float]]) -> dict[str, dict[str, float]]:
        """host -> model -> token share, over the given targets."""
        per_host: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for (_, instance), models in tokens.items():
            for model, n in models.items():
                if model:
                    per_host[self.node_of(instance)][model] += n
        return {h: {m: (v / sum(ms.values()) if sum(ms.values()) else 1 / len(ms)) for m, v in ms.items()}
                for h, ms in per_host.items()}

    def _cpu_nodes(
        self,
        acc: dict[tuple[str, ...], list[float]],
        node_seconds: dict[str, dict[str, float]],
        cpu_targets: dict[Target, str],
        per_target: dict[Target, dict[str, np.ndarray]],
        tenant_shares: dict[str, dict[str, float]],
        stamps: np.ndarray,
    ) -> None:
        """Engines on CPU nodes: each node-minute its engines were observed costs the CPU
        node-hour price / 60, busy when tokens were generated in it, idle otherwise; one charge
        per node, shared among its models by tokens."""
        by_host: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
        for target, host in cpu_targets.items():
            for model, minutes in per_target.get(target, {}).items():
                prev = by_host[host].get(model)
                by_host[host][model] = minutes if prev is None else np.where(np.isnan(prev), minutes, prev + np.nan_to_num(minutes))
        price = np.asarray([self.book.cpu_price(int(t)) for t in stamps]) / 60.0
        n = len(stamps)
        for host, models in by_host.items():
            arrays = np.vstack([v[:n] for v in models.values()])
            seen = ~np.all(np.isnan(arrays), axis=0)
            busy = seen & (np.nansum(arrays, axis=0) > 0)
            idle = seen & ~busy
            total = {m: float(np.nansum(v)) for m, v in models.items()}
            whole = sum(total.values())
            pclass = self.book.purchase_class(host)
            for model, tokens in total.items():
                share = tokens / whole if whole else 1 / len(total)
                node_seconds[host][model] += share * float(seen.sum()) * 60.0
                for tenant, t_share in tenant_shares.get(model, {"": 1.0}).items():
                    row = acc[(host, CPU, "CPU", pclass, model, tenant, "gpu")]
                    row[0] += share * t_share * float(price[busy].sum())
                    row[1] += share * t_share * float(busy.sum()) * 60.0
                idle_row = acc[(host, CPU, "CPU", pclass, model, "", "idle")]
                idle_row[0] += share * float(price[idle].sum())
                idle_row[1] += share * float(idle.sum()) * 60.0

    @staticmethod
    def _model_shares(usage: list[UsageRow]) -> dict[str, dict[str, float]]:
        """host → model → share of generated tokens (equal shares where no tokens yet)."""
        per_host: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for u in usage:
            if u.model:
                per_host[u.node][u.model] += u.generated_tokens
        out = {}
        for host, models in per_host.items():
            total = sum(models.values())
            out[host] = {m: (v / total if total else 1 / len(models)) for m, v in models.items()}
        return out

    @staticmethod
    def _tenant_shares(usage: list[UsageRow]) -> dict[str, dict[str, float]]:
        per_model: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for u in usage:
            if u.tenant:
                per_model[u.model][u.tenant] += u.generated_tokens
        out = {}
        for model, tenants in per_model.items():
            total = sum(tenants.values())
            if total > 0:
                out[model] = {t: v / total for t, v in tenants.items()}
        return out
