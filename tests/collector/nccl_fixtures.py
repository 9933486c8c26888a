"""Hand-written NCCL / PyTorch / nccl-tests lines in the real formats (see FORMATS.md section 3)."""

from __future__ import annotations

import json

# Two ranks of one communicator in one process (ncclCommInitAll), NCCL 2.27-style, plus a WARN
# with the >= 2.26 timestamp prefix, a WARN naming its function, and noise that must be ignored.
DEBUG_LOG = """\
node7:4100:4100 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.7<0>
node7:4100:4100 [0] NCCL INFO NCCL version 2.26.5+cuda12.8
node7:4100:4150 [0] NCCL INFO ncclCommInitAll comm 0x5500aa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1a000 commId 0xfeedbeef01 - Init START
node7:4100:4151 [1] NCCL INFO ncclCommInitAll comm 0x5500bb rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1b000 commId 0xfeedbeef01 - Init START
node7:4100:4150 [0] NCCL INFO comm 0x5500aa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
node7:4100:4150 [0] NCCL INFO Channel 00/02 : 0 1
node7:4100:4150 [0] NCCL INFO 2 coll channels, 2 collnet channels, 4 nvls channels, 2 p2p channels, 2 p2p channels per peer

[2026-01-05 09:15:02] node7:4100:4151 [1] misc/socket.cc:481 NCCL WARN socketStartConnect: Connect to 10.0.0.8<39113> failed : Connection refused
node7:4100:4151 [1] NCCL INFO misc/socket.cc:564 -> 6
node7:4100:4151 [1] transport/net_ib.cc:1020 (ncclIbConnect) NCCL WARN NET/IB : peer not ready
node7:4100:4150 [0] NCCL INFO ncclCommInitAll comm 0x5500aa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1a000 commId 0xfeedbeef01 - Init COMPLETE
node7:4100:4150 [0] NCCL INFO Init timings - ncclCommInitAll: rank 0 nranks 2 total 1.25 (kernels 0.9, alloc 0.1, bootstrap 0.1, allgathers 0.0, topo 0.1, graphs 0.0, connections 0.05, rest 0.0)
node7:4100:4151 [1] NCCL INFO Init timings - ncclCommInitAll: rank 1 nranks 2 total 1.5 (kernels 0.9, alloc 0.1, bootstrap 0.4, allgathers 0.0, topo 0.1, graphs 0.0, connections 0.0, rest 0.0)
node7:4100:4180 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
node7:4100:4180 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read
node7:4100:4181 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
node7:4100:4181 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
node7:4100:4182 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
node7:4100:4182 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/Socket/0
node7:4100:4182 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA
node7:4100:4180 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
Epoch 1 step 10 loss 2.31
"""

VERSION_ONLY = "NCCL version 2.21.5+cuda12.4\n"

# torch >= 2.2 glog prefix, torch 1.x prefix without NumelIn/Out, and the echo lines that repeat it.
WATCHDOG_LOG = """\
[rank2]:[E0105 09:20:11.123456789 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4242, OpType=ALLGATHER, NumelIn=1024, NumelOut=4096, Timeout(ms)=300000) ran for 300007 milliseconds before timing out.
[rank2]:[E0105 09:20:11.123500000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 2] Exception (either an error or timeout) detected by watchdog at work: 4242, last enqueued NCCL work: 4243, last completed NCCL work: 4241.
[rank2]:[E0105 09:20:11.123600000 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4242, OpType=ALLGATHER, NumelIn=1024, NumelOut=4096, Timeout(ms)=300000) ran for 300007 milliseconds before timing out.
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 0 (default_pg) Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4242, OpType=ALLGATHER, NumelIn=1024, NumelOut=4096, Timeout(ms)=300000) ran for 300007 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:737] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800500 milliseconds before timing out.
"""


def inspector_record(rank: int, op: str = "AllGather", size: int = 1 << 20, exec_us: float = 250.0,
                     busbw: float = 120.5, p2p: bool = False) -> str:
    header = {"id": "0xabc123", "comm_name": "tp", "rank": rank, "n_ranks": 4, "nnodes": 1}
    meta = {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "nccl_profiler_interface",
            "dump_timestamp_us": 1767600000000000, "hostname": "node7", "pid": 4100}
    if p2p:
        perf: dict[str, object] = {"p2p": op, "p2p_sn": 9, "p2p_peer": 1, "p2p_msg_size_bytes": size,
                                   "p2p_exec_time_us": exec_us, "p2p_timing_source": "kernel_gpu",
                                   "p2p_algobw_gbs": busbw, "p2p_busbw_gbs": busbw}
        return json.dumps({"header": header, "metadata": meta, "p2p_perf": perf}, separators=(",", ":"))
    perf = {"coll": op, "coll_sn": 31, "coll_msg_size_bytes": size, "coll_exec_time_us": exec_us,
            "coll_timing_source": "kernel_gpu", "coll_algobw_gbs": busbw / 1.5, "coll_busbw_gbs": busbw}
    return json.dumps({"header": header, "metadata": meta, "coll_perf": perf}, separators=(",", ":"))


INSPECTOR_PROM = (
    'nccl_bus_bandwidth_gbs{version="v5.1",slurm_job_id="77",node="node7",gpu="GPU1",comm_name="tp",'
    'n_nodes="1",nranks="4",collective="AllGather",message_size="1-2MB",algo_proto="Ring_simple"} 120.5\n'
    'nccl_collective_exec_time_microseconds{version="v5.1",slurm_job_id="77",node="node7",gpu="GPU1",'
    'comm_name="tp",n_nodes="1",nranks="4",collective="AllGather",message_size="1-2MB",algo_proto="Ring_simple"} 250\n'
)

# reduce_scatter_perf, 4 GPUs, newer header, N/A #wrong (validation off) on the last row.
NCCL_TESTS_OUT = """\
# nccl-tests version 2.17.1 nccl-headers=22605 nccl-library=22605
# Collective test starting: reduce_scatter_perf
# nThread 1 nGpus 4 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024            64     float     sum      -1    20.50    0.05    0.04      0    19.90    0.05    0.04      0
        2048           128     float     sum      -1    21.00    0.10    0.07      0    20.10    0.10    0.08      0
        4096           256     float     sum      -1    22.00    0.19    0.14    N/A    21.00    0.20    0.15    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.0867
#
# Collective test concluded: reduce_scatter_perf
"""

# Other PyTorch generations: the newest logPrefix() style (PG name, no "[Rank N]"), `srun -l` plus a
# c10 prefix with an unpadded month and no rank in the message, a Python exception echo and a peer's
# dump-signal line (neither is a timeout of its own), and a torch 1.x line with no rank at all.
WATCHDOG_VARIANTS = """\
[rank6]:[E0212 04:11:09.550312841 ProcessGroupNCCL.cpp:688] [PG ID 2 PG GUID 5(tp_group) Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=_ALLGATHER_BASE, NumelIn=2048, NumelOut=16384, Timeout(ms)=120000) ran for 120094 milliseconds before timing out.
[rank6]: torch.distributed.DistBackendError: [PG ID 2 PG GUID 5(tp_group) Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=_ALLGATHER_BASE, NumelIn=2048, NumelOut=16384, Timeout(ms)=120000) ran for 120094 milliseconds before timing out.
[rank2]:[E0212 04:11:10.000100000 ProcessGroupNCCL.cpp:1987] [PG ID 2 PG GUID 5(tp_group) Rank 2] Received a dump signal due to a collective timeout from  rank 6 and we will try our best to dump the debug info. Last enqueued NCCL work: 31, last completed NCCL work: 30.
12: [rank12]:[E307 22:01:45.001937 ProcessGroupNCCL.cpp:632] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=REDUCE_SCATTER, NumelIn=65536, NumelOut=8192, Timeout(ms)=600000) ran for 600110 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:414] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BARRIER, Timeout(ms)=10000) ran for 10250 milliseconds before timing out.
"""

# TORCH_NCCL_DESYNC_DEBUG=1 reports: torch 1.x appends it to the timeout message (missing ranks);
# torch 2.x logs it as its own message after the timeout (rank 6 finished #41207 and never joined
# #41208), interleaved with another rank's lines, and the snapshot part names no lagging rank.
DESYNC_LOG = """\
[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=60000) ran for 60321 milliseconds before timing out.
\t - [0] Timeout at collective: ALLREDUCE, #12
\t - To our best knowledge, ranks [2, 3] are the lagging ranks that caused this timeout. They never joined any collectives
[rank4]:[E0311 10:02:03.100000000 ProcessGroupNCCL.cpp:1595] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41208, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.
[rank5]:[E0311 10:02:03.100050000 ProcessGroupNCCL.cpp:1595] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41208, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600051 milliseconds before timing out.
[rank4]:[E0311 10:02:03.100100000 ProcessGroupNCCL.cpp:1610] [PG 0 (default_pg) Rank 4]
\t - [4] Timeout at collective: ALLREDUCE, #41208
\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:
\t     [6] finished collective #41207, but didn't join collective #41208 (count from 1)
\t - Snapshot of ranks' latest states:
\t   #41207 finished ranks:
\t     [6] finished ALLREDUCE
\t   #41208 started ranks:
\t     [0, 1, 2, 3, 4, 5, 7] started ALLREDUCE
"""


def timeout_line(rank: int, seq: int, op: str = "ALLREDUCE", timeout_ms: int = 600000, stamp: str = "0105 09:20:11") -> str:
    """One torch >= 2.2 watchdog timeout line."""
    return (f"[rank{rank}]:[E{stamp}.123456789 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=4096, NumelOut=4096, "
            f"Timeout(ms)={timeout_ms}) ran for {timeout_ms + 37} milliseconds before timing out.\n")


def nccl_tests_output(hosts: list[str], gpus_per_host: int, peak_busbw_gbs: float, *, new_format: bool = True,
                      sizes: tuple[int, ...] = (1 << 20, 1 << 24, 1 << 28, 1 << 30)) -> str:
    """An all_reduce_perf run over ``hosts`` x ``gpus_per_host`` ranks whose largest size reaches
    ``peak_busbw_gbs``: the newer header (version, "starting"/"concluded" lines, ``Group``) or the
    older one (no version line, ``Rank`` lines without ``Group``)."""
    n = len(hosts) * gpus_per_host
    lines = []
    if new_format:
        lines += ["# nccl-tests version 2.17.1 nccl-headers=22605 nccl-library=22605",
                  "# Collective test starting: all_reduce_perf"]
    lines += [f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 iters: 20 "
              "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for rank in range(n):
        host, dev = hosts[rank // gpus_per_host], rank % gpus_per_host
        group = "Group  0 " if new_format else ""
        lines.append(f"#  Rank {rank:2d} {group}Pid {4000 + rank:6d} on {host:>10} device {dev:2d} [0000:{dev:02x}:00] "
                     "NVIDIA H100 80GB HBM3")
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    factor = 2 * (n - 1) / n
    for size in sizes:
        busbw = peak_busbw_gbs * size / (size + sizes[-1] / 64) * (1 + 1 / 64)
        algbw = busbw / factor
        time_us = size / (algbw * 1e9) * 1e6
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {time_us:7.1f}  {algbw:6.2f}  {busbw:6.2f}      0"
                     f"  {time_us * 1.01:7.1f}  {algbw / 1.01:6.2f}  {busbw / 1.01:6.2f}      0")
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {peak_busbw_gbs / 2:.3f}", "#"]
    if new_format:
        lines.append("# Collective test concluded: all_reduce_perf")
    return "\n".join(lines) + "\n"
