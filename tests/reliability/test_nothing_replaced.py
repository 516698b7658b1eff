"""Issue 25: nothing the user has is replaced without ``--force`` (an experiment
file, a workload), and a refused comparison leaves its directory as it was."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.commands import call as _call
from tests.support.runs import REPO
from tests.support.workloads import make_workload

_DEAD = "http://127.0.0.1:1"
_AZURE = REPO / "tests" / "fixtures" / "traces" / "azure" / "AzureLLMInferenceTrace_code.csv"


def _refused(argv: list[str], *words: str) -> None:
    code, err = _call(argv)
    lines = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), lines[0]


def _compare(wl: Path, out: Path, *more: str) -> list[str]:
    return ["compare", "--arm", f"a={_DEAD}", "--arm", f"b={_DEAD}", "--workload", str(wl),
            "--duration", "1", "--out", str(out), "--quiet", *more]


@pytest.mark.parametrize("kind", ["save-config", "generate", "import"])
def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "mine.txt"
    target.write_text("precious\n")
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    argv, flag = {
        "save-config": (_compare(wl, tmp_path / "o", "--save-config", str(target)),
                        "--save-config"),
        "generate": (["traces", "generate", "--sessions", "1", "-o", str(target)], "-o"),
        "import": (["traces", "import", "--format", "azure", str(_AZURE), "-o",
                    str(target)], "-o"),
    }[kind]
    _refused(argv, flag, str(target), "--force")
    assert target.read_text() == "precious\n"
    code, err = _call([*argv, "--force"])
    assert code == 0, err
    assert target.read_text() != "precious\n"


def test_a_refused_resume_keeps_the_stored_experiment_file(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "experiment.toml").write_text("# the original experiment\n")
    (out / "comparison.json").write_bytes(orjson.dumps(
        {"settings": {"arms": ["a", "b"], "duration_s": 99.0}, "runs": {"r": {}}}))
    _refused(_compare(wl, out), "cannot resume")
    assert (out / "experiment.toml").read_text() == "# the original experiment\n"


@pytest.mark.parametrize("why", ["unreachable", "settings"])
def test_a_refused_comparison_leaves_nothing_behind(tmp_path: Path, why: str) -> None:
    arrival = "timestamps" if why == "settings" else "closed"
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1, arrival=arrival)
    out = tmp_path / "deep" / "cmp"
    more = ["--users", "1,2"] if why == "settings" else []
    _refused(_compare(wl, out, *more), "--users" if why == "settings" else "127.0.0.1:1")
    assert not (tmp_path / "deep").exists()
