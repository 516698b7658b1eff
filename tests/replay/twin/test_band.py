"""The twin's prediction interval from its held-out error, and where it stands against
the measured bracket (issue 23: modelled, next to and never instead of the measured)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import SloTier
from analysis.judge import bracket_of
from replay.cli import main
from replay.twin import (
    calibration_error,
    interval_text,
    outside_measured,
    widened_tiers,
)
from tests.analysis.report.builders import make_sweep
from tests.support.twin import plan_argv as _plan
from tests.support.twin import twin_file as _twin


def _holdouts(*errs: tuple[float, float]) -> dict[str, object]:
    return {"holdouts": [{"users": 8, "relative_error": {"p90_interactivity": i,
                                                         "p90_ttft_s": t}} for i, t in errs]}


def test_the_largest_held_out_miss_is_the_band() -> None:
    band = calibration_error(_holdouts((0.05, -0.3), (-0.12, 0.1)))
    assert band is not None and band.holdouts == 2
    # as factors either way: -12% is 1/0.88, -30% is 1/0.7 (the measurement was larger)
    assert band.interactivity == pytest.approx(1 / 0.88) and band.ttft == pytest.approx(1 / 0.7)
    under = calibration_error(_holdouts((-0.74, 0.26)))
    assert under is not None and under.interactivity == pytest.approx(1 / 0.26)
    assert under.ttft == pytest.approx(1.26)
    assert calibration_error({"runs": 3}) is None and calibration_error(None) is None


def test_widened_tiers_are_stricter_and_looser_by_the_band() -> None:
    band = calibration_error(_holdouts((0.25, 0.5)))
    assert band is not None
    strict, loose = widened_tiers(SloTier(floor_tok_s=100, ttft_s=3), band)
    assert strict.floor_tok_s == pytest.approx(125) and strict.ttft_s == pytest.approx(2)
    assert loose.floor_tok_s == pytest.approx(80) and loose.ttft_s == pytest.approx(4.5)


@pytest.mark.parametrize(("twin", "measured", "outside"), [
    ([(4, True), (8, False)], [(2, True), (16, False)], False),   # inside
    ([(16, True), (32, False)], [(2, True), (8, False)], True),   # passes what failed
    ([(1, True), (2, False)], [(4, True), (8, False)], True),     # fails what passed
    ([(4, True)], [(4, True)], False),                            # both "at least 4"
])
def test_outside_measured(twin: list[tuple[float, bool]], measured: list[tuple[float, bool]],
                          outside: bool) -> None:
    assert outside_measured(bracket_of(twin), bracket_of(measured)) is outside


def test_interval_text_runs_from_strict_pass_to_loose_fail() -> None:
    strict, loose = bracket_of([(4, True), (8, False)]), bracket_of([(8, True), (16, False)])
    assert interval_text(strict, loose) == "from 4 users to below 16 users"
    assert interval_text(bracket_of([(1, False)]), bracket_of([(4, True)])) == \
        "from below the lowest level to beyond the highest level tried"


def test_plan_twin_shows_the_interval_and_the_measured_bracket(
    tmp_path: Path, wl: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    # a twin of the measured runs' model, fitted on their backend (plan shows only those)
    twin = _twin(tmp_path, calibration={**_holdouts((0.1, 0.2)), "decode_backend": "auto"},
                 model="tiny-llama")
    slow = make_sweep(tmp_path / "slow", arms={"auto": 0.2}, levels=(1, 4))  # fails at 1
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1:6",
                      "--levels", "3", "--slo", "10:5", str(slow)))
    got = capsys.readouterr()
    out = got.out
    assert code == 0, got.err
    assert "calibration: held-out miss up to 1.10x in P90 interactivity, 1.20x in P90 TTFT" in out
    # the twin's 1 and 2 users see too few requests in 30 s to tell (indeterminate)
    assert ("tier 10:5: capacity at least 6 users; indeterminate at 1, 2 (too few requests "
            "to tell) [modelled (twin)]") in out
    assert "tier 10:5: with the calibration error, from " in out
    assert "tier 10:5: measured auto: below 1 user (measured)" in out
    assert "caveat: tier 10:5: the twin's capacity (at least 6 users; indeterminate" in out
    # stored beside the results; the report shows it after the measured capacity
    assert (slow / "twin-plan.json").is_file()
    assert main(["report", str(slow)]) in (0, 3)
    html = (slow / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="twin">'):]
    section = section[:section.index("</section>")]
    assert "Twin estimate (modelled)" in section and "MODELLED, not measured" in section
    assert "<td>auto: below 1 user</td><td>at least 6 users" in section
    assert "outside auto&#39;s measured bracket" in section or \
        "outside auto's measured bracket" in section
    assert "<svg" in section  # the measured points and the twin's curve


def test_plan_twin_without_a_holdout_says_it_is_unchecked(
    tmp_path: Path, wl: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    # 40 requests per user: 6 (the default) at 1 user cannot tell met from failed
    fast = make_sweep(tmp_path / "fast", arms={"auto": 0.001}, levels=(1, 4, 16), per_user=40)
    twin = _twin(tmp_path, calibration={"runs": 3, "decode_backend": "auto"},
                 model="tiny-llama")
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1:6",
                      "--levels", "3", "--slo", "10:5", str(fast)))
    got = capsys.readouterr()
    out = got.out
    assert code == 0, got.err
    assert "no prediction interval: the twin has no held-out check" in out
    assert "tier 10:5: measured auto: at least 16 users (measured)" in out
    assert "caveat:" not in out
