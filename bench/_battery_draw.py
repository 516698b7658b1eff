"""The twin battery's hidden truths: simulator profiles and workloads drawn at random.

Every draw comes from one ``numpy`` generator seeded by the case's number and the
battery's seed, so a case is the same profile and workload on every machine. The
ranges are wide on purpose (issue 35): batch-1 step 2-60 ms, a batch slope from
flat to steep, a context reference from weak to strong, prefill 5K-200K tok/s,
``max_num_batched_tokens`` from 256 to 8192, KV caches from a little over one
longest request (some profiles preempt) to roomy, and step noise from none to
heavy-tailed with a mean up to 1.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Case", "WorkloadSpec", "draw_case", "noise_quantiles", "write_workload_spec"]

NOISE_POINTS = 101


@dataclass(frozen=True)
class WorkloadSpec:
    """A generated workload (``traces.generate``) as the battery names it."""

    kind: str
    """``coding-agent`` or ``decode``."""
    seed: int
    max_context: int
    sessions: int
    prompt_scale: float | None = None
    """None: the generator's scale for the context (prompts up to the context)."""
    output_scale: float = 0.3
    think_scale: float = 0.05

    @property
    def name(self) -> str:
        if self.kind == "decode":
            return f"decode-s{self.seed}"
        return f"agent-s{self.seed}-c{self.max_context // 1024}k"


@dataclass(frozen=True)
class Case:
    """One hidden profile and the workloads it is fitted on and asked about."""

    number: int
    profile: dict[str, Any]
    workload: WorkloadSpec
    other: WorkloadSpec
    """The what-if's workload (another seed and context size, or the decode profile)."""
    noise: str
    """How the step noise was drawn (``none``, ``lognormal``, ``heavy``)."""


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def noise_quantiles(kind: str, mean: float, rng: np.random.Generator) -> list[float] | None:
    """``NOISE_POINTS`` quantiles of a step-noise factor with the given mean: none, a
    lognormal, or a lognormal bulk with a Pareto tail (a few steps many times the
    typical one), scaled so the mean is ``mean``."""
    if kind == "none":
        return None
    p = np.linspace(0.0, 1.0, NOISE_POINTS)
    p = np.clip(p, 0.002, 0.998)
    from scipy import stats

    sigma = rng.uniform(0.03, 0.25)
    q = stats.lognorm.ppf(p, sigma)
    if kind == "heavy":
        alpha = rng.uniform(1.6, 3.0)
        tail = rng.uniform(0.02, 0.08)  # share of steps in the tail
        over = p > 1 - tail
        q[over] = q[over] * (tail / (1 - p[over])) ** (1 / alpha)
    # the simulator draws linearly between quantiles: that piecewise mean is the mean
    pieces = (q[:-1] + q[1:]) / 2
    q = q * (mean / pieces.mean())
    return [float(x) for x in np.maximum.accumulate(np.maximum(q, 1e-3))]


def draw_case(number: int, seed: int) -> Case:
    """Case ``number`` of the battery run with ``seed``."""
    rng = np.random.default_rng([seed, number])
    s1 = _log_uniform(rng, 0.002, 0.060)
    s64 = s1 * (1 + _log_uniform(rng, 0.2, 8.0))
    ctx = int(_log_uniform(rng, 20_000, 2_000_000))
    prefill = _log_uniform(rng, 5_000, 200_000)
    chunk = int(rng.choice([256, 512, 1024, 2048, 4096, 8192]))
    contexts = (4096, 8192, 16384)
    max_context = int(rng.choice(contexts))
    noise = str(rng.choice(["none", "lognormal", "heavy"], p=[0.25, 0.35, 0.4]))
    mean = 1.0 if noise == "none" else float(rng.uniform(1.0, 1.5))
    block = 16
    # from a little over one longest request (a busy level preempts) to roomy
    blocks = int(max_context / block * _log_uniform(rng, 1.1, 40.0))
    timing = {"step_s_batch1": s1, "step_s_batch64": s64}
    profile = {
        "name": f"hidden-{seed}-{number}", "description": "twin battery hidden profile",
        "model": "sim/hidden", "max_model_len": max_context, "vocab_size": 32000,
        "block_size": block, "num_gpu_blocks": blocks, "max_num_seqs": 256,
        "max_num_batched_tokens": chunk, "prefill_tokens_per_s": prefill,
        "ctx_ref_tokens": ctx, "backends": {"auto": timing, "latency_specialized": timing},
        "step_noise": noise_quantiles(noise, mean, rng),
    }
    wl_seed = int(rng.integers(0, 1000))
    workload = WorkloadSpec("coding-agent", wl_seed, max_context, sessions=64)
    if rng.uniform() < 0.3:
        other = WorkloadSpec("decode", wl_seed + 1, max_context, sessions=64)
    else:
        smaller = [c for c in contexts if c <= max_context]
        other = WorkloadSpec("coding-agent", wl_seed + 1, int(rng.choice(smaller)),
                             sessions=64)
    return Case(number, profile, workload, other, noise)


def write_workload_spec(spec: WorkloadSpec, path: Path) -> Path:
    """Write the workload once (``traces.generate``); a file already there is reused."""
    from traces import generate, write_workload

    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if spec.kind == "decode":
        header, sessions = generate("decode", sessions=spec.sessions, seed=spec.seed,
                                    block_size=16, max_context=spec.max_context,
                                    input_tokens=256, output_tokens=200,
                                    requests_per_session=40)
    else:
        header, sessions = generate("coding-agent", sessions=spec.sessions, seed=spec.seed,
                                    block_size=16, max_context=spec.max_context,
                                    prompt_scale=spec.prompt_scale,
                                    think_scale=spec.think_scale,
                                    output_scale=spec.output_scale)
    write_workload(path, header, sessions)
    return path
