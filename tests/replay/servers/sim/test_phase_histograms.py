"""serve-sim's per-request phase histograms (vLLM's names, labels and bucket edges),
held against its truth log: every finished request's queue, prefill and decode times,
and the tokens of every engine step; and the client's poller keeps their sums and
counts in ``server_metrics.jsonl`` for ``calibrate``."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from replay.cli import main
from replay.client import parse_prometheus
from replay.servers.sim import SimServerProcess, TruthRecord, read_step_log, step_log_path
from traces import generate, write_workload

pytestmark = pytest.mark.sim

_NAMES = ("request_queue_time_seconds", "request_prefill_time_seconds",
          "request_decode_time_seconds", "request_time_per_output_token_seconds",
          "iteration_tokens_total")
"""vLLM's deprecated ``time_per_output_token_seconds`` is not among them: the vLLM this
simulator copies (tests/fixtures/vllm/metrics.txt) no longer exposes it."""


def test_phase_histograms_match_the_truth_log(tmp_path: Path) -> None:
    wl = tmp_path / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=4, seed=3, block_size=16,
                                max_context=4096, prompt_scale=0.05, think_scale=0.01,
                                output_scale=0.2)
    write_workload(wl, header, sessions)
    truth = tmp_path / "truth.jsonl"
    with SimServerProcess("small", "auto", truth_path=str(truth)) as srv:
        code = main(["run", "--target", srv.url, "--workload", str(wl), "--users", "2",
                     "--warmup", "0", "--duration", "3", "--drain", "10", "--quiet",
                     "--out", str(tmp_path / "run"), "--metrics-interval", "0.5"])
        assert code in (0, 3)
        text = urllib.request.urlopen(f"{srv.url}/metrics", timeout=10).read().decode()
    # the server is stopped: its truth log is complete and the scrape above saw all of it
    recs = [TruthRecord.model_validate_json(line) for line in truth.read_text().splitlines()]
    done = [r for r in recs if r.first_token_ns is not None and r.status == "ok"]
    assert done
    values = parse_prometheus(text)
    s = 1e9
    expect = {
        "request_queue_time_seconds": sum((r.scheduled_ns - r.queued_ns) / s for r in done),
        "request_prefill_time_seconds": sum((r.first_token_ns - r.scheduled_ns) / s
                                            for r in done),
        "request_decode_time_seconds": sum((r.emit_ns[-1] - r.first_token_ns) / s
                                           for r in done),
    }
    for name, want in expect.items():
        assert values[f"vllm:{name}_count"] == len(done), name
        assert values[f"vllm:{name}_sum"] == pytest.approx(want, rel=1e-6, abs=1e-6), name
    steps = read_step_log(step_log_path(str(truth)))
    emitting = [st for st in steps if st.emitted_tokens]
    assert values["vllm:iteration_tokens_total_count"] == len(emitting)
    # vLLM's labels and edges: a bucket line per edge, le between engine and model_name
    assert ('vllm:request_prefill_time_seconds_bucket{engine="0",le="7680.0",'
            'model_name="') in text
    assert 'vllm:iteration_tokens_total_bucket{engine="0",le="16384.0",' in text
    assert 'vllm:request_time_per_output_token_seconds_bucket{engine="0",le="80.0",' in text
    assert 'vllm:time_per_output_token_seconds' not in text
    # the poller kept every family's sum and count
    rows = [json.loads(line) for line in
            (tmp_path / "run" / "server_metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    kept = last["values"]
    for name in _NAMES:
        assert f"vllm:{name}_sum" in kept and f"vllm:{name}_count" in kept, name
