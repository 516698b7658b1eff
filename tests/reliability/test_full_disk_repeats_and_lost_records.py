"""Issue 25's smaller defects: a disk-full --save-config exits 4 (the README's I/O
code); ``report A A`` shows A once; ``traces import --max-context 1`` is refused;
a resumed comparison whose run lost its requests.jsonl redoes that run and says so."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.servers.sim import SimServerProcess
from tests.analysis.builders import make_run, rec
from tests.support.commands import call as _call
from tests.support.runs import REPO, cli
from tests.support.workloads import make_workload

_DEAD = "http://127.0.0.1:1"
_AZURE = REPO / "tests" / "fixtures" / "traces" / "azure" / "AzureLLMInferenceTrace_code.csv"


def test_save_config_on_a_full_disk_exits_4(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    code, err = _call(["compare", "--arm", f"a={_DEAD}", "--arm", f"b={_DEAD}", "--workload",
                       str(wl), "--duration", "1", "--out", str(tmp_path / "o"),
                       "--save-config", "/dev/full"])
    assert code == 4 and "Traceback" not in err and "/dev/full" in err, (code, err)


def test_report_a_a_shows_a_once(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", [rec(i) for i in range(4)])
    code, err = _call(["report", str(run), f"{tmp_path}/./run", "--no-charts"])
    assert code in (0, 3), err
    assert "more than once" in err
    assert (run / "report.html").is_file() and not (run / "history.html").exists()


def test_import_refuses_a_context_too_small(tmp_path: Path) -> None:
    code, err = _call(["traces", "import", "--format", "azure", str(_AZURE), "--max-context",
                       "1", "-o", str(tmp_path / "w.jsonl")])
    assert code == 2 and "--max-context" in err and "16" in err, err
    assert not (tmp_path / "w.jsonl").exists()


@pytest.mark.sim
def test_a_run_that_lost_its_records_is_redone_on_resume(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=2, output=4, think_s=0.0)
    out = tmp_path / "cmp"
    with SimServerProcess("small", time_scale=4.0) as srv:
        argv = ["compare", "--arm", f"a={srv.url}", "--arm", f"b={srv.url}", "--allow-identical",
                "--workload",
                str(wl), "--duration", "0.5", "--drain", "2", "--out", str(out), "--plain"]
        first = cli(*argv, timeout=120)
        assert first.returncode in (0, 3), first.stderr
        lost = sorted((out / "runs").iterdir())[0]
        (lost / "requests.jsonl").unlink()
        again = cli(*argv, timeout=120)
    assert again.returncode in (0, 3), again.stderr
    assert f"{lost.name}: its requests.jsonl is missing, redone" in again.stderr
    assert (lost / "requests.jsonl").is_file()
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert state["runs"][lost.name]["skipped"] is False
