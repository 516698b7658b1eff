"""Each trap of issue 15, built from synthetic records with a known truth: the
numbers and the verdict must say what is true."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import (
    Comparison,
    assess_run,
    compare_runs,
    read_run,
    read_runs,
)
from analysis.judge import DEFAULT_RULES, analyse_run
from tests.analysis.builders import make_run, rec, synth_records

WINDOW = (10.0, 110.0)  # builders.manifest's window; drain 5 s


def _head(c: Comparison, level: int = 0) -> Any:
    (ratios,) = c.levels[level].ratios.values()
    return next(r for r in ratios if r.metric == "interactivity.p90")


def _arms(tmp_path: Path, a: list[dict[str, Any]], b: list[dict[str, Any]], users: int,
          **kw: Any) -> Comparison:
    make_run(tmp_path / "a", a, label="auto", run_id="a", load=_load(users))
    make_run(tmp_path / "b", b, label="fast", run_id="b", load=_load(users),
             server_info={"vllm_config": _cfg("fast")})
    return compare_runs(read_runs([tmp_path]), **kw)


def _load(users: int, **kw: Any) -> dict[str, Any]:
    return {"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5, **kw}


def _cfg(backend: str) -> dict[str, Any]:
    from tests.analysis.builders import config
    return config(backend)


def test_drain_cuts_are_incomplete_misses_and_censored(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=10, tpot=0.01, ttft=0.2)
    for r in records[-4:]:  # the last request of each of 4 users: cut at the drain's end
        r.update(status="incomplete", first_token_s=None, last_token_s=None,
                 chunk_times_s=[], chunk_tokens=[], output_tokens=0, end_s=115.0,
                 sent_s=108.0, due_s=108.0)
    s = analyse_run(read_run(make_run(tmp_path, records, load=_load(4))))
    assert s.counts.incomplete == 4 and s.counts.in_window == 40
    assert s.counts.failure_share == pytest.approx(0.1)
    assert s.counts.incomplete_rate == pytest.approx(0.1)
    assert all(not g.meets for g in s.goodput)  # 10% > 5%: every tier fails
    # TTFT of the cut requests is at least 7 s: the P99 cannot be read exactly
    assert s.ttft.censored == 4 and "p99" in s.ttft.bounds and s.ttft.p99 is not None
    assert s.ttft.p99 >= 7.0 * 0.9
    assert s.validity is not None
    assert "failures" in {r.code for r in s.validity.reasons}


def test_tokens_of_failed_and_cut_requests_count_in_throughput(tmp_path: Path) -> None:
    base = [rec(0, chunk_times_s=[11.0, 12.0], chunk_tokens=[1, 9])]
    cut = rec(1, status="incomplete", last_token_s=None, output_tokens=5,
              chunk_times_s=[12.0, 13.0], chunk_tokens=[1, 4])
    err = rec(2, status="error", error_kind="disconnect", output_tokens=3,
              chunk_times_s=[13.0, 14.0], chunk_tokens=[2, 1])
    s = analyse_run(read_run(make_run(tmp_path, base + [cut, err])))
    assert s.output_tok_s == pytest.approx((10 + 5 + 3) / 100.0)
    assert s.decode_tok_s == pytest.approx((9 + 4 + 2) / 100.0)


def test_forty_percent_failures_fail_every_tier_and_the_verdict_names_them(
    tmp_path: Path,
) -> None:
    records = synth_records(users=8, per_user=10, tpot=0.005, ttft=0.1, errors=32)
    make_run(tmp_path / "r", records, load=_load(8))
    c = compare_runs(read_runs([tmp_path]))
    s = c.levels[0].arms["auto"]
    assert s.counts.failure_share == pytest.approx(0.4)
    assert all(not g.meets for g in s.goodput)
    assert all(row.bracket.kind == "below" for row in c.capacity)
    assert "40%" in c.verdict and "fails every SLO tier" in c.verdict


def test_two_requests_per_arm_are_not_established(tmp_path: Path) -> None:
    a = [rec(i, user=i, last_token_s=11.0 + i + 1.0) for i in range(2)]
    b = [rec(i, user=i, last_token_s=11.0 + i + 0.3) for i in range(2)]
    c = _arms(tmp_path, a, b, users=2)
    r = _head(c)
    assert not r.established
    assert c.levels[0].evidence["fast"] is not None
    assert "not established" in c.verdict and ", established (" not in c.verdict


def test_one_user_two_repeats_is_not_established_with_the_reason(tmp_path: Path) -> None:
    for i in range(2):
        make_run(tmp_path / f"a{i}", synth_records(users=1, per_user=40, tpot=0.02, ttft=0.2,
                                                   seed=i),
                 label="auto", run_id=f"a{i}", load=_load(1))
        make_run(tmp_path / f"b{i}", synth_records(users=1, per_user=40, tpot=0.01, ttft=0.2,
                                                   seed=10 + i),
                 label="fast", run_id=f"b{i}", load=_load(1),
                 server_info={"vllm_config": _cfg("fast")})
    c = compare_runs(read_runs([tmp_path]))
    lv = c.levels[0]
    assert not lv.single_run
    r = _head(c)
    assert r.ratio == pytest.approx(2.0, rel=0.15)
    assert not r.established
    reason = lv.evidence["fast"]
    assert reason is not None and "2 users across 2 runs" in reason and "fewer than 4" in reason
    assert "not established" in c.verdict and "fewer than 4" in c.verdict


def test_a_real_difference_with_enough_users_is_established(tmp_path: Path) -> None:
    a = synth_records(users=8, per_user=10, tpot=0.02, ttft=0.2, seed=1)
    b = synth_records(users=8, per_user=10, tpot=0.01, ttft=0.2, seed=2)
    c = _arms(tmp_path, a, b, users=8)
    r = _head(c)
    assert r.established and r.better and r.ratio == pytest.approx(2.0, rel=0.1)
    assert f"{r.ratio:.2f}x faster" in c.verdict and "established (the 95%" in c.verdict
    assert "do not cover drift between runs" in c.verdict


def test_same_backend_with_noise_is_not_established(tmp_path: Path) -> None:
    for seed in range(3):
        root = tmp_path / str(seed)
        a = synth_records(users=6, per_user=10, tpot=0.01, ttft=0.2, seed=seed)
        b = synth_records(users=6, per_user=10, tpot=0.01, ttft=0.2, seed=100 + seed)
        c = _arms(root, a, b, users=6)
        assert not any(r.established for r in c.levels[0].ratios["fast"]), seed


def test_an_invalid_run_never_establishes(tmp_path: Path) -> None:
    a = synth_records(users=8, per_user=10, tpot=0.02, ttft=0.2, seed=1)
    b = synth_records(users=8, per_user=10, tpot=0.01, ttft=0.2, seed=2)
    make_run(tmp_path / "a", a, label="auto", run_id="a", load=_load(8))
    make_run(tmp_path / "b", b, label="fast", run_id="b", load=_load(8),
             server_info={"vllm_config": _cfg("fast")},
             server_watch={"server_died": True, "detail": "exit code 1"})
    c = compare_runs(read_runs([tmp_path]))
    r = _head(c)
    assert r.sure and not r.established and "server_died" in (r.not_established or "")
    assert c.validity.verdict == "invalid" and c.verdict.startswith("INVALID")


def test_no_request_in_the_window_is_invalid_and_names_the_cause(tmp_path: Path) -> None:
    # 4 warmup requests still running when the window ends (README's 32-user example)
    records = [rec(i, user=i, sent_s=5.0, due_s=5.0, first_token_s=None, last_token_s=None,
                   status="incomplete", output_tokens=0, end_s=115.0, phase="warmup")
               for i in range(4)]
    v = assess_run(read_run(make_run(tmp_path, records, load=_load(4))))
    assert v.verdict == "invalid"
    (r,) = [r for r in v.reasons if r.code == "window_empty"]
    assert "warmup" in r.message and "4" in r.message
    assert "thinking" not in r.message  # a named cause, not the fallback


def test_users_thinking_through_the_window_name_the_think_time_cap(tmp_path: Path) -> None:
    # one request each, ended before the window; the next turns were due after it
    records = [rec(i, user=i, sent_s=1.0, due_s=1.0, first_token_s=1.5, last_token_s=2.0,
                   end_s=2.0, phase="warmup") for i in range(4)]
    v = assess_run(read_run(make_run(tmp_path, records, load=_load(4))))
    (r,) = [r for r in v.reasons if r.code == "window_empty"]
    assert r.severity == "invalid"
    assert "thinking through the whole window" in r.message
    assert "--think-time-cap" in r.message and "no turn due" not in r.message


def test_under_a_scenario_the_remedy_is_a_longer_run_not_a_think_time_cap(tmp_path: Path) -> None:
    # a scenario's rules fix the think times: --think-time-cap and --think-scale are not
    # open to its user, so the caveat names only --duration (both causes' texts)
    records = [rec(i, user=i, sent_s=1.0, due_s=1.0, first_token_s=1.5, last_token_s=2.0,
                   end_s=2.0, phase="warmup") for i in range(4)]
    empty = assess_run(read_run(make_run(tmp_path / "a", records, load=_load(4),
                                         scenario="agentx-v1")))
    early = assess_run(read_run(make_run(
        tmp_path / "b", [rec(i) for i in range(2)], scenario="agentx-v1",
        coverage={"lanes": 1, "lanes_done_before_window_end": 1})))
    for v, code in ((empty, "window_empty"), (early, "lanes_done_early")):
        (r,) = [r for r in v.reasons if r.code == code]
        assert "--duration" in r.message, r.message
        assert "--think-time-cap" not in r.message and "--think-scale" not in r.message


def test_lanes_that_stopped_early_are_flagged(tmp_path: Path) -> None:
    records = [rec(i) for i in range(2)]
    v = assess_run(read_run(make_run(
        tmp_path, records, coverage={"lanes": 1, "lanes_done_before_window_end": 1})))
    codes = {r.code: r.severity for r in v.reasons}
    assert codes["lanes_done_early"] == "invalid" and codes["window_thin"] == "caveat"


def _sim_metrics(lateness: float) -> list[dict[str, Any]]:
    return [{"t_s": t, "values": {
        "vllm_sim:engine_step_model_seconds_total": t * 0.5,
        "vllm_sim:engine_step_actual_seconds_total": t * 0.5 * (1 + lateness)}}
        for t in (0.0, 50.0, 120.0)]


@pytest.mark.parametrize(("lateness", "verdict"), [(0.5, "invalid"), (0.01, "valid")])
def test_a_late_simulator_is_invalid(tmp_path: Path, lateness: float, verdict: str) -> None:
    records = synth_records(users=4, per_user=10, tpot=0.01, ttft=0.2)
    run = read_run(make_run(tmp_path, records, metrics=_sim_metrics(lateness), simulated=True,
                            load=_load(4)))
    s = analyse_run(run)
    assert s.sim_lateness == pytest.approx(lateness)
    assert s.validity is not None and s.validity.verdict == verdict
    if verdict == "invalid":
        assert [r.code for r in s.validity.reasons] == ["sim_late"]


def test_a_cold_cache_is_a_caveat_naming_warmup(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=10, tpot=0.01, ttft=0.2)
    # expected reuse 800/1000-1800 tokens (~0.55); measured 10% then 40%: cold and warming
    metrics = [{"t_s": 10.0, "values": {"vllm:prefix_cache_hits_total": 0.0,
                                        "vllm:prefix_cache_queries_total": 0.0}},
               {"t_s": 60.0, "values": {"vllm:prefix_cache_hits_total": 100.0,
                                        "vllm:prefix_cache_queries_total": 1000.0}},
               {"t_s": 110.0, "values": {"vllm:prefix_cache_hits_total": 500.0,
                                         "vllm:prefix_cache_queries_total": 2000.0}}]
    s = analyse_run(read_run(make_run(tmp_path, records, metrics=metrics, load=_load(4))))
    assert s.prefix.measured_share == pytest.approx(0.25)
    assert s.prefix.measured_share_halves == pytest.approx((0.1, 0.4))
    assert s.validity is not None and s.validity.verdict == "caveats"
    codes = {r.code: r.message for r in s.validity.reasons}
    assert "--warmup" in codes["cache_cold"] and "--warmup" in codes["cache_warming"]


def test_client_health_thresholds(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=10, tpot=0.01, ttft=0.2)
    health = {"schedule_lag_p99_s": 0.2, "cpu_share": 0.97, "loop_lag_max_s": 2.0,
              "loop_lag_p99_s": 0.1}
    v = assess_run(read_run(make_run(tmp_path, records, client_health=health,
                                     load=_load(4))))
    codes = {r.code: r.severity for r in v.reasons}
    assert codes == {"client_schedule_lag": "caveat", "client_cpu": "caveat",
                     "client_loop_stall": "invalid"}
    assert v.verdict == "invalid"


def test_a_failure_burst_says_the_server_died(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=25, tpot=0.01, ttft=0.2, think=3.5)
    assert max(r["sent_s"] for r in records) < 110
    for r in records:
        if r["sent_s"] >= 10 + 75:
            r.update(status="error", error_kind="connect", first_token_s=None,
                     last_token_s=None, chunk_times_s=[], chunk_tokens=[], output_tokens=0)
    v = assess_run(read_run(make_run(tmp_path, records, load=_load(4))))
    codes = {r.code for r in v.reasons}
    assert {"failure_burst", "server_unreachable"} <= codes and v.verdict == "invalid"


def test_requests_a_short_drain_cut_are_no_failure_burst(tmp_path: Path) -> None:
    # the same run, the last quarter's requests still streaming when the drain ended
    # (seen on compare --search with --drain 5: "the server died or restarted" on a
    # serve-sim that was fine): a drain cut, said as one, not a dead server
    records = synth_records(users=4, per_user=25, tpot=0.01, ttft=0.2, think=3.5)
    cut = [r for r in records if r["sent_s"] >= 10 + 75]
    assert len(cut) >= 5
    for r in cut:
        r.update(status="incomplete", error_kind=None)
    v = assess_run(read_run(make_run(tmp_path, records, load=_load(4))))
    codes = {r.code: r.severity for r in v.reasons}
    assert "failure_burst" not in codes, v.reasons
    assert codes.get("drain_cut") == "caveat", v.reasons


def _refused(records: list[dict[str, Any]], which: list[int]) -> None:
    for i in which:
        records[i].update(status="error", error_kind="connect", first_token_s=None,
                          last_token_s=None, chunk_times_s=[], chunk_tokens=[], output_tokens=0)


def test_a_server_down_from_the_start_is_invalid_not_a_caveat(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=25, tpot=0.01, ttft=0.2, think=3.5)
    _refused(records, list(range(len(records))))
    v = assess_run(read_run(make_run(tmp_path, records, load=_load(4))))
    codes = {r.code: r.severity for r in v.reasons}
    assert codes.get("server_unreachable") == "invalid" and v.verdict == "invalid"


def test_one_refused_connection_is_only_a_caveat(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=25, tpot=0.01, ttft=0.2, think=3.5)
    in_window = [i for i, r in enumerate(records) if 10 <= r["sent_s"] < 110]
    _refused(records, in_window[:1])
    v = assess_run(read_run(make_run(tmp_path, records, load=_load(4))))
    codes = {r.code: r.severity for r in v.reasons}
    assert codes.get("connection_failures") == "caveat" and "server_unreachable" not in codes


def test_open_loop_levels_are_rates_not_users(tmp_path: Path) -> None:
    for rate in (0.5, 2.0):
        make_run(tmp_path / str(rate), synth_records(users=6, per_user=5, tpot=0.01 * rate,
                                                      ttft=0.2),
                 run_id=f"r{rate}", load_kind="rate",
                 load=_load(0, arrival="open", rate=rate))
    c = compare_runs(read_runs([tmp_path]))
    assert [lv.load.label for lv in c.levels] == ["0.5 sessions/s", "2 sessions/s"]
    assert all(lv.load.kind == "rate" for lv in c.levels)
    assert all(row.load_kind == "rate" and row.levels == [0.5, 2.0] for row in c.capacity)
    assert "users" not in c.verdict.replace("user lane", "")


def test_capacity_brackets_and_the_arms_ratio_bracket(tmp_path: Path) -> None:
    # interactivity falls with users; arm "fast" holds it twice as long
    for users in (2, 4, 8):
        for label, slow in (("auto", 1.0), ("fast", 0.5)):
            tpot = 0.002 * users * slow
            make_run(tmp_path / f"{label}{users}",
                     synth_records(users=users, per_user=12, tpot=tpot, ttft=0.2,
                                   seed=users),
                     label=label, run_id=f"{label}{users}", load=_load(users),
                     server_info={"vllm_config": _cfg(label)})
    c = compare_runs(read_runs([tmp_path]))
    rows = {r.arm: r for r in c.capacity if r.tier.floor_tok_s == 100}
    base, fast = rows["auto"], rows["fast"]
    # auto: 250, 125, 62.5 tok/s/user at 2, 4, 8 users; fast twice that
    assert (base.bracket.passed, base.bracket.failed) == (4, 8)
    assert (fast.bracket.passed, fast.bracket.failed) == (8, None)
    assert base.ratio is None and fast.ratio is not None
    assert (fast.ratio.low, fast.ratio.high, fast.ratio.verdict) == (1.0, None, "more")


def test_nested_bootstrap_drops_whole_runs() -> None:
    from analysis.metrics._stats import draw_counts

    clusters = np.array([0, 0, 0, 1, 1, 1])
    counts = draw_counts(6, 200, np.random.default_rng(0), clusters)
    one_run = (counts[:, :3].sum(axis=1) == 0) | (counts[:, 3:].sum(axis=1) == 0)
    assert 0.3 < one_run.mean() < 0.7  # half the replicates draw a single run twice
    assert (counts.sum(axis=1) == 6).all()


def test_rules_are_documented_defaults() -> None:
    assert DEFAULT_RULES.max_failure_share == 0.05
    assert DEFAULT_RULES.min_users == 4 and DEFAULT_RULES.min_requests == 20


def test_chunks_in_one_read_are_counted_and_merged_for_itl_over_reads(tmp_path: Path) -> None:
    # two chunks of 1 token each arrive in one read (same timestamp) every 0.1 s
    times = [11.0] + [11.0 + 0.1 * (i // 2 + 1) for i in range(8)]
    r = rec(0, output_tokens=9, last_token_s=times[-1], chunk_times_s=times,
            chunk_tokens=[1] * 9)
    s = analyse_run(read_run(make_run(tmp_path, [r])))
    assert s.chunks_same_read_share == pytest.approx(4 / 8)
    assert s.itl_reads is not None and s.itl_reads.count == 8
    assert s.itl_reads.p90 == pytest.approx(0.05)  # 0.1 s per read of 2 tokens
    assert s.itl.p90 == pytest.approx(0.1)  # per chunk: gaps of 0.1 and of 0


def test_drift_between_pooled_runs_is_inside_the_interval(tmp_path: Path) -> None:
    # each arm: a fast and a slow run (machine drift), arm b 15% slower in both;
    # within a run users barely differ, so only the runs carry the uncertainty
    for label, scale in (("auto", 1.0), ("fast", 1.15)):
        for i, drift in enumerate((1.0, 1.3)):
            make_run(tmp_path / f"{label}{i}",
                     synth_records(users=8, per_user=8, tpot=0.01 * scale * drift, ttft=0.2,
                                   seed=i + (10 if label == "fast" else 0)),
                     label=label, run_id=f"{label}{i}", load=_load(8),
                     server_info={"vllm_config": _cfg(label)})
    c = compare_runs(read_runs([tmp_path]))
    r = _head(c)
    assert r.ratio == pytest.approx(1 / 1.15, rel=0.05)
    assert r.ci is not None and r.ci[0] < 1 < r.ci[1]  # the runs' spread is in it
    assert not r.established
    assert "do not cover drift" not in c.verdict


def test_an_interrupted_run_is_a_caveat(tmp_path: Path) -> None:
    records = synth_records(users=4, per_user=10, tpot=0.01, ttft=0.2)
    records[-1].update(status="cancelled", error_kind="cancelled_interrupt", last_token_s=None)
    s = analyse_run(read_run(make_run(tmp_path, records, interrupted=True, load=_load(4))))
    assert s.counts.cancelled == 1 and s.counts.failure_share == 0.0
    assert s.validity is not None
    assert [r.code for r in s.validity.reasons] == ["run_interrupted"]


def test_client_imbalance_between_arms_blocks_a_verdict(tmp_path: Path) -> None:
    a = synth_records(users=8, per_user=10, tpot=0.02, ttft=0.2, seed=1)
    b = synth_records(users=8, per_user=10, tpot=0.01, ttft=0.2, seed=2)
    for r in b:  # arm b's client sent every request 80 ms late
        r["due_s"] = r["sent_s"] - 0.08
    c = _arms(tmp_path, a, b, users=8)
    codes = {r.code: r.severity for r in c.levels[0].validity.reasons}
    assert codes["client_imbalance"] == "invalid"
    assert codes["client_schedule_lag"] == "caveat"
    assert not _head(c).established and c.validity.verdict == "invalid"


def _steady(tpot: float, users: int = 16, per_user: int = 10) -> list[dict[str, Any]]:
    """Records whose TPOT varies by 0.1% between users, not at all within one."""
    out = []
    for u in range(users):
        tp = tpot * (1 + 0.001 * (u % 3))
        for j in range(per_user):
            sent = 10.0 + 5.0 * j + 0.1 * u
            out.append(rec(len(out), user=u, turn=j, sent_s=sent, output_tokens=21,
                           output_tokens_asked=21,
                           last_token_s=sent + 1.0 + 20 * tp))
    return out


def test_a_tiny_systematic_difference_is_not_established(tmp_path: Path) -> None:
    # arm b 1% slower in every request: the interval excludes 1, but 1% is
    # within what a machine drifts between two runs
    c = _arms(tmp_path, _steady(0.01), _steady(0.0101), users=16)
    r = _head(c)
    assert r.sure and not r.established
    assert r.not_established is not None and "below the 2%" in r.not_established
    c = _arms(tmp_path / "big", _steady(0.01), _steady(0.0105), users=16)
    assert _head(c).established  # 5% with the same evidence is


def test_a_cut_request_still_measures_its_decode_rate(tmp_path: Path) -> None:
    # the only request of the window was cut by the drain after 11 tokens at 0.1 s each
    times = [11.0 + 0.1 * i for i in range(11)]
    cut = rec(0, status="incomplete", output_tokens=11, output_tokens_asked=50,
              first_token_s=11.0, last_token_s=12.0, end_s=115.0, chunk_times_s=times,
              chunk_tokens=[1] * 11)
    s = analyse_run(read_run(make_run(tmp_path, [cut])))
    assert s.tpot.p50 == pytest.approx(0.1) and s.interactivity.p50 == pytest.approx(10.0)
    assert s.itl.count == 10
    assert s.e2e.count == 1 and s.e2e.bounds and s.e2e.p50 == pytest.approx(105.0)
    assert s.ttft.p50 == pytest.approx(1.0) and not s.ttft.bounds  # its first token came
