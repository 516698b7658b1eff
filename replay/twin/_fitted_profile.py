"""A twin profile from fitted step times and the server's own ``/server_info`` facts.

Queueing limits (``max_num_seqs``, ``max_num_batched_tokens``), the KV cache (block
size, blocks) and the model's length and vocabulary are not fitted: the run stored
them (``run.json`` ``server_info``). What a server did not report is filled with a
stated assumption (listed in ``calibration.assumed``).
"""

from __future__ import annotations

from typing import Any

from analysis import RunManifest
from analysis.fit import StepFit
from replay.servers.sim import MAX_GPU_BLOCKS

__all__ = ["clock_scale", "decode_backend", "step_budget", "twin_profile"]

_DEFAULT_BLOCK = 16
_DEFAULT_SEQS = 256
_DEFAULT_BATCHED = 8192


def _section(info: dict[str, Any], name: str) -> dict[str, Any]:
    cfg = info.get("vllm_config")
    part = cfg.get(name) if isinstance(cfg, dict) else None
    return part if isinstance(part, dict) else {}


def _int(value: object) -> int | None:
    """A positive whole figure of the server's report (None: absent, not a finite number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 < value < 2**63 else None


def clock_scale(manifest: RunManifest) -> float:
    """Model seconds per second of the run's clock: a simulated server's ``time_scale``
    (its steps ran that many times faster than its profile says), else 1."""
    info = manifest.server_info or {}
    scale = info.get("time_scale") if info.get("simulated") else None
    return float(scale) if isinstance(scale, int | float) and scale > 0 else 1.0


def step_budget(manifest: RunManifest) -> int | None:
    """The server's token budget per step (``max_num_batched_tokens``), if reported."""
    return _int(_section(manifest.server_info or {}, "scheduler_config")
                .get("max_num_batched_tokens"))


def decode_backend(manifest: RunManifest) -> str:
    extra = _section(manifest.server_info or {}, "additional_config")
    backend = extra.get("decode_backend")
    return backend if backend in ("auto", "latency_specialized") else "auto"


def twin_profile(fit: StepFit, manifest: RunManifest, scale: float) -> tuple[dict[str, Any],
                                                                          list[str]]:
    """The profile document (``replay.servers.sim`` format) and the facts it had to assume."""
    info = manifest.server_info or {}
    model_cfg, cache = _section(info, "model_config"), _section(info, "cache_config")
    sched, par = _section(info, "scheduler_config"), _section(info, "parallel_config")
    assumed: list[str] = []

    def fact(value: object, default: int, what: str, most: int = 2**24) -> int:
        got = _int(value)
        if got is None:
            assumed.append(f"{what}={default}")
            return default
        return bounded(got, most, what)

    def bounded(got: int, most: int, what: str) -> int:
        """A server's figure past what a profile may hold (``SimProfile``'s bounds) is
        capped, and said: the twin file stays loadable."""
        if got > most:
            assumed.append(f"{what}={most} (the server reported {got:.6g}; a profile holds "
                           f"at most {most})")
            return most
        return got

    max_len = fact(model_cfg.get("max_model_len"), 8192, "max_model_len")
    block = fact(cache.get("block_size") or manifest.server_block_size, _DEFAULT_BLOCK,
                 "block_size", 4096)
    seqs = fact(sched.get("max_num_seqs"), _DEFAULT_SEQS, "max_num_seqs", 65536)
    batched = fact(sched.get("max_num_batched_tokens"), _DEFAULT_BATCHED,
                   "max_num_batched_tokens")
    blocks = _int(cache.get("num_gpu_blocks"))
    if blocks is None:
        tokens = _int(cache.get("kv_cache_size_tokens"))
        blocks = tokens // block if tokens else None
    if blocks is None:
        blocks = -(-max_len * seqs // block)
        assumed.append(f"num_gpu_blocks={blocks} (max_model_len x max_num_seqs)")
    blocks = bounded(max(blocks, -(-max_len // block)), MAX_GPU_BLOCKS, "num_gpu_blocks")
    vocab = manifest.vocab_size or _int((model_cfg.get("hf_config") or {}).get("vocab_size"))
    if vocab is None:
        vocab = 32000
        assumed.append("vocab_size=32000")
    vocab = bounded(int(vocab), 2**24, "vocab_size")
    cfg = info.get("vllm_config")
    spec = cfg.get("speculative_config") if isinstance(cfg, dict) else None
    if isinstance(spec, dict) and spec:
        assumed.append(f"no speculative decoding (the server ran {spec.get('method')!r}: "
                       "the fitted step is per token read, not per engine step)")
    if cache.get("enable_prefix_caching") is False:
        assumed.append("prefix caching on (the server had it off; the simulator always "
                       "caches)")
    timing = {
        "step_s_batch1": fit.step_s_batch1 * scale,
        "step_s_batch64": (fit.step_s_batch1 + 63 * fit.slope_s_per_seq) * scale,
    }
    dtype = str(model_cfg.get("dtype") or "bfloat16").removeprefix("torch.")
    profile = {
        "name": "twin",
        "description": f"Fitted by agentreplay calibrate to runs of {manifest.model}.",
        "model": manifest.model,
        "max_model_len": max_len,
        "vocab_size": max(int(vocab), 65),
        "dtype": dtype,
        "tensor_parallel_size": bounded(_int(par.get("tensor_parallel_size")) or 1, 4096,
                                  "tensor_parallel_size"),
        "pipeline_parallel_size": bounded(_int(par.get("pipeline_parallel_size")) or 1, 4096,
                                  "pipeline_parallel_size"),
        "data_parallel_size": bounded(_int(par.get("data_parallel_size")) or 1, 4096,
                                  "data_parallel_size"),
        "block_size": block,
        "num_gpu_blocks": blocks,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": batched,
        "prefill_tokens_per_s": fit.prefill_tokens_per_s / scale,
        "request_overhead_s": fit.ttft_overhead_s * scale,
        "ctx_ref_tokens": int(round(fit.ctx_ref_tokens)),
        "step_noise": list(fit.noise) if fit.noise is not None else None,
        "backends": {"auto": dict(timing), "latency_specialized": dict(timing)},
    }
    return profile, assumed
