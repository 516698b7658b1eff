"""Every output path is checked before the work: a directory where a file is wanted, a
file where a directory is wanted, a place that takes no new file. One line naming the
flag, exit 2, and the fit or the simulation never ran (nothing lost to the path).

Before: ``calibrate -o DIR --force``, ``calibrate -o /sys/x.json``,
``--keep-predictions FILE`` and ``plan --keep-runs FILE`` were IsADirectoryError,
PermissionError or NotADirectoryError tracebacks after the fit or the simulation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import load_profile, server_info
from tests.analysis.builders import make_run
from tests.replay.conftest import make_workload
from tests.support.fit import PROFILE, engine_records


def _unwritable() -> Path:
    """A directory that takes no new file even for root (sysfs)."""
    probe = Path("/sys/agentreplay-probe")
    try:
        probe.touch()
    except OSError:
        return Path("/sys")
    probe.unlink()
    pytest.skip("/sys takes new files here: no directory refuses root")


@pytest.fixture
def runs(tmp_path: Path) -> list[str]:
    info = server_info(PROFILE, "auto", 1.0)
    return [str(make_run(tmp_path / f"u{u}", engine_records(PROFILE, u, seed=u), label="auto",
                         model=PROFILE.model, simulated=True, server_info=info,
                         load={"users": u, "duration_s": 10, "warmup_s": 0, "drain_s": 5}))
            for u in (1, 2, 4)]


@pytest.fixture
def afile(tmp_path: Path) -> Path:
    path = tmp_path / "afile"
    path.write_text("not a directory\n")
    return path


def _one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("where", ["dir", "under_file", "unwritable"])
def test_calibrate_output_checked_before_the_fit(
    tmp_path: Path, runs: list[str], afile: Path, where: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = {"dir": tmp_path / "adir", "under_file": afile / "twin.json",
           "unwritable": _unwritable() / "x.json" if where == "unwritable" else None}[where]
    assert out is not None
    if where == "dir":
        out.mkdir()
    code = main(["calibrate", *runs, "-o", str(out), "--force"])
    stdout, err = capsys.readouterr()
    _one_line(code, err, f"-o {out}:")
    assert "fit residuals" not in stdout  # the fit never ran
    assert afile.read_text() == "not a directory\n"


def test_calibrate_keep_predictions_file_refused_before_the_fit(
    tmp_path: Path, runs: list[str], afile: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    twin = tmp_path / "twin.json"
    code = main(["calibrate", *runs, "-o", str(twin), "--holdout", "2",
                 "--keep-predictions", str(afile)])
    stdout, err = capsys.readouterr()
    _one_line(code, err, f"--keep-predictions {afile}:", "not a directory")
    assert not twin.exists() and "fit residuals" not in stdout


@pytest.fixture
def twin_args(tmp_path: Path) -> list[str]:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=4, new_blocks=4, output=20,
                       think_s=1.0)
    twin = tmp_path / "twin.json"
    twin.write_text(load_profile("small").model_dump_json())
    return ["plan", "--twin", str(twin), "--workload", str(wl), "--users", "1:2", "--levels",
            "2", "--duration", "10", "--warmup", "1", "--drain", "1", "--jobs", "1"]


@pytest.mark.parametrize("where", ["file", "under_file", "unwritable"])
def test_plan_keep_runs_checked_before_simulating(
    tmp_path: Path, twin_args: list[str], afile: Path, where: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    keep = {"file": afile, "under_file": afile / "runs",
            "unwritable": _unwritable() / "runs" if where == "unwritable" else None}[where]
    code = main([*twin_args, "--keep-runs", str(keep)])
    stdout, err = capsys.readouterr()
    _one_line(code, err, f"--keep-runs {keep}:")
    assert "  level " not in err and "P90" not in stdout


def test_plan_beside_runs_checks_its_estimate_file_first(
    tmp_path: Path, twin_args: list[str], runs: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``plan --twin ... DIR`` writes DIR/twin-plan.json: a directory in its place is
    refused before any level is simulated."""
    (tmp_path / "twin-plan.json").mkdir()
    code = main([*twin_args, str(tmp_path)])
    stdout, err = capsys.readouterr()
    _one_line(code, err, "twin-plan.json", "is a directory")
    assert "  level " not in err


def test_report_output_checked_before_the_analysis(
    tmp_path: Path, runs: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "adir").mkdir()
    code = main(["report", runs[0], "-o", str(tmp_path / "adir"), "--no-charts"])
    _one_line(code, capsys.readouterr().err, "-o", "is a directory")
    assert not (Path(runs[0]) / "summary.json").exists()


def test_save_config_directory_refused_even_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    wl = make_workload(tmp_path / "wl.jsonl")
    (tmp_path / "cfg").mkdir()
    code = main(["compare", "--arm", "a=http://127.0.0.1:9", "--arm", "b=http://127.0.0.1:9/x",
                 "--workload", str(wl), "--out", str(tmp_path / "o"), "--users", "1",
                 "--duration", "1", "--save-config", str(tmp_path / "cfg"), "--force"])
    _one_line(code, capsys.readouterr().err, "--save-config", "is a directory")
    assert os.listdir(tmp_path / "cfg") == []


def test_launch_log_dir_file_refused_before_any_server(
    tmp_path: Path, afile: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``/bin/true`` as the vLLM python: had a server been started, it would be the
    launch's own error (no /health), not the path's."""
    code = main(["launch", "--model", "m", "--arm", "auto", "--vllm-python", "/bin/true",
                 "--log-dir", str(afile)])
    _one_line(code, capsys.readouterr().err, f"--log-dir {afile}:", "not a directory")
    assert json.dumps(afile.read_text()) == json.dumps("not a directory\n")
