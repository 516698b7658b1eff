"""Comparison of arms: grouping, pooling, ratios with intervals, verdict sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import compare_runs, read_runs
from analysis.schema import FairnessError, LoadLevel
from tests.analysis.builders import config, make_run, synth_records


def _arm(root: Path, backend: str, users: int, tpot: float, seed: int, run_id: str,
         **kw: object) -> None:
    recs = synth_records(users=users, per_user=12, tpot=tpot, ttft=0.2, seed=seed)
    end = max(r["last_token_s"] for r in recs) + 1.0
    make_run(root / run_id, recs, label=backend, run_id=run_id,
             server_info={"vllm_config": config(backend, **kw)},
             load={"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5},
             window={"start_s": 10.0, "end_s": end})


def test_twice_as_fast_decode_gives_ratio_two_with_interval(tmp_path: Path) -> None:
    # same seed: identical jitter, so every TPOT of B is exactly half of A's
    _arm(tmp_path, "latency_specialized", 8, 0.01, seed=1, run_id="b8")
    _arm(tmp_path, "auto", 8, 0.02, seed=1, run_id="a8")
    c = compare_runs(read_runs([tmp_path]))
    assert c.baseline == "auto" and c.arms == ["auto", "latency_specialized"]
    (level,) = c.levels
    r = {x.metric: x for x in level.ratios["latency_specialized"]}
    p90 = r["interactivity.p90"]
    assert p90.ratio == pytest.approx(2.0)
    assert p90.ci is not None and p90.ci[0] < 2.0 < p90.ci[1] and p90.ci[0] > 1.0
    assert p90.better and p90.sure
    tp = r["tpot.p90"]
    assert tp.ratio == pytest.approx(0.5) and tp.better  # lower TPOT is better
    dec = r["decode_tok_s_per_gpu"]
    s = level.arms
    assert dec.ratio == pytest.approx(
        s["latency_specialized"].decode_tok_s_per_gpu / s["auto"].decode_tok_s_per_gpu)
    lo, hi = p90.ci
    assert (f"latency_specialized vs auto, P90 interactivity: at 8 users: 2.00x faster "
            f"[{lo:.2f}x \u2013 {hi:.2f}x], established") in c.verdict


def test_equal_arms_are_not_distinguishable(tmp_path: Path) -> None:
    _arm(tmp_path, "auto", 8, 0.02, seed=1, run_id="a")
    _arm(tmp_path, "latency_specialized", 8, 0.02, seed=2, run_id="b")
    c = compare_runs(read_runs([tmp_path]))
    p90 = next(x for x in c.levels[0].ratios["latency_specialized"]
               if x.metric == "interactivity.p90")
    assert p90.ci[0] < 1.0 < p90.ci[1] and not p90.sure
    assert "not distinguishable" in c.verdict


def test_repeats_pool_and_levels_split(tmp_path: Path) -> None:
    for i, users in enumerate((2, 4, 4)):
        _arm(tmp_path, "auto", users, 0.02, seed=i, run_id=f"a{i}")
        _arm(tmp_path, "latency_specialized", users, 0.01, seed=i, run_id=f"b{i}")
    c = compare_runs(read_runs([tmp_path]))
    assert [lv.load for lv in c.levels] == [LoadLevel(value=2), LoadLevel(value=4)]
    four = c.levels[1].arms["auto"]
    assert four.runs == ["a1", "a2"]
    assert four.ttft.count == 2 * 4 * 12 and four.ttft.groups == 8
    assert {r.arm for r in c.capacity} == {"auto", "latency_specialized"}


def test_unfair_arms_refuse_unless_overridden(tmp_path: Path) -> None:
    _arm(tmp_path, "auto", 4, 0.02, seed=1, run_id="a")
    _arm(tmp_path, "latency_specialized", 4, 0.01, seed=1, run_id="b",
         parallel_config__tensor_parallel_size=4)
    runs = read_runs([tmp_path])
    with pytest.raises(FairnessError, match="tensor_parallel_size"):
        compare_runs(runs)
    c = compare_runs(runs, allow_unfair=True)
    assert c.fairness.overridden
    assert c.verdict.startswith("WARNING, UNFAIR COMPARISON")


def test_single_run_works(tmp_path: Path) -> None:
    _arm(tmp_path, "auto", 3, 0.02, seed=1, run_id="solo")
    c = compare_runs(read_runs([tmp_path / "solo"]))
    assert c.arms == ["auto"] and c.levels[0].ratios == {}
    assert c.verdict.startswith("Single arm 'auto'")
    assert c.fairness.fair


@pytest.mark.parametrize(("ci", "text"), [
    (None, "no interval"),
    ((1.82, 1.923), "[1.82x \u2013 1.92x]"),
    ((0.0, 90514.68), "no evidence"),
    ((0.05, 3.0), "no evidence"),
    ((0.5, float("inf")), "no evidence"),
    ((0.4, 3.9), "[0.40x \u2013 3.90x]"),
])
def test_ratio_intervals_that_say_nothing_are_printed_as_no_evidence(
    ci: tuple[float, float] | None, text: str,
) -> None:
    from analysis.judge import ratio_interval_text

    assert ratio_interval_text(ci) == text
