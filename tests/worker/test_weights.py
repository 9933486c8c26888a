"""Reference weights: deterministic from a seed, Hugging Face layout, SHA-256 manifest checked at
start (a mismatch refuses the start with a clear message)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from worker.weights import (
    MANIFEST,
    ManifestError,
    ensure_weights,
    locate_model,
    read_manifest,
    verify_manifest,
)

ROOT = Path(__file__).resolve().parents[2]


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path, model_dir: Path) -> None:
    again = locate_model("ref-tiny", tmp_path / "a", 0)
    assert ensure_weights(again) is True
    assert ensure_weights(again) is False  # cached
    assert read_manifest(again.directory) == read_manifest(model_dir / "ref-tiny")
    other = locate_model("ref-tiny", tmp_path / "b", 1)
    assert other.directory.name == "ref-tiny-seed1"
    ensure_weights(other)
    assert read_manifest(other.directory)["model.safetensors"] != read_manifest(again.directory)["model.safetensors"]
    config = json.loads((other.directory / "config.json").read_text())
    assert config["infermeter_seed"] == 1


def test_checkpoint_is_hugging_face_llama(model_dir: Path) -> None:
    from safetensors import safe_open

    directory = model_dir / "ref-tiny"
    config = json.loads((directory / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["num_key_value_heads"] < config["num_attention_heads"]  # GQA
    with safe_open(str(directory / "model.safetensors"), framework="pt") as fh:
        names = set(fh.keys())
    assert {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.3.mlp.down_proj.weight",
            "model.norm.weight", "lm_head.weight"} <= names
    # the manifest is sha256sum -c compatible
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--quiet", "-c", MANIFEST], cwd=directory, check=True)


def test_tampered_weights_are_refused(tmp_path: Path, model_dir: Path) -> None:
    directory = tmp_path / "ref-tiny"
    shutil.copytree(model_dir / "ref-tiny", directory)
    verify_manifest(directory)
    data = bytearray((directory / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (directory / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ManifestError, match=r"SHA-256 mismatch for .*model.safetensors: expected [0-9a-f]{64}, got"):
        verify_manifest(directory)
    (directory / "extra.safetensors").write_bytes(b"x")
    with pytest.raises(ManifestError, match="extra.safetensors not listed"):
        verify_manifest(directory)
    (directory / MANIFEST).unlink()
    with pytest.raises(ManifestError, match="sha256sum config.json"):
        verify_manifest(directory)


def test_worker_refuses_to_start_on_a_manifest_mismatch(tmp_path: Path, model_dir: Path) -> None:
    """The real command: `python -m worker serve` exits 78 with the message on stderr."""
    models = tmp_path / "models"
    shutil.copytree(model_dir / "ref-tiny", models / "ref-tiny")
    weights = models / "ref-tiny" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    from tests.worker.conftest import free_port

    config = tmp_path / "infermeter.yaml"
    config.write_text(f"worker:\n  model_dir: {models}\n  port: {free_port()}\n")
    proc = subprocess.run([sys.executable, "-m", "worker", "--config", str(config), "serve", "--log-level", "error"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 78, proc.stderr
    assert "refusing to start: SHA-256 mismatch" in proc.stderr and "model.safetensors" in proc.stderr


def test_same_logits_as_transformers(model_dir: Path) -> None:
    """The checkpoint loads in Hugging Face transformers and gives the same logits."""
    pytest.importorskip("transformers")
    import torch
    from transformers import LlamaForCausalLM

    from worker.model import LlamaDecoder
    from worker.weights import load_tensors

    loc = locate_model("ref-tiny", model_dir, 0)
    hf = LlamaForCausalLM.from_pretrained(str(loc.directory), dtype=torch.float32)
    hf.eval()  # type: ignore[no-untyped-call]
    ours = LlamaDecoder(loc.shape, load_tensors(loc.directory, "cpu", torch.float32), device=torch.device("cpu"),
                        dtype=torch.float32)
    tokens = list(b"Hello, transformers!")
    with torch.no_grad():
        want = hf(torch.tensor([tokens])).logits[0]
    got = ours.logits_all(tokens)
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
