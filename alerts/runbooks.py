"""Runbook text attached to the default alerts, written from the source documents' troubleshooting
tables (seed 000 §4.2, seed 004 §6 and §7): probable causes first, then what to check."""

from __future__ import annotations

RUNBOOKS: dict[str, str] = {
    "GpuThroughputLow": (
        "Probable causes: load imbalance across GPUs (routing weights), a throttled or faulty GPU, "
        "decode bound by memory bandwidth under high concurrency. Checks: compare this GPU's "
        "utilization, clocks and clock-event reasons with its peers; look for XID/ECC errors and "
        "temperature; review the router's weights; consider hierarchical scheduling (seed 000 §4.2)."
    ),
    "GpuMemoryHigh": (
        "Probable cause: weights + KV cache exceed the card's memory (seed 004 §6, 'out of memory at "
        "start'). Checks: recompute weights + KV cache (`infermeter plan`); lower max_context_length or "
        "max_batch_size, use a quantized format, or raise tensor parallelism."
    ),
    "RequestFailureRateHigh": (
        "Probable causes: timeouts under load (decode bound by memory bandwidth), OOM, engine errors, "
        "upstream aborts. Checks: failures by cause on the Requests page; the worker's logs by layer "
        "(driver, runtime, framework, application); KV-cache usage and queue length; recent releases "
        "(roll back if a new version started it) (seed 004 §6)."
    ),
    "TokenCostOverBudget": (
        "Cost per token is more than the configured margin above budget. Checks: (1) the utilization "
        "curve — idle GPUs cost money; (2) the request mix — prompt/generation length shifts change "
        "cost per token; (3) whether autoscaling acted on the last recommendation (seed 000 §4.2)."
    ),
    "CostPerTokenSpike": (
        "Per-token cost jumped. The alert carries the three checks of seed 000 §4.2: utilization "
        "change, request-mix change (prompt/generation length distribution) and whether the last "
        "scale recommendation was acted on."
    ),
    "InterTokenLatencyHigh": (
        "P99 inter-token latency is above the SLA. Probable cause: decode is bound by memory "
        "bandwidth at this concurrency (seed 004 §6, 'timeouts as concurrency rises'). Checks: batch "
        "size and concurrency vs the baseline; bandwidth of the card; a lower-bit quantized format."
    ),
    "TimeToFirstTokenHigh": (
        "P99 time to first token is above the SLA. Probable causes: queueing (waiting requests), long "
        "prompts (prefill), cold start after a release (seed 004 §6, 'first requests very slow'). "
        "Checks: queue length, prompt length distribution, instance warm-up and local weight cache."
    ),
    "EndToEndLatencyHigh": (
        "P99 end-to-end latency is above the SLA. Checks: queue time vs decode time, output lengths, "
        "batch size and concurrency against the baseline (seed 004 §5); scale out if the queue grows."
    ),
    "FleetUtilizationLow": (
        "Fleet GPU utilization is below the target (> 70 %, seed 000 §3.3): money is idle. Checks: "
        "release idle instances (seed 004 §7), consolidate models, lower the replica count."
    ),
    "GpuLoadImbalance": (
        "Some GPUs are above 90 % while others are below 30 % (seed 000 §4.2). Remedies: tune the "
        "routing algorithm's weights, provide NCCL_TOPO_FILE, consider hierarchical scheduling."
    ),
    "NcclTimeouts": (
        "NCCL timeouts (seed 000 §4.2). Checks: RDMA/IB network link state; set "
        "NCCL_ASYNC_ERROR_HANDLING=1 and NCCL_BLOCKING_WAIT=1; for a multi-GPU hang at start check "
        "topology visibility and the driver/runtime compatibility matrix (seed 004 §6)."
    ),
    "QueueBacklog": (
        "The request queue is above the scale-out threshold (seed 000 §2.2: scale out when the queue "
        "exceeds 1000). Action: add an instance (recommendation attached; 300 s cooldown, group size "
        "2..16). Check that the autoscaler acted."
    ),
    "QueueIdle": (
        "No requests queued or running for a long time: an instance can be released (seed 004 §7). "
        "Action: remove an instance (recommendation attached; never below the minimum group size)."
    ),
    "TargetDown": (
        "A scrape target does not answer. Checks: the process is running and listening; network "
        "path and firewall; the target's /metrics by hand; the error in the Targets view."
    ),
    "GpuIdle": (
        "A GPU has done nothing for a long time (seed 004 §7: release long-idle instances). Checks: "
        "is a worker assigned? Release the instance or move a model onto it."
    ),
    "GpuXidError": (
        "The driver reported an XID error. Checks: the XID code in the NVIDIA XID catalogue; "
        "dmesg on the node; drain the GPU if it repeats (hardware, NVLink or driver fault)."
    ),
    "GpuEccUncorrected": (
        "Uncorrectable ECC errors: memory contents on this GPU are unreliable. Drain the GPU, check "
        "retired pages / remapped rows, and open a hardware ticket."
    ),
    "GpuTemperatureHigh": (
        "GPU temperature is above the limit; the GPU will throttle (thermal clock-event reasons). "
        "Checks: cooling and airflow, fan state, power limits, the data centre's inlet temperature."
    ),
    "SpendBudgetWarning": (
        "Spend this period is past the warning share of the budget. Checks: the cost page by model "
        "and node; idle cost; the 72 h forecast."
    ),
    "SpendBudgetExceeded": ("Spend this period has passed the budget. Checks: idle cost first, then spend by model."),
    "BudgetOverrunAhead": (
        "The spend forecast crosses the period budget within 72 h (seed 000 §4.3). The crossing time "
        "is attached. Checks: idle GPUs, the utilization target, scale-in recommendations."
    ),
    "UnitCostBudgetBreachAhead": (
        "The forecast of cost per 1M tokens crosses its budget within 72 h. Checks: utilization trend "
        "and the request mix; release idle capacity."
    ),
    "MoeExpertImbalance": (
        "One expert of the layer takes far more than its share of tokens, so every expert-parallel step "
        "waits for the GPU that holds it (seed 000 §1, §4.2). Checks: the MoE page's heatmap for the hot "
        "experts and whether the imbalance follows a change of traffic mix (one language, one task); "
        "rebalance expert placement (vLLM --enable-eplb, SGLang --enable-eplb), replicate hot experts, "
        "review the router's auxiliary load-balancing loss for the next training run."
    ),
    "MoeRoutingUnexpected": (
        "The layer's expert activation frequencies are far from uniform, the acceptance check's "
        "'activation distribution as expected' fails (seed 000 §3.3). Checks: whether a release changed "
        "the model or router weights (deploy markers), the traffic mix, and the heatmap; compare with the "
        "distribution measured at acceptance."
    ),
    "MoeExpertsUnused": (
        "Experts of this layer received no token for a week: candidates for pruning, or a sign the router "
        "collapsed (seed 000 §4.3). Checks: confirm on a representative traffic mix before pruning; "
        "a collapse after a release points at the router weights."
    ),
    "NodeSoftwareDrift": (
        "This node runs another driver, CUDA, NCCL, VBIOS or engine version than the rest of its group "
        "(seed 004 step 1: versions must match across a group; a mismatch shows up as NCCL hangs, "
        "timeouts or wrong results). Checks: the Drift page's table; whether a rolling upgrade is under "
        "way; align the node with the driver/CUDA/NCCL compatibility matrix and restart its engine."
    ),
    "NcclSettingDrift": (
        "This node's NCCL or PyTorch setting differs from its group's (seed 000 §4.2, seed 004 §6: "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and TORCH_NCCL_BLOCKING_WAIT=1 against timeouts, "
        "NCCL_TOPO_FILE for topology visibility). Checks: the engine's environment on that node "
        "(launcher, container spec); 'unset' means the node never showed the setting its peers have."
    ),
}
