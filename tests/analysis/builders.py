"""Hand-built run directories for analysis tests: records in, run dir out."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson

from analysis import RunManifest

BASE_CONFIG: dict[str, Any] = {
    "model_config": {"model": "tiny-llama", "max_model_len": 4096, "dtype": "bfloat16",
                     "seed": 0},
    "cache_config": {"block_size": 16, "cache_dtype": "auto", "enable_prefix_caching": True,
                     "num_gpu_blocks": 1000},
    "parallel_config": {"tensor_parallel_size": 2, "pipeline_parallel_size": 1,
                        "data_parallel_size": 1, "data_parallel_master_port": 29500},
    "scheduler_config": {"max_num_seqs": 64, "max_num_batched_tokens": 8192},
    "speculative_config": None,
    "additional_config": {"decode_backend": "auto"},
    "instance_id": "abc",
}


def config(backend: str = "auto", **changes: Any) -> dict[str, Any]:
    """BASE_CONFIG with the backend set and dotted-path changes applied."""
    cfg = copy.deepcopy(BASE_CONFIG)
    cfg["additional_config"]["decode_backend"] = backend
    for path, value in changes.items():
        node = cfg
        parts = path.split("__")
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
    return cfg


def rec(i: int = 0, **kw: Any) -> dict[str, Any]:
    """A request record with sensible defaults: sent at 10+i, 2 s TTFT, 10 tokens."""
    sent = kw.pop("sent_s", 10.0 + i)
    d: dict[str, Any] = {
        "id": f"r{i}", "user": 0, "session": "s0", "turn": i, "status": "ok",
        "due_s": sent, "sent_s": sent, "first_token_s": sent + 1.0, "last_token_s": sent + 2.0,
        "prompt_tokens": 100, "output_tokens_asked": 10, "output_tokens": 10,
    }
    d.update(kw)
    return d


def manifest(**kw: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "run_id": "run1", "label": "auto", "target": "http://127.0.0.1:8000",
        "model": "tiny-llama", "server_info": {"vllm_config": config("auto")},
        "gpu_count": 2, "simulated": False,
        "workload": {"fingerprint": "fp1", "source": "coding-agent", "seed": 1},
        "load": {"users": 2, "duration_s": 100, "warmup_s": 10, "drain_s": 5},
        "window": {"start_s": 10.0, "end_s": 110.0},
        "clock": {"t0_wall": "2026-12-01T00:00:00Z", "t0_monotonic_ns": 0},
        "started_at": "2026-12-01T00:00:00Z", "complete": True, "tool_version": "0.1.0",
    }
    m.update(kw)
    RunManifest.model_validate(m)
    return m


def make_run(
    root: Path, records: list[dict[str, Any]], *, metrics: list[dict[str, Any]] | None = None,
    tail: bytes = b"", **manifest_kw: Any,
) -> Path:
    """Write run.json, requests.jsonl (plus raw ``tail`` bytes) and server_metrics.jsonl."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_bytes(orjson.dumps(manifest(**manifest_kw)))
    lines = b"".join(orjson.dumps(r) + b"\n" for r in records)
    (root / "requests.jsonl").write_bytes(lines + tail)
    if metrics is not None:
        (root / "server_metrics.jsonl").write_bytes(
            b"".join(orjson.dumps(m) + b"\n" for m in metrics))
    return root


def synth_records(
    *, users: int, per_user: int, tpot: float, ttft: float, seed: int = 0,
    out_tokens: int = 20, chunk: int = 1, errors: int = 0, start: float = 10.0,
    think: float = 0.5,
) -> list[dict[str, Any]]:
    """Closed-loop-like records: each user sends per_user requests back to back;
    TPOT and TTFT jitter per user (lognormal) so the bootstrap has something to do."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for u in range(users):
        scale = float(rng.lognormal(0.0, 0.1))
        t = start + float(rng.uniform(0, 1))
        for j in range(per_user):
            tp = tpot * scale * float(rng.lognormal(0.0, 0.05))
            tf = ttft * scale * float(rng.lognormal(0.0, 0.1))
            n_chunks = out_tokens // chunk
            first = t + tf
            times = [first + i * tp * chunk for i in range(n_chunks)]
            idx = len(out)
            bad = idx < errors
            out.append({
                "id": f"u{u}r{j}", "user": u, "lane": str(u), "session": f"s{u}-{j // 5}",
                "session_instance": j // 5, "turn": j % 5, "status": "error" if bad else "ok",
                "error_kind": "http_500" if bad else None,
                "due_s": t, "sent_s": t,
                "first_token_s": None if bad else first,
                "last_token_s": None if bad else times[-1],
                "chunk_times_s": [] if bad else times,
                "chunk_tokens": [] if bad else [chunk] * n_chunks,
                "prompt_tokens": 1000 + 200 * (j % 5), "output_tokens_asked": out_tokens,
                "output_tokens": 0 if bad else out_tokens,
                "expected_cached_tokens": 800 if j % 5 else 0,
            })
            t = (times[-1] if not bad else t + 1.0) + think
    return out
