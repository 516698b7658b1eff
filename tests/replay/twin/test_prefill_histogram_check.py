"""``calibrate`` holds its fitted prefill against serve-sim's own
``vllm:request_prefill_time_seconds`` histogram (scraped by the client's poller), and
names a fit that the histogram contradicts. The truth is the profile this test wrote."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from analysis import read_run
from analysis.fit import prefill_check, ttft_samples
from replay.cli import main
from replay.servers.sim import SimServerProcess
from replay.twin import calibrate
from replay.twin._fitted_profile import step_budget
from replay.twin._misfit import misfit_warnings
from tests.replay.ab.conftest import profile_variant
from traces import generate, write_workload

pytestmark = pytest.mark.sim

_TIMING = {"step_s_batch1": 0.004, "step_s_batch64": 0.02}


def test_the_prefill_histogram_agrees_with_a_right_fit_and_names_a_wrong_one(
        tmp_path: Path) -> None:
    wl = tmp_path / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=6, seed=2, block_size=16,
                                max_context=4096, prompt_scale=0.05, think_scale=0.0005,
                                output_scale=0.1)
    write_workload(wl, header, sessions)
    noise = [0.9, 0.95, 1.0, 1.05, 1.2, 2.0]
    profile = profile_variant(tmp_path, backends={"auto": _TIMING, "latency_specialized": _TIMING},
                              prefill_tokens_per_s=20000.0, max_num_batched_tokens=512,
                              step_noise=noise, request_overhead_s=0.003)
    run = tmp_path / "u1"
    with SimServerProcess(str(profile), "auto") as srv:
        code = main(["run", "--target", srv.url, "--workload", str(wl), "--users", "1",
                     "--warmup", "1", "--duration", "10", "--drain", "10", "--quiet",
                     "--out", str(run), "--metrics-interval", "0.5"])
    assert code in (0, 3)
    cal = calibrate([str(run)])
    checks = cal.profile["calibration"]["prefill_histogram"]
    assert len(checks) == 1 and checks[0]["requests"] >= 10
    # one user: every request ran alone. The race: on a busy machine the client reads
    # tokens late, which the fit (client side) sees and the histogram (server side) does
    # not, so the right fit agrees within 15% on a quiet machine and was seen 23% off
    # on a loaded one; what holds either way is that it is far nearer than a fit 4x off
    right = checks[0]["relative_error"]
    assert abs(right) < 0.5
    data = read_run(run)
    t = ttft_samples(data.requests, chunk_tokens=step_budget(data.manifest))
    wrong = replace(cal.fit, prefill_tokens_per_s=cal.fit.prefill_tokens_per_s * 4)
    got = prefill_check(data.requests, data.metrics.t_s,
                        np.asarray(data.metrics.get("request_prefill_time_seconds_sum")),
                        np.asarray(data.metrics.get("request_prefill_time_seconds_count")),
                        wrong, t.uncached_tokens, t.alone, t.batch_at_send,
                        step_budget(data.manifest))
    assert got is not None and got.error < -0.5 and abs(got.error) > abs(right) + 0.25
    warned = misfit_warnings(cal.levels, wrong, [1], [(str(run), got)])
    assert any("vllm:request_prefill_time_seconds" in w for w in warned)


def test_prompts_of_one_size_take_the_prefill_rate_from_the_histogram(tmp_path: Path) -> None:
    """A decode workload: every prompt 1000 fresh tokens, so every idle TTFT is one
    size, and any split into overhead and prefill explains it (the records' fit read
    19,077 tok/s and 681 ms here). The server's prefill-time histogram excludes the overhead:
    the rate comes from it, the overhead from the TTFTs. Truth: 2,000 tok/s, 200 ms
    (long, so a loaded machine's late token reads, which the client-side overhead
    carries and the server's histogram does not, stay a few percent of it)."""
    wl = tmp_path / "wl.jsonl"
    header, sessions = generate("decode", sessions=2, input_tokens=1000, output_tokens=20,
                                requests_per_session=400, block_size=16, max_context=4096)
    write_workload(wl, header, sessions)
    noise = [0.9, 0.95, 1.0, 1.05, 1.2, 2.0]
    profile = profile_variant(tmp_path, backends={"auto": _TIMING, "latency_specialized": _TIMING},
                              prefill_tokens_per_s=2000.0, step_noise=noise,
                              request_overhead_s=0.2)
    run = tmp_path / "u1"
    with SimServerProcess(str(profile), "auto") as srv:
        code = main(["run", "--target", srv.url, "--workload", str(wl), "--users", "1",
                     "--warmup", "1", "--duration", "11", "--drain", "5", "--quiet",
                     "--out", str(run), "--metrics-interval", "0.5"])
    assert code in (0, 3)
    cal = calibrate([str(run)])
    doc = cal.profile
    assert doc["calibration"]["prefill_source"].startswith("vllm:request_prefill_time_seconds")
    # the fit's typical step is the noise's centre (about 1.05 here): within 15%
    # (the records-only split read 9.5x and 3.4x here: 19,077 tok/s and 681 ms)
    assert doc["prefill_tokens_per_s"] == pytest.approx(2000.0, rel=0.15)
    assert doc["request_overhead_s"] == pytest.approx(0.2, rel=0.15)
    (lv,) = cal.levels
    assert lv.mean_idle_ttft_s is not None and lv.mean_pred_idle_ttft_s is not None
    assert lv.mean_pred_idle_ttft_s == pytest.approx(lv.mean_idle_ttft_s, rel=0.1)
