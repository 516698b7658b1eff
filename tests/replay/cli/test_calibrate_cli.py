"""``agentreplay calibrate`` on hand-made run directories (records from the clockless
sim engine, ``/server_info`` from the sim's own builder): the twin file and the user
errors, with no server started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import load_profile, server_info
from tests.analysis.builders import make_run
from tests.support.fit import PROFILE, engine_records


def _runs(root: Path, levels: tuple[int, ...] = (1, 2, 4), label: str = "auto") -> list[str]:
    info = server_info(PROFILE, "auto", 1.0)
    out = []
    for users in levels:
        out.append(str(make_run(
            root / f"{label}-u{users}", engine_records(PROFILE, users, seed=users),
            label=label, model=PROFILE.model, simulated=True, server_info=info,
            load={"users": users, "duration_s": 10, "warmup_s": 0, "drain_s": 5})))
    return out


def test_calibrate_writes_a_profile_serve_sim_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    twin = tmp_path / "twin.json"
    assert main(["calibrate", *_runs(tmp_path), "-o", str(twin)]) == 0
    out = capsys.readouterr().out
    assert "fit residuals per level" in out and "twin written to" in out
    prof = load_profile(str(twin))
    truth = PROFILE.backends["auto"]
    assert prof.backends["auto"].step_s_batch1 == pytest.approx(truth.step_s_batch1, rel=0.01)
    assert prof.backends["auto"].step_s_batch64 == pytest.approx(truth.step_s_batch64,
                                                                 rel=0.02)
    assert prof.prefill_tokens_per_s == pytest.approx(PROFILE.prefill_tokens_per_s, rel=0.05)
    for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_gpu_blocks",
                 "max_model_len", "vocab_size"):
        assert getattr(prof, name) == getattr(PROFILE, name), name
    cal = json.loads(twin.read_text())["calibration"]
    assert cal["fitted_levels"] == [1, 2, 4] and cal["holdouts"] == []
    assert len(cal["runs"]) == 3 and cal["assumed"] == []
    assert all(abs(lv["gap_error"]) < 0.01 for lv in cal["levels"])


@pytest.mark.parametrize(("args", "message"), [
    (["nowhere"], "no such run or comparison directory"),
    (["{runs}", "--holdout", "16"], "--holdout 16: no run at 16 users"),
    (["{u1}", "--holdout", "1"], "every level is held out"),
    (["{mixed}"], "several servers"),
    (["{mixed}", "--arm", "nope"], "--arm nope: no run of that arm"),
])
def test_calibrate_user_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str,
) -> None:
    runs = _runs(tmp_path / "a", (1, 2))
    other = _runs(tmp_path / "b", (1,), label="other")
    subst = {"{runs}": runs, "{u1}": runs[:1], "{mixed}": runs + other}
    argv = [a for arg in args for a in subst.get(arg, [arg])]
    assert main(["calibrate", *argv, "-o", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "t.json").exists()


def test_calibrate_picks_one_arm_of_a_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    _runs(tmp_path / "cmp" / "runs", (1, 2))
    _runs(tmp_path / "cmp" / "runs", (1,), label="other")
    twin = tmp_path / "twin.json"
    assert main(["calibrate", str(tmp_path / "cmp"), "--arm", "auto", "-o", str(twin)]) == 0
    assert len(json.loads(twin.read_text())["calibration"]["runs"]) == 2


@pytest.mark.sim
def test_holdout_refuses_a_workload_that_is_not_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from traces import generate, write_workload

    wl = tmp_path / "other.jsonl"
    header, sessions = generate("coding-agent", sessions=2, seed=9, block_size=16,
                                max_context=4096, prompt_scale=0.02)
    write_workload(wl, header, sessions)
    runs = _runs(tmp_path, (1, 2))
    code = main(["calibrate", *runs, "-o", str(tmp_path / "t.json"), "--holdout", "2",
                 "--workload", str(wl)])
    err = capsys.readouterr().err
    assert code == 2 and "not the workload of" in err
