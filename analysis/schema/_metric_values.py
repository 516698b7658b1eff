"""Which ``/metrics`` values are believable: the one rule the writer and the reader share.

Prometheus text may legally say ``NaN`` or ``+Inf``, and a broken exporter may say
``-5`` or ``1e308``. Every ``vllm:`` sample the tool reads is a count, a sum of
seconds or tokens, or a usage share: none is negative, and none reaches
:data:`MAX_METRIC_VALUE` (a million tokens a second for thirty years is 1e15). A
value outside that is kept as missing, its name listed in the sample's ``dropped``
and named in a caveat of the run (``analysis.judge``), never stored as if true and
never written as a JSON ``null`` that would make the run unreadable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["MAX_METRIC_VALUE", "split_metric_values"]

MAX_METRIC_VALUE = 1e15
"""The largest believable value of any server metric the tool reads."""


def _believable(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and 0.0 <= value <= MAX_METRIC_VALUE


def split_metric_values(values: Mapping[str, object]) -> tuple[dict[str, float], list[str]]:
    """``values`` as (the believable ones, the sorted names of the others): a null read
    back from an older file, a non-finite, negative or absurd number."""
    kept = {k: float(v) for k, v in values.items() if _believable(v)}  # type: ignore[arg-type]
    return kept, sorted(k for k in values if k not in kept)
