"""The thin-window warning: its estimate from the workload's own think times and
output lengths, and the fix it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.cli._warmup import MIN_WINDOW_REQUESTS, window_advice
from traces import Request, Session, WorkloadHeader, write_workload


def _workload(path: Path, thinks: list[float], output: int = 30) -> Path:
    reqs = tuple(Request(prompt_tokens=64, output_tokens=output, think_time_s=t,
                         new_block_ids=(i,)) for i, t in enumerate(thinks))
    write_workload(path, WorkloadHeader(source="test", block_size=64),
                   [Session(id="s0", requests=reqs)])
    return path


def test_long_mean_think_times_warn_and_name_a_cap_that_fixes_them(tmp_path: Path) -> None:
    # mean think 100.5 s (one 300-s pause in three): 4 users x 30 s see ~1 request
    wl = _workload(tmp_path / "w.jsonl", [1.0, 0.5, 300.0])
    text = window_advice(wl, 4, 30)
    assert text is not None and "about 1 request" in text and "mean think time 100.5 s" in text
    cap = int(text.split("--think-time-cap ")[1].split()[0])
    # the cap it names gives the window enough requests
    assert window_advice(wl, 4, 30, think_time_cap_s=cap) is None
    assert 4 * 30 / (sum(min(t, cap) for t in [1.0, 0.5, 300.0]) / 3 + 1.0) >= MIN_WINDOW_REQUESTS


def test_a_window_too_short_for_any_cap_asks_for_a_longer_duration(tmp_path: Path) -> None:
    wl = _workload(tmp_path / "w.jsonl", [0.5, 0.5], output=60)  # 2 s per request
    text = window_advice(wl, 1, 5)
    assert text is not None and "lengthen --duration to about 50 s" in text
    assert window_advice(wl, 1, 50) is None


@pytest.mark.parametrize("think_scale", [0.001, 1.0])
def test_enough_requests_say_nothing(tmp_path: Path, think_scale: float) -> None:
    wl = _workload(tmp_path / "w.jsonl", [0.1, 0.1, 0.1])
    assert window_advice(wl, 16, 60, think_scale=think_scale) is None


def test_under_a_scenario_the_fix_is_a_longer_window_never_a_think_cap(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario refuses --think-time-cap and --think-scale (it sets the think times),
    so the warning `run` prints before the load names what the scenario allows."""
    from replay.cli._cmd_run import _advise
    from replay.load import RunSettings

    wl = _workload(tmp_path / "w.jsonl", [1.0, 0.5, 300.0])  # the case above: a cap fixes it
    text = window_advice(wl, 4, 30, scenario="agentx-mvp")
    assert text is not None and "--think-time-cap" not in text
    need = int(text.split("--duration to about ")[1].split()[0])
    assert 4 * need / (sum([1.0, 0.5, 300.0]) / 3 + 1.0) >= MIN_WINDOW_REQUESTS
    assert "scenario agentx-mvp sets the think times" in text
    _advise(str(wl), RunSettings(target="http://127.0.0.1:1", users=4, duration_s=30,
                                 warmup_s=0.0, scenario="agentx-mvp"))
    err = capsys.readouterr().err
    assert "the 30 s window would see about 1 request" in err
    assert "--think-time-cap" not in err and "lengthen --duration" in err
