"""Retiming timestamp traces: slice, start offset, time scale, arrival counts."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

import pytest

from traces import TraceError, count_arrivals, import_azure, import_weka, retime


def _offsets(path: Path) -> list[float]:
    with open(path, newline="") as fh:
        stamps = [datetime.fromisoformat(r["TIMESTAMP"]) for r in csv.DictReader(fh)]
    return [(t - stamps[0]).total_seconds() for t in stamps]


def test_slice_start_and_scale_against_the_csv(sample_traces: Path) -> None:
    path = sample_traces / "azure" / "AzureLLMInferenceTrace_conv.csv"
    raw = _offsets(path)
    start, length, scale = raw[len(raw) // 3], 5.0, 0.5
    want = [(a - start) * scale for a in raw if start <= a < start + length]
    assert want  # the slice holds arrivals
    got = [s.requests[0].arrival_s for s in retime(import_azure(path).sessions,
                                                   time_scale=scale, start_s=start,
                                                   slice_s=length)]
    assert got == pytest.approx(want, abs=1e-6)
    assert max(got) < length * scale  # type: ignore[type-var]


def test_count_arrivals_in_a_window(sample_traces: Path) -> None:
    path = sample_traces / "azure" / "AzureLLMInferenceTrace_code.csv"
    raw = _offsets(path)
    sessions = list(import_azure(path).sessions)
    lo, hi = raw[10], raw[50]
    assert count_arrivals(sessions, lo, hi) == sum(lo <= a < hi for a in raw)
    assert count_arrivals(sessions, raw[-1] + 1, raw[-1] + 100) == 0


def test_closed_workloads_pass_unchanged(sample_traces: Path) -> None:
    sessions = list(import_weka(sample_traces / "weka").sessions)
    assert list(retime(sessions, time_scale=3, start_s=100, slice_s=1)) == sessions


@pytest.mark.parametrize(("kw", "field"), [({"time_scale": 0}, "time_scale"),
                                           ({"start_s": -1}, "start_s"),
                                           ({"slice_s": float("nan")}, "slice_s")])
def test_bad_controls_name_the_field(kw: dict[str, float], field: str) -> None:
    with pytest.raises(TraceError) as info:
        list(retime([], **kw))
    assert info.value.field == field
