"""Issue 24's traps on hand-built records with a known truth: short answers, answers
too short to have an interactivity, drift between repeats, requests cut by the drain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis import SloTier, compare_runs, read_run, read_runs
from analysis.judge import DEFAULT_RULES, analyse_run
from tests.analysis.builders import config, make_run, rec, synth_records


def _load(users: int, **kw: Any) -> dict[str, Any]:
    return {"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5, **kw}


def _put(root: Path, name: str, label: str, records: list[dict[str, Any]], users: int,
         **kw: Any) -> None:
    make_run(root / name, records, label=label, run_id=name, load=_load(users),
             server_info={"vllm_config": config(label)}, **kw)


def _ratio(c: Any, metric: str, level: int = 0) -> Any:
    (ratios,) = c.levels[level].ratios.values()
    return next(r for r in ratios if r.metric == metric)


def _cut_answers(records: list[dict[str, Any]], every: int, keep: int) -> int:
    """Every ``every``-th ok record got only ``keep`` of its tokens (a proxy that cut
    max_tokens); returns how many were cut."""
    n = 0
    for i, r in enumerate(records):
        if i % every == 0 and r["status"] == "ok":
            r.update(output_tokens=keep, chunk_times_s=r["chunk_times_s"][:keep],
                     chunk_tokens=r["chunk_tokens"][:keep],
                     last_token_s=r["chunk_times_s"][keep - 1])
            n += 1
    return n


# --- 1. output-length mismatches ------------------------------------------------------

def test_short_answers_in_front_of_one_arm_make_the_comparison_invalid(tmp_path: Path) -> None:
    # the trap: every answer of arm b a third as long as asked (89 asked, 30 got)
    a = synth_records(users=8, per_user=10, tpot=0.01, ttft=0.2, out_tokens=89, seed=1)
    b = synth_records(users=8, per_user=10, tpot=0.01, ttft=0.2, out_tokens=89, seed=2)
    assert _cut_answers(b, every=1, keep=30) == 80
    _put(tmp_path, "a", "auto", a, 8)
    _put(tmp_path, "b", "fast", b, 8)
    c = compare_runs(read_runs([tmp_path]))
    assert c.levels[0].arms["fast"].counts.output_mismatch == 80
    assert c.validity.verdict == "invalid"
    (reason,) = [r for r in c.validity.reasons if r.code == "output_mismatch"]
    assert reason.severity == "invalid" and "80 of 80" in reason.message
    assert "INVALID" in c.verdict and "max_tokens" in c.verdict
    e2e = _ratio(c, "e2e.p90")
    assert e2e.sure and not e2e.established  # 0.34x, but not of the same work
    assert not any(r.established for r in c.levels[0].ratios["fast"])


def test_a_few_short_answers_are_a_caveat_and_block_only_length_sensitive_ratios(
    tmp_path: Path,
) -> None:
    a = synth_records(users=8, per_user=25, tpot=0.02, ttft=0.2, out_tokens=40, seed=1)
    b = synth_records(users=8, per_user=25, tpot=0.01, ttft=0.2, out_tokens=40, seed=2)
    assert _cut_answers(b, every=20, keep=39) == 10  # 10 of 200 = 5%: above 1%, below 10%
    _put(tmp_path, "a", "auto", a, 8)
    _put(tmp_path, "b", "fast", b, 8)
    c = compare_runs(read_runs([tmp_path]))
    (reason,) = [r for r in c.validity.reasons if r.code == "output_mismatch"]
    assert reason.severity == "caveat" and "10 of 200" in reason.message
    assert c.validity.verdict == "caveats"
    head = _ratio(c, "interactivity.p90")
    assert head.sure and not head.established
    assert head.not_established is not None and "another length" in head.not_established
    assert not _ratio(c, "e2e.p90").established
    assert _ratio(c, "ttft.p90").not_established is None  # TTFT is not length-sensitive


def test_one_stray_short_answer_is_below_the_caveat_share(tmp_path: Path) -> None:
    b = synth_records(users=8, per_user=25, tpot=0.01, ttft=0.2, out_tokens=40, seed=2)
    b[0].update(output_tokens=39, chunk_times_s=b[0]["chunk_times_s"][:39],
                chunk_tokens=b[0]["chunk_tokens"][:39])  # 1 of 200 = 0.5%
    s = analyse_run(read_run(make_run(tmp_path, b, load=_load(8))))
    assert s.counts.output_mismatch == 1
    assert s.validity is not None and "output_mismatch" not in {r.code for r in
                                                                s.validity.reasons}


def test_streamed_tokens_beyond_the_usage_count_are_a_mismatch(tmp_path: Path) -> None:
    recs = [rec(i, user=i % 4, chunk_times_s=[11.0 + i, 11.5 + i], chunk_tokens=[1, 9])
            for i in range(10)]
    for r in recs[:2]:  # 2 of 10 (above 10%): usage says 8, 10 streamed
        r["output_tokens_asked"] = r["output_tokens"] = 8
    s = analyse_run(read_run(make_run(tmp_path, recs, load=_load(4))))
    assert s.counts.output_mismatch == 2
    assert s.validity is not None
    assert {r.code: r.severity for r in s.validity.reasons}["output_mismatch"] == "invalid"


def test_thresholds_are_rules() -> None:
    assert DEFAULT_RULES.output_mismatch_caveat == 0.01
    assert DEFAULT_RULES.output_mismatch_invalid == 0.10


# --- 2. requests without an interactivity ---------------------------------------------

def test_one_token_answers_are_never_counted_as_fast(tmp_path: Path) -> None:
    # the trap: an arm that cannot exceed 100 tok/s/user, 30% of its answers one token
    records = synth_records(users=10, per_user=10, tpot=0.01, ttft=0.2, seed=3)
    for r in records[::10] + records[3::10] + records[7::10]:
        r.update(output_tokens=1, output_tokens_asked=1, chunk_times_s=r["chunk_times_s"][:1],
                 chunk_tokens=[1], last_token_s=r["first_token_s"])
    fast = SloTier(floor_tok_s=300.0, ttft_s=5.0)
    slow = SloTier(floor_tok_s=50.0, ttft_s=5.0)
    s = analyse_run(read_run(make_run(tmp_path, records, load=_load(10))), tiers=(fast, slow))
    g_fast, g_slow = s.goodput
    assert s.counts.no_interactivity == 30
    assert g_fast.unrated == 30 and g_fast.fast_share == 0.0 and g_fast.requests == 0.0
    assert not g_fast.meets
    assert g_slow.fast_share == pytest.approx(1.0) and g_slow.requests == pytest.approx(1.0)
    assert g_slow.ttft_share == pytest.approx(1.0)  # the 30 still count for TTFT


def test_two_tokens_in_one_read_have_no_tpot(tmp_path: Path) -> None:
    recs = [rec(i, user=i % 4, output_tokens=2, output_tokens_asked=2,
                first_token_s=11.0 + i, last_token_s=11.0 + i,
                chunk_times_s=[11.0 + i, 11.0 + i], chunk_tokens=[1, 1]) for i in range(8)]
    recs.append(rec(8, user=0, output_tokens=11, output_tokens_asked=11, sent_s=29.5,
                    first_token_s=30.0, last_token_s=31.0))
    s = analyse_run(read_run(make_run(tmp_path, recs, load=_load(4))),
                    tiers=(SloTier(floor_tok_s=5.0, ttft_s=5.0),))
    assert s.tpot.count == 1 and s.tpot.p50 == pytest.approx(0.1)  # never 0
    assert s.counts.no_interactivity == 8
    (g,) = s.goodput
    assert g.unrated == 8 and g.fast_share == pytest.approx(1.0)
    # users 1-3 only had one-read answers: no interactivity to judge, left out
    assert g.users == pytest.approx(1.0)


# --- 3. drift between repeats ---------------------------------------------------------

def _repeats(root: Path, label: str, tpots: list[float], seed: int, users: int = 12) -> None:
    for i, tp in enumerate(tpots):
        make_run(root / f"{label}{i}",
                 synth_records(users=users, per_user=8, tpot=tp, ttft=0.2, seed=seed + i),
                 label=label, run_id=f"{label}{i}", load=_load(users),
                 server_info={"vllm_config": config(label)},
                 started_at=f"2026-12-01T0{i}:00:00Z")


def test_an_arm_restarted_slower_between_repeats_is_flagged_and_not_established(
    tmp_path: Path,
) -> None:
    # the trap: arm fast's second repeat 1.3x slower; the baseline sits in between
    _repeats(tmp_path, "auto", [0.0075, 0.0075], seed=0)
    _repeats(tmp_path, "fast", [0.006, 0.0078], seed=10)
    c = compare_runs(read_runs([tmp_path]))
    lv = c.levels[0]
    drifts = [d for d in lv.drift if d.metric == "interactivity.p90"]
    assert [d.arm for d in drifts] == ["fast"]
    d = drifts[0]
    assert d.factor == pytest.approx(1.3, rel=0.12) and d.explained < d.factor
    assert d.repeats[0].value > d.repeats[1].value  # in the order the runs started
    codes = {r.code: r.severity for r in c.validity.reasons}
    assert codes["repeat_drift"] == "caveat"
    assert "arm 'fast'" in next(r.message for r in c.validity.reasons
                                if r.code == "repeat_drift")
    head = _ratio(c, "interactivity.p90")
    assert not head.established
    if head.sure:
        assert head.not_established is not None and "drift" in head.not_established


def test_drift_too_small_to_flip_a_clear_difference_leaves_it_established(
    tmp_path: Path,
) -> None:
    _repeats(tmp_path, "auto", [0.02, 0.02], seed=0)
    _repeats(tmp_path, "fast", [0.006, 0.0078], seed=10)
    c = compare_runs(read_runs([tmp_path]))
    assert any(d.arm == "fast" for d in c.levels[0].drift)
    assert "repeat_drift" in {r.code for r in c.validity.reasons}
    assert _ratio(c, "interactivity.p90").established


def test_repeats_that_agree_show_no_drift(tmp_path: Path) -> None:
    _repeats(tmp_path, "auto", [0.01, 0.01], seed=0)
    _repeats(tmp_path, "fast", [0.005, 0.005], seed=10)
    c = compare_runs(read_runs([tmp_path]))
    assert c.levels[0].drift == []
    assert "repeat_drift" not in {r.code for r in c.validity.reasons}


def test_a_repeat_pair_on_the_other_side_of_one_flips_the_verdict() -> None:
    from analysis.judge import RepeatValue, drift_flip

    def vals(*xs: float) -> list[RepeatValue]:
        return [RepeatValue(run_id=str(i), value=x, ci=None) for i, x in enumerate(xs)]

    # pooled 1.15x faster, but the slow repeat of the other arm is slower than the base
    assert drift_flip(1.15, vals(140.0), vals(165.0, 119.0), 0.02) == pytest.approx(
        (119 / 140, 165 / 140))
    assert drift_flip(2.0, vals(100.0), vals(190.0, 240.0), 0.02) is None
    assert drift_flip(1.5, vals(100.0), vals(101.0, 200.0), 0.02) is not None  # within 2%


# --- shown in the report ---------------------------------------------------------------

def test_the_report_shows_drift_mismatch_cuts_and_the_claimed_acceptance(
    tmp_path: Path,
) -> None:
    import html as html_lib

    from analysis import render_report

    _repeats(tmp_path, "auto", [0.0075, 0.0075], seed=0)
    _repeats(tmp_path, "fast", [0.006, 0.0078], seed=10)
    runs = read_runs([tmp_path])
    for r in runs:  # the simulator's claim, as /server_info carries it
        assert r.manifest.server_info is not None
        r.manifest.server_info["sim_acceptance_length"] = 6.0
    c = compare_runs(runs)
    assert c.levels[0].arms["fast"].speculation.claimed_acceptance_length == 6.0
    page = html_lib.unescape(render_report(c, runs, charts=False))
    assert "repeat_drift" in page and "arm 'fast' at 12 users" in page
    assert "speculative acceptance length (claimed by server/profile)" in page
    assert "no interactivity" in page and "tokens the incomplete requests received" in page
    text = " ".join(page.split())
    for needle in ("Above 1% of a run's ok requests", "above 10% the run is invalid",
                   "20 tok/s plus 10 s", "on pace", "Drift between repeats"):
        assert needle in text, needle


def test_a_drain_cut_on_pace_is_censored_and_a_stalled_one_is_a_miss(tmp_path: Path) -> None:
    # 20 requests at 100 tok/s; 2 more cut by the drain at 115 s: one kept 100 tok/s
    # until the cut (on pace), one stalled after its first tokens (a miss)
    records = synth_records(users=4, per_user=5, tpot=0.01, ttft=0.2, seed=5)
    records.append(rec(50, user=0, status="incomplete", sent_s=105.0, first_token_s=105.2,
                       last_token_s=115.0, end_s=115.0, output_tokens=980,
                       output_tokens_asked=5000, chunk_times_s=[105.2, 115.0],
                       chunk_tokens=[1, 979]))
    records.append(rec(51, user=1, status="incomplete", sent_s=105.0, first_token_s=105.2,
                       last_token_s=105.4, end_s=115.0, output_tokens=20,
                       output_tokens_asked=5000, chunk_times_s=[105.2, 105.4],
                       chunk_tokens=[1, 19]))
    tier = SloTier(floor_tok_s=50.0, ttft_s=5.0)
    s = analyse_run(read_run(make_run(tmp_path, records, load=_load(4))), tiers=(tier,))
    (g,) = s.goodput
    assert s.counts.incomplete == 2
    assert (s.counts.cut_received, s.counts.cut_asked) == (1000, 10000)
    assert g.censored == 1  # the on-pace one: in no share
    assert g.failure_share == pytest.approx(1 / 21)  # the stalled one is a miss
    assert g.fast_share == pytest.approx(20 / 21)
    assert s.validity is not None
    (reason,) = [r for r in s.validity.reasons if r.code == "drain_cut"]
    assert "--drain" in reason.message and "1,000 of the 10,000 tokens asked" in reason.message
