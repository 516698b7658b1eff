"""A full disk mid-run: the records stop at the last complete line, the manifest says
the run is incomplete and why, the command prints one line and exits 4.

The fault is injected where the kernel would report it: the result file's
``write`` takes part of a line and then fails with ``ENOSPC``.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from io import FileIO
from pathlib import Path

import orjson
import pytest

import replay.load._writer as writer_mod
from analysis import RunManifest
from replay.load import RunWriter
from replay.servers.sim import SimServerProcess
from tests.support.commands import call as _call
from tests.support.workloads import make_workload


class _FullDisk(FileIO):
    """A file on a disk with ``budget`` bytes free: a write past it is short, the next
    one fails with ENOSPC (what write(2) does)."""

    def __init__(self, path: Path, budget: int) -> None:
        super().__init__(path, "w")
        self.budget = budget

    def write(self, data: object) -> int:
        raw = bytes(data)  # type: ignore[call-overload]
        if self.budget <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        part = raw[: self.budget]
        self.budget -= len(part)
        return super().write(part) or 0


def _full_after(budget: int, name: str = "requests.jsonl") -> object:
    real = writer_mod._open_raw

    def opener(path: Path) -> FileIO:
        return _FullDisk(path, budget) if path.name == name else real(path)
    return opener


def _lines(path: Path) -> list[dict[str, object]]:
    raw = path.read_bytes()
    assert not raw or raw.endswith(b"\n"), "a half line was left"
    return [orjson.loads(line) for line in raw.splitlines()]


def test_writer_keeps_whole_lines_and_raises_once(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rec = {"id": "r", "status": "ok", "pad": "x" * 50}
    line = len(orjson.dumps(rec)) + 1
    monkeypatch.setattr(writer_mod, "_open_raw", _full_after(2 * line + line // 2))
    w = RunWriter(tmp_path)
    w.write_record(rec)
    w.write_record(rec)
    with pytest.raises(OSError) as exc:
        w.write_record(rec)
    assert exc.value.errno == errno.ENOSPC and exc.value.filename.endswith("requests.jsonl")
    assert w.failure is exc.value
    with pytest.raises(OSError):  # later records are refused the same way
        w.write_lines([orjson.dumps(rec)])
    w.write_metrics(1.0, {"vllm:x": 1.0})  # samples after the failure are dropped quietly
    w.close()
    assert _lines(tmp_path / "requests.jsonl") == [rec, rec]
    assert w.records == 2


def test_manifest_of_a_failed_writer_says_why(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_mod, "_open_raw", _full_after(0))
    w = RunWriter(tmp_path)
    with pytest.raises(OSError):
        w.write_record({"id": "r"})
    w.close()
    manifest = RunManifest.model_construct(complete=True, warnings=[])
    writer_mod._mark_failed(manifest, w.failure)  # type: ignore[arg-type]
    assert manifest.complete is False
    assert any("requests.jsonl could not be written" in x for x in manifest.warnings)


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with SimServerProcess("instant", time_scale=1.0) as srv:
        yield srv.url


@pytest.mark.sim
@pytest.mark.parametrize("name", ["requests.jsonl", "server_metrics.jsonl"])
def test_run_on_a_full_disk_exits_4_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim: str, name: str) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=6, output=4, think_s=0.0)
    monkeypatch.setattr(writer_mod, "_open_raw", _full_after(1500, name))
    out = tmp_path / "run"
    code, err = _call(["run", "--target", sim, "--workload", str(wl), "--users", "2",
                       "--duration", "3", "--out", str(out), "--quiet",
                       "--metrics-interval", "0.2"])
    assert code == 4, err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert errors == [f"agentreplay: error: cannot write {out / name}: "
                      "No space left on device"], err
    recs = _lines(out / "requests.jsonl")  # every line whole
    assert len({r["id"] for r in recs}) == len(recs)
    _lines(out / "server_metrics.jsonl")
    manifest = RunManifest.model_validate_json((out / "run.json").read_bytes())
    assert manifest.complete is False
    assert any(f"{name} could not be written" in x for x in manifest.warnings), manifest
    assert not any("internal error" in x for x in manifest.warnings)


@pytest.mark.sim
def test_report_on_a_full_disk_exits_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       sim: str) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=2, output=4, think_s=0.0)
    out = tmp_path / "run"
    code, err = _call(["run", "--target", sim, "--workload", str(wl), "--duration", "0.5",
                       "--drain", "0.5", "--out", str(out), "--quiet"])
    assert code in (0, 3), err
    real = Path.write_text

    def full(self: Path, *a: object, **kw: object) -> int:
        if self.name == "requests.csv":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    code, err = _call(["report", str(out), "--no-charts"])
    assert code == 4, err
    errors = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert errors == [f"agentreplay: error: cannot write {out / 'requests.csv'}: "
                      "No space left on device"], err
