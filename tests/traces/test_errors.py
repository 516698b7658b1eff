"""One located-error base: a bad workload and a bad result file read alike
(``FILE:LINE: field 'NAME': message``) and the CLI turns either into one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import ResultError
from replay.cli import main
from traces import LocatedError, TraceError


@pytest.mark.parametrize("kind", [TraceError, ResultError])
def test_located_errors_share_one_base_and_one_format(kind: type[LocatedError]) -> None:
    err = kind("must be a number", file="a.jsonl", line=3, field="think_s")
    assert isinstance(err, LocatedError)
    assert str(err) == "a.jsonl:3: field 'think_s': must be a number"


def test_without_a_file_a_trace_error_says_input() -> None:
    assert str(TraceError("empty")) == "<input>: empty"
    assert str(ResultError("empty")) == "empty"


def test_both_reach_the_user_as_one_line(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad_workload = tmp_path / "wl.jsonl"
    bad_workload.write_text('{"not": "a header"}\n')
    bad_run = tmp_path / "run"
    bad_run.mkdir()
    (bad_run / "run.json").write_text("{")
    for argv in (["traces", "inspect", str(bad_workload)], ["report", str(bad_run)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert str(tmp_path) in err, err
