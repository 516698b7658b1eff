"""Fitting the simulator's step-time model to reconstructed steps (scipy least squares).

The model is serve-sim's (``replay.servers.sim`` profiles)::

    step(b, ctx, p) = (s1 + slope * (b - 1)) * (1 + ctx / ctx_ref) + p / prefill_rate

times a per-step noise factor. A gap spanning ``k`` steps (coalesced reads) counts
``k`` decode steps. TTFT of a request sent to an idle engine (nothing else in flight) is
``overhead + p / prefill_rate`` times the noise of its ``n`` prefill steps (typically
the median of the mean of ``n`` draws, ``chunk_noise``): its prefill steps have no
decode part, and the overhead (HTTP, tokenizing, opening a connection) is fitted with
it. Busy-engine TTFTs wait for a step in flight and are not used.

The decode structure is fitted on the gaps without a prefill, then the prefill rate and
overhead on the rest with it held (``fit_steps`` says why). Typical and tail apart,
because a real server's steps are heavy-tailed (on a CPU server a few steps
take ten times the typical one). The structure is fitted to the TYPICAL step: relative
(log) residuals under a robust loss, so stalls neither bend the batch and context terms
nor inflate them (a plain mean fit made a stall-ridden level look like a steep context
term and over-predicted long contexts). The stalls are then kept as what they are: the
distribution of measured/modelled single steps (``StepFit.noise``), whose mean is the
empirical one, so a twin replaying it reproduces the mean gap (throughput,
interactivity) and the spread (the slow tail of per-request interactivity).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np
from scipy.optimize import least_squares

from analysis.fit._samples import StepSamples, TtftSamples

__all__ = ["GroupResidual", "StepFit", "chunk_noise", "fit_steps", "predict_gap"]

_MAX_CTX_REF = 1e9
_ROBUST_SCALE = 0.1
"""Relative residual (about 10%) beyond which a gap counts as an outlier of the fit."""
_NOISE_QUANTILES = 101
_MIN_NOISE_STEPS = 50
_CHUNK_DRAWS = 2001


@dataclass(frozen=True)
class StepFit:
    """Fitted step-time parameters (seconds and tokens of the runs' own clock)."""

    step_s_batch1: float
    slope_s_per_seq: float
    ctx_ref_tokens: float
    """0: the context term is not seen in the data (disabled)."""
    prefill_tokens_per_s: float
    """0: prefill takes no measurable time."""
    ttft_overhead_s: float
    gaps: int
    ttfts: int
    cost: float
    groups: tuple[GroupResidual, ...]
    noise: tuple[float, ...] | None = None
    """Quantiles (at evenly spaced probabilities) of measured / modelled single steps;
    None: too few clean steps to tell (``SimProfile.step_noise``)."""

    @property
    def noise_mean(self) -> float:
        """Mean of the noise factor: the mean step over the typical (modelled) one."""
        if self.noise is None:
            return 1.0
        q = np.asarray(self.noise)
        return float((q[:-1] + q[1:]).mean() / 2)

    def step_s(self, batch: float, ctx_tokens: float = 0.0) -> float:
        """Modelled typical decode step at ``batch`` decoding requests and ``ctx_tokens``."""
        factor = 1.0 + (ctx_tokens / self.ctx_ref_tokens if self.ctx_ref_tokens else 0.0)
        return (self.step_s_batch1 + self.slope_s_per_seq * (batch - 1)) * factor


@dataclass(frozen=True)
class GroupResidual:
    """How well the fit explains one group's (level's) gaps and idle TTFTs."""

    group: int
    gaps: int
    mean_gap_s: float
    mean_pred_gap_s: float
    mean_batch: float
    ttfts: int
    mean_ttft_s: float | None
    mean_pred_ttft_s: float | None

    @property
    def gap_error(self) -> float:
        """Relative error of the mean predicted gap."""
        return self.mean_pred_gap_s / self.mean_gap_s - 1.0 if self.mean_gap_s else 0.0


def _gap_model(x: np.ndarray, s: StepSamples) -> np.ndarray:
    s1, slope, inv_ref, inv_rate = x[0], x[1], x[2], x[3]
    decode = (s1 + slope * (s.batch - 1.0)) * (1.0 + inv_ref * s.ctx_tokens)
    return np.asarray(s.steps * decode + s.prefill_tokens * inv_rate, dtype=np.float64)


def _typical_gap(fit: StepFit, s: StepSamples) -> np.ndarray:
    inv_ref = 1.0 / fit.ctx_ref_tokens if fit.ctx_ref_tokens else 0.0
    inv_rate = 1.0 / fit.prefill_tokens_per_s if fit.prefill_tokens_per_s else 0.0
    return _gap_model(np.array([fit.step_s_batch1, fit.slope_s_per_seq, inv_ref, inv_rate]), s)


def predict_gap(fit: StepFit, s: StepSamples) -> np.ndarray:
    """The fitted model's mean gap (typical step times the noise mean) for every row."""
    return _typical_gap(fit, s) * fit.noise_mean


_Fn = Callable[[np.ndarray], np.ndarray]


def _weighted_soft_l1(weights: np.ndarray, scale: float) -> _Fn:
    """scipy's soft-L1 loss with a weight per residual (``least_squares`` takes a loss
    callable of ``z = f**2``; its own ``f_scale`` cannot differ between residuals)."""
    c2 = scale * scale

    def loss(z: np.ndarray) -> np.ndarray:
        t = np.sqrt(1.0 + z / c2)
        return np.vstack([2.0 * c2 * (t - 1.0) * weights, weights / t,
                          -0.5 * weights / (c2 * t ** 3)])
    return loss


def _block_weights(group: np.ndarray) -> np.ndarray:
    """Each group's rows sum to one: the busiest level must not drown the others."""
    _, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
    return np.asarray(1.0 / counts[inverse], dtype=np.float64)


def _subset(s: StepSamples, m: np.ndarray) -> StepSamples:
    return StepSamples(**{k: getattr(s, k)[m] for k in s.__dataclass_fields__})


def _robust(residuals: _Fn, x0: np.ndarray, lower: np.ndarray, upper: np.ndarray,
            scale: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, float]:
    weights = weights * len(weights) / weights.sum()
    res = least_squares(residuals, x0, bounds=(lower, upper), x_scale=scale, method="trf",
                        loss=_weighted_soft_l1(weights, _ROBUST_SCALE))  # type: ignore[arg-type]
    return res.x, float(res.cost)


def _fit_decode(s: StepSamples) -> tuple[np.ndarray, float]:
    """s1, slope, 1/ctx_ref on the decode-only gaps, each level's gaps one block."""
    log_gap = np.log(s.gap_s)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(_gap_model(np.array([x[0], x[1], x[2], 0.0]), s)) - log_gap,
                          dtype=np.float64)

    b1 = s.gap_s[(s.batch == 1) & (s.steps == 1)]
    s1_0 = float(np.median(b1)) if len(b1) else float(np.median(s.gap_s / s.steps))
    return _robust(residuals, np.array([s1_0, 0.0, 0.0]), np.array([1e-9, 0.0, 0.0]),
                   np.array([np.inf, np.inf, 1e-3]), np.array([s1_0, s1_0 / 10, 1e-5]),
                   _block_weights(s.group))


def chunk_noise(noise: tuple[float, ...] | None, chunks: np.ndarray) -> np.ndarray:
    """The typical (median) factor of a prefill spread over ``chunks`` noisy steps: the
    median of the mean of that many draws of the step noise (1 without noise). One
    step's is the noise median; many steps' tends to the noise mean, so a long
    prompt's TTFT carries the stalls' mean and a short one's does not (a mean fit to
    idle TTFTs mistook that for a fast prefill and a long overhead)."""
    out = np.ones(len(chunks))
    if noise is None or not len(chunks):
        return out
    q = np.asarray(noise)
    rng = np.random.default_rng(0)
    for n in np.unique(chunks):
        k = int(min(max(n, 1), 256))
        u = rng.random((_CHUNK_DRAWS, k)) * (len(q) - 1)
        i = np.minimum(u.astype(np.int64), len(q) - 2)
        draws = q[i] + (q[i + 1] - q[i]) * (u - i)
        out[chunks == n] = float(np.median(draws.mean(axis=1)))
    return out


def _fit_prefill(decode: np.ndarray, s: StepSamples, t: TtftSamples,
                 noise: tuple[float, ...] | None) -> tuple[float, float, float]:
    """1/prefill_rate and the TTFT overhead, the decode part held: the gaps with a
    prefill in them (each level's one block) and the idle TTFTs, all of them together
    weighing as much as all the gaps (an idle TTFT is the cleanest sight of the
    prefill: no decode shares its steps; each counts alike, wherever it was seen, as a
    busy level holds only a few). Both in log residuals under the robust loss, so both fit the
    typical value; an idle TTFT's typical value is the overhead plus its prefill times
    the median noise of its chunk count (``chunk_noise``)."""
    if not len(s) and not len(t):
        return 0.0, 0.0, 0.0
    log_gap, log_ttft = np.log(s.gap_s), np.log(t.ttft_s)
    t_unc = t.uncached_tokens * chunk_noise(noise, t.chunks)

    def residuals(x: np.ndarray) -> np.ndarray:
        gap = _gap_model(np.array([decode[0], decode[1], decode[2], x[0]]), s)
        return np.concatenate([np.log(gap) - log_gap, np.log(x[1] + t_unc * x[0]) - log_ttft])

    gap_w = _block_weights(s.group)
    blocks = max(float(gap_w.sum()), 1.0)
    weights = np.concatenate([gap_w, np.full(len(t), blocks / max(len(t), 1))])
    t0 = float(np.min(t.ttft_s)) if len(t) else 1e-3
    r0 = float(np.median(t.ttft_s / np.maximum(t_unc, 1.0))) if len(t) else 1e-5
    x, cost = _robust(residuals, np.array([r0, t0 / 2]), np.array([0.0, 1e-6]),
                      np.array([np.inf, np.inf]), np.array([max(r0, 1e-9), t0]), weights)
    return float(x[0]), float(x[1]) if len(t) else 0.0, cost


def fit_steps(steps: StepSamples, ttfts: TtftSamples | None = None) -> StepFit:
    """Robust fit of the step model: the decode structure on decode-only gaps, then the
    noise on its single steps, then the prefill rate and overhead on the gaps with a
    prefill and the idle TTFTs with that noise in the model (it multiplies prefill steps
    too). Apart, because the prefill attribution is the rebuild's least certain part
    (chunking, the step a first token belongs to): fitted jointly, its misfit leaks
    into the batch and context terms (-20% at batch 64 on serve-sim)."""
    s = _subset(steps, (steps.batch >= 1) & ~steps.buffered)
    plain = s.prefill_tokens == 0
    if plain.sum() < 8:
        raise ValueError("too few inter-token gaps to fit (need 8 with a decode batch "
                         "and no prefill)")
    idle = (ttfts.alone & (ttfts.ttft_s > 0) if ttfts is not None
            else np.zeros(0, dtype=bool))
    t = _subset_t(ttfts, idle) if ttfts is not None else None
    decode, cost = _fit_decode(_subset(s, plain))
    ctx_ref = 1.0 / decode[2] if decode[2] > 1.0 / _MAX_CTX_REF else 0.0
    fit = StepFit(float(decode[0]), float(decode[1]), float(ctx_ref), 0.0, 0.0,
                  len(s), len(t) if t is not None else 0, cost, ())
    fit = replace(fit, noise=_noise(fit, s))
    empty = TtftSamples(*(np.zeros(0) for _ in fields(TtftSamples)))
    inv_rate, overhead, cost_p = _fit_prefill(decode, _subset(s, ~plain),
                                              t if t is not None else empty, fit.noise)
    rate = 1.0 / inv_rate if inv_rate > 0 else 0.0
    fit = replace(fit, prefill_tokens_per_s=float(rate), ttft_overhead_s=overhead,
                  cost=cost + cost_p)
    return replace(fit, groups=_groups(fit, s, ttfts))


def _subset_t(t: TtftSamples, m: np.ndarray) -> TtftSamples:
    return TtftSamples(**{k: getattr(t, k)[m] for k in t.__dataclass_fields__})


def _clean_ratios(fit: StepFit, s: StepSamples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(measured / typical, weight, mask) of the single decode steps (one token read, no
    prefill, not buffered), each step counted once (a step of batch ``b`` is seen by
    ``b`` requests) and each level alike."""
    m = (s.steps == 1) & (s.prefill_tokens == 0) & ~s.buffered & (s.batch >= 1)
    ratio = s.gap_s[m] / _typical_gap(fit, s)[m]
    return ratio, _block_weights(s.group[m]) / s.batch[m], m


def level_stall_factor(fit: StepFit, s: StepSamples, group: int) -> float | None:
    """A level's own mean step over the fitted typical one: what the noise mean would be
    had the fit seen this level alone (None: too few clean steps). Levels whose factors
    differ ran under different stalls, and a prediction carries the fitted levels'."""
    ratio, w, m = _clean_ratios(fit, s)
    at = s.group[m] == group
    if at.sum() < _MIN_NOISE_STEPS:
        return None
    return float(np.average(ratio[at], weights=w[at]))


def _noise(fit: StepFit, s: StepSamples) -> tuple[float, ...] | None:
    """Quantiles of measured / modelled over single decode steps (one token read, no
    prefill), each step counted once (a step of batch ``b`` is seen by ``b`` requests)
    and each level alike; the top quantile set so the distribution's mean is the
    measured mean ratio (a piecewise-linear quantile function would miss the rarest
    stalls' weight)."""
    ratio, w, _m = _clean_ratios(fit, s)
    if len(ratio) < _MIN_NOISE_STEPS:
        return None
    order = np.argsort(ratio)
    r, cw = ratio[order], np.cumsum(w[order])
    cdf = (cw - 0.5 * w[order]) / cw[-1]
    q = np.interp(np.linspace(0.0, 1.0, _NOISE_QUANTILES), cdf, r)
    q[0], q[-1] = r[0], r[-1]
    mean = float(np.average(ratio, weights=w))
    top = 2.0 * (_NOISE_QUANTILES - 1) * mean - q[0] - 2.0 * q[1:-1].sum()
    q[-1] = max(top, q[-2])
    return tuple(float(v) for v in q)


def _groups(fit: StepFit, s: StepSamples, ttfts: TtftSamples | None) -> tuple[GroupResidual, ...]:
    pred = predict_gap(fit, s)
    out = []
    inv_rate = 1.0 / fit.prefill_tokens_per_s if fit.prefill_tokens_per_s else 0.0
    for g in np.unique(s.group):
        m = s.group == g
        tm = None
        if ttfts is not None:
            tm = (ttfts.group == g) & ttfts.alone
        has_t = tm is not None and bool(tm.any())
        out.append(GroupResidual(
            group=int(g), gaps=int(m.sum()), mean_gap_s=float(s.gap_s[m].mean()),
            mean_pred_gap_s=float(pred[m].mean()), mean_batch=float(s.batch[m].mean()),
            ttfts=int(tm.sum()) if tm is not None else 0,
            mean_ttft_s=float(ttfts.ttft_s[tm].mean()) if has_t and ttfts is not None
            and tm is not None else None,
            mean_pred_ttft_s=float(fit.ttft_overhead_s + inv_rate * fit.noise_mean
                                   * ttfts.uncached_tokens[tm].mean())
            if has_t and ttfts is not None and tm is not None else None,
        ))
    return tuple(out)
