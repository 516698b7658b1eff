"""Moved: samples (``_samples``, ``_measure``), summaries (``_summary``) and the
window (``_window``). Import these names from ``analysis``; this module only
keeps older imports working while they move."""

from analysis._measure import measure
from analysis._samples import Samples, pool
from analysis._summary import (
    Goodput,
    PrefixReuse,
    RequestCounts,
    RunSummary,
    Speculation,
    summarize,
)
from analysis._window import counter_delta, steady_window

__all__ = ["Goodput", "PrefixReuse", "RequestCounts", "RunSummary", "Samples", "Speculation",
           "counter_delta", "measure", "pool", "steady_window", "summarize"]
