"""``plan --twin --replicas 2`` against two real-time serve-sims of the same profile.

A profile file is a twin (``serve-sim --profile`` and ``plan --twin`` read the same
file). The twin is asked, with 2 replicas behind session-affinity routing, whether a
tier is met at a light and a heavy level; the tier's floor is set between the twin's
P90 interactivity at the two levels, so the twin answers "met at the light level,
failed at the heavy one". Then the same levels are measured in real time by one
``agentreplay run`` against two serve-sims (``--target`` twice, affinity routing),
and the measured answer must be the same at both levels. The floor sits at the
geometric mean of the twin's two values (each about 20% away). On a busy machine the
real-time level is not the one the twin played (late steps, late sends): the simulators'
step logs and the run's stamp say by how much, and what holds either way is asserted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis import SloTier, measure, read_run, summarize
from analysis.judge import meets_tier
from replay.cli import main
from replay.servers.sim import SimServerProcess, read_step_log, step_log_path
from replay.twin import load_twin, load_workload, simulate_level
from tests.support.runs import server_timed
from tests.support.servers import profile_variant
from traces import generate, write_workload

pytestmark = pytest.mark.integration

LIGHT, HEAVY = 4, 40
DURATION_S, WARMUP_S, DRAIN_S = 25.0, 3.0, 15.0
_TIMING = {"step_s_batch1": 0.04, "step_s_batch64": 0.16}


def _setup(root: Path) -> tuple[Path, Path]:
    wl = root / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=48, seed=3, block_size=16,
                                max_context=4096, prompt_scale=0.02, think_scale=0.01,
                                output_scale=0.04)  # short answers: enough requests at 4
    # users in 25 s (about 47) for the level to be told met or failed, not indeterminate
    write_workload(wl, header, sessions)
    profile = profile_variant(root, backends={"auto": _TIMING, "latency_specialized": _TIMING},
                              ctx_ref_tokens=200000, prefill_tokens_per_s=200000.0)
    return wl, profile


def _lateness(truth_paths: list[str]) -> float:
    """How much longer the simulators' decode steps really took than modelled (0: on
    time), from their step logs."""
    steps = [st for path in truth_paths for st in read_step_log(step_log_path(path))
             if st.decode_batch]
    return max(sum(st.actual_s for st in steps) / sum(st.model_s for st in steps) - 1, 0.0)


def _client_lagged(run: Path) -> bool:
    """Whether the run's stamp names the client's schedule lag (caveat or invalid)."""
    validity = json.loads((run / "run.json").read_text()).get("validity") or {}
    return any(r.get("code") == "client_schedule_lag" for r in validity.get("reasons", []))


@pytest.mark.slow  # minutes on the 2-core machine: started first under xdist
@pytest.mark.sim
def test_plan_replicas_gives_the_tier_answer_two_serve_sims_measure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    wl, profile_path = _setup(tmp_path)
    twin, _ = load_twin(profile_path)
    work = load_workload(wl)
    p90 = {u: simulate_level(twin, work, u, DURATION_S, WARMUP_S, drain_s=DRAIN_S,
                             replicas=2, backend="auto", tiers=()).summary.interactivity.p90
           for u in (LIGHT, HEAVY)}
    assert p90[LIGHT] and p90[HEAVY] and p90[LIGHT] > 1.3 * p90[HEAVY]
    floor = math.sqrt(p90[LIGHT] * p90[HEAVY])
    tier = SloTier(floor_tok_s=round(floor, 1), ttft_s=30.0)
    code = main(["plan", "--twin", str(profile_path), "--workload", str(wl), "--users",
                 f"{LIGHT}:{HEAVY}", "--levels", "2", "--replicas", "2", "--duration",
                 str(DURATION_S), "--warmup", str(WARMUP_S), "--drain", str(DRAIN_S),
                 "--backend", "auto", "--slo", f"{tier.floor_tok_s}:{tier.ttft_s:g}",
                 "--agents", str(HEAVY), "--jobs", "1"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    assert f"tier {tier.name}: capacity between {LIGHT} and {HEAVY} users" in out
    twin_answer = {LIGHT: True, HEAVY: False}
    for users in (LIGHT, HEAVY):
        run = tmp_path / f"fleet-u{users}"
        truths = [str(tmp_path / f"truth-u{users}-{k}.jsonl") for k in range(2)]
        with SimServerProcess(str(profile_path), "auto", truth_path=truths[0]) as a, \
                SimServerProcess(str(profile_path), "auto", seed=1, truth_path=truths[1]) as b:
            rc = main(["run", "--target", a.url, "--target", b.url, "--workload", str(wl),
                       "--users", str(users), "--warmup", str(WARMUP_S), "--duration",
                       str(DURATION_S), "--drain", str(DRAIN_S), "--out", str(run),
                       "--quiet"])
        assert rc in (0, 3)
        s = summarize(measure(read_run(run)), tiers=(tier,), bootstrap=False)
        met = meets_tier(s, tier)
        late = _lateness(truths)
        # the level as the simulators delivered it (a starved client's late reads out),
        # then their own measured lateness out: what an idle machine would have measured
        served = summarize(measure(read_run(server_timed(run, truths, tmp_path / f"s{users}"))),
                           tiers=(tier,), bootstrap=False)
        on_time = served.interactivity.p90 * (1 + late)
        client_late = _client_lagged(run)
        print(f"{users} users on two serve-sims: P90 interactivity {s.interactivity.p90:.1f} "
              f"(twin {p90[users]:.1f}), tier {tier.name} met: {met}; sim lateness "
              f"{late:.1%}; as served {served.interactivity.p90:.1f}, on time {on_time:.1f}; "
              f"client lagged: {client_late}")
        # A race: a starved simulator stretches its steps and a starved client reads
        # late (slower: can fail the light level); a starved client also sends late
        # (fewer requests in flight, faster: can pass the heavy one). The truth logs
        # measure the first two: with them taken out, the level's P90 is on the twin's
        # side of the floor either way. The third is stamped (client_schedule_lag);
        # without it the heavy level must fail.
        if twin_answer[users]:
            assert on_time >= tier.floor_tok_s, (users, on_time, tier.floor_tok_s)
        elif not client_late:
            assert served.interactivity.p90 < tier.floor_tok_s, (users, served.interactivity.p90)
        # the tier judgement itself, where neither race moved the level
        if late < 0.02 and not client_late:
            assert met == twin_answer[users], (users, met)
    doc = json.loads(profile_path.read_text())
    assert doc["max_num_seqs"] > HEAVY  # the heavy level is not capped by the batch limit
