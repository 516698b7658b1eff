"""Issue 18's input defects, as the user meets them on the command line: endless or
absurd inputs are refused in one line with bounded memory; results whose format or
window cannot be right are refused; spreadsheet formulas never reach requests.csv
live. (The readers themselves are tested in tests/traces and tests/analysis.)"""

from __future__ import annotations

import csv
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from replay.servers.sim import SimServerProcess
from tests.support.commands import call as _call
from tests.support.runs import REPO, is_number
from tests.support.workloads import make_workload

_FIXTURES = REPO / "tests" / "fixtures" / "traces"
_ADDRESS_SPACE = 3 << 30
"""The child's limit: room for the interpreter and its libraries, far below the 6.8 GB
an unbounded read of /dev/zero reached in 6 s."""


def _capped(*args: str) -> subprocess.CompletedProcess[str]:
    """``agentreplay ARGS`` in a child with a capped address space: reading without
    bound would end in MemoryError, not one line."""
    def limit() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE, hard))

    return subprocess.run([sys.executable, "-m", "replay.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, preexec_fn=limit,
                          check=False)


def _one_line(res: subprocess.CompletedProcess[str] | tuple[int, str], *words: str) -> None:
    code, err = (res.returncode, res.stderr) if not isinstance(res, tuple) else res
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert len(lines) == 1 and "Traceback" not in err and "MemoryError" not in err, err
    assert all(w in lines[0] for w in words), (words, lines[0])


@pytest.mark.cli
@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_an_endless_file_is_refused_in_one_line(command: str) -> None:
    _one_line(_capped("traces", command, "/dev/zero"), "/dev/zero")


@pytest.mark.cli
def test_a_workload_with_an_endless_line(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    with open(wl, "ab") as fh:
        fh.write(b'{"id": "' + b"x" * (40 << 20))  # 40 MiB, no newline
    _one_line(_capped("traces", "inspect", str(wl)), str(wl))


@pytest.mark.cli
def test_absurd_token_counts_in_imports_name_file_line_and_field(tmp_path: Path) -> None:
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,100000000000000,5\n")
    _one_line(_capped("traces", "import", "--format", "azure", str(azure), "-o",
                      str(tmp_path / "a.jsonl")), f"{azure}:2", "ContextTokens")
    src = _FIXTURES / "tracelab" / "round_trace.jsonl"
    first = orjson.loads(src.read_bytes().split(b"\n", 1)[0])
    first["input_tokens_total"] = 10**14
    lab = tmp_path / "lab.jsonl"
    lab.write_bytes(orjson.dumps(first) + b"\n")
    _one_line(_capped("traces", "import", "--format", "tracelab", str(lab), "-o",
                      str(tmp_path / "b.jsonl")), f"{lab}:1")


@pytest.fixture(scope="module")
def a_run(uses_sim: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("bounded")
    wl = make_workload(tmp / "wl.jsonl", sessions=2, turns=2, output=4, think_s=0.0)
    with SimServerProcess("instant", time_scale=1.0) as srv:
        code, err = _call(["run", "--target", srv.url, "--workload", str(wl), "--duration",
                           "0.5", "--drain", "0.5", "--out", str(tmp / "run"), "--quiet",
                           "--label", "arm"])
    assert code in (0, 3), err
    # --label takes letters, digits and -_.+ (a formula is refused before any load); a
    # hand-edited run.json can still carry one, which must not reach a spreadsheet live
    manifest = orjson.loads((tmp / "run" / "run.json").read_bytes())
    manifest["label"] = "=HYPERLINK(\"http://x\")"
    (tmp / "run" / "run.json").write_bytes(orjson.dumps(manifest))
    yield tmp / "run"


def _edited(a_run: Path, tmp_path: Path, **changes: object) -> Path:
    run = tmp_path / "run"
    shutil.copytree(a_run, run)
    manifest = orjson.loads((run / "run.json").read_bytes())
    manifest.update(changes)
    (run / "run.json").write_bytes(orjson.dumps(manifest))
    return run


def test_a_manifest_from_the_future_is_refused(a_run: Path, tmp_path: Path) -> None:
    run = _edited(a_run, tmp_path, format_version=99)
    _one_line(_call(["report", str(run), "--no-charts"]), "run.json")


def test_a_window_that_ends_before_it_starts_is_refused(a_run: Path, tmp_path: Path) -> None:
    run = _edited(a_run, tmp_path, window={"start_s": 5.0, "end_s": 1.0})
    _one_line(_call(["report", str(run), "--no-charts"]), "run.json")


def test_formulas_never_reach_a_spreadsheet_live(a_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(a_run, run)
    code, err = _call(["report", str(run), "--no-charts"])
    assert code in (0, 3), err
    with open(run / "requests.csv", newline="", encoding="utf-8") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert any("HYPERLINK" in c for c in cells)  # the label is there ...
    assert not any(c[:1] in ("=", "+", "-", "@") for c in cells if c and not is_number(c))




def test_a_workload_written_to_a_device_leaves_the_device(tmp_path: Path) -> None:
    """``traces generate -o /dev/null`` writes to the device; an atomic rename over it
    once put a regular file where /dev/null was (a fuzzed path did, on the test machine)."""
    import os
    import stat

    from replay.cli import main

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["traces", "generate", "--sessions", "2", "--max-context", "4096",
                 "-o", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe, not a file put there
    assert got and got[0].startswith(b"{") and got[0].count(b"\n") == 3  # header + 2 sessions
