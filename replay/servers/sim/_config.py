"""The simulated server's settings (``SimConfig``) and its ``/server_info`` document."""

from __future__ import annotations

import copy
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from replay.knobs import Knob
from replay.servers.sim._faults import FaultSpec
from replay.servers.sim._profile import Backend, SimProfile, list_profiles, load_profile
from replay.servers.sim._vllm_tree import BASE_VLLM_CONFIG, SYSTEM_ENV_KEYS

__all__ = ["SERVE_SIM_PROFILE", "SimConfig", "server_info", "step_log_path"]

SERVE_SIM_PROFILE = "kimi-k3-gb300-tp16"
"""``serve-sim``'s profile when none is named: the one the demo uses."""
_PROFILE_HELP = (
    "a bundled profile (" + ", ".join(list_profiles()) + ") or a profile .json file "
    f"(default: {SERVE_SIM_PROFILE}, calibrated to vLLM's published Kimi K3 TP16 decode "
    "rates, as the demo uses; 'small' is a fast test profile whose auto arm misses every "
    "default SLO tier)")


class SimConfig(BaseModel):
    """Everything a simulated server needs (the ``serve-sim`` options)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    profile: Annotated[str | SimProfile, Knob(
        "--profile", _PROFILE_HELP, metavar="NAME|FILE.json",
        default=SERVE_SIM_PROFILE)] = "small"
    backend: Annotated[Backend, Knob(
        "--backend", "the simulated decode backend (the arms of a comparison differ in it)",
    )] = "latency_specialized"
    host: Annotated[str, Knob("--host", "address to listen on")] = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535), Knob(
        "--port", "port to listen on (0 = any free; default: 8000)", default=8000)] = 0
    """0 picks a free port."""
    time_scale: Annotated[float, Field(gt=0), Knob(
        "--speedup", "run X times faster than real time: every modelled duration divided "
        "by X, reported in the profile's seconds", metavar="X")] = 1.0
    """Run this many times faster than real time (modelled durations / time_scale)."""
    slowdown: Annotated[float, Field(ge=1.0), Knob(
        "--slowdown", "every engine step really takes F times its modelled time, while "
        "reporting the modelled time (a deliberately late simulator; default 1.0)",
        metavar="F")] = 1.0
    """Every engine step really takes this many times its modelled duration, while the
    step's ``model_s`` stays the profile's: a deliberately late simulator (a trap for the
    validity checks, which must see the lateness in ``vllm_sim:`` counters)."""
    faults: FaultSpec = Field(default_factory=FaultSpec)
    truth_path: Annotated[str | None, Knob(
        "--truth", "write the truth log (JSONL) here; the per-step log goes beside it "
        "(X.jsonl -> X.steps.jsonl)", metavar="FILE")] = None
    """Request truth log (JSONL); the step log goes beside it (``step_log_path``)."""
    seed: Annotated[int, Knob("--seed", "seed of the simulated output tokens and faults")] = 0
    split_tokens: Annotated[bool, Knob(
        "--split-tokens", "one token per SSE event and one event per write")] = False
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
