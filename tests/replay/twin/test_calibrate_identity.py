"""``calibrate`` fits one engine of one server configuration: runs against a fleet, or
runs of different configurations of one model (under one label), are refused in one
line naming what differs (they were fitted together silently)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import SimProfile, SimServerProcess, load_profile
from replay.twin._level import load_workload, simulate_level
from traces import generate, write_workload

_TIMING = {"step_s_batch1": 0.004, "step_s_batch64": 0.02}


def _workload(tmp: Path) -> Path:
    wl = tmp / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=4, seed=1, block_size=16,
                                max_context=4096, prompt_scale=0.05, think_scale=0.001,
                                output_scale=0.1)
    write_workload(wl, header, sessions)
    return wl


def _profile(**changes: object) -> SimProfile:
    data = load_profile("small").model_dump(mode="json")
    data.update(backends={"auto": _TIMING, "latency_specialized": _TIMING}, **changes)
    return SimProfile.model_validate(data)


def _level(tmp: Path, name: str, profile: SimProfile, users: int, backend: str = "auto",
           label: str | None = None) -> Path:
    out = tmp / name
    simulate_level(profile, load_workload(_workload(tmp)), users, 20.0, 2.0, tiers=(),
                   backend=backend, out_dir=out)  # type: ignore[arg-type]
    if label is not None:  # one label for both, as a user may give with run --label
        doc = json.loads((out / "run.json").read_text())
        doc["label"] = label
        (out / "run.json").write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("second, field", [
    (dict(backend="latency_specialized", label="kimi"), "decode_backend"),
    (dict(changes={"max_num_seqs": 8}, label="kimi"), "max_num_seqs"),
])
def test_runs_of_different_server_configurations_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], second: dict[str, object],
        field: str) -> None:
    a = _level(tmp_path, "u1", _profile(), 1, label="kimi")
    changes = second.pop("changes", {})
    b = _level(tmp_path, "u2", _profile(**changes), 2, **second)  # type: ignore[arg-type]
    code = main(["calibrate", str(a), str(b), "-o", str(tmp_path / "twin.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "different server configurations" in err and field in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "twin.json").exists()


def test_runs_of_one_configuration_still_calibrate(tmp_path: Path) -> None:
    a = _level(tmp_path, "u1", _profile(), 1)
    b = _level(tmp_path, "u2", _profile(), 2)
    assert main(["calibrate", str(a), str(b), "-o", str(tmp_path / "twin.json")]) == 0


@pytest.mark.sim
def test_runs_against_a_fleet_are_refused(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    wl = _workload(tmp_path)
    with SimServerProcess("small", "auto") as s1, SimServerProcess("small", "auto") as s2:
        code = main(["run", "--target", s1.url, "--target", s2.url, "--workload", str(wl),
                     "--users", "2", "--warmup", "0", "--duration", "3", "--drain", "5",
                     "--quiet", "--out", str(tmp_path / "fleet")])
    assert code in (0, 3)
    capsys.readouterr()
    code = main(["calibrate", str(tmp_path / "fleet"), "-o", str(tmp_path / "twin.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "2-replica fleet" in err and "--replicas 2" in err
    assert len(err.strip().splitlines()) == 1
