"""The fit's own uncertainty: refits of the twin on block-bootstrap draws of its data.

``analysis.fit.resample`` draws the fitted levels' step records and requests again
(time windows within each level, with replacement); each draw is fitted the way
``calibrate`` fitted the whole (``fit``: the records' fit and the histogram's prefill
rate where it applies) and turned into a profile. The refits are cheap (a fit is a
fraction of a second); predicting with them is what costs, so ``calibrate`` predicts
the held-out level once per refit, each with its own engine seed
(``replay.twin._holdout``): their spread is the fit's and the twin's sampling spread
together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from analysis.fit import StepFit, StepSamples, TtftSamples, resample
from replay.servers.sim import SimProfile

__all__ = ["REFITS", "refit_profiles"]

REFITS = 5
"""Bootstrap refits predicted at the held-out level (each one twin run)."""
_TRIES = 3
"""A draw that cannot be fitted (too few clean gaps in it) is drawn again this often."""


def refit_profiles(steps: StepSamples, ttfts: TtftSamples,
                   fit: Callable[[StepSamples, TtftSamples], StepFit],
                   to_profile: Callable[[StepFit], dict[str, Any]],
                   n: int = REFITS, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` profiles, each fitted to one bootstrap draw of ``steps`` and ``ttfts``
    (fewer where draws cannot be fitted). Deterministic for ``seed``."""
    rng = np.random.default_rng([seed, 35])
    out: list[dict[str, Any]] = []
    for _ in range(n * _TRIES):
        if len(out) == n:
            break
        s, t = resample(steps, ttfts, rng)
        try:
            profile = to_profile(fit(s, t))
            # a draw that does not pin a figure down (a prefill rate of 1e17 tokens/s) is
            # no twin: it is drawn again, not predicted with (that was a traceback)
            SimProfile.model_validate(profile)
        except ValueError:  # pydantic's ValidationError is one
            continue
        out.append(profile)
    return out
