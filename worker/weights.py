"""Weights on disk: deterministic reference weights, the SHA-256 manifest, loading.

Layout of a model directory (a Hugging Face ``LlamaForCausalLM`` checkpoint, so
``transformers`` loads the same directory)::

    config.json                      shape, dtype, plus infermeter_reference / infermeter_seed
    model.safetensors                or model-0000i-of-0000n.safetensors + model.safetensors.index.json
    SHA256SUMS                       "<sha256>  <file>" lines, ``sha256sum -c SHA256SUMS`` compatible

Reference weights (``model_path: ref-tiny`` ...) are generated on first use into
``<model_dir>/<name>`` (``<name>-seed<N>`` for a seed other than 0; ``model_dir`` defaults to
``./data/models``), written to a temporary directory and renamed into place, so an interrupted
generation leaves nothing half-written.  Every tensor comes from its own generator seeded by
SHA-256(seed, tensor name): the same seed gives byte-identical files on any machine.

At start every file the manifest lists is hashed and compared (seed 004 step 2); a mismatch, a
listed file missing, or a weight file the manifest does not list refuses the start with
:class:`ManifestError`, whose message names the file and the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from worker.shapes import REFERENCE_SHAPES, ModelShape

if TYPE_CHECKING:
    import torch

MANIFEST = "SHA256SUMS"
SHARD_BYTES = 2 * 1024**3
INIT_STD = 0.02


class ManifestError(Exception):
    """The weights on disk do not match their manifest (or have none)."""


@dataclass(frozen=True)
class ModelLocation:
    directory: Path
    shape: ModelShape
    reference: bool  # generated from a seed (may be created on first use)
    seed: int


def locate_model(model_path: str, model_dir: str | os.PathLike[str], seed: int) -> ModelLocation:
    """Where ``model_path`` lives: a reference name under ``model_dir``, or a checkpoint dir."""
    shape = REFERENCE_SHAPES.get(model_path)
    if shape is not None:
        name = model_path if seed == 0 else f"{model_path}-seed{seed}"
        return ModelLocation(Path(model_dir) / name, shape, True, seed)
    directory = Path(model_path)
    config = directory / "config.json"
    if not config.is_file():
        known = ", ".join(REFERENCE_SHAPES)
        raise ManifestError(f"model_path {model_path!r} is neither a reference model ({known}) nor a directory with config.json")
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
        shape = ModelShape.from_hf_config(data, model_path)
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"{config}: cannot use this checkpoint: {exc}") from exc
    return ModelLocation(directory, shape, False, int(data.get("infermeter_seed", 0)))


# -- deterministic generation -------------------------------------------------------------
def tensor_specs(shape: ModelShape) -> list[tuple[str, tuple[int, ...]]]:
    """Hugging Face Llama tensor names and shapes, in checkpoint order."""
    d, q, kv, inter = shape.hidden_size, shape.q_size, shape.kv_size, shape.intermediate_size
    specs: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (shape.vocab_size, d))]
    for i in range(shape.num_layers):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (d,)),
            (p + "self_attn.q_proj.weight", (q, d)),
            (p + "self_attn.k_proj.weight", (kv, d)),
            (p + "self_attn.v_proj.weight", (kv, d)),
            (p + "self_attn.o_proj.weight", (d, q)),
            (p + "post_attention_layernorm.weight", (d,)),
            (p + "mlp.gate_proj.weight", (inter, d)),
            (p + "mlp.up_proj.weight", (inter, d)),
            (p + "mlp.down_proj.weight", (d, inter)),
        ]
    specs.append(("model.norm.weight", (d,)))
    if not shape.tie_word_embeddings:
        specs.append(("lm_head.weight", (shape.vocab_size, d)))
    return specs


def _tensor_seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") & ((1 << 63) - 1)


def make_tensor(seed: int, name: str, dims: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """One reference tensor: RMSNorm weights are ones, the rest N(0, 0.02) from its own seed."""
    import torch

    if name.endswith("norm.weight"):
        return torch.ones(dims, dtype=dtype)
    gen = torch.Generator().manual_seed(_tensor_seed(seed, name))
    return torch.empty(dims, dtype=torch.float32).normal_(0.0, INIT_STD, generator=gen).to(dtype)


def _shards(shape: ModelShape, bytes_per_value: int) -> list[list[tuple[str, tuple[int, ...]]]]:
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, dims in tensor_specs(shape):
        n = bytes_per_value
        for dim in dims:
            n *= dim
        if shards[-1] and size + n > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((name, dims))
        size += n
    return shards


def generate_reference(shape: ModelShape, seed: int, directory: Path) -> None:
    """Write ``shape``'s weights from ``seed`` plus config.json and SHA256SUMS into ``directory``
    (atomically: built next to it, then renamed)."""
    import torch
    from safetensors.torch import save_file

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[shape.storage]
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        shards = _shards(shape, torch.empty((), dtype=dtype).element_size())
        names = (
            ["model.safetensors"]
            if len(shards) == 1
            else [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
        )
        index: dict[str, str] = {}
        for file, specs in zip(names, shards):
            tensors = {name: make_tensor(seed, name, dims, dtype) for name, dims in specs}
            save_file(tensors, str(tmp / file), metadata={"format": "pt"})
            index.update({name: file for name in tensors})
            del tensors
        if len(names) > 1:
            (tmp / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}, indent=1))
        config = {**shape.to_hf_config(), "infermeter_seed": seed}
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        write_manifest(tmp)
        if directory.exists():  # someone else generated it meanwhile: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def ensure_weights(location: ModelLocation) -> bool:
    """Generate reference weights that are not on disk yet; True if it generated them."""
    if location.reference and not (location.directory / MANIFEST).exists():
        if location.directory.exists() and any(location.directory.iterdir()):
            raise ManifestError(
                f"{location.directory} exists but has no {MANIFEST}: delete the directory to regenerate "
                f"the {location.shape.name} reference weights"
            )
        if location.directory.exists():
            location.directory.rmdir()
        generate_reference(location.shape, location.seed, location.directory)
        return True
    return False


# -- manifest -----------------------------------------------------------------------------
def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _checked_files(directory: Path) -> list[str]:
    names = ["config.json", *(p.name for p in sorted(directory.glob("*.safetensors")))]
    if (directory / "model.safetensors.index.json").exists():
        names.append("model.safetensors.index.json")
    return names


def write_manifest(directory: Path) -> dict[str, str]:
    sums = {name: sha256_file(directory / name) for name in _checked_files(directory)}
    (directory / MANIFEST).write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))
    return sums


def read_manifest(directory: Path) -> dict[str, str]:
    path = directory / MANIFEST
    if not path.exists():
        raise ManifestError(
            f"no {MANIFEST} in {directory}: weights are verified before loading (seed 004 step 2). After checking "
            f"the files against their source, create it with: cd {directory} && sha256sum config.json *.safetensors > {MANIFEST}"
        )
    sums: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise ManifestError(f"{path}:{lineno}: expected '<sha256>  <file>', got {line!r}")
        sums[name.lstrip("*")] = digest.lower()
    return sums


def verify_manifest(directory: Path) -> dict[str, str]:
    """Hash every listed file; raise ManifestError naming the first problem and the fix."""
    sums = read_manifest(directory)
    unlisted = sorted(set(_checked_files(directory)) - set(sums))
    if unlisted:
        raise ManifestError(f"{directory}: {', '.join(unlisted)} not listed in {MANIFEST}; refusing unverified weights")
    for name, expected in sums.items():
        path = directory / name
        if not path.is_file():
            raise ManifestError(f"{path}: listed in {MANIFEST} but missing")
        actual = sha256_file(path)
        if actual != expected:
            raise ManifestError(
                f"SHA-256 mismatch for {path}: expected {expected}, got {actual}. The file is corrupt or was "
                f"changed; restore it, or for reference weights delete {directory} to regenerate them"
            )
    return sums


# -- loading ------------------------------------------------------------------------------
def iter_tensors(directory: Path, device: str) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ManifestError(f"{directory}: no *.safetensors files")
    for file in files:
        with safe_open(str(file), framework="pt", device=device) as fh:
            for name in fh.keys():  # noqa: SIM118 - safe_open is not a mapping
                yield name, fh.get_tensor(name)


def load_tensors(directory: Path, device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {name: t.to(dtype) for name, t in iter_tensors(directory, device)}
