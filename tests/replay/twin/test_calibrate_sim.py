"""``agentreplay calibrate`` against serve-sim, whose truth is known: the profile file and
the step log (what every engine step was modelled to take and really took).

Runs at 1, 2, 4 and 8 users; the twin is fitted on 1, 2, 4 and predicts 8. Fitted step
times are held against the step log's real step times (within 5%) and against the
profile (within 5% plus the simulator's own measured lateness: on a busy machine a
late simulator is what the client saw, not a fitting error). The held-out P90
interactivity must be within 5% of the measured one, plus what the truth shows the
real-time level ran differently from the twin (``_allowed_miss``). Where a starved
simulator's single steps strayed from their modelled times (``_unsteadiness``, 0 on an
idle machine), every bound widens by that measured amount.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from replay.cli import main
from replay.servers.sim import SimServerProcess, load_profile, read_step_log, step_log_path
from tests.support.servers import profile_variant
from traces import generate, write_workload

LEVELS = (1, 2, 4, 8)
_TIMING = {"step_s_batch1": 0.02, "step_s_batch64": 0.12}


def _sim_runs(root: Path, **changes: object) -> tuple[Path, Path, Path]:
    """Workload, profile file, and a folder of one run per level (each on a fresh sim)."""
    wl = root / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=8, seed=1, block_size=16,
                                max_context=4096, prompt_scale=0.05, think_scale=0.01,
                                output_scale=0.3)
    write_workload(wl, header, sessions)
    profile = profile_variant(root, backends={"auto": _TIMING, "latency_specialized": _TIMING},
                              ctx_ref_tokens=100000, prefill_tokens_per_s=100000.0, **changes)
    runs = root / "runs"
    for users in LEVELS:
        truth = root / f"truth-u{users}.jsonl"
        with SimServerProcess(str(profile), "auto", truth_path=str(truth)) as srv:
            code = main(["run", "--target", srv.url, "--workload", str(wl), "--users",
                         str(users), "--warmup", "2", "--duration", "6", "--drain", "6",
                         "--out", str(runs / f"u{users}"), "--quiet",
                         "--metrics-interval", "0.5"])
        assert code in (0, 3)
    return wl, profile, runs


@pytest.fixture(scope="module")
def sim_runs(uses_sim: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return _sim_runs(tmp_path_factory.mktemp("calibrate"))


STEADY = 0.10
"""Mean |real / modelled - 1| of the simulator's decode steps on an idle machine: about
0.06 (a 20-ms step kept to its deadline within a millisecond or so)."""


def _unsteadiness(root: Path, levels: tuple[int, ...]) -> float:
    """How far a starved simulator's steps strayed from their modelled times, beyond what
    an idle machine shows (0 when it kept its clock).

    The race, stated: a starved simulator runs some steps late and the next ones short
    to catch up (its deadline chain), so its mean can stay on time while single steps
    are 40% off (seen at load 13). The fit reads those steps through the client and
    can be off by as much; the step log measures it. Exact bounds hold where this is 0.
    """
    steps = [st for u in levels for st in read_step_log(step_log_path(
        str(root / f"truth-u{u}.jsonl"))) if st.decode_batch and not st.prefill_tokens]
    off = float(np.mean([abs(st.actual_s / st.model_s - 1) for st in steps]))
    return max(off - STEADY, 0.0)


def _in_flight(run_dir: Path) -> float:
    """Mean requests in flight over a run's window, from its records (sent to end)."""
    manifest = json.loads((run_dir / "run.json").read_text())
    lo, hi = manifest["window"]["start_s"], manifest["window"]["end_s"]
    busy = 0.0
    for line in (run_dir / "requests.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("sent_s") is not None:
            busy += max(0.0, min(r.get("end_s") or hi, hi) - max(r["sent_s"], lo))
    return busy / (hi - lo)


def _allowed_miss(root: Path, measured: Path, predicted: Path) -> tuple[float, str]:
    """How far the held-out prediction may miss the measured level: 5%, plus what the
    truth shows the real-time level ran differently from the twin's.

    The twin plays the level on time. A starved machine changes the real level in two
    ways the fit cannot know: the simulator's steps run late (the step log: real over
    modelled), and the client sends late, so fewer requests share the steps (each one
    then decodes faster: CI at load 17 measured P90 interactivity 5.6% above the
    prediction with the simulator on time). The second is the load gap: the mean
    requests in flight over the window, measured run against the twin's kept run.
    A step grows less than in proportion to its batch, so the gap bounds the effect on
    interactivity and on output throughput. Idle, both are about 1%, and a fit 5% off
    still fails."""
    held = np.array(_step_truth(root, 8))
    late = max(held[:, 2].mean() / held[:, 1].mean() - 1, 0.0)
    gap = abs(_in_flight(measured) / _in_flight(predicted) - 1)
    shaky = _unsteadiness(root, LEVELS)
    return 0.05 + late + gap + shaky, (f"sim lateness {late:.1%}, load gap {gap:.1%}, "
                                       f"unsteady steps {shaky:.1%}")


def _spoiled_and_named(runs: Path, notes: list[str]) -> set[int]:
    """The fitted levels stamped invalid (a starved simulator or client); calibrate's
    notes must name each."""
    spoiled = {u for u in (1, 2, 4) if (json.loads((runs / f"u{u}" / "run.json").read_text())
                                         .get("validity") or {}).get("verdict") == "invalid"}
    for users in spoiled:
        assert any(f"u{users}: stamped invalid" in note for note in notes), notes
    return spoiled


def _step_truth(root: Path, users: int) -> list[tuple[int, float, float]]:
    steps = read_step_log(step_log_path(str(root / f"truth-u{users}.jsonl")))
    return [(s.decode_batch, s.model_s, s.actual_s) for s in steps
            if s.decode_batch and not s.prefill_tokens]


def test_calibrate_recovers_the_profile_and_predicts_a_held_out_level(
    sim_runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str],
) -> None:
    wl, profile_path, runs = sim_runs
    twin = runs.parent / "twin.json"
    kept = runs.parent / "predictions"
    code = main(["calibrate", *(str(runs / f"u{u}") for u in LEVELS), "-o", str(twin),
                 "--holdout", "8", "--workload", str(wl), "--keep-predictions", str(kept)])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    assert "held-out level 8" in out
    doc = json.loads(twin.read_text())
    cal = doc["calibration"]
    assert cal["fitted_levels"] == [1, 2, 4] and cal["holdout_levels"] == [8]
    twin_profile = load_profile(str(twin))  # serve-sim reads it, calibration block and all
    truth = load_profile(str(profile_path))
    assert twin_profile.max_num_seqs == truth.max_num_seqs
    assert twin_profile.max_num_batched_tokens == truth.max_num_batched_tokens
    assert twin_profile.block_size == truth.block_size
    assert twin_profile.num_gpu_blocks == truth.num_gpu_blocks
    # the fixed TTFT overhead the fit measured is what the twin plays back
    assert twin_profile.request_overhead_s == pytest.approx(cal["fit"]["ttft_overhead_s"])
    fitted_t, true_t = twin_profile.backends["auto"], truth.backends["auto"]
    print(f"fitted vs profile: batch 1 {fitted_t.step_s_batch1:.5f}/{true_t.step_s_batch1} s, "
          f"batch 64 {fitted_t.step_s_batch64:.5f}/{true_t.step_s_batch64} s, ctx_ref "
          f"{twin_profile.ctx_ref_tokens}/{truth.ctx_ref_tokens}, prefill "
          f"{twin_profile.prefill_tokens_per_s:.0f}/{truth.prefill_tokens_per_s:.0f} tok/s")
    # against the profile, within 5% plus how late the simulator's batch-1 steps really
    # ran (the step log): a starved simulator's slow steps are what the client measured
    b1 = np.array([st for u in (1, 2, 4) for st in _step_truth(runs.parent, u) if st[0] == 1])
    late1 = max(b1[:, 2].mean() / b1[:, 1].mean() - 1, 0.0)
    shaky = _unsteadiness(runs.parent, (1, 2, 4))  # 0 unless the simulator was starved
    print(f"simulator: batch-1 lateness {late1:.1%}, unsteady steps {shaky:.1%}")
    assert abs(fitted_t.step_s_batch1 / true_t.step_s_batch1 - 1) <= 0.05 + late1 + shaky
    # The race, stated: a level whose simulator was starved past its own check is stamped
    # invalid (sim_late); its steps ran off the model unevenly, so the fit (one model
    # over the three levels) cannot follow them there. Calibrate must say so; the fit
    # is then held to the profile only.
    spoiled = _spoiled_and_named(runs, cal["notes"])
    for users in (1, 2, 4):
        steps = np.array(_step_truth(runs.parent, users))
        for b in np.unique(steps[:, 0]):
            at = steps[steps[:, 0] == b]
            if len(at) < 50:
                continue
            model, actual = at[:, 1].mean(), at[:, 2].mean()
            lateness = max(actual / model - 1, 0.0)
            fitted = twin_profile.backends["auto"].batch_step_s(int(b))
            ctx = twin_profile.ctx_ref_tokens
            level = next(lv for lv in cal["levels"] if lv["users"] == users)
            # the fitted step at this batch, at the level's mean context
            full = [s for s in read_step_log(step_log_path(
                str(runs.parent / f"truth-u{users}.jsonl")))
                    if s.decode_batch == b and not s.prefill_tokens]
            mean_ctx = float(np.mean([s.ctx_tokens for s in full]))
            fitted *= 1 + (mean_ctx / ctx if ctx else 0.0)
            print(f"users {users} batch {int(b)}: fitted {fitted * 1e3:.3f} ms, "
                  f"real {actual * 1e3:.3f} ms, profile {model * 1e3:.3f} ms, "
                  f"sim lateness {lateness:.1%}, level gap error {level['gap_error']:+.2%}")
            # The race, stated: a starved simulator can run one batch of one level late
            # (seen at load 4: batch 1 at 2 users 34% late, the level still valid, every
            # other batch on time); one model over three levels cannot follow that, so
            # the fit is held to the real step where the simulator kept its model there,
            # and to the model (below) everywhere.
            if users not in spoiled and abs(actual / model - 1) <= STEADY:
                assert abs(fitted / actual - 1) <= 0.05 + shaky
            assert abs(fitted / model - 1) <= 0.05 + lateness + shaky
    (hold,) = cal["holdouts"]
    err = hold["relative_error"]
    print(f"held out 8: predicted {hold['predicted']}, measured {hold['measured']}, "
          f"errors {err}")
    # A race: on a busy machine the real level ran late (simulator) or thinner (client)
    # by amounts the fitted levels never showed; the truth measures both.
    allowed, why = _allowed_miss(runs.parent, runs / "u8", kept / "predict-u8")
    print(f"at 8 users: {why}; allowed miss {allowed:.1%}")
    # The race, stated: on a loaded machine the client's 2-s warmup can send too few
    # requests to warm the cache (CI on e94b8d0: 43% of prefix hits against 99%
    # expected, schedule lag P99 106 ms), so the held-out level prefilled far more than
    # the twin's on-time run and its P90 interactivity (9 requests) fell 25% below the
    # prediction while every fitted step was within 0.1%. Such a level is no check of
    # the twin; what holds then is that the run says so.
    held = json.loads((runs / "u8" / "run.json").read_text()).get("validity") or {}
    codes = {r["code"] for r in held.get("reasons", [])}
    if codes & {"cache_cold", "client_schedule_lag"}:
        assert held["verdict"] in ("caveats", "invalid"), held
        return
    assert abs(err["p90_interactivity"]) <= allowed


def test_calibrate_refuses_a_holdout_level_it_has_no_run_for(
    sim_runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str],
) -> None:
    _wl, _profile, runs = sim_runs
    code = main(["calibrate", str(runs / "u1"), str(runs / "u2"), "-o",
                 str(runs.parent / "t.json"), "--holdout", "16"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--holdout 16" in err and "Traceback" not in err


def test_calibrate_refuses_to_overwrite_without_force(
    sim_runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str],
) -> None:
    _wl, _profile, runs = sim_runs
    out = runs.parent / "exists.json"
    out.write_text("{}")
    assert main(["calibrate", str(runs / "u1"), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


def test_calibrate_names_the_runs_stamped_invalid(
    sim_runs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A controlled trap: one copied run is stamped invalid for late sends; the twin's
    notes (file and printout) name it and its reason, and only it."""
    import shutil

    _wl, _profile, runs = sim_runs
    for users in (1, 2):
        shutil.copytree(runs / f"u{users}", tmp_path / f"u{users}")
    # Both stamps are set: the real runs' own stamps depend on how busy the machine was.
    for users, validity in ((1, {"verdict": "valid", "reasons": []}),
                            (2, {"verdict": "invalid", "reasons": [
                                {"code": "client_schedule_lag", "severity": "invalid",
                                 "message": "late"}]})):
        manifest_path = tmp_path / f"u{users}" / "run.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["validity"] = validity
        manifest_path.write_text(json.dumps(manifest))
    out = tmp_path / "twin.json"
    assert main(["calibrate", str(tmp_path / "u1"), str(tmp_path / "u2"), "-o", str(out)]) == 0
    notes = json.loads(out.read_text())["calibration"]["notes"]
    flagged = [n for n in notes if "stamped invalid" in n]
    assert len(flagged) == 1 and str(tmp_path / "u2") in flagged[0]
    assert "client_schedule_lag" in flagged[0]
    assert "stamped invalid (client_schedule_lag)" in capsys.readouterr().out


def test_calibrate_refuses_a_run_whose_level_is_no_users(
    sim_runs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """An open-loop run stores users=0; it is named as the rate it ran at, not fitted
    as a level of 0 users."""
    import shutil

    _wl, _profile, runs = sim_runs
    for users in (1, 2):
        shutil.copytree(runs / f"u{users}", tmp_path / f"u{users}")
    manifest_path = tmp_path / "u2" / "run.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["load"].update(users=0, arrival="open", rate=0.5)
    manifest["load_kind"] = "rate"
    manifest_path.write_text(json.dumps(manifest))
    code = main(["calibrate", str(tmp_path / "u1"), str(tmp_path / "u2"), "-o",
                 str(tmp_path / "twin.json")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert str(tmp_path / "u2") in err and "0.5 sessions/s" in err


_NOISE = (0.8, 0.9, 1.0, 1.1, 1.2, 3.0)
"""Step factor quantiles at 0, 20 .. 100%: mean 1.2, a heavy top fifth."""


@pytest.mark.slow  # minutes on the 2-core machine: started first under xdist
@pytest.mark.sim
def test_calibrate_recovers_heavy_tailed_steps_and_predicts_with_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """serve-sim's steps times a heavy-tailed factor (``step_noise``): the twin's mean
    step (typical step x its noise mean) is the step log's real mean at every batch, and
    the held-out level is predicted within 5% with the noise played back."""
    wl, _profile, runs = _sim_runs(tmp_path, step_noise=list(_NOISE))
    twin = tmp_path / "twin.json"
    kept = tmp_path / "predictions"
    assert main(["calibrate", *(str(runs / f"u{u}") for u in LEVELS), "-o", str(twin),
                 "--holdout", "8", "--workload", str(wl), "--keep-predictions",
                 str(kept)]) == 0
    print(capsys.readouterr().out)
    fitted = load_profile(str(twin))
    shaky = _unsteadiness(tmp_path, (1, 2, 4))  # 0 unless the simulator was starved
    q = np.asarray(fitted.step_noise)
    noise_mean = float((q[:-1] + q[1:]).mean() / 2)
    assert q[-1] / q[len(q) // 2] > 2  # the tail is kept, not averaged away
    # The race, stated: on a busy machine a fitted level can be stamped invalid (its
    # simulator ran late, its client stalled: seen at load 6, a 1-user level 9% late
    # with a 0.28-s stall). The noise is fitted over all three levels, so that level's
    # stretched steps reach every batch's mean; calibrate must name it, and the twin is
    # then held to nothing finer (the accuracy below holds where every level is valid).
    spoiled = _spoiled_and_named(runs, json.loads(twin.read_text())["calibration"]["notes"])
    if spoiled:
        print(f"fitted levels stamped invalid: {sorted(spoiled)}; named by calibrate")
        return
    for users in (1, 2, 4):
        full = [s for s in read_step_log(step_log_path(str(tmp_path / f"truth-u{users}.jsonl")))
                if s.decode_batch and not s.prefill_tokens]
        for b in sorted({s.decode_batch for s in full}):
            at = [s for s in full if s.decode_batch == b]
            if len(at) < 100:
                continue
            actual = np.asarray([s.actual_s for s in at])
            real = float(actual.mean())
            # the real mean of a few hundred heavy-tailed steps is itself a sample (the
            # noise's coefficient of variation is 0.42: 4% standard error at 100 steps);
            # which steps land at this batch depends on timing, so allow 3 of its errors
            sampled = 3 * float(actual.std(ddof=1)) / np.sqrt(len(actual)) / real
            ctx = float(np.mean([s.ctx_tokens for s in at]))
            mean_step = (fitted.backends["auto"].batch_step_s(b) * noise_mean
                         * (1 + ctx / fitted.ctx_ref_tokens if fitted.ctx_ref_tokens else 1))
            print(f"users {users} batch {b}: twin mean step {mean_step * 1e3:.2f} ms, "
                  f"real {real * 1e3:.2f} ms over {len(at)} steps (+-{sampled:.1%})")
            assert abs(mean_step / real - 1) <= 0.05 + shaky + sampled
    (hold,) = json.loads(twin.read_text())["calibration"]["holdouts"]
    allowed, why = _allowed_miss(tmp_path, runs / "u8", kept / "predict-u8")
    print(f"held out 8: {hold['relative_error']}; {why}; allowed miss {allowed:.1%}")
    assert abs(hold["relative_error"]["p90_interactivity"]) <= allowed  # a race: see there
    assert abs(hold["relative_error"]["output_tok_s"]) <= allowed
