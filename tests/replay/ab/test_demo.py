"""``agentreplay demo`` end to end, checked against the simulator profile's own figures."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import orjson
import pytest

from replay.ab import DEMO_PROFILE
from replay.servers.sim import load_profile
from tests.support.demo import DemoRun
from tests.support.servers import exit_for

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_demo_end_to_end(quick_demo: DemoRun) -> None:
    # the session's one `agentreplay demo --quick` (tests/support/demo.py), also read by
    # the browser's check of its report
    out, done = quick_demo.out, quick_demo
    assert done.returncode == exit_for(out), done.stderr.decode(errors="replace")
    printed = done.stdout.decode()
    report = out / "report.html"
    assert report.exists()
    summary = orjson.loads((out / "summary.json").read_bytes())
    from analysis import Comparison
    from analysis.report import decide

    # stdout opens with the decision the report opens with (each arm's twin beside its
    # bracket), line for line
    plan = orjson.loads((out / "twin-plan.json").read_bytes())
    decision = decide(Comparison.model_validate(summary), plan).lines()
    assert printed.splitlines()[:len(decision)] == decision
    _check_twins(out, plan, printed)
    html = report.read_text()
    # the decision as shown, escaped (an invalid one, on a starved machine, quotes
    # "server's"); the validity is its own line ("Validity: CAVEATS (...)")
    for line in decision:
        assert line in unescape(html), line
    assert "same GPU count" in html
    prof = load_profile(DEMO_PROFILE).backends
    expected = prof["auto"].step_s_batch1 / prof["latency_specialized"].step_s_batch1
    # the smallest level (4 users): batches stay small, so the step-time ratio at batch 1
    # is what the arms' P90 interactivity ratio comes to
    level = summary["levels"][0]
    assert level["load"] == {"kind": "users", "value": 4}
    ratio = next(r for r in level["ratios"]["latency_specialized"]
                 if r["metric"] == "interactivity.p90")
    if summary["validity"]["verdict"] == "invalid":
        # a starved simulator (a busy machine) must be stamped, not reported as a speed
        assert done.returncode == 3 and "INVALID" in printed
    else:
        assert ratio["ratio"] == pytest.approx(expected, rel=0.10)
        # The ratio is established exactly where its interval excludes 1 (quick has 4
        # users per arm and 20+ requests, as "established" asks). Whether it excludes 1 is
        # a race: it mostly does ([1.79, 2.08] in a fresh clone's demo beside a loaded
        # suite), but on CI the bootstrap over 4 users once spread to [0.69, 1.97] about 1.88,
        # in a level still valid: one user's timing moves a P90 over 4. Either way the
        # decision says which (its lines are checked above).
        lo = ratio["ci"][0]
        assert ratio["better"] and ratio["established"] == (
            lo > 1 and ratio["not_established"] is None), ratio
        # warm (its warmup fills the prefix cache); a busy machine may still add a caveat
        # about the client (client_imbalance, schedule lag): not asserted away
        codes = {r["code"] for r in summary["validity"]["reasons"]}
        assert not codes & {"cache_cold", "cache_warming"}, summary["validity"]
    # the decision the report opens with is what the demo printed, capacity first
    assert "Capacity at \u2265 100 tok/s/user" in printed
    assert "users per GPU" in printed and "latency_specialized / auto capacity" in printed


def _check_twins(out: Path, plan: dict, printed: str) -> None:
    """Each arm's twin, fitted on its own runs, recovers that backend's step time at
    batch 1 from the simulator profile (the truth the arm was served by), and stands
    beside its arm's bracket at every tier, labelled modelled with its replica count."""
    prof = load_profile(DEMO_PROFILE)
    assert [t["arm"] for t in plan["twins"]] == ["auto", "latency_specialized"]
    for t in plan["twins"]:
        arm = t["arm"]
        twin = orjson.loads((out / f"twin-{arm}.json").read_bytes())
        assert twin["calibration"]["decode_backend"] == arm
        truth = prof.backends[arm].step_s_batch1
        assert twin["backends"][arm]["step_s_batch1"] == pytest.approx(truth, rel=0.10), arm
        assert t["replicas"] == 1 and t["gpus_per_replica"] == prof.gpu_count
        assert t["prediction_interval"]["checked_users"] == 16  # the held-out level
        assert {x["tier"] for x in t["tiers"]} == {"30:15", "100:15", "300:15"}
    for line in printed.splitlines()[:3]:  # one line per tier
        assert line.count(", its twin (1 replica) modelled ") == 2, line
        # each twin beside its own arm's measured bracket, in the arms' order (a level a
        # starved machine left indeterminate can make a bracket "capacity unknown", said
        # where "measured (...)" would stand)
        auto = line.index(": auto ")
        lat = line.index("; latency_specialized ", auto)
        for start, end in ((auto, lat), (lat, len(line))):
            twin_at = line.index("its twin", start, end)
            assert "measured (" in line[start:twin_at] \
                or "capacity unknown" in line[start:twin_at], line[start:end]
    html = unescape((out / "report.html").read_text())
    assert "Twin estimate per arm (modelled)" in html
    assert html.count("its twin (1 replica) modelled") == 2 * len(plan["twins"][0]["tiers"])


def test_demo_levels_bracket_a_tier_on_both_arms() -> None:
    """The full demo's levels straddle each arm's capacity at the 100 tok/s/user tier,
    by the twin of its own profile (simulated time, no server): auto meets it at 4 users
    and fails at 16, latency_specialized meets it at 16 and fails at 40, each with a
    margin of 10% or more (a small drift cannot move a bracket)."""
    import tempfile

    from analysis import SloTier
    from analysis.judge import meets_tier
    from replay.ab import demo_settings
    from replay.ab._demo import _workload
    from replay.twin import load_workload, run_ladder

    s = demo_settings()
    tier = SloTier(floor_tok_s=100, ttft_s=15)
    profile = load_profile(DEMO_PROFILE)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wl.jsonl"
        _workload(path, s)
        wl = load_workload(str(path))
        for backend, met in (("auto", (True, False, False)),
                             ("latency_specialized", (True, True, False))):
            results = run_ladder(profile, wl, list(s.levels), jobs=1, duration=s.duration_s,
                                 warmup=s.warmup_s, drain_s=s.drain_s, backend=backend,
                                 tiers=(tier,))
            assert tuple(meets_tier(r.summary, tier) for r in results) == met, backend
            for r in results:
                p90 = r.summary.interactivity.p90
                assert p90 is not None and abs(p90 / tier.floor_tok_s - 1) >= 0.10, (backend, p90)
