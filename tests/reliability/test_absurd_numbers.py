"""Issue 25: absurd numbers are refused before anything is planned or sent, in one
line naming the flag and its limit (``--rate 1e308`` built a 24 GB arrival plan,
``--time-scale 1e308`` overflowed the lanes' nanosecond clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.commands import call as _call
from tests.support.workloads import make_workload

_DEAD = "http://127.0.0.1:1"  # nobody listens: a refusal must come before any request


@pytest.mark.parametrize(("flags", "words"), [
    (["--rate", "1e308"], ["--rate", "10000"]),
    (["--rate", "5000", "--duration", "100000"], ["--rate", "10,000,000"]),
    (["--time-scale", "1e308"], ["--time-scale", "1000000"]),
    (["--time-scale", "1e-300"], ["--time-scale", "0.000001"]),
    (["--duration", "1e308"], ["--duration", "2592000"]),
    (["--think-scale", "1e308"], ["--think-scale", "1000000"]),
    (["--ttft-timeout", "1e308"], ["--ttft-timeout", "2592000"]),
])
@pytest.mark.parametrize("command", ["run", "compare"])
def test_absurd_numbers_are_refused_naming_flag_and_limit(
        tmp_path: Path, command: str, flags: list[str], words: list[str]) -> None:
    arrival = "timestamps" if "--time-scale" in flags else "closed"
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1, arrival=arrival)
    base = ["--workload", str(wl), "--out", str(tmp_path / "out"), "--quiet"]
    if "--duration" not in flags:
        base += ["--duration", "2"]
    if command == "run":
        argv = ["run", "--target", _DEAD, *base, *flags]
    else:
        argv = ["compare", "--arm", f"a={_DEAD}", "--arm", f"b={_DEAD}", *base, *flags]
    code, err = _call(argv)
    lines = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), (words, lines[0])
    assert "cannot reach" not in err
    assert not (tmp_path / "out").exists()
