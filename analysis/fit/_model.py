"""Fitting the simulator's step-time model to reconstructed steps (scipy least squares).

The model is serve-sim's (``replay.sim`` profiles)::

    step(b, ctx, p) = (s1 + slope * (b - 1)) * (1 + ctx / ctx_ref) + p / prefill_rate

A gap spanning ``k`` steps (coalesced reads) counts ``k`` decode steps. TTFT of a
request sent to an idle engine (nothing else in flight) is ``overhead + p / prefill_rate``:
its prefill steps have no decode part, and the overhead (HTTP, tokenizing) is fitted
with it. Busy-engine TTFTs wait for a step in flight and are not used. The loss is
plain least squares, so the fit follows the MEAN gap: the interactivity and throughput
a twin must reproduce are means over gaps, slow ones included (a robust loss fitted
the typical step and missed a noisy CPU server's tail by a third).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from analysis.fit._samples import StepSamples, TtftSamples

__all__ = ["GroupResidual", "StepFit", "fit_steps", "predict_gap"]

_MAX_CTX_REF = 1e9


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

    def step_s(self, batch: float, ctx_tokens: float = 0.0) -> float:
        """Modelled decode step at ``batch`` decoding requests and ``ctx_tokens`` context."""
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


def predict_gap(fit: StepFit, s: StepSamples) -> np.ndarray:
    """The fitted model's gap for every row of ``s``."""
    inv_ref = 1.0 / fit.ctx_ref_tokens if fit.ctx_ref_tokens else 0.0
    inv_rate = 1.0 / fit.prefill_tokens_per_s if fit.prefill_tokens_per_s else 0.0
    return _gap_model(np.array([fit.step_s_batch1, fit.slope_s_per_seq, inv_ref, inv_rate]), s)


def fit_steps(steps: StepSamples, ttfts: TtftSamples | None = None) -> StepFit:
    """Least-squares fit of the step model to gaps (and idle-engine TTFTs)."""
    use = steps.batch >= 1
    s = StepSamples(**{k: getattr(steps, k)[use] for k in steps.__dataclass_fields__})
    if len(s) < 8:
        raise ValueError("too few inter-token gaps to fit (need 8 with a decode batch)")
    idle = ttfts.alone if ttfts is not None else None
    t_obs = ttfts.ttft_s[idle] if ttfts is not None and idle is not None else np.zeros(0)
    t_unc = ttfts.uncached_tokens[idle] if ttfts is not None and idle is not None else t_obs
    med = float(np.median(s.gap_s / s.steps))
    # each level's gaps weigh as one block (the busiest level must not drown the others),
    # and the idle TTFTs as one more, so a few of them still inform the prefill rate
    groups, inverse, counts = np.unique(s.group, return_inverse=True, return_counts=True)
    w_gap = 1.0 / (med * np.sqrt(len(groups) * counts[inverse]))
    w_ttft = 1.0 / (max(float(np.median(t_obs)), med) * np.sqrt(len(t_obs))) if len(t_obs) else 0

    def residuals(x: np.ndarray) -> np.ndarray:
        r_gap = (_gap_model(x, s) - s.gap_s) * w_gap
        if not len(t_obs):
            return np.asarray(r_gap, dtype=np.float64)
        r_ttft = (x[4] + t_unc * x[3] - t_obs) * w_ttft
        return np.concatenate([r_gap, r_ttft])

    b1 = s.gap_s[(s.batch == 1) & (s.steps == 1) & (s.prefill_tokens == 0)]
    s1_0 = float(np.median(b1)) if len(b1) else med
    x0 = np.array([s1_0, 0.0, 0.0, 0.0, 0.0])
    lower = np.zeros(5)
    lower[0] = 1e-9
    upper = np.array([np.inf, np.inf, 1e-3, np.inf, np.inf])
    scale = np.array([s1_0, s1_0 / 10, 1e-5, 1e-5, s1_0])
    res = least_squares(residuals, x0, bounds=(lower, upper), loss="linear", x_scale=scale,
                        method="trf")
    x = res.x
    ctx_ref = 1.0 / x[2] if x[2] > 1.0 / _MAX_CTX_REF else 0.0
    rate = 1.0 / x[3] if x[3] > 0 else 0.0
    fit = StepFit(float(x[0]), float(x[1]), float(ctx_ref), float(rate),
                  float(x[4]) if len(t_obs) else 0.0, len(s), len(t_obs), float(res.cost), ())
    return replace(fit, groups=_groups(fit, s, ttfts))


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
            mean_pred_ttft_s=float(fit.ttft_overhead_s + inv_rate
                                   * ttfts.uncached_tokens[tm].mean())
            if has_t and ttfts is not None and tm is not None else None,
        ))
    return tuple(out)
