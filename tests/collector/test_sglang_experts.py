"""SGLang's expert distribution recorder, read as the real server offers it: a fake SGLang on
loopback answers the three recorder endpoints and, on each dump, writes the counts with
torch.save into its dump directory in the real shapes (stat: logical_count [steps, layers,
experts]; per_pass: records + physical->logical map; older servers: CSV). Garbage, hangs and a
server without the recorder mark the target down and keep what was counted."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Response

from collector.sglang_experts import SglangExpertSource, read_dump
from infermeter.settings import Settings
from infermeter.targets import source_factories, target_specs
from store.clock import ManualClock
from tests.service import health_app, run_app

torch = pytest.importorskip("torch")
LAYERS, EXPERTS = 3, 4


def fake_sglang(dump_dir: Path, mode: str = "stat") -> tuple[FastAPI, dict[str, object]]:
    state: dict[str, object] = {"recording": False, "pending": torch.zeros(2, LAYERS, EXPERTS), "hang": False}
    app = health_app()

    @app.get("/get_server_info")
    async def info() -> Response:
        if mode == "garbage":
            return Response("<html>proxy error</html>", media_type="text/html")
        return Response(json.dumps({"served_model_name": "deepseek-v3", "version": "0.5.2",
                                    "expert_distribution_recorder_mode": mode}), media_type="application/json")

    @app.api_route("/start_expert_distribution_record", methods=["GET", "POST"])
    async def start() -> Response:
        if mode == "off":
            return Response("Internal Server Error", status_code=500)
        state["recording"] = True
        return Response("Start recording the expert distribution.\n")

    @app.api_route("/dump_expert_distribution_record", methods=["GET", "POST"])
    async def dump() -> Response:
        if state["hang"]:
            await asyncio.sleep(1.5)
        if mode == "garbage":
            return Response("\x00\x01 not a recorder", status_code=502)
        pending = state["pending"]
        assert isinstance(pending, torch.Tensor)
        stamp = time.time()
        if mode == "stat":
            torch.save({"rank": 0, "logical_count": pending.clone(), "average_utilization_rate_over_window": None},
                       dump_dir / f"expert_distribution_recorder_{stamp}.pt")
        elif mode == "per_pass":  # physical slots 0..3 hold logical experts 3,2,1,0
            mapping = torch.tensor([[3, 2, 1, 0]] * LAYERS)
            records = [{"forward_pass_id": i, "rank": 0, "gatherer_key": "primary",
                        "global_physical_count": pending[i].flip(-1)} for i in range(pending.shape[0])]
            torch.save({"records": records, "last_physical_to_logical_map": mapping},
                       dump_dir / f"expert_distribution_recorder_{stamp}_0.pt")
        state["pending"] = torch.zeros(2, LAYERS, EXPERTS)  # a dump resets the recorder
        return Response("Dump expert distribution record.\n")

    return app, state


def route(state: dict[str, object], layer: int, expert: int, tokens: float) -> None:
    if state["recording"]:
        pending = state["pending"]
        assert isinstance(pending, torch.Tensor)
        pending[0, layer, expert] += tokens / 2  # spread over two steps of the circular buffer
        pending[1, layer, expert] += tokens / 2


async def collect(source: SglangExpertSource, timeout: float = 2.0):  # type: ignore[no-untyped-def]
    return await source.collect(asyncio.get_running_loop().time() + timeout)


def totals(result) -> dict[tuple[str, str, str], float]:  # type: ignore[no-untyped-def]
    return {(s.series.get("model"), s.series.get("layer"), s.series.get("expert")): s.value
            for s in result.batch.samples()}


@pytest.mark.parametrize("mode", ["stat", "per_pass"])
def test_dumps_become_a_counter_per_layer_and_expert(tmp_path: Path, mode: str) -> None:
    app, state = fake_sglang(tmp_path, mode)

    async def scenario():  # type: ignore[no-untyped-def]
        source = SglangExpertSource(base, httpx.AsyncClient(), ManualClock(1_000), tmp_path)
        first = await collect(source)  # dumps (nothing yet) and starts recording
        assert first.health.up, first.health.error
        route(state, 0, 0, 300)
        route(state, 0, 3, 100)
        route(state, 2, 1, 40)
        second = await collect(source)
        route(state, 0, 0, 100)
        third = await source.collect(asyncio.get_running_loop().time() + 2, 45_000)  # the scrape loop's timestamp
        await source.close()
        return second, third

    with run_app(app) as base:
        second, third = asyncio.run(scenario())
    assert second.health.up, second.health.error
    assert set(second.batch.ts_ms.tolist()) == {1_000} and set(third.batch.ts_ms.tolist()) == {45_000}
    assert totals(second)[("deepseek-v3", "0", "0")] == 300 and totals(second)[("deepseek-v3", "0", "3")] == 100
    assert totals(third)[("deepseek-v3", "0", "0")] == 400  # running totals: a counter
    assert totals(third)[("deepseek-v3", "2", "1")] == 40 and totals(third)[("deepseek-v3", "1", "2")] == 0
    assert not list(tmp_path.glob("*.pt"))  # read dumps are deleted


def test_older_servers_csv(tmp_path: Path) -> None:
    path = tmp_path / "expert_distribution_rank0_timestamp1733000000.0.csv"
    path.write_text("layer_id,expert_id,count\n0,0,12\n0,1,3\n1,0,7\n0,0,1\n")
    assert read_dump(path) == {(0, 0): 13.0, (0, 1): 3.0, (1, 0): 7.0}


def test_garbage_hangs_and_a_server_without_the_recorder(tmp_path: Path) -> None:
    app, state = fake_sglang(tmp_path)

    async def scenario() -> None:
        source = SglangExpertSource(base, httpx.AsyncClient(), ManualClock(1_000), tmp_path, keep_dumps=True)
        await collect(source)
        route(state, 1, 2, 50)
        assert (await collect(source)).health.up
        (tmp_path / "expert_distribution_recorder_9999999999.0.pt").write_bytes(b"\x00garbage")
        bad = await collect(source)
        assert not bad.health.up and bad.health.reason == "parse"
        assert "expert_distribution_recorder_9999999999.0.pt: not a torch file" in bad.health.error
        assert totals(bad)[("deepseek-v3", "1", "2")] == 50  # counted before: still there
        assert (tmp_path / "expert_distribution_recorder_9999999999.0.pt.bad").exists()
        assert (await collect(source)).health.up  # not read again
        state["hang"] = True
        hung = await collect(source, timeout=0.5)
        assert hung.health.reason == "timeout" and totals(hung)[("deepseek-v3", "1", "2")] == 50
        await source.close()

    with run_app(app) as base:
        asyncio.run(scenario())

    async def refused_by(base: str):  # type: ignore[no-untyped-def]
        source = SglangExpertSource(base, httpx.AsyncClient(), ManualClock(1_000), tmp_path)
        result = await collect(source)
        await source.close()
        return result

    off_app, _ = fake_sglang(tmp_path, "off")
    with run_app(off_app) as base:
        refused = asyncio.run(refused_by(base))
    assert refused.health.reason == "http_status"
    assert "--expert-distribution-recorder-mode stat" in refused.health.error
    garbage_app, _ = fake_sglang(tmp_path, "garbage")
    with run_app(garbage_app) as base:
        garbage = asyncio.run(refused_by(base))
    assert garbage.health.reason == "http_status" and "dump_expert_distribution_record: HTTP 502" in garbage.health.error


def test_configured_as_a_target_of_its_own(tmp_path: Path) -> None:
    settings = Settings.model_validate({
        "worker": {"embedded": False}, "gpu": {"nvml": "off"},
        "scrape": {"targets": [{"job": "sglang", "urls": ["http://10.0.0.5:30000/metrics"], "engine": "sglang",
                                "expert_distribution": {"dump_dir": str(tmp_path), "interval": "30s"}}]},
    })
    specs = target_specs(settings, host="n1", gpu_present=False)
    recorder = [s for s in specs if s.kind == "sglang_experts"]
    assert [(s.job, s.url, s.instance, s.interval_s) for s in recorder] == [
        ("sglang-experts", "http://10.0.0.5:30000", "10.0.0.5:30000", 30.0)]
    source = source_factories(ManualClock(0))["sglang_experts"](recorder[0])
    assert isinstance(source, SglangExpertSource) and source.dump_dir == tmp_path
    asyncio.run(source.close())


def test_the_nccl_source_watches_the_rule_packs_settings(tmp_path: Path) -> None:
    settings = Settings.model_validate({
        "worker": {"embedded": False}, "gpu": {"nvml": "off"},
        "nccl": {"paths": [str(tmp_path / "*.log")], "state_file": str(tmp_path / "state.json")},
        "alerts": {"thresholds": {"drift_nccl_settings": ["NCCL_TOPO_FILE", "TORCH_NCCL_BLOCKING_WAIT"]}},
    })
    (spec,) = [s for s in target_specs(settings, host="n1", gpu_present=False) if s.kind == "nccl"]
    source = source_factories(ManualClock(0))["nccl"](spec)
    assert source.watched == ("NCCL_TOPO_FILE", "TORCH_NCCL_BLOCKING_WAIT") and source.host == "n1"  # type: ignore[attr-defined]


def test_sglang_balancedness_summary_maps_to_the_canonical_summary() -> None:
    from collector.exposition import parse_exposition
    from collector.mapping.mapper import CanonicalMapper

    body = (  # prometheus_client's Summary without quantiles, as SGLang registers it on EP rank 0
        "# HELP sglang:eplb_balancedness Balancedness of MoE in expert parallelism.\n"
        "# TYPE sglang:eplb_balancedness summary\n"
        'sglang:eplb_balancedness_count{engine_type="unified",forward_mode="decode",model_name="deepseek-v3",'
        'moe_ep_rank="0",pp_rank="0",tp_rank="0"} 120.0\n'
        'sglang:eplb_balancedness_sum{engine_type="unified",forward_mode="decode",model_name="deepseek-v3",'
        'moe_ep_rank="0",pp_rank="0",tp_rank="0"} 81.5\n'
        'sglang:eplb_balancedness_created{engine_type="unified",forward_mode="decode",model_name="deepseek-v3",'
        'moe_ep_rank="0",pp_rank="0",tp_rank="0"} 1.733e+09\n'
    )
    mapped = CanonicalMapper().map(parse_exposition(body, default_ts_ms=1).batch, "sglang")
    got = {(k.name, k.get("model"), k.get("forward_mode")): v for k, v in zip(mapped.keys, mapped.values)}
    assert got == {("moe_balancedness_count", "deepseek-v3", "decode"): 120.0,
                   ("moe_balancedness_sum", "deepseek-v3", "decode"): 81.5}
