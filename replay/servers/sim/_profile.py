"""Simulator profiles: a model, its hardware figures and one step-time model per backend.

Profiles are JSON data files in ``replay/servers/sim/profiles/``. The decode backend
(``auto`` or ``latency_specialized``) is a variant inside a profile: both
variants share every field except their step times, so the two arms of an A/B
comparison report identical ``/server_info`` apart from ``decode_backend``.

Step-time model (seconds, before ``time_scale``)::

    t(b, ctx, p) = t_b(b) * (1 + ctx / ctx_ref_tokens) + p / prefill_tokens_per_s

``t_b`` interpolates linearly between the batch-1 and batch-64 figures (and
extrapolates past 64); ``ctx`` is the total context of the decoding requests;
``p`` the prompt tokens computed in the step. The context factor multiplies
both backends alike, so their batch-1 ratio holds at any context.
"""

from __future__ import annotations

import importlib.resources
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from replay.errors import ConfigError
from traces import first_problem

__all__ = [
    "MAX_GPU_BLOCKS",
    "MAX_MODELLED_STEP_S",
    "MAX_STEP_NOISE",
    "MAX_STEP_S",
    "Backend",
    "BackendTiming",
    "SimProfile",
    "SpeculativeSpec",
    "list_profiles",
    "load_profile",
]

Backend = Literal["auto", "latency_specialized"]

MAX_STEP_S = 60.0
"""The longest engine step a profile may model (a minute: past it a number is a typo, and
the twin's nanosecond clock overflows on steps of 1e10 s)."""
MAX_GPU_BLOCKS = 2**20
"""KV blocks at most (16M tokens at block size 16, past any one engine's cache): the
simulator holds a record per block, so 1e12 blocks is a MemoryError, not a bigger cache."""
MAX_TOKENS = 2**24
"""Context length, step token budget and vocabulary at most."""
MAX_STEP_NOISE = 1000.0
"""A step-noise quantile at most (a step a thousand times its modelled time)."""
MAX_MODELLED_STEP_S = 86_400.0
"""The longest step a profile may model at all (a day): its full batch at a full KV
cache, times its largest noise, plus a full step budget of prefill. Each field may be in
bounds while their product is not (a prefill rate of 1e-300 tokens/s, a context
reference of 1 token): such a step overflowed the twin's nanosecond clock (a traceback,
or steps of 1 ns)."""

_Time = Annotated[float, Field(ge=0, le=MAX_STEP_S, allow_inf_nan=False)]
_Tokens = Annotated[int, Field(gt=0, le=MAX_TOKENS)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BackendTiming(_Model):
    """Decode step time of one backend at batch 1 and batch 64 (seconds)."""

    step_s_batch1: _Time
    step_s_batch64: _Time

    def batch_step_s(self, batch: int) -> float:
        """Step time for ``batch`` decoding requests at zero context."""
        if batch <= 0:
            return 0.0
        slope = (self.step_s_batch64 - self.step_s_batch1) / 63.0
        return self.step_s_batch1 + slope * (batch - 1)


class SpeculativeSpec(_Model):
    """Speculative decoding: drafts per step and the distribution of accepted drafts."""

    method: str
    num_speculative_tokens: int = Field(ge=1, le=64)
    acceptance_pmf: list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]]
    """P(accepted drafts = i) for i in 0..num_speculative_tokens."""

    @model_validator(mode="after")
    def _check_pmf(self) -> SpeculativeSpec:
        if len(self.acceptance_pmf) != self.num_speculative_tokens + 1:
            raise ValueError("acceptance_pmf needs num_speculative_tokens + 1 entries")
        if any(p < 0 for p in self.acceptance_pmf) or abs(sum(self.acceptance_pmf) - 1) > 1e-6:
            raise ValueError("acceptance_pmf must be non-negative and sum to 1")
        return self

    @property
    def mean_acceptance_length(self) -> float:
        """1 + expected accepted drafts: tokens emitted per step on average."""
        return 1.0 + sum(i * p for i, p in enumerate(self.acceptance_pmf))


class SimProfile(_Model):
    """One simulated deployment (see the module docstring for the step-time model)."""

    name: str
    description: str = ""
    model: str
    max_model_len: _Tokens
    vocab_size: int = Field(gt=64, le=MAX_TOKENS)
    dtype: str = "bfloat16"
    tensor_parallel_size: int = Field(default=1, ge=1, le=4096)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=4096)
    data_parallel_size: int = Field(default=1, ge=1, le=4096)
    block_size: int = Field(gt=0, le=4096)
    cache_dtype: str = "auto"
    num_gpu_blocks: int = Field(gt=0, le=MAX_GPU_BLOCKS)
    max_num_seqs: int = Field(gt=0, le=65536)
    max_num_batched_tokens: _Tokens
    prefill_tokens_per_s: float = Field(ge=0, le=1e12, allow_inf_nan=False)
    """0 means prefill takes no time."""
    request_overhead_s: float = Field(default=0.0, ge=0, le=3600, allow_inf_nan=False)
    """Time from a request's arrival to its entry into the engine (HTTP, tokenizing,
    scheduling on a real server): it delays the first token and holds no engine
    capacity. ``calibrate`` fits it from idle-engine TTFTs; bundled profiles leave it 0."""
    request_overhead_busy_s: float | None = Field(default=None, ge=0, le=3600,
                                                  allow_inf_nan=False)
    """The same overhead for a request that arrives while the engine has work; None: as
    ``request_overhead_s``. A real server can take a request in sooner while its engine
    runs than when it has to wake it (vLLM on a CPU: about 3 ms less); ``calibrate`` fits
    it where the fitted levels' busy-engine TTFTs show it (``busy_overhead``)."""
    ctx_ref_tokens: int = Field(ge=0, le=10**12)
    """Total decode context that doubles the step time; 0 disables the context term."""
    gpu: str = "sim"
    vllm_version: str = "0.33.0"
    speculative: SpeculativeSpec | None = None
    burst_tokens: int = Field(default=1, ge=1, le=65536)
    """Tokens one decode step emits per request without speculation (>1 only for
    the instant profile, where tokens are ready as fast as they can be written)."""
    backends: dict[Backend, BackendTiming]
    step_noise: tuple[Annotated[float, Field(gt=0, le=MAX_STEP_NOISE, allow_inf_nan=False)],
                      ...] | None = Field(default=None, max_length=10_000)
    """Each step's time multiplied by a factor drawn from this distribution, given as its
    quantiles at evenly spaced probabilities (``replay.servers.sim._noise``); None: every step
    takes its modelled time. Fitted by ``calibrate`` where a server's steps vary."""
    idle_power_w: float = Field(default=100.0, ge=0, le=10_000)
    """Each GPU's draw with the engine idle (W): an assumption of the power model of
    the modelled DCGM endpoint (``replay.servers.sim._dcgm``), not a measurement."""
    busy_power_w: float = Field(default=700.0, ge=0, le=10_000)
    """Each GPU's draw while an engine step runs (W); power = idle + (busy - idle) x
    engine utilisation. Also an assumption."""
    gpu_memory_mib: int = Field(default=81_920, gt=0)
    """Each GPU's memory (MiB), for the modelled ``DCGM_FI_DEV_FB_USED``."""
    calibration: dict[str, Any] | None = None
    """What a fitted twin was fitted on and how well (``agentreplay calibrate``); the
    simulator does not read it."""

    @model_validator(mode="after")
    def _check(self) -> SimProfile:
        if set(self.backends) != {"auto", "latency_specialized"}:
            raise ValueError("backends must define exactly 'auto' and 'latency_specialized'")
        if self.num_gpu_blocks * self.block_size < self.max_model_len:
            raise ValueError("num_gpu_blocks * block_size must hold max_model_len tokens")
        if self.busy_power_w < self.idle_power_w:
            raise ValueError("busy_power_w must be at least idle_power_w")
        q = self.step_noise
        if q is not None and (len(q) < 2 or q[0] <= 0
                              or any(b < a for a, b in zip(q, q[1:], strict=False))):
            raise ValueError("step_noise must be at least 2 quantiles, above 0 and "
                             "non-decreasing")
        self._check_longest_step()
        return self

    def _check_longest_step(self) -> None:
        """Refuse a profile whose worst step is negative or past MAX_MODELLED_STEP_S:
        the full batch (``max_num_seqs``) over the whole KV cache, at the largest noise
        quantile, plus ``max_num_batched_tokens`` of prefill. Named by the field that
        makes it so."""
        n = self.max_num_seqs
        for name, timing in self.backends.items():
            if timing.batch_step_s(n) < 0:
                raise ValueError(
                    f"backends.{name}: step_s_batch64 {timing.step_s_batch64:g} below "
                    f"step_s_batch1 {timing.step_s_batch1:g} extrapolates to a negative "
                    f"step at max_num_seqs {n}")
        decode = max(max(t.step_s_batch1, t.batch_step_s(n)) for t in self.backends.values())
        ctx = min(n * self.max_model_len, self.num_gpu_blocks * self.block_size)
        stretch = 1.0 + ctx / self.ctx_ref_tokens if self.ctx_ref_tokens else 1.0
        noise = self.step_noise[-1] if self.step_noise else 1.0
        prefill = (self.max_num_batched_tokens / self.prefill_tokens_per_s
                   if self.prefill_tokens_per_s else 0.0)
        worst = decode * stretch * noise + prefill
        if worst <= MAX_MODELLED_STEP_S:
            return
        if prefill > decode * stretch * noise:
            why = (f"prefill_tokens_per_s {self.prefill_tokens_per_s:g} makes a step of "
                   f"{self.max_num_batched_tokens} prefill tokens take {prefill:.3g} s")
        elif stretch >= noise:
            why = (f"ctx_ref_tokens {self.ctx_ref_tokens} stretches a {decode:g} s step "
                   f"{stretch:.3g}x at a full KV cache ({ctx} tokens)")
        else:
            why = (f"step_noise up to {noise:g}x on steps of {decode * stretch:.3g} s "
                   "(at a full KV cache)")
        raise ValueError(f"{why}: the longest step would be {worst:.3g} s, past the "
                         f"{MAX_MODELLED_STEP_S:g} s a profile may model")

    @property
    def gpu_count(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    def overhead_s(self, busy: bool) -> float:
        """Arrival to engine entry for a request that finds the engine busy or idle."""
        if busy and self.request_overhead_busy_s is not None:
            return self.request_overhead_busy_s
        return self.request_overhead_s

    def step_s(self, backend: Backend, decode_batch: int, ctx_tokens: int, prefill: int) -> float:
        """Modelled duration of one engine step in seconds (before time scaling)."""
        t = self.backends[backend].batch_step_s(decode_batch)
        if self.ctx_ref_tokens and decode_batch:
            t *= 1.0 + ctx_tokens / self.ctx_ref_tokens
        if prefill and self.prefill_tokens_per_s:
            t += prefill / self.prefill_tokens_per_s
        return t


def list_profiles() -> list[str]:
    """Names of the bundled profiles."""
    files = importlib.resources.files("replay.servers.sim").joinpath("profiles")
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".json"))


def load_profile(name_or_path: str) -> SimProfile:
    """A bundled profile by name, or a profile JSON file by path."""
    if name_or_path.endswith(".json"):
        try:
            with open(name_or_path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise ConfigError(f"{name_or_path}: cannot read profile: {exc.strerror}") from None
        where = name_or_path
    else:
        names = list_profiles()
        if name_or_path not in names:
            raise ConfigError(
                f"unknown sim profile {name_or_path!r}; known: {', '.join(names)}"
            )
        res = importlib.resources.files(__package__ or "replay.servers.sim").joinpath(
            f"profiles/{name_or_path}.json"
        )
        raw = res.read_bytes()
        where = f"profile {name_or_path}"
    try:
        return SimProfile.model_validate(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    except ValidationError as exc:
        problem = first_problem(exc)
        raise ConfigError(f"{where}: field {problem.field or '(profile)'}: {problem.message}")\
            from None
