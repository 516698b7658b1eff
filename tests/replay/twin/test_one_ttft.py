"""One TTFT: the held-out comparison measures TTFT from the schedule (first token minus
the time the request was due), as the SLO tiers and ``plan`` do; it was measured from
send, which drops the client's lateness the tiers count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.twin import measured_metrics
from tests.analysis.builders import make_run, synth_records


def test_held_out_ttft_is_from_the_schedule(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=30, tpot=0.02, ttft=0.1, seed=1)
    lag = 0.5  # every request sent half a second after it was due (a late client)
    for r in records:
        r["due_s"] = r["sent_s"] - lag
    run = make_run(tmp_path / "run", records,
                   load={"users": 4, "duration_s": 200, "warmup_s": 0, "drain_s": 5},
                   window={"start_s": 0.0, "end_s": 400.0})
    got = measured_metrics(run)
    from_due = np.array([r["first_token_s"] - r["due_s"] for r in records])
    from_send = from_due - lag
    assert got.p90_ttft_s is not None
    assert got.p90_ttft_s == pytest.approx(float(np.percentile(from_due, 90)), rel=0.05)
    assert got.p90_ttft_s > float(np.percentile(from_send, 90)) + 0.4
