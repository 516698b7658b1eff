"""Issue 38 items 7, 10 and 19: ``compare --search``'s state on disk.

A probe spoiled by a server that died (stamped invalid) or by an interrupt is redone
when the same search is run again, as a plain comparison redoes such a run (it was
reused forever); ``search-state.json`` holds no credentials of the arms' URLs; a
damaged state file is refused in one line before any load (it was an
``AttributeError`` traceback after a new probe had run).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from replay.cli import main
from replay.servers.sim import SimServerProcess
from tests.replay.conftest import make_workload

pytestmark = pytest.mark.sim

_SECRET = "pw-planted-38s"


@pytest.fixture(scope="module")
def servers() -> Iterator[list[str]]:
    with SimServerProcess("small", "auto", time_scale=4.0) as a, \
            SimServerProcess("small", "latency_specialized", time_scale=4.0) as b:
        yield [a.url.replace("http://", f"http://bob:{_SECRET}@"), b.url]


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workload(tmp_path_factory.mktemp("ss") / "wl.jsonl", sessions=2, turns=2,
                         output=4, think_s=0.0)


def _args(urls: list[str], wl: Path, out: Path) -> list[str]:
    return ["compare", "--arm", f"a={urls[0]}", "--arm", f"b={urls[1]}", "--workload", str(wl),
            "--users", "1", "--duration", "1", "--warmup", "0.2", "--drain", "2",
            "--out", str(out), "--search", "30:15", "--search-max-probes", "1", "--quiet"]


@pytest.fixture(scope="module")
def searched(servers: list[str], wl: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("searched") / "s"
    assert main(_args(servers, wl, out)) in (0, 3)  # 3: a probe a starved sim spoiled
    return out


def _run_ids(out: Path) -> dict[str, str]:
    return {p.name: orjson.loads((p / "run.json").read_bytes())["run_id"]
            for p in sorted((out / "runs").iterdir())}


def test_the_state_file_and_every_output_hold_no_credentials(
        searched: Path, servers: list[str]) -> None:
    state = (searched / "search-state.json").read_text()
    assert _SECRET not in state and "bob" not in state
    # the servers are still named, without their user info
    assert servers[0].replace(f"bob:{_SECRET}@", "") in state
    for path in searched.rglob("*"):
        if path.is_file():
            assert _SECRET.encode() not in path.read_bytes(), path


def test_a_spoiled_probe_is_redone_on_rerun(
        searched: Path, servers: list[str], wl: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    shutil.copytree(searched, out)
    before = _run_ids(out)
    spoiled = out / "runs" / "a-u1-r0" / "run.json"
    manifest = orjson.loads(spoiled.read_bytes())
    # what a run whose server died mid-probe is stamped with
    manifest["validity"] = {"verdict": "invalid", "reasons": [
        {"code": "server_died", "severity": "invalid", "message": "the server died"}]}
    spoiled.write_bytes(orjson.dumps(manifest))
    assert main(_args(servers, wl, out)) in (0, 3)
    after = _run_ids(out)
    assert after["a-u1-r0"] != before["a-u1-r0"]  # redone, not reused
    # a sound probe is reused (unless a starved simulator had itself stamped it invalid)
    b = orjson.loads((searched / "runs" / "b-u1-r0" / "run.json").read_bytes())
    if b.get("validity", {}).get("verdict") != "invalid":
        assert after["b-u1-r0"] == before["b-u1-r0"]
    result = orjson.loads((out / "search.json").read_bytes())
    assert all("server died" not in e["reason"] for r in result["results"]
               for e in r["evidence"])


@pytest.mark.parametrize("runs", [{"a-u1-r0": "x"}, "a-u1-r0", [1, 2]])
def test_a_damaged_state_file_is_refused_before_any_load(
        runs: object, searched: Path, servers: list[str], wl: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    shutil.copytree(searched, out)
    shutil.rmtree(out / "runs" / "b-u1-r0")  # a probe the rerun would have to run
    state = out / "search-state.json"
    data = orjson.loads(state.read_bytes())
    data["runs"] = runs
    state.write_bytes(orjson.dumps(data))
    capsys.readouterr()
    assert main(_args(servers, wl, out)) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "search-state.json" in lines[0] and "runs" in lines[0], lines[0]
    assert not (out / "runs" / "b-u1-r0").exists()  # nothing was loaded
