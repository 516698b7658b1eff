"""The server's own account of its prefill: vLLM's ``request_prefill_time_seconds``
histogram (first scheduled to first token, per finished request), held against what
the fitted model says those requests' prefills took.

The histogram excludes the request overhead and the queue (``request_queue_time_seconds``)
that a client's TTFT includes, so it tells a slow prefill from a long overhead; the
records alone cannot, where few requests ran alone. Its sum and count are kept by the
poller in ``server_metrics.jsonl``; a window's delta covers the requests that finished
between the first and last scrape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.fit._model import StepFit
from analysis.schema import RequestColumns

__all__ = ["PrefillCheck", "overhead_given_rate", "prefill_check", "prefill_pinned"]

_MIN_REQUESTS = 10
_MIN_ALONE_SHARE = 0.8
"""The check is made where most requests ran alone: there a prefill step holds little
else (a busy engine's prefill also waits on others' chunks, which the model here does
not count)."""


@dataclass(frozen=True)
class PrefillCheck:
    """One run's histogram against the fit."""

    requests: int
    """Requests the histogram counted in the window (and the records matched)."""
    measured_s: float
    """Sum of their prefill times, as the server measured them."""
    predicted_s: float
    """What the fitted model says (decode share of the prefill steps included, times the
    noise mean)."""
    rate_tokens_per_s: float | None
    """The prefill rate the histogram implies with the fitted decode share and noise."""

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0 if self.measured_s else 0.0


def prefill_check(cols: RequestColumns, t_s: np.ndarray, prefill_sum: np.ndarray,
                  prefill_count: np.ndarray, fit: StepFit, uncached: np.ndarray,
                  alone: np.ndarray, batch_at_send: np.ndarray,
                  chunk_tokens: int | None) -> PrefillCheck | None:
    """The check over the scrapes' span, or None where it cannot be made (no histogram,
    too few requests, counts that do not match the records, a busy engine).

    ``uncached``, ``alone`` and ``batch_at_send`` are per record with a first token
    (``TtftSamples`` order: records with a send time and a first token)."""
    ok = np.isfinite(prefill_sum) & np.isfinite(prefill_count)
    if ok.sum() < 2:
        return None
    t, s, c = t_s[ok], prefill_sum[ok], prefill_count[ok]
    count = float(c[-1] - c[0])
    if count < _MIN_REQUESTS:
        return None
    has = np.isfinite(cols.first_token_s) & np.isfinite(cols.sent_s)
    end = np.where(np.isfinite(cols.end_s), cols.end_s, cols.last_token_s)[has]
    inside = (end > t[0]) & (end <= t[-1]) & (cols.status[has] == "ok")
    if abs(int(inside.sum()) - count) > max(1.0, 0.05 * count):
        return None  # another client, or requests the records do not hold
    if alone[inside].mean() < _MIN_ALONE_SHARE:
        return None
    unc = uncached[inside]
    chunks = np.ones(len(unc)) if chunk_tokens is None else np.maximum(
        np.ceil(unc / chunk_tokens), 1)
    decode = np.where(batch_at_send[inside] >= 1,
                      np.array([fit.step_s(b) for b in batch_at_send[inside]]), 0.0)
    decode_s = float((chunks * decode).sum()) * fit.noise_mean
    inv_rate = 1.0 / fit.prefill_tokens_per_s if fit.prefill_tokens_per_s else 0.0
    predicted = decode_s + float(unc.sum()) * inv_rate * fit.noise_mean
    measured = float(s[-1] - s[0])
    prefill_part = measured - decode_s
    rate = (float(unc.sum()) * fit.noise_mean / prefill_part
            if prefill_part > 0 and unc.sum() > 0 else None)
    return PrefillCheck(int(count), measured, predicted, rate)


def prefill_pinned(uncached: np.ndarray) -> bool:
    """Whether idle TTFTs can tell the prefill rate from the request overhead: enough of
    them, over uncached prompts of different sizes (the 90th percentile at least twice
    the 10th). Prompts all alike (a decode benchmark: fixed fresh input) give one TTFT
    size, which any split into overhead and prefill explains."""
    if len(uncached) < 5:
        return False
    lo, hi = np.percentile(uncached, [10, 90])
    return bool(hi > 0 and hi >= 2 * lo)


def overhead_given_rate(ttft_s: np.ndarray, uncached: np.ndarray, rate: float,
                        noise: tuple[float, ...] | None) -> float:
    """The request overhead of idle TTFTs once the prefill rate is known from the
    server's prefill-time histogram. That rate reads a sum (a mean prefill time, the
    noise's mean in it), so the overhead is the mean TTFT less that mean prefill: a
    median against a heavy-tailed noise's typical chunk read the overhead 18% low."""
    if not len(ttft_s) or rate <= 0:
        return 0.0
    q = np.asarray(noise) if noise else np.ones(2)
    mean_noise = float((q[:-1] + q[1:]).mean() / 2)  # as StepFit.noise_mean reads it
    prefill = uncached / rate * mean_noise
    return max(float(np.mean(ttft_s - prefill)), 0.0)
