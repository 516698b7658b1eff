"""Every metric on hand-built records, with the answers worked out by hand below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis import (
    SloTier,
    measure,
    read_run,
    summarize,
)
from analysis.judge import analyse_run
from analysis.metrics import pool
from tests.analysis.builders import make_run, rec

# Window [10, 110), 2 GPUs. Per record: sent, due, first, last, out, chunks (time, tokens).
RECORDS = [
    # r0 user 0: TTFT 1, from due 1.5, E2E 3, TPOT 2/4 = 0.5, ITL 0.5 x4
    rec(0, user=0, session="a", session_instance=0, turn=0, sent_s=10.0, due_s=9.5,
        first_token_s=11.0, last_token_s=13.0, output_tokens=5, output_tokens_asked=5,
        chunk_times_s=[11.0, 12.0, 13.0], chunk_tokens=[1, 2, 2],
        prompt_tokens=100, cached_tokens=40, expected_cached_tokens=50),
    # r1 user 0: TTFT 0.5, E2E 2.5, TPOT 2/2 = 1.0, ITL 1.0 x2
    rec(1, user=0, session="a", session_instance=0, turn=1, sent_s=20.0,
        first_token_s=20.5, last_token_s=22.5, output_tokens=3, output_tokens_asked=3,
        chunk_times_s=[20.5, 22.5], chunk_tokens=[1, 2],
        prompt_tokens=200, expected_cached_tokens=150),
    # r2 user 1: one output token: TTFT 2, from due 3, E2E 2, no TPOT
    rec(2, user=1, session="c", session_instance=1, turn=0, sent_s=30.0, due_s=29.0,
        first_token_s=32.0, last_token_s=32.0, output_tokens=1, output_tokens_asked=1,
        chunk_times_s=[32.0], chunk_tokens=[1], prompt_tokens=300),
    # r3 user 1: HTTP 500
    rec(3, user=1, session="c", session_instance=1, turn=1, sent_s=40.0, status="error",
        error_kind="http_500", http_status=500, first_token_s=None, last_token_s=None,
        output_tokens=0),
    # r4 user 1: sent before the window (warmup): excluded everywhere
    rec(4, user=1, session="w", session_instance=0, turn=3, sent_s=5.0, phase="warmup",
        first_token_s=6.0, last_token_s=7.0, output_tokens=3, output_tokens_asked=3,
        chunk_times_s=[6.0, 6.5, 7.0], chunk_tokens=[1, 1, 1]),
    # r5 user 2: timeout
    rec(5, user=2, session="d", turn=0, sent_s=50.0, status="timeout",
        error_kind="timeout_itl", first_token_s=None, last_token_s=None, output_tokens=0),
    # r6 user 0: sent in the window, ends after it: TTFT 3, E2E 7, TPOT 4/7,
    # ITL 0.5, 1.5, then a 5-token chunk 2 s later: 0.4 x5
    rec(6, user=0, session="b", session_instance=1, turn=0, sent_s=105.0,
        first_token_s=108.0, last_token_s=112.0, output_tokens=8, output_tokens_asked=9,
        chunk_times_s=[108.0, 108.5, 110.0, 112.0], chunk_tokens=[1, 1, 1, 5],
        prompt_tokens=100),
]
METRICS = [
    {"t_s": 0.0, "values": {"vllm:prefix_cache_hits_total": 0.0,
                            "vllm:prefix_cache_queries_total": 0.0,
                            "vllm:spec_decode_num_drafts_total": 0.0,
                            "vllm:spec_decode_num_accepted_tokens_total": 0.0}},
    {"t_s": 60.0, "values": {"vllm:prefix_cache_hits_total": 300.0,
                             "vllm:prefix_cache_queries_total": 600.0}},
    {"t_s": 120.0, "values": {"vllm:prefix_cache_hits_total": 900.0,
                              "vllm:prefix_cache_queries_total": 1200.0,
                              "vllm:spec_decode_num_drafts_total": 1200.0,
                              "vllm:spec_decode_num_accepted_tokens_total": 3600.0}},
]
TIERS = (SloTier(floor_tok_s=1.5, ttft_s=2.0), SloTier(floor_tok_s=1.0, ttft_s=5.0))


@pytest.fixture()
def summary(tmp_path: Path):
    run = read_run(make_run(tmp_path, RECORDS, metrics=METRICS, gpu_count=2,
                            window={"start_s": 10.0, "end_s": 110.0}))
    return analyse_run(run, tiers=TIERS)


def test_ttft_from_sent_and_from_due(summary) -> None:
    # ok requests sent in the window: r0, r1, r2, r6
    assert summary.ttft.count == 4
    assert summary.ttft.mean == pytest.approx((1 + 0.5 + 2 + 3) / 4)
    assert summary.ttft.p50 == pytest.approx(1.5)  # between 1 and 2
    assert summary.ttft_due.p50 == pytest.approx((1.5 + 3) / 2)  # [0.5, 1.5, 3, 3]


def test_e2e_and_tpot(summary) -> None:
    assert summary.e2e.p50 == pytest.approx((2.5 + 3) / 2)  # [2, 2.5, 3, 7]
    assert summary.tpot.count == 3  # r2 has one token
    tpots = sorted([0.5, 1.0, 4 / 7])
    assert summary.tpot.p50 == pytest.approx(4 / 7)
    # linear P90 of 3 values: position 1.8 between 4/7 and 1.0
    assert summary.tpot.p90 == pytest.approx(tpots[1] + 0.8 * (tpots[2] - tpots[1]))


def test_interactivity_is_one_over_p90_tpot(summary) -> None:
    assert summary.interactivity.p90 == pytest.approx(1 / summary.tpot.p90)
    assert summary.interactivity.p50 == pytest.approx(7 / 4)
    assert summary.interactivity.mean == pytest.approx((2 + 1 + 7 / 4) / 3)
    # user 0: (4 + 2 + 7) tokens after the first over (2 + 2 + 4) s of decode;
    # user 1 has no multi-token request, so only one user is in the sample
    assert summary.interactivity_user.count == 1
    assert summary.interactivity_user.p90 == pytest.approx(13 / 8)


def test_itl_counts_each_token_of_a_chunk(summary) -> None:
    assert summary.itl.count == 13  # 4 + 2 + 7 tokens after the first
    assert summary.itl.mean == pytest.approx(8 / 13)  # total decode time / gaps
    assert summary.itl.p50 == pytest.approx(0.5)  # 0.4 x5, 0.5 x5, 1.0 x2, 1.5


def test_throughputs_count_tokens_inside_the_window(summary) -> None:
    # decode tokens arriving in [10, 110): r0 4, r1 2, r6 1 (the chunk at 108.5);
    # r4's tokens came before the window, r6's at 110 and 112 after it
    assert summary.window_s == 100.0
    assert summary.decode_tok_s == pytest.approx(7 / 100)
    assert summary.decode_tok_s_per_gpu == pytest.approx(7 / 100 / 2)
    assert summary.output_tok_s == pytest.approx((5 + 3 + 1 + 2) / 100)
    # uncached prompt tokens: 100-40 (server cached) + 200-150 (expected) + 300 + 100
    assert summary.prefill_tok_s == pytest.approx(510 / 100)


def test_errors_never_enter_latency_and_are_counted(summary) -> None:
    c = summary.counts
    assert (c.total_records, c.in_window, c.ok, c.error, c.timeout) == (7, 6, 4, 1, 1)
    assert c.by_error_kind == {"http_500": 1, "timeout_itl": 1}
    assert c.error_rate == pytest.approx(1 / 6)
    assert c.timeout_rate == pytest.approx(1 / 6)
    assert c.output_mismatch == 1  # r6 asked 9, got 8


def test_schedule_lag_and_session_latency(summary) -> None:
    assert summary.schedule_lag.count == 6
    assert summary.schedule_lag.mean == pytest.approx((0.5 + 1.0) / 6)
    # only session a qualifies (started in window, all ok, user moved on): 22.5 - 10
    assert summary.session_latency.count == 1
    assert summary.session_latency.p50 == pytest.approx(12.5)


def test_goodput(summary) -> None:
    strict, loose = summary.goodput
    # r2 has one output token: no interactivity, so it is left out of the shares
    # that judge it (5 of the 6 requests), never counted as fast
    assert strict.unrated == loose.unrated == 1
    assert summary.counts.no_interactivity == 1
    # strict (>= 1.5 tok/s, TTFT from due <= 2 s): only r0 of 5 rated requests;
    # no user meets it (user 0 has r6 at 3 s)
    assert strict.requests == pytest.approx(1 / 5)
    assert strict.users == pytest.approx(0.0)
    # loose: r0, r1, r6 meet; user 0 only (user 1 failed r3, user 2 timed out)
    assert loose.requests == pytest.approx(3 / 5)
    assert loose.fast_share == pytest.approx(3 / 5)
    assert loose.ttft_share == pytest.approx(4 / 6)  # r2's TTFT still counts
    assert loose.users == pytest.approx(1 / 3)


def test_prefix_reuse_expected_reported_measured(summary) -> None:
    p = summary.prefix
    assert p.prompt_tokens == 900  # 100 + 200 + 300 + 100 + 100 + 100
    assert p.expected_share == pytest.approx(200 / 900)
    assert p.reported_share == pytest.approx(40 / 900)
    # counters interpolated at 10 and 110: hits 50 -> 800, queries 100 -> 1100
    assert p.measured_hits == pytest.approx(750)
    assert p.measured_share == pytest.approx(0.75)


def test_acceptance_length_is_measured(summary) -> None:
    # drafts 0 -> 1200 and accepted 0 -> 3600 over 120 s: deltas over the window 1000, 3000
    assert summary.speculation.acceptance_length == pytest.approx(1 + 3000 / 1000)


def test_without_counters_acceptance_is_none(tmp_path: Path) -> None:
    s = analyse_run(read_run(make_run(tmp_path, RECORDS)))
    assert s.speculation.acceptance_length is None
    assert s.prefix.measured_share is None


def test_empty_window_gives_none_not_zero(tmp_path: Path) -> None:
    s = analyse_run(read_run(make_run(tmp_path, RECORDS,
                                      window={"start_s": 500.0, "end_s": 600.0})))
    assert s.ttft.p90 is None and s.interactivity.p90 is None
    assert s.decode_tok_s is None and s.output_tok_s is None
    assert s.goodput[0].requests is None


def test_pooling_repeats_keeps_users_apart(tmp_path: Path) -> None:
    a = measure(read_run(make_run(tmp_path / "a", RECORDS)))
    b = measure(read_run(make_run(tmp_path / "b", RECORDS, run_id="run2")))
    p = pool([a, b])
    assert p.n_users == 6
    s = summarize(p, tiers=TIERS)
    assert s.ttft.count == 8 and s.ttft.groups == 4  # users 0 and 1 of each run
    assert s.window_s == 200.0
    assert s.decode_tok_s == pytest.approx(14 / 200)
    assert s.interactivity_user.count == 2
    assert np.isclose(s.ttft.p50, 1.5)
