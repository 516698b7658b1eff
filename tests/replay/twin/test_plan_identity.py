"""``plan --twin TWIN DIR``: the twin stands beside the measured brackets of its own
model, decode backend and replica count only (a twin fitted on ``auto`` was held
against the latency_specialized arm's bracket and told to recalibrate), and says
which it shows; a twin of another model than the runs' is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import SimProfile, load_profile
from replay.twin._level import load_workload, simulate_level
from traces import generate, write_workload

_AUTO = {"step_s_batch1": 0.008, "step_s_batch64": 0.03}
_LAT = {"step_s_batch1": 0.004, "step_s_batch64": 0.018}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two arms measured (on the twin's engines, simulated time) at 1, 2, 4 users, and a
    twin calibrated on the auto arm."""
    root = tmp_path_factory.mktemp("plan-identity")
    wl = root / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=6, seed=1, block_size=16,
                                max_context=4096, prompt_scale=0.05, think_scale=0.01,
                                output_scale=0.2)
    write_workload(wl, header, sessions)
    data = load_profile("small").model_dump(mode="json")
    data["backends"] = {"auto": _AUTO, "latency_specialized": _LAT}
    profile = SimProfile.model_validate(data)
    work = load_workload(wl)
    runs = root / "runs"
    for backend in ("auto", "latency_specialized"):
        for users in (1, 2, 4):
            simulate_level(profile, work, users, 30.0, 3.0, tiers=(), backend=backend,
                           out_dir=runs / f"{backend}-u{users}")
    twin = root / "twin.json"
    assert main(["calibrate", str(runs), "--arm", "auto", "-o", str(twin)]) == 0
    return wl, runs, twin


@pytest.mark.parametrize(("users", "flags", "shown", "notes"), [
    pytest.param("1:4", ["--backend", "auto"], {"auto"},
                 ["measured brackets beside the twin: those of backend auto on 1 replica, "
                  "the twin's: auto",
                  "not shown (another backend or replica count): latency_specialized"],
                 id="own-backend-only"),
    pytest.param("2:4", ["--replicas", "2"], set(),
                 ["on 2 replicas, the twin's: none of the runs given"],
                 id="other-replica-count-none"),
])
def test_the_twin_stands_beside_brackets_of_its_own_backend_and_replicas_only(
        measured: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], users: str,
        flags: list[str], shown: set[str], notes: list[str]) -> None:
    wl, runs, twin = measured
    capsys.readouterr()
    code = main(["plan", "--twin", str(twin), "--workload", str(wl), "--users", users,
                 "--levels", "2", "--duration", "20", *flags, "--jobs", "1",
                 "--slo", "10:5", str(runs)])
    out = capsys.readouterr().out
    assert code == 0, out
    for arm in ("auto", "latency_specialized"):
        assert (f"measured {arm}:" in out) == (arm in shown), arm
    for note in notes:
        assert note in out
    stored = json.loads((runs / "twin-plan.json").read_text())
    assert {m["arm"] for t in stored["tiers"] for m in t["measured"]} == shown


def test_a_twin_of_another_model_is_refused(measured: tuple[Path, Path, Path],
                                            tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    wl, runs, twin = measured
    doc = json.loads(twin.read_text())
    doc["model"] = "other-org/Other-Model"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    capsys.readouterr()
    code = main(["plan", "--twin", str(other), "--workload", str(wl), "--users", "1:2",
                 "--levels", "2", "--duration", "10", "--jobs", "1", str(runs)])
    err = capsys.readouterr().err
    assert code == 2
    assert "other-org/Other-Model" in err and load_profile("small").model in err
    assert len(err.strip().splitlines()) == 1


def test_a_calibrated_twin_plans_the_backend_it_was_fitted_on(
        measured: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``calibrate`` writes the fitted steps under both backend names: planned at the
    default ``--backend`` (latency_specialized) a twin of ``auto`` was labelled
    latency_specialized in twin-plan.json and the decision, beside auto's bracket."""
    wl, runs, twin = measured
    capsys.readouterr()
    code = main(["plan", "--twin", str(twin), "--workload", str(wl), "--users", "1:4",
                 "--levels", "2", "--duration", "20", "--jobs", "1", "--slo", "10:5",
                 str(runs)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert json.loads((runs / "twin-plan.json").read_text())["backend"] == "auto"
    assert "twin (backend latency_specialized" not in out
    assert "twin (backend auto" in out


def test_another_backend_typed_for_a_calibrated_twin_is_refused(
        measured: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    wl, _, twin = measured
    capsys.readouterr()
    code = main(["plan", "--twin", str(twin), "--workload", str(wl), "--users", "1:2",
                 "--levels", "2", "--duration", "10", "--jobs", "1",
                 "--backend", "latency_specialized"])
    out, err = capsys.readouterr()
    assert code == 2 and "P90" not in out
    assert len(err.strip().splitlines()) == 1
    assert "--backend latency_specialized" in err and "fitted on runs of backend auto" in err


def test_a_twin_shown_beside_no_run_stays_out_of_the_decision(
        measured: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """A 2-replica twin beside 1-replica runs: the note said "none of the runs given",
    yet the decision (printed and in report.html) set the twin's capacity beside every
    arm's bracket."""
    wl, runs, twin = measured
    capsys.readouterr()
    code = main(["plan", "--twin", str(twin), "--workload", str(wl), "--users", "2:4",
                 "--levels", "2", "--duration", "20", "--replicas", "2", "--jobs", "1",
                 "--slo", "10:5", str(runs)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "the twin's: none of the runs given" in out
    decision = [line for line in out.splitlines() if "Capacity at" in line]
    assert decision and not any("twin (" in line for line in decision), decision
    assert json.loads((runs / "twin-plan.json").read_text())["arms"] == []
