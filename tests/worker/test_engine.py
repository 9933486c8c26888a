"""The engine and the model: KV-cache decoding equals a full forward pass, batched decoding of
different-length sequences equals decoding them alone, and the scheduler's rules (continuous
batching, chunked prefill, deadlines, queue limit, cancel, drain) -- the latter with a fake
model and a fake clock, so they run in milliseconds."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from worker.engine import Engine
from worker.events import Event, FinishEvent, GenerationRequest, TokenEvent


# -- the real model ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def decoder(model_dir: Path):  # type: ignore[no-untyped-def]
    from worker.model import LlamaDecoder
    from worker.weights import load_tensors, locate_model

    loc = locate_model("ref-tiny", model_dir, 0)
    return LlamaDecoder(loc.shape, load_tensors(loc.directory, "cpu", torch.float32), device=torch.device("cpu"),
                        dtype=torch.float32)


def test_kv_cache_decode_matches_full_forward_and_batching_is_exact(decoder) -> None:  # type: ignore[no-untyped-def]
    seqs = [[1, 2, 3, 4, 5, 6, 7], [9, 8, 7], list(range(100, 140))]
    full = [decoder.logits_all(s) for s in seqs]
    cache = decoder.new_cache(4, 64)
    for slot, s in enumerate(seqs):  # prefill in two chunks, then decode the last token batched
        mid = len(s[:-1]) // 2
        decoder.prefill(cache, slot, s[:mid], 0)
        last = decoder.prefill(cache, slot, s[mid:-1], mid)
        assert torch.allclose(last, full[slot][-2], atol=1e-5)
    out = decoder.decode(cache, [s[-1] for s in seqs], [len(s) - 1 for s in seqs])
    for slot in range(len(seqs)):
        assert torch.allclose(out[slot], full[slot][-1], atol=1e-5)
    # moving a slot moves its cache: decoding it from the new slot gives the same logits
    cache.move(2, 0, len(seqs[2]))
    again = decoder.decode(cache, [seqs[2][-1]], [len(seqs[2]) - 1])
    assert torch.allclose(again[0], full[2][-1], atol=1e-5)


def test_cache_grows_past_its_initial_capacity(decoder) -> None:  # type: ignore[no-untyped-def]
    tokens = [i % 250 for i in range(300)]
    cache = decoder.new_cache(2, 1024)
    assert cache.capacity == 256
    logits = decoder.prefill(cache, 1, tokens, 0)
    assert cache.capacity == 512
    assert torch.allclose(logits, decoder.logits_all(tokens)[-1], atol=1e-4)
    cache.move(1, 0, 300)  # outside inference mode, on tensors grown inside it
    assert torch.equal(cache.k[0][0, :, :300], cache.k[0][1, :, :300])
    cache.shrink()
    assert cache.capacity == 256


# -- the scheduler, with a fake model and clock ---------------------------------------------------
class FakeCache:
    def __init__(self) -> None:
        self.moves: list[tuple[int, int, int]] = []

    def move(self, src: int, dst: int, length: int) -> None:
        self.moves.append((src, dst, length))

    def shrink(self) -> None:
        pass


class FakeModel:
    """Always predicts token 7 (or EOS after ``eos_after`` decode calls); logs every call."""

    vocab = 16

    def __init__(self, clock: list[float], step_s: float = 0.01) -> None:
        self.clock, self.step_s = clock, step_s
        self.calls: list[tuple[str, int]] = []

    def new_cache(self, slots: int, max_len: int) -> FakeCache:
        return FakeCache()

    def _logits(self, n: int) -> torch.Tensor:
        out = torch.zeros(n, self.vocab)
        out[:, 7] = 10.0
        return out

    def prefill(self, cache: FakeCache, slot: int, tokens: list[int], start: int) -> torch.Tensor:
        self.clock[0] += self.step_s * len(tokens) / 8
        self.calls.append(("prefill", len(tokens)))
        return self._logits(1)[0]

    def decode(self, cache: FakeCache, tokens: list[int], positions: list[int]) -> torch.Tensor:
        self.clock[0] += self.step_s
        self.calls.append(("decode", len(tokens)))
        return self._logits(len(tokens))


class Harness:
    def __init__(self, **kwargs: int) -> None:
        self.now = [0.0]
        self.model = FakeModel(self.now)
        self.events: list[Event] = []
        opts = {"max_batch_size": 4, "max_context_length": 1024, "max_waiting": 4, "prefill_chunk_tokens": 64, **kwargs}
        self.engine = Engine(self.model, eos_id=15, banned_ids=(), emit=self.events.extend,
                             clock=lambda: self.now[0], **opts)

    def submit(self, rid: str, prompt: int = 8, max_tokens: int = 4, timeout: float = 100.0) -> str:
        req = GenerationRequest(rid, [1] * prompt, max_tokens, deadline=self.now[0] + timeout, arrival=self.now[0],
                                temperature=0.0)
        return self.engine.submit(req)

    def run(self, iterations: int) -> None:
        """Drive the engine's loop body by hand (no thread)."""
        e = self.engine
        for _ in range(iterations):
            with e._cv:
                e._waiting.extend(e._inbox)
                e._inbox.clear()
                cancels, e._cancels = e._cancels, set()
            out: list[Event] = []
            e._iteration(cancels, out)
            e._deliver(out)

    def finished(self) -> dict[str, FinishEvent]:
        return {ev.request_id: ev for ev in self.events if isinstance(ev, FinishEvent)}

    def tokens(self, rid: str) -> int:
        return sum(1 for ev in self.events if isinstance(ev, TokenEvent) and ev.request_id == rid)


def test_a_request_joins_the_running_batch_without_waiting_for_it_to_drain() -> None:
    h = Harness()
    h.submit("a", max_tokens=10)
    h.run(3)
    h.submit("b", max_tokens=3)
    h.run(1)  # b is prefilled and decodes in the same iteration as a
    assert h.model.calls[-2:] == [("prefill", 8), ("decode", 2)]
    h.run(2)
    assert h.finished()["b"].reason == "length" and "a" not in h.finished()
    h.run(10)
    assert h.finished()["a"].completion_tokens == 10 and h.tokens("a") == 10


def test_long_prompts_are_prefilled_in_chunks_between_decode_steps() -> None:
    h = Harness(prefill_chunk_tokens=64)
    h.submit("short", max_tokens=50)
    h.run(1)
    h.submit("long", prompt=300, max_tokens=2)
    h.run(6)
    kinds = h.model.calls[2:]  # after the short request's prefill and first decode
    prefills = [n for kind, n in kinds if kind == "prefill"]
    assert prefills == [64, 64, 64, 64, 44]  # never more than the chunk budget per iteration
    assert all(kind == "decode" for kind, _ in kinds[1::2])  # a decode step after every chunk


def test_deadlines_finish_waiting_and_running_requests_with_timeout() -> None:
    h = Harness(max_batch_size=1)
    h.submit("running", max_tokens=1000, timeout=0.5)
    h.submit("waiting", max_tokens=5, timeout=0.2)
    h.run(60)
    done = h.finished()
    assert done["waiting"].reason == "timeout" and done["waiting"].completion_tokens == 0
    assert done["running"].reason == "timeout" and 0 < done["running"].completion_tokens < 1000
    assert done["waiting"].timings.scheduled is None


def test_queue_limit_cancel_and_eos() -> None:
    h = Harness(max_batch_size=1, max_waiting=1)
    assert h.submit("a", max_tokens=100) == "accepted"
    assert h.submit("b") == "accepted"
    assert h.submit("c") == "queue_full"
    h.engine.cancel("a")
    h.engine.eos_id = 7  # the fake model's only prediction: from now on every request stops at once
    h.run(1)
    assert h.finished()["a"].reason == "abort"
    assert h.submit("d") == "accepted"  # room again
    h.run(3)
    assert h.finished()["b"].reason == "stop" and h.finished()["b"].completion_tokens == 1


def test_finishing_slots_keep_the_batch_compact() -> None:
    h = Harness(max_batch_size=4)
    for rid, n in (("a", 2), ("b", 9), ("c", 3), ("d", 9)):
        h.submit(rid, max_tokens=n)
    h.run(4)
    cache = h.engine.cache
    assert isinstance(cache, FakeCache)
    assert cache.moves[0] == (3, 0, 8 + 1)  # d moved into a's slot 0: its prompt + the one token fed back
    assert [s.slot for s in h.engine._running] == list(range(len(h.engine._running)))


def test_threaded_engine_drains_then_stops() -> None:
    now = [0.0]
    events: list[Event] = []
    lock = threading.Lock()

    def emit(batch: list[Event]) -> None:
        with lock:
            events.extend(batch)

    engine = Engine(FakeModel(now, step_s=0.0), max_batch_size=2, max_context_length=256, max_waiting=8,
                    prefill_chunk_tokens=64, eos_id=15, banned_ids=(), emit=emit, clock=lambda: now[0])
    engine.start()
    for i in range(5):
        engine.submit(GenerationRequest(f"r{i}", [1, 2], 20, deadline=1e9, arrival=0.0, temperature=0.0))
    assert engine.drain(10.0)
    assert engine.submit(GenerationRequest("late", [1], 2, deadline=1e9, arrival=0.0)) == "draining"
    engine.stop()
    finished = [ev for ev in events if isinstance(ev, FinishEvent)]
    assert sorted(ev.request_id for ev in finished) == [f"r{i}" for i in range(5)]
    assert all(ev.reason == "length" and ev.completion_tokens == 20 for ev in finished)
