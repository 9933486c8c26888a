"""Memory and capacity planning (seed 004 §4.2 and its first troubleshooting row; seed 000 §3.1).

Memory, per device: weights (parameters x bytes per parameter, split over the tensor-parallel
group; an MoE counts every expert, all resident) + KV cache (2 x layers x kv_heads x head_dim x
bytes x context x batch, split by KV head but never below one head per device; an MLA model's
latent, layers x (kv_lora_rank + qk_rope_head_dim), is whole on every device) + a margin (a
fraction of the device, for activations and allocator slack) must fit the device's free memory.
A config that does not fit is refused with what to lower, and to what: the largest
``max_batch_size`` or ``max_context_length`` that fits, a lower ``precision``, or a larger
``tensor_parallel_size`` -- the seed's four remedies ("降低上下文长度或批大小，改用量化或提高并行度").

Capacity (*ours*, a roofline estimate, printed step by step): a decode step reads the weights
and the batch's KV cache once, so it takes (weight bytes + KV bytes) / (bandwidth x efficiency);
a prefill is compute-bound, 2 x params x prompt tokens / (peak FLOPS x efficiency).  Weights and
params are those a token runs through (:meth:`ModelShape.params_read_per_step`; the input
embedding is one row): for an MoE, the top-k experts per token for compute, and for the bytes a
decode step reads, the distinct experts its batch is routed to (k at batch 1, all of them for
large batches).  One replica serves 1 / (prefill + output tokens x step / batch) requests/s; seed
000 §3.1 sizes the fleet as peak QPS / per-card capacity, so nodes = ceil(peak QPS / (replica
req/s x replicas per node)).

KV cache values are 16-bit for int8/fp8/int4 weights (weight-only quantisation), 32-bit for fp32.
Pure arithmetic: no torch, no device access (the free memory is a parameter).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from worker.shapes import BYTES_PER_PARAM, ModelShape

GIB = 1024**3
PRECISION_ORDER = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")


@dataclass(frozen=True)
class GpuSpec:
    """Vendor spec-sheet figures (*ours*): memory as nvidia-smi reports the total, HBM/GDDR
    bandwidth, dense 16-bit tensor FLOPS."""

    name: str
    memory_bytes: int
    bandwidth_bytes_s: float
    bf16_flops: float


def _gpu(name: str, mib: int, tb_s: float, tflops: float) -> GpuSpec:
    return GpuSpec(name, mib * 1024 * 1024, tb_s * 1e12, tflops * 1e12)


GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        _gpu("H100 80GB", 81_559, 3.35, 989),  # SXM5
        _gpu("H100 PCIe 80GB", 81_559, 2.0, 756),
        _gpu("H200 141GB", 143_771, 4.8, 989),
        _gpu("A100 80GB", 81_920, 2.039, 312),
        _gpu("A100 40GB", 40_960, 1.555, 312),
        _gpu("L40S 48GB", 46_068, 0.864, 362),
        _gpu("L4 24GB", 23_034, 0.3, 121),
        _gpu("A10 24GB", 23_028, 0.6, 125),
        _gpu("RTX 4090 24GB", 24_564, 1.008, 165),
        _gpu("V100 32GB", 32_768, 0.9, 125),
        _gpu("MI300X 192GB", 196_592, 5.3, 1307),
    )
}


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def find_gpu(name: str) -> GpuSpec:
    """A catalogue GPU by name, ignoring case, spaces and punctuation ("h100-80gb" works); a
    partial name ("L4", "H100") picks the shortest catalogue name containing all its words."""
    wanted = _norm(name)
    for gpu in GPUS.values():
        if _norm(gpu.name) == wanted:
            return gpu
    words = {_norm(w) for w in re.split(r"[\s_\-/]+", name) if w}
    matches = [g for g in GPUS.values() if words and words <= {_norm(w) for w in g.name.split()}]
    if matches:
        return min(matches, key=lambda g: len(g.name.split()))
    raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPUS)} (or give --gpu-memory-gib)")


def kv_bytes_per_value(precision: str) -> float:
    return 4.0 if precision == "fp32" else 2.0


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


@dataclass(frozen=True)
class Suggestion:
    field: str
    value: int | str
    reason: str

    def text(self) -> str:
        return f"{self.field}: {self.value}  ({self.reason})"


@dataclass(frozen=True)
class MemoryPlan:
    model: str
    precision: str
    tensor_parallel_size: int
    max_context_length: int
    max_batch_size: int
    device: str
    total_bytes: int
    free_bytes: int
    params: int
    weight_bytes: float  # per device
    kv_bytes_per_token: float  # per device
    kv_bytes: float  # per device, whole context x whole batch
    margin_bytes: float
    suggestions: tuple[Suggestion, ...] = field(default=())
    kv_formula: str = "2 x layers x kv_heads x head_dim"
    kv_split: str | None = None  # how the KV cache divides over tp; None: " / tp N"
    active_params: int = 0  # an MoE's parameters per token (model-card count); 0: dense
    num_experts: int = 0

    @property
    def needed_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.margin_bytes

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.free_bytes

    @property
    def max_batch_that_fits(self) -> int:
        room = self.free_bytes - self.weight_bytes - self.margin_bytes
        return max(0, int(room // (self.kv_bytes_per_token * self.max_context_length)))

    def lines(self) -> list[str]:
        tp = self.tensor_parallel_size
        split = f" / tp {tp}" if tp > 1 else ""
        bpp = BYTES_PER_PARAM[self.precision]
        kvb = kv_bytes_per_value(self.precision)
        count = f"{self.params / 1e9:.3f} B" if self.params >= 1e9 else f"{self.params / 1e6:.2f} M"
        kv_split = split if self.kv_split is None else self.kv_split
        moe = (
            [f"           (MoE: all {self.num_experts} experts resident; {self.active_params / 1e9:.2f} B active per token)"]
            if self.active_params else []
        )
        out = [
            f"model {self.model}: {count} parameters, precision {self.precision} "
            f"({bpp:g} bytes/param), tensor_parallel_size {tp}",
            f"device {self.device}: total {gib(self.total_bytes)}, free {gib(self.free_bytes)}",
            f"weights  = {self.params:,} params x {bpp:g} B{split} = {gib(self.weight_bytes)}",
            *moe,
            f"KV cache = {self.kv_formula} x {kvb:g} B{kv_split} = {self.kv_bytes_per_token / 1024:.1f} KiB/token"
            f" x context {self.max_context_length} x batch {self.max_batch_size} = {gib(self.kv_bytes)}",
            f"margin   = {self.margin_bytes / self.total_bytes:.0%} of the device = {gib(self.margin_bytes)}",
            f"needed   = {gib(self.needed_bytes)} of {gib(self.free_bytes)} free -> "
            + ("fits" if self.fits else "DOES NOT FIT"),
        ]
        if not self.fits:
            out.append("change one of these (any one is enough):")
            out.extend(f"  {s.text()}" for s in self.suggestions)
            if not self.suggestions:
                out.append("  nothing fits this device: use a larger device or a smaller model")
        return out

    def refusal(self) -> str:
        fixes = "; ".join(s.text() for s in self.suggestions) or "use a larger device or a smaller model"
        return (
            f"refusing to start: weights {gib(self.weight_bytes)} + KV cache {gib(self.kv_bytes)} "
            f"(context {self.max_context_length} x batch {self.max_batch_size}) + margin {gib(self.margin_bytes)} "
            f"= {gib(self.needed_bytes)} does not fit the {gib(self.free_bytes)} free on {self.device}. "
            f"Change one of: {fixes}"
        )


def _kv_text(shape: ModelShape, tp: int) -> tuple[str, str]:
    """The KV-cache formula and how it divides over ``tp`` devices, for :meth:`MemoryPlan.lines`."""
    if shape.uses_mla:
        formula = f"layers x (kv_lora_rank {shape.kv_lora_rank} + qk_rope_head_dim {shape.qk_rope_head_dim})"
        return formula, (f" (MLA latent: whole on each of the tp {tp} devices)" if tp > 1 else "")
    kv = shape.num_kv_heads
    if tp <= 1:
        return "2 x layers x kv_heads x head_dim", ""
    if kv % tp == 0:
        return "2 x layers x kv_heads x head_dim", f" / tp {tp}"
    here = math.ceil(kv / tp)
    return "2 x layers x kv_heads x head_dim", f" x {here}/{kv} ({kv} kv heads over tp {tp}: replicated)"


def _plan(
    shape: ModelShape, precision: str, tp: int, context: int, batch: int,
    device: str, total: int, free: int, margin: float,
) -> MemoryPlan:
    params = shape.param_count()
    kv_tok = shape.kv_bytes_per_token_per_device(kv_bytes_per_value(precision), tp)
    formula, split = _kv_text(shape, tp)
    return MemoryPlan(
        model=shape.name, precision=precision, tensor_parallel_size=tp, max_context_length=context,
        max_batch_size=batch, device=device, total_bytes=total, free_bytes=free, params=params,
        weight_bytes=params * BYTES_PER_PARAM[precision] / tp, kv_bytes_per_token=kv_tok,
        kv_bytes=kv_tok * context * batch, margin_bytes=total * margin, kv_formula=formula, kv_split=split,
        active_params=shape.active_param_count() if shape.is_moe else 0, num_experts=shape.num_experts,
    )


def plan_memory(
    shape: ModelShape,
    *,
    precision: str,
    tensor_parallel_size: int,
    max_context_length: int,
    max_batch_size: int,
    device: str,
    total_bytes: int,
    free_bytes: int | None = None,
    margin: float = 0.10,
) -> MemoryPlan:
    """Weights + KV cache + margin against one device's free memory, with fixes if it does not fit."""
    if precision not in BYTES_PER_PARAM:
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(BYTES_PER_PARAM)}")
    free = total_bytes if free_bytes is None else free_bytes
    args = (device, total_bytes, free, margin)
    tp, ctx, batch = tensor_parallel_size, max_context_length, max_batch_size
    plan = _plan(shape, precision, tp, ctx, batch, *args)
    if plan.fits:
        return plan
    fixes: list[Suggestion] = []
    room = free - plan.weight_bytes - plan.margin_bytes
    if room > 0:
        fit_batch = int(room // (plan.kv_bytes_per_token * ctx))
        if fit_batch >= 1:
            fixes.append(Suggestion("max_batch_size", fit_batch, f"at max_context_length {ctx}"))
        fit_ctx = int(room // (plan.kv_bytes_per_token * batch))
        fit_ctx = fit_ctx // 256 * 256 if fit_ctx >= 256 else fit_ctx // 16 * 16
        if fit_ctx >= 16:
            fixes.append(Suggestion("max_context_length", fit_ctx, f"at max_batch_size {batch}"))
    for lower in PRECISION_ORDER[PRECISION_ORDER.index(precision) + 1 :]:
        if BYTES_PER_PARAM[lower] < BYTES_PER_PARAM[precision] and _plan(shape, lower, tp, ctx, batch, *args).fits:
            fixes.append(Suggestion("precision", lower, "quantised weights; check output quality"))
            break
    for more in (2, 4, 8, 16):
        if more > tp and shape.tp_supported(more) and _plan(shape, precision, more, ctx, batch, *args).fits:
            fixes.append(Suggestion("tensor_parallel_size", more, f"needs {more} devices"))
            break
    return MemoryPlan(**{**plan.__dict__, "suggestions": tuple(fixes)})


@dataclass(frozen=True)
class CapacityPlan:
    gpu: GpuSpec
    batch: int
    replicas_per_node: int
    step_s: float
    prefill_s: float
    request_s: float
    replica_rps: float
    node_rps: float
    peak_qps: float
    nodes: int
    lines: tuple[str, ...]


def plan_capacity(
    shape: ModelShape,
    *,
    precision: str,
    tensor_parallel_size: int,
    batch: int,
    gpu: GpuSpec,
    peak_qps: float,
    prompt_tokens: int = 512,
    output_tokens: int = 256,
    gpus_per_node: int = 8,
    bandwidth_efficiency: float = 0.6,
    compute_efficiency: float = 0.4,
    measured_replica_rps: float | None = None,
) -> CapacityPlan:
    """Nodes for a peak load (seed 000 §3.1), from a bandwidth/compute roofline of one replica.
    Compute uses the parameters a token runs through (an MoE's top-k experts); the weight bytes a
    decode step reads are those of the experts its whole batch is routed to."""
    tp = tensor_parallel_size
    batch = max(1, batch)
    params = shape.params_per_token()
    read = shape.params_read_per_step(batch)
    weights = read * BYTES_PER_PARAM[precision]
    # KV bytes the group reads per token of context: each device its own share (MLA: all of it).
    kv_tok = tp * shape.kv_bytes_per_token_per_device(kv_bytes_per_value(precision), tp)
    ctx = prompt_tokens + output_tokens / 2
    bandwidth = tp * gpu.bandwidth_bytes_s * bandwidth_efficiency
    flops = tp * gpu.bf16_flops * compute_efficiency
    bw_step = (weights + batch * ctx * kv_tok) / bandwidth
    compute_step = 2 * params * batch / flops
    step = max(bw_step, compute_step)
    prefill = 2 * params * prompt_tokens / flops
    request = prefill + output_tokens * step / batch
    replica_rps = 1 / request
    estimated_rps = replica_rps
    if measured_replica_rps is not None and measured_replica_rps > 0:  # `load` / `evaluate` beat the roofline
        replica_rps = measured_replica_rps
        request = 1 / replica_rps
    replicas = max(1, gpus_per_node // tp)
    node_rps = replica_rps * replicas
    nodes = max(1, math.ceil(peak_qps / node_rps)) if peak_qps > 0 else 0
    moe = (
        (
            f"MoE: {shape.experts_per_token} of {shape.num_experts} routed experts per token"
            + (f" + {shape.num_shared_experts} shared" if shape.num_shared_experts else "")
            + f"; a batch of {batch} reads ~{shape.expected_experts_read(batch):.1f} of {shape.num_experts} per layer"
            f" (uniform routing) -> {read / 1e9:.2f} B of {shape.param_count() / 1e9:.2f} B params per step",
        )
        if shape.is_moe else ()
    )
    lines = (
        f"GPU {gpu.name}: {gpu.bandwidth_bytes_s / 1e12:.2f} TB/s x {bandwidth_efficiency:.0%} efficiency, "
        f"{gpu.bf16_flops / 1e12:.0f} TFLOPS x {compute_efficiency:.0%}",
        f"workload: {prompt_tokens} prompt + {output_tokens} output tokens per request, batch {batch}, "
        f"mean context {ctx:.0f}",
        *moe,
        f"decode step = (weights {weights / 1e9:.2f} GB + batch x context x KV {batch * ctx * kv_tok / 1e9:.2f} GB)"
        f" / {bandwidth / 1e12:.2f} TB/s = {bw_step * 1e3:.2f} ms (compute bound {compute_step * 1e3:.2f} ms)"
        f" -> {batch / step:,.0f} tokens/s per replica",
        f"prefill = 2 x {params / 1e9:.2f} B x {prompt_tokens} / {flops / 1e12:.0f} TFLOPS = {prefill * 1e3:.2f} ms",
        (f"per request = prefill + {output_tokens} x step / batch = {request * 1e3:.1f} ms -> {replica_rps:.2f} req/s per replica"
         if replica_rps == estimated_rps else
         f"per replica: {replica_rps:.2f} req/s measured (the roofline estimates {estimated_rps:.2f})"),
        f"node = {gpus_per_node} GPUs / tp {tp} = {replicas} replicas -> {node_rps:.2f} req/s per node",
        f"nodes = ceil(peak {peak_qps:g} req/s / {node_rps:.2f}) = {nodes}"
        + (f"  (peak uses {peak_qps / (nodes * node_rps):.0%} of their capacity)" if nodes else ""),
    )
    return CapacityPlan(
        gpu=gpu, batch=batch, replicas_per_node=replicas, step_s=step, prefill_s=prefill, request_s=request,
        replica_rps=replica_rps, node_rps=node_rps, peak_qps=peak_qps, nodes=nodes, lines=lines,
    )


def host_memory() -> tuple[int, int]:
    """(total, available) bytes of this host from /proc/meminfo; (0, 0) when unreadable."""
    values: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    return values.get("MemTotal", 0), values.get("MemAvailable", values.get("MemFree", 0))
