"""``agentreplay plan --twin``: one clear error for a bad twin file or flag; per-level and
per-tier lines, labelled modelled (twin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replay.cli import main
from tests.support.twin import plan_argv as _plan
from tests.support.twin import twin_file as _twin


def test_plan_twin_prints_levels_and_tier_capacity(tmp_path: Path, wl: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_plan("--twin", str(_twin(tmp_path)), "--workload", str(wl),
                      "--users", "1:6", "--levels", "3", "--slo", "10:5", "--slo", "5000:5",
                      "--agents", "40"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "modelled (twin)" in out and "(calibrated)" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2", "6"]  # geometric ladder 1..6 in 3 levels
    tiers = [line for line in out.splitlines() if line.startswith("tier ")]
    assert any(line.startswith("tier 10:5: capacity at least 6 users") for line in tiers)
    assert any(line.startswith("tier 5000:5: capacity below 1 user ") for line in tiers)
    need = "tier 10:5: 40 agents need at most 7 replicas = 7 GPUs"
    assert any(need in line for line in tiers)
    assert all(line.endswith("[modelled (twin)]") for line in tiers)


def test_plan_twin_replicas_and_kept_runs(tmp_path: Path, wl: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "runs"
    code = main(_plan("--twin", str(_twin(tmp_path)), "--workload", str(wl), "--users", "4",
                      "--replicas", "2", "--slo", "10:5", "--keep-runs", str(keep)))
    out = capsys.readouterr().out
    assert code == 0
    assert "2 replicas" in out
    assert (keep / "users-0004" / "run.json").is_file()
    assert (keep / "users-0004" / "requests.jsonl").stat().st_size > 0


@pytest.mark.parametrize(("change", "field"), [
    ({"block_size": 0}, "field block_size"),
    ({"backends": {"auto": {"step_s_batch1": 0.1, "step_s_batch64": 0.2}}}, "field backends"),
    ({"colour": "blue"}, "field colour"),
])
def test_bad_twin_file_names_file_and_field(tmp_path: Path, wl: Path, change: dict[str, object],
                                            field: str, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    twin = _twin(tmp_path, **change)
    code = main(_plan("--twin", str(twin), "--workload", str(wl)))
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert str(twin) in lines[0] and field in lines[0]


def test_unreadable_or_invalid_json_twin(tmp_path: Path, wl: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n  oops}')
    assert main(_plan("--twin", str(bad), "--workload", str(wl))) == 2
    err = capsys.readouterr().err
    assert f"--twin {bad}: line 2: invalid JSON" in err
    missing = tmp_path / "missing.json"
    assert main(_plan("--twin", str(missing), "--workload", str(wl))) == 2
    assert f"--twin {missing}: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "needle"), [
    (["--users", "8:2"], "--users: need 1 <= LO <= HI, e.g. 1:256 (got '8:2')"),
    (["--users", "a:b"], "--users: give LO:HI, whole numbers"),
    (["--levels", "0"], "--levels: must be >= 1"),
    (["--replicas", "0"], "--replicas: must be >= 1"),
    (["--think-scale", "-1"], "--think-scale: must be >= 0"),
    (["--duration", "0"], "--duration: must be > 0"),
    (["--warmup", "1e9"], "--warmup: must be <= 2592000"),
])
def test_bad_flags_one_line(tmp_path: Path, wl: Path, extra: list[str], needle: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_plan("--twin", str(_twin(tmp_path)), "--workload", str(wl), *extra))
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_twin_needs_a_workload_and_plain_plan_needs_dirs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--twin", str(_twin(tmp_path))]) == 2
    assert "--twin needs --workload FILE" in capsys.readouterr().err
    assert main(["plan"]) == 2
    assert "give result directories" in capsys.readouterr().err


def test_workload_that_does_not_fit_the_twin(tmp_path: Path, wl: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    twin = _twin(tmp_path, max_model_len=256, num_gpu_blocks=64)
    assert main(_plan("--twin", str(twin), "--workload", str(wl))) == 2
    err = capsys.readouterr().err
    assert str(wl) in err and "max_model_len 256" in err and "--max-context 256" in err


def test_the_twin_plan_flags_run_shares_take_runs_bounds() -> None:
    """--duration, --warmup, --drain, --think-scale and --think-time-cap are declared
    with run's types: every bound one command sets, the other sets too."""
    from replay.knobs import knobs
    from replay.load import SharedSettings
    from replay.twin import PlanSettings

    run = {k.flag: info for _n, info, k in knobs(SharedSettings)}
    shared = [(k.flag, info) for _n, info, k in knobs(PlanSettings) if k.flag in run]
    assert {f for f, _ in shared} >= {"--duration", "--warmup", "--drain", "--think-scale",
                                      "--think-time-cap"}
    from typing import Annotated

    from pydantic import TypeAdapter, ValidationError

    def accepts(info: Any, value: float) -> bool:
        try:
            TypeAdapter(Annotated[info.annotation, *info.metadata]).validate_python(value)
        except ValidationError:
            return False
        return True

    for flag, info in shared:
        for value in (-1.0, 0.0, 0.5, 3e6, 1e9):
            assert accepts(info, value) == accepts(run[flag], value), (flag, value)
