"""The simulated server's settings (``SimConfig``) and its ``/server_info`` document."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from replay.sim._faults import FaultSpec
from replay.sim._profile import Backend, SimProfile, load_profile
from replay.sim._vllm_tree import BASE_VLLM_CONFIG, SYSTEM_ENV_KEYS

__all__ = ["SimConfig", "server_info", "step_log_path"]


class SimConfig(BaseModel):
    """Everything a simulated server needs (the ``serve-sim`` options)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    profile: str | SimProfile = "small"
    backend: Backend = "latency_specialized"
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port."""
    time_scale: float = Field(default=1.0, gt=0)
    """Run this many times faster than real time (modelled durations / time_scale)."""
    slowdown: float = Field(default=1.0, ge=1.0)
    """Every engine step really takes this many times its modelled duration, while the
    step's ``model_s`` stays the profile's: a deliberately late simulator (a trap for the
    validity checks, which must see the lateness in ``vllm_sim:`` counters)."""
    faults: FaultSpec = Field(default_factory=FaultSpec)
    truth_path: str | None = None
    """Request truth log (JSONL); the step log goes beside it (``step_log_path``)."""
    seed: int = 0
    split_tokens: bool = False
    keep_truth: bool = True
    """Keep truth records in memory (``SimServer.truth`` and ``SimServer.steps``)."""
    prompt_tokens_details: bool = True
    """Report ``usage.prompt_tokens_details.cached_tokens``, as vLLM does only when started
    with ``--enable-prompt-tokens-details`` (off: the usage keys of a default server)."""

    def resolved_profile(self) -> SimProfile:
        if isinstance(self.profile, SimProfile):
            return self.profile
        return load_profile(self.profile)


def step_log_path(truth_path: str) -> str:
    """Where the per-step truth log of ``truth_path`` goes: ``x.jsonl`` -> ``x.steps.jsonl``.

    Steps have their own file so that every line of the request log stays one request.
    """
    stem = truth_path[:-6] if truth_path.endswith(".jsonl") else truth_path
    return stem + ".steps.jsonl"


def server_info(profile: SimProfile, backend: Backend, time_scale: float,
                slowdown: float = 1.0) -> dict[str, Any]:
    """``/server_info?config_format=json``: vLLM 0.32's key tree, filled from the profile.

    Every key a real server reports is present (``_vllm_tree``); the profile's
    figures overwrite the defaults. Beyond real vLLM: ``model_config.hf_config.vocab_size``
    (real servers do not expose it; the replayer reads it from here),
    ``device_config.gpu``, and the top-level ``simulated``, ``sim_profile`` (with its
    description: what it is calibrated to), ``sim_acceptance_length`` (the mean
    acceptance length its speculative profile claims), ``time_scale``, ``slowdown``.
    """
    spec = profile.speculative
    cfg = copy.deepcopy(BASE_VLLM_CONFIG)
    dtype = profile.dtype if profile.dtype.startswith("torch.") else f"torch.{profile.dtype}"
    cfg["model_config"].update(
        model=profile.model, served_model_name=profile.model, tokenizer=profile.model,
        max_model_len=profile.max_model_len, dtype=dtype,
        hf_config={"vocab_size": profile.vocab_size},
    )
    tp, pp = profile.tensor_parallel_size, profile.pipeline_parallel_size
    cfg["parallel_config"].update(
        tensor_parallel_size=tp, pipeline_parallel_size=pp,
        data_parallel_size=profile.data_parallel_size,
        data_parallel_size_local=profile.data_parallel_size, world_size=tp * pp,
    )
    tokens = profile.num_gpu_blocks * profile.block_size
    cfg["cache_config"].update(
        block_size=profile.block_size, effective_attention_block_size=profile.block_size,
        cache_dtype=profile.cache_dtype, enable_prefix_caching=True,
        gpu_memory_utilization=0.9, num_gpu_blocks=profile.num_gpu_blocks,
        kv_cache_size_tokens=tokens, kv_cache_max_concurrency=tokens / profile.max_model_len,
        kv_cache_memory_bytes=None,
    )
    cfg["scheduler_config"].update(
        max_num_seqs=profile.max_num_seqs,
        max_num_batched_tokens=profile.max_num_batched_tokens,
        max_num_encoder_input_tokens=profile.max_num_batched_tokens,
        encoder_cache_size=profile.max_num_batched_tokens, enable_chunked_prefill=True,
    )
    cfg["speculative_config"] = None if spec is None else {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
    }
    cfg["device_config"] = {"device": "cuda", "gpu": profile.gpu}
    cfg["additional_config"] = {"decode_backend": backend}
    return {
        "vllm_config": cfg,
        "vllm_env": {},
        "system_env": dict.fromkeys(SYSTEM_ENV_KEYS),
        "simulated": True,
        "sim_profile": profile.name,
        "sim_profile_description": profile.description,
        "sim_acceptance_length": None if spec is None else spec.mean_acceptance_length,
        "time_scale": time_scale,
        "slowdown": slowdown,
    }
