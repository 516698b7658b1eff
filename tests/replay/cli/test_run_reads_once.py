"""One close per run: ``agentreplay run`` reads its records back once, at the close, and
every later step (client health, validity, scenario, the closing lines) takes that read
and its one analysis. Counted at the reader itself, so any second read fails the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from replay.cli import main
from replay.servers.sim import SimServerProcess

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServerProcess]:
    with SimServerProcess("instant", time_scale=10.0) as srv:
        yield srv


def test_a_run_reads_its_records_once(sim: SimServerProcess, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import analysis.read._read as reader

    wl = tmp_path / "w.jsonl"
    assert main(["traces", "generate", "--sessions", "4", "--max-context", "32768",
                 "--think-scale", "0.05", "-o", str(wl)]) == 0
    reads = {"requests": 0, "manifest": 0}
    read_requests, read_manifest = reader._read_requests, reader.read_manifest

    def counted_requests(path: Path) -> object:
        reads["requests"] += 1
        return read_requests(path)

    def counted_manifest(path: Path) -> object:
        reads["manifest"] += 1
        return read_manifest(path)

    monkeypatch.setattr(reader, "_read_requests", counted_requests)
    monkeypatch.setattr(reader, "read_manifest", counted_manifest)
    out = tmp_path / "run"
    capsys.readouterr()
    code = main(["run", "--target", sim.url, "--workload", str(wl), "--users", "2",
                 "--duration", "3", "--drain", "5", "--out", str(out), "--quiet"])
    got = capsys.readouterr()
    assert code in (0, 3), got.err
    assert reads == {"requests": 1, "manifest": 1}
    # the closing lines came from that one read: they count the records on disk
    records = [orjson.loads(line) for line in (out / "requests.jsonl").read_bytes().splitlines()]
    window = sum(r["phase"] == "measure" for r in records)
    assert got.out.splitlines()[0].startswith(f"[SIMULATED] window: {window} request")
    stored = orjson.loads((out / "run.json").read_bytes())
    assert stored["validity"] is not None and stored["client_health"] is not None
