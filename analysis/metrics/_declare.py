"""What a metric is: one declaration holding its wording and how it is computed.

A :class:`Metric` says what a table, axis or methodology row shows (label, unit,
direction, definition) and how its value comes out of a run: a per-request
formula over the requests a selection picks (``per_request``), another sampler
over the window (per chunk, per user, per session), the inverse of another
distribution, or a scalar of the pooled samples. Declarations sit on the
summary fields they fill (``RunSummary``); the catalogue, the samples, the
summary and the report's tables are derived from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from analysis.metrics._derived import Latencies
from analysis.metrics._samples import Samples
from analysis.read import RunData
from analysis.schema import RequestColumns

__all__ = [
    "PERCENTILES", "Drawn", "Metric", "Sampler", "Window", "per_request",
]

PERCENTILES: tuple[str, ...] = ("p50", "p90", "p99")
"""The statistics a distribution's percentile keys take (as ``Distribution`` holds them)."""


@dataclass(frozen=True)
class Window:
    """Which requests a run's samples come from: the steady window and, per request,
    its user (as a dense code), whether it was sent in the window, ok or cut, its
    derived latencies and until when it ran."""

    run: RunData
    lat: Latencies
    start: float
    end: float
    found: bool
    user_code: np.ndarray
    n_users: int
    in_win: np.ndarray
    good: np.ndarray
    """Sent in the window and answered in full."""
    cut: np.ndarray
    """Sent in the window and cut short (incomplete: measured until the cut)."""
    ran_until: np.ndarray
    """When each request was last known running: its end, else the drain's end."""

    @property
    def requests(self) -> RequestColumns:
        return self.run.requests

    @property
    def decoding(self) -> np.ndarray:
        """Whose decode rate was measured: ok, or cut after tokens arrived."""
        both: np.ndarray = self.good | self.cut
        return both

    @property
    def timed(self) -> np.ndarray:
        """Sent in the window with a known send time (a lost request's is not known)."""
        out: np.ndarray = self.in_win & (self.requests.status != "lost")
        return out

    @property
    def cut_with_first(self) -> np.ndarray:
        """Cut after its first token came (its TTFT is exact)."""
        out: np.ndarray = self.cut & np.isfinite(self.requests.first_token_s)
        return out

    @property
    def cut_without_first(self) -> np.ndarray:
        """Cut before any token came (its TTFT is at least what it ran)."""
        out: np.ndarray = self.cut & ~np.isfinite(self.requests.first_token_s)
        return out


@dataclass(frozen=True)
class Drawn:
    """A metric's samples of one run: values with the user code of each, repeat counts
    (``weights``) and right-censored lower bounds where the metric has them."""

    values: np.ndarray
    groups: np.ndarray
    weights: np.ndarray | None = None
    censored: np.ndarray | None = None
    censored_groups: np.ndarray | None = None


Sampler = Callable[[Window], Drawn]
"""How a distribution's samples are drawn from a run's window."""

PerRequest = Callable[[Window], np.ndarray]
"""A value (or a mask) per request record of the run."""


def per_request(formula: PerRequest, of: PerRequest, *, also: PerRequest | None = None,
                bound: PerRequest | None = None, bound_of: PerRequest | None = None) -> Sampler:
    """Samples of a per-request ``formula`` over the requests ``of`` selects (finite values
    only), then those ``also`` selects (exact values of cut requests); ``bound`` over
    ``bound_of``: lower bounds of the requests cut before the value was seen."""

    def draw(w: Window) -> Drawn:
        values, pick = formula(w), of(w)
        v, g = values[pick], w.user_code[pick]
        keep = np.isfinite(v)
        v, g = v[keep], g[keep]
        if also is not None:
            more = also(w)
            v, g = np.concatenate([v, values[more]]), np.concatenate([g, w.user_code[more]])
        if bound is None or bound_of is None:
            return Drawn(v, g)
        cut = bound_of(w)
        return Drawn(v, g, censored=bound(w)[cut], censored_groups=w.user_code[cut])

    return draw


Scalar = Callable[[Samples], float | None]
"""A single value of a (pooled) sample, e.g. a throughput over the window."""


@dataclass(frozen=True)
class Metric:
    """One metric, declared once; ``key`` is the summary field it is declared on.

    Exactly one of ``sample`` (a distribution of its own samples), ``inverse_of``
    (the rate view of another distribution: pXX = 1 / pXX of it) or ``value`` (a
    scalar) says how it is computed; with none, the summary computes it in a part
    (the failure share, in the counts)."""

    label: str
    unit: str
    """Of the stored value: ``s``, ``tok/s``, ``tok/s/user``, ``tok/s/GPU``, ``share``."""
    higher_is_better: bool
    definition: str
    """One sentence: what is measured, as the methodology section states it."""
    sample: Sampler | None = None
    inverse_of: str | None = None
    value: Scalar | None = None
    shown: tuple[str, ...] = ()
    """The statistics of a distribution the report's detail table shows."""
    row: int | None = None
    """Where the report's detail table lists it (ascending); None: not listed there."""
    display: str | None = None
    """The unit a report shows a time in (``ms`` or ``s``); stored values are seconds."""
    key: str = ""

    @property
    def direction(self) -> str:
        """``higher is better`` or ``lower is better``."""
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def is_distribution(self) -> bool:
        """Summarised as a distribution (percentiles with intervals), not one value."""
        return self.sample is not None or self.inverse_of is not None
