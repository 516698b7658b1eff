"""The twin's stored prediction interval: it widens with the distance from the checked
level and for what-ifs, says extrapolated beyond what was checked, and ``plan --twin``
prints each tier's capacity as an interval with it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import load_profile
from replay.twin import PredictionInterval, interval_of
from tests.replay.conftest import make_workload


def _interval(**changes: object) -> PredictionInterval:
    base: dict[str, object] = dict(
        checked_users=8, max_measured_users=8, max_request_tokens=4000,
        miss={"p90_interactivity": 0.05, "p90_ttft_s": 0.2, "output_tok_s": 0.02},
        spread={"p90_interactivity": 0.01, "p90_ttft_s": 0.1, "output_tok_s": 0.01},
        requests=200, z=2.0, growth=1.0)  # a twin file from before the refits stored 1.0
    base.update(changes)
    return PredictionInterval(**base)  # type: ignore[arg-type]


def test_the_interval_widens_with_distance_and_for_a_what_if() -> None:
    pi = _interval()
    at = pi.half_width("p90_interactivity", 8)
    assert at == pytest.approx(0.05 + 2.0 * 0.01)
    assert pi.half_width("p90_interactivity", 2) == pytest.approx(at)  # below: no narrower
    assert pi.half_width("p90_interactivity", 16) == pytest.approx(2 * at)  # one doubling
    assert pi.half_width("p90_interactivity", 32) == pytest.approx(3 * at)
    assert pi.half_width("p90_interactivity", 8, what_if=True) == pytest.approx(2 * at)
    lo, hi = pi.bounds("p90_ttft_s", 1.0, 8)
    assert lo == pytest.approx(math.exp(-0.4)) and hi == pytest.approx(math.exp(0.4))
    assert pi.holds("p90_ttft_s", 1.0, 1.45, 8) and not pi.holds("p90_ttft_s", 1.0, 1.55, 8)
    assert pi.holds("p90_ttft_s", 1.0, 1.55, 16)  # twice as wide at twice the level


def test_extrapolated_beyond_four_times_the_largest_level_or_the_longest_request() -> None:
    pi = _interval()
    assert pi.extrapolated(32) == []
    assert pi.extrapolated(33) and "4x the largest measured level (8)" in pi.extrapolated(33)[0]
    why = pi.extrapolated(8, longest_request=5000)
    assert len(why) == 1 and "longer than any the twin was fitted on (4000)" in why[0]


def test_the_interval_round_trips_through_the_twin_file() -> None:
    pi = _interval(notes=["x"])
    assert interval_of({"interval": json.loads(json.dumps(pi.as_dict()))}) == pi
    assert interval_of({"holdouts": []}) is None
    assert interval_of(None) is None
    assert interval_of({"interval": {"unknown": 1}}) is None


def _twin(tmp_path: Path, pi: PredictionInterval) -> Path:
    data = json.loads(load_profile("small").model_dump_json())
    data["calibration"] = {"interval": pi.as_dict(), "holdouts": []}
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(data))
    return path


def test_plan_prints_capacity_as_an_interval_and_labels_extrapolation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=6, turns=6, new_blocks=8, output=40,
                       think_s=2.0, shared_blocks=2)
    pi = _interval(checked_users=2, max_measured_users=2, max_request_tokens=100000)
    code = main(["plan", "--twin", str(_twin(tmp_path, pi)), "--workload", str(wl),
                 "--users", "1:16", "--levels", "3", "--slo", "10:5", "--duration", "30",
                 "--warmup", "5", "--drain", "5", "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "the intervals below are nominal 90%" in out
    line = next(x for x in out.splitlines() if "prediction interval (nominal 90%)" in x)
    # the ladder's top (16 users) is beyond 4x the largest measured level (2): labelled
    assert line.startswith("tier 10:5: from ") and "(extrapolated)" in line
    assert "more than 4x the largest measured level (2)" in line
    pi_in = _interval(checked_users=4, max_measured_users=4, max_request_tokens=100000)
    main(["plan", "--twin", str(_twin(tmp_path, pi_in)), "--workload", str(wl), "--users",
          "1:16", "--levels", "3", "--slo", "10:5", "--duration", "30", "--warmup", "5",
          "--drain", "5", "--jobs", "1"])
    inside = next(x for x in capsys.readouterr().out.splitlines()
                  if "prediction interval (nominal 90%)" in x)
    assert "extrapolated" not in inside


def test_the_miss_counts_its_bias_only_and_ttft_widens_most_for_what_ifs_and_fleets() -> None:
    from replay.twin._interval import REPLICA_BY_METRIC, WHAT_IF_BY_METRIC

    # a twin with refits: miss and spread in quadrature, the miss's own sampling
    # noise (0.03 of its 0.05) taken out first: the bias left is 0.04
    pi = _interval(refits=5, growth=0.75, sampling={"p90_interactivity": 0.03},
                   what_if_by_metric=dict(WHAT_IF_BY_METRIC),
                   replica_by_metric=dict(REPLICA_BY_METRIC))
    at = pi.half_width("p90_interactivity", 8)
    assert at == pytest.approx(math.hypot(0.04, 2.0 * 0.01))
    # a miss smaller than its noise is all noise: the spread alone is left
    small = _interval(refits=5, sampling={"p90_interactivity": 0.2})
    assert small.half_width("p90_interactivity", 8) == pytest.approx(2.0 * 0.01)
    # a what-if: half a doubling for interactivity, a whole one for P90 TTFT
    assert pi.half_width("p90_interactivity", 8, what_if=True) == \
        pytest.approx(at * (1 + 0.75 * WHAT_IF_BY_METRIC["p90_interactivity"]))
    ttft = pi.half_width("p90_ttft_s", 8)
    assert pi.half_width("p90_ttft_s", 8, what_if=True) == \
        pytest.approx(ttft * (1 + 0.75 * WHAT_IF_BY_METRIC["p90_ttft_s"]))
    # 4 replicas of 8 users each: two doublings of the fleet, TTFT's count more
    assert pi.half_width("p90_ttft_s", 8, replicas=4) == \
        pytest.approx(ttft * (1 + 0.75 * 2 * REPLICA_BY_METRIC["p90_ttft_s"]))
    assert pi.half_width("p90_interactivity", 8, replicas=4) == \
        pytest.approx(at * (1 + 0.75 * 2 * REPLICA_BY_METRIC["p90_interactivity"]))
    assert REPLICA_BY_METRIC["p90_ttft_s"] > REPLICA_BY_METRIC["p90_interactivity"]
    # a twin file from before the per-metric doublings keeps its scalar ones
    old = _interval(refits=5, growth=0.75, what_if_doublings=1.0, replica_doublings=0.5)
    base = old.half_width("p90_interactivity", 8)
    assert old.half_width("p90_interactivity", 8, what_if=True) == pytest.approx(1.75 * base)
    assert old.half_width("p90_interactivity", 8, replicas=4) == pytest.approx(1.75 * base)


def test_a_noiseless_twin_still_gets_a_p90_ttft_spread() -> None:
    from replay.twin._interval import MIN_SPREAD, MIN_SPREAD_BY_METRIC, combine_spread

    # no spread over engine seeds (a twin without step noise): the floors apply
    assert combine_spread(0.0, 0.0, "p90_ttft_s") == MIN_SPREAD_BY_METRIC["p90_ttft_s"]
    assert combine_spread(0.0, 0.0, "p90_interactivity") == MIN_SPREAD
    assert MIN_SPREAD_BY_METRIC["p90_ttft_s"] > MIN_SPREAD
    # a measured spread above the floor stands
    assert combine_spread(0.3, 0.4, "p90_ttft_s") == pytest.approx(0.5)
