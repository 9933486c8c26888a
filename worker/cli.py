"""``infermeter worker | load | plan``: the worker's subcommands, registered on a parent parser.

``register(sub)`` adds them to the service's ``argparse`` subparsers; every subcommand sets
``func(args, out, err) -> int``.  The parent parser defines ``--config``.  Nothing here imports
torch: ``worker`` imports the server only when it runs, ``load`` and ``plan`` never do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

from worker.config import WorkerConfig, WorkerConfigError, load_worker_config

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _config(args: argparse.Namespace, err: TextIO) -> WorkerConfig | None:
    try:
        return load_worker_config(getattr(args, "config", None))
    except WorkerConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return None


def _override(config: WorkerConfig, **changes: Any) -> WorkerConfig:
    update = {k: v for k, v in changes.items() if v is not None}
    return WorkerConfig.model_validate({**config.model_dump(), **update}) if update else config


# -- worker ---------------------------------------------------------------------------------
def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="listen address (default: worker.host)")
    p.add_argument("--port", type=int, help="listen port (default: worker.port, 8080)")
    p.add_argument("--model-path", help="reference name (ref-tiny...) or checkpoint directory")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"])
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--max-batch-size", type=int)
    p.add_argument("--max-context-length", type=int)
    p.add_argument("--timeout-ms", type=int)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pydantic import ValidationError

    from worker.serve import serve

    config = _config(args, err)
    if config is None:
        return EXIT_FAIL
    try:
        config = _override(
            config, host=args.host, port=args.port, model_path=args.model_path, precision=args.precision,
            device=args.device, max_batch_size=args.max_batch_size, max_context_length=args.max_context_length,
            timeout_ms=args.timeout_ms,
        )
    except ValidationError as exc:
        print(f"invalid option: {exc}", file=err)
        return EXIT_USAGE
    return serve(config, out=out, err=err, log_level=args.log_level)


# -- load -----------------------------------------------------------------------------------
def add_load_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="server base URL (default: the worker's, from the config)")
    p.add_argument("--endpoint", choices=["generate", "completions", "chat"], default="generate",
                   help="the worker's /v1/generate, OpenAI /v1/completions or /v1/chat/completions")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--concurrency", type=int, default=None, help="closed loop: this many users (default 8)")
    mode.add_argument("--rate", type=float, help="open loop: Poisson arrivals, requests/s")
    mode.add_argument("--trace", help="replay a trace: Azure LLM CSV or Mooncake JSONL")
    p.add_argument("--trace-format", choices=["auto", "azure", "mooncake"], default="auto")
    p.add_argument("--speedup", type=float, default=1.0, help="trace replay: divide arrival times by this")
    p.add_argument("--duration", type=float, help="seconds to send for")
    p.add_argument("--requests", type=int, help="number of requests to send")
    p.add_argument("--prompt-tokens", default="128", help="N, A-B, normal:M:S, lognormal:MEDIAN:SIGMA, exp:M")
    p.add_argument("--output-tokens", default="64", help="same forms as --prompt-tokens")
    p.add_argument("--think-time", type=float, default=0.0, help="closed loop: seconds between a user's requests")
    p.add_argument("--no-stream", action="store_true", help="plain responses (TTFT/ITL from server timings)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--respect-eos", action="store_true", help="let the server stop at </s> (default: ignore_eos)")
    p.add_argument("--model", help="model field for /v1/completions")
    p.add_argument("--timeout", type=float, default=60.0, help="client timeout per request, seconds")
    p.add_argument("--max-context", type=int, help="fit lengths into this context (default: worker.max_context_length)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=0, help="requests sent first and not counted")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON ('-' for stdout)")
    progress = p.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="show the progress bar")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(func=cmd_load)


def cmd_load(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from worker.loadgen import LoadOptions, run_load
    from worker.loadgen.progress import Progress
    from worker.loadgen.traces import read_trace
    from worker.loadgen.workload import LengthDist

    config = _config(args, err)
    if config is None:
        return EXIT_FAIL
    try:
        trace = read_trace(args.trace, args.trace_format) if args.trace else None
        opts = LoadOptions(
            url=(args.url or config.url()).rstrip("/"), endpoint=args.endpoint, concurrency=args.concurrency or 8,
            rate=args.rate, trace=trace, speedup=args.speedup, duration_s=args.duration, requests=args.requests,
            prompt=LengthDist.parse(args.prompt_tokens), output=LengthDist.parse(args.output_tokens),
            stream=not args.no_stream, temperature=args.temperature, ignore_eos=not args.respect_eos,
            model=args.model or config.model_name, timeout_s=args.timeout,
            max_context=args.max_context or config.max_context_length, think_time_s=args.think_time,
            seed=args.seed, warmup=args.warmup,
        )
    except (OSError, ValueError) as exc:
        print(f"load: {exc}", file=err)
        return EXIT_USAGE
    if opts.duration_s is None and opts.requests is None and trace is None:
        opts = LoadOptions(**{**opts.__dict__, "requests": 100})
    total = opts.requests if opts.requests is not None else (len(trace.records) if trace is not None else None)
    progress = Progress(err, total=total, duration_s=opts.duration_s, enabled=args.progress)
    report = asyncio.run(run_load(opts, progress=progress))
    text = json.dumps(report.to_dict(), indent=2)
    if args.json and args.json != "-":
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(report.table(), file=out)
    if args.json == "-":
        print(text, file=out)
    return EXIT_OK if report.ok > 0 else EXIT_FAIL


# -- plan -----------------------------------------------------------------------------------
def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        help="reference name (ref-7b...), checkpoint directory (its config.json), or a published model by hub id "
        "or alias, e.g. meta-llama/Llama-3.1-70B-Instruct, llama-3.1-70b, qwen3-30b-a3b, deepseek-v3 "
        "(default: worker.model_path)",
    )
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4"],
                   help="auto: fp8 for a model released in FP8 (DeepSeek-V3), else bf16")
    p.add_argument("--gpu", help='GPU type, e.g. "H100 80GB" (default: this host\'s memory)')
    p.add_argument("--gpu-memory-gib", type=float, help="a GPU not in the catalogue: its memory")
    p.add_argument("--gpu-bandwidth-tbs", type=float, default=1.0, help="with --gpu-memory-gib: TB/s")
    p.add_argument("--gpu-tflops", type=float, default=100.0, help="with --gpu-memory-gib: dense bf16 TFLOPS")
    p.add_argument("--tensor-parallel-size", type=int)
    p.add_argument("--max-context-length", type=int)
    p.add_argument("--max-batch-size", type=int)
    p.add_argument("--peak-qps", type=float, help="peak requests/s: prints the node count (seed 000 §3.1)")
    p.add_argument("--prompt-tokens", type=int, default=512, help="mean prompt length for capacity")
    p.add_argument("--output-tokens", type=int, default=256, help="mean output length for capacity")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--measured-rps", type=float,
                   help="requests/s one replica sustained in `infermeter load` or `evaluate`: sizes the fleet from "
                   "it instead of the roofline estimate")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from worker.planner import GpuSpec, find_gpu, host_memory, plan_capacity, plan_memory
    from worker.shapes import shape_for

    config = _config(args, err)
    if config is None:
        return EXIT_FAIL
    try:
        shape = shape_for(args.model or config.model_path)
        gpu: GpuSpec | None = None
        if args.gpu_memory_gib:
            gpu = GpuSpec(args.gpu or "custom GPU", int(args.gpu_memory_gib * 1024**3), args.gpu_bandwidth_tbs * 1e12,
                          args.gpu_tflops * 1e12)
        elif args.gpu:
            gpu = find_gpu(args.gpu)
    except ValueError as exc:
        print(f"plan: {exc}", file=err)
        return EXIT_USAGE
    precision = args.precision or config.precision
    if precision == "auto":
        precision = "fp8" if shape.storage == "fp8" else "bf16"
    tp = args.tensor_parallel_size or config.tensor_parallel_size
    if not shape.tp_supported(tp):
        print(f"plan: tensor_parallel_size {tp} does not divide {shape.name}'s {shape.num_heads} attention heads "
              f"and {shape.num_kv_heads} KV heads (nor is a multiple of the KV heads)", file=err)
        return EXIT_USAGE
    if gpu is not None:
        device, total, free = gpu.name, gpu.memory_bytes, gpu.memory_bytes
    else:
        total, free = host_memory()
        device = "this host (CPU memory)"
    plan = plan_memory(
        shape, precision=precision, tensor_parallel_size=tp,
        max_context_length=args.max_context_length or config.max_context_length,
        max_batch_size=args.max_batch_size or config.max_batch_size, device=device, total_bytes=total,
        free_bytes=free, margin=config.memory_margin,
    )
    print("\n".join(plan.lines()), file=out)
    if args.peak_qps is not None:
        if gpu is None:
            print("capacity: give --gpu (or --gpu-memory-gib) to size a fleet for --peak-qps", file=out)
        else:
            batch = plan.max_batch_size if plan.fits else plan.max_batch_that_fits
            if batch < 1:
                print("capacity: no batch fits this device, so no node count", file=out)
            else:
                cap = plan_capacity(
                    shape, precision=precision, tensor_parallel_size=plan.tensor_parallel_size, batch=batch, gpu=gpu,
                    peak_qps=args.peak_qps, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                    gpus_per_node=args.gpus_per_node, measured_replica_rps=args.measured_rps,
                )
                print("", file=out)
                print("\n".join(cap.lines), file=out)
    return EXIT_OK if plan.fits else EXIT_FAIL


# -- registration -----------------------------------------------------------------------------
def _with_config(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    # SUPPRESS: given after the subcommand it sets args.config; absent, the parent's value stays.
    p.add_argument("--config", default=argparse.SUPPRESS, help="config file (the worker: section is read)")
    return p


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``worker``, ``load`` and ``plan`` to the service's subcommands."""
    add_worker_arguments(_with_config(sub.add_parser("worker", help="run the reference inference worker alone")))
    add_load_arguments(_with_config(sub.add_parser("load", help="load-test an inference server; report TTFT/ITL/P99")))
    add_plan_arguments(_with_config(sub.add_parser("plan", help="memory plan (weights + KV cache) and node count")))


def main(argv: list[str] | None = None) -> int:
    """``python -m worker {serve,worker,load,plan}`` (``serve`` = ``worker``)."""
    parser = argparse.ArgumentParser(prog="python -m worker")
    parser.add_argument("--config", help="config file (default ./infermeter.yaml or $INFERMETER_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    add_worker_arguments(_with_config(sub.add_parser("serve", help="same as worker")))
    args = parser.parse_args(argv)
    code: int = args.func(args, sys.stdout, sys.stderr)
    return code
