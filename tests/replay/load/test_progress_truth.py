"""Progress that tells the truth: the time left is the schedule's (warmup + window), the
drain is shown apart as its cap; caveats name runs by their directory (auto-u8-r0), a
fleet's report title names every replica, the history view lands where -o says or in
the working directory, and counts agree with their nouns."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

from analysis import compare_runs, read_runs
from analysis.judge import Bracket
from analysis.report._decision import report_title
from replay.cli import main
from replay.load import LiveStats, render_lines
from replay.twin import interval_text
from tests.analysis.builders import make_run, rec, synth_records
from tests.analysis.report.builders import make_sweep


def _line(phase: str, elapsed: float, busy: int = 0) -> str:
    """The progress line ``elapsed`` seconds in, on a stopped clock: the figures are the
    schedule's exactly, however late this process runs."""
    now = 1000.0
    with mock.patch("replay.load._live.time", SimpleNamespace(monotonic=lambda: now)):
        stats = LiveStats(30.0, drain_s=541.0)  # a 30 s schedule, a drain for 10k tokens
        stats.t0 = now - elapsed
        stats.phase = phase
        stats.busy = lambda: busy
        return render_lines(stats.snapshot())[0]


def test_remaining_is_the_schedule_and_the_drain_is_its_cap_apart() -> None:
    line = _line("measure", 10.0)
    left = int(re.search(r"remaining (\d+)s", line).group(1))  # type: ignore[union-attr]
    assert left == 20  # 30 s schedule, 10 s gone: not 561 s
    assert "then the drain (until the window's requests finish, at most 541s)" in line
    drain = _line("drain", 31.0, busy=1)
    assert re.search(r"drain\s+elapsed 31s\s+remaining 540s at most", drain), drain
    assert "1 request still running" in drain
    ended = _line("drain", 31.0, busy=0)  # the drain ends with its last answer, not its cap
    assert re.search(r"remaining 0s \(no request still running", ended), ended
    assert "540s" not in ended


def test_caveats_name_the_run_directory_not_its_id(tmp_path: Path) -> None:
    # one request in the window: the few-requests caveat, said of the run by its name
    make_run(tmp_path / "runs" / "auto-u8-r0", [rec(0)], run_id="55dad2d09600")
    (c,) = [compare_runs(read_runs([tmp_path / "runs"]))]
    messages = [r.message for r in c.validity.reasons]
    assert messages and all(m.startswith("auto-u8-r0: ") for m in messages), messages
    assert not any("55dad2d09600" in m for m in messages)
    assert "55dad2d09600" in c.run_validity  # the stored verdicts keep the id as key


def test_a_fleet_report_title_names_every_replica(tmp_path: Path) -> None:
    replicas = [{"target": f"http://127.0.0.1:{p}", "model": "tiny-llama"} for p in (8101, 8102)]
    run = make_run(tmp_path / "fleet", synth_records(users=2, per_user=5, tpot=0.01, ttft=0.1),
                   label="", target="http://127.0.0.1:8101", replicas=replicas)
    runs = read_runs([run])
    title = report_title(compare_runs(runs), runs)
    assert "fleet of 2 (127.0.0.1:8101, 127.0.0.1:8102)" in title, title


def test_history_goes_to_the_working_directory_not_into_the_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = make_sweep(tmp_path / "a", levels=(1, 4))
    b = make_sweep(tmp_path / "b", levels=(1, 4))
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["report", str(a), str(b), "--no-charts"]) in (0, 3)
    assert (here / "history.html").is_file() and not (a / "history.html").exists()
    html = (here / "history.html").read_text(encoding="utf-8")
    # the verdict reads as the decision's short lines, one item each, not a wall of prose
    assert html.count('<td class="verdict"><ul class="decision"><li>') == 2
    # each entry's start reads as a date and a UTC time, not a raw ISO stamp
    assert html.count("2026-12-01 00:00 UTC") == 2 and "2026-12-01T00:00:00Z" not in html
    assert os.getcwd() == str(here)


def test_one_user_is_singular() -> None:
    text = interval_text(Bracket(passed=1, failed=None), Bracket(passed=None, failed=1))
    assert text == "from 1 user to below 1 user"
    assert interval_text(Bracket(passed=2, failed=None),
                         Bracket(passed=4, failed=6)) == "from 2 users to below 6 users"
