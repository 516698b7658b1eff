"""The twin in simulated time agrees with a real-time serve-sim run of the same profile
and workload: request counts, P90 interactivity, P90 TTFT and throughput within noise,
and per request with what serve-sim's truth log says it did."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis import measure, read_run, summarize
from replay.load import RunSettings, run_load
from replay.servers.sim import SimServerProcess, load_profile
from replay.twin import load_workload, simulate_level
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

USERS, WARMUP, DURATION, DRAIN = 8, 3.0, 24.0, 10.0


def _within(a: float | None, b: float | None, rel: float, slack: float = 0.0) -> bool:
    assert a is not None and b is not None
    return abs(a - b) <= rel * abs(b) + slack


@pytest.mark.slow  # minutes on the 2-core machine: started first under xdist
def test_twin_matches_a_real_time_serve_sim_run(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=8, turns=8, new_blocks=12,
                       output=60, think_s=1.5, shared_blocks=4)
    profile = load_profile("small").model_copy(update={"prefill_tokens_per_s": 40_000.0})
    profile_path = tmp_path / "p.json"
    profile_path.write_text(profile.model_dump_json())
    truth_path = tmp_path / "truth.jsonl"
    settings = RunSettings(target="http://127.0.0.1:1", users=USERS, duration_s=DURATION,
                           warmup_s=WARMUP, drain_s=DRAIN, metrics_interval_s=None, seed=5)
    with SimServerProcess(str(profile_path), truth_path=str(truth_path)) as srv:
        real_dir = asyncio.run(run_load(settings.model_copy(update={"target": srv.url}), wl,
                                        tmp_path / "real"))
    real = summarize(measure(read_run(real_dir)), bootstrap=False)
    twin = simulate_level(profile, load_workload(wl), USERS, DURATION, WARMUP, drain_s=DRAIN,
                          seed=5, out_dir=tmp_path / "twin").summary

    # what serve-sim did per request: TTFT (arrival to first token) and TPOT from its log
    truth = [orjson.loads(line) for line in truth_path.read_bytes().splitlines()]
    assert truth
    twin_recs = [orjson.loads(x) for x in (tmp_path / "twin" / "requests.jsonl")
                 .read_bytes().splitlines()]
    done = [t for t in truth if t["status"] == "ok" and t["output_tokens"] > 1]
    truth_ttft = [(t["first_token_ns"] - t["arrival_ns"]) / 1e9 for t in done]
    truth_tpot = [(t["emit_ns"][-1] - t["first_token_ns"]) / 1e9 / (t["output_tokens"] - 1)
                  for t in done]
    ok = [r for r in twin_recs if r["status"] == "ok" and r["output_tokens"] > 1]
    twin_ttft = [r["first_token_s"] - r["sent_s"] for r in ok]
    twin_tpot = [(r["last_token_s"] - r["first_token_s"]) / (r["output_tokens"] - 1) for r in ok]
    for name, a, b, rel, slack in (("ttft", twin_ttft, truth_ttft, 0.25, 0.01),
                                   ("tpot", twin_tpot, truth_tpot, 0.08, 0.0)):
        for q in (50, 90):
            assert _within(float(np.percentile(a, q)), float(np.percentile(b, q)), rel,
                           slack), (name, q)
    hit_twin = sum(r["cached_tokens"] for r in ok) / sum(r["prompt_tokens"] for r in ok)
    hit_truth = sum(t["cached_tokens"] for t in done) / sum(t["prompt_tokens"] for t in done)
    assert hit_twin == pytest.approx(hit_truth, abs=0.05)

    print(f"real vs twin: requests {real.counts.in_window} / {twin.counts.in_window}, "
          f"P90 interactivity {real.interactivity.p90:.2f} / {twin.interactivity.p90:.2f}, "
          f"P90 TTFT {real.ttft_due.p90:.4f} / {twin.ttft_due.p90:.4f}, "
          f"output tok/s {real.output_tok_s:.1f} / {twin.output_tok_s:.1f}")
    assert real.counts.in_window > 40
    assert _within(twin.counts.in_window, real.counts.in_window, 0.12, 2)
    assert twin.counts.ok == twin.counts.in_window
    assert _within(twin.interactivity.p90, real.interactivity.p90, 0.10)
    assert _within(twin.interactivity.p50, real.interactivity.p50, 0.10)
    assert _within(twin.ttft_due.p90, real.ttft_due.p90, 0.25, 0.02)
    assert _within(twin.output_tok_s, real.output_tok_s, 0.12)
    assert twin.prefix.reported_share == pytest.approx(real.prefix.reported_share, abs=0.05)
