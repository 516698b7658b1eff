"""Twin-guided ``compare --search``: it closes on the simulator's own bracket with fewer
probes than bisection, and falls back to bisection when a probe contradicts the twin.

The "server" is a simulator profile on the twin's virtual clock (each probe a
``simulate_level`` run directory, through ``search_capacity``'s ``run_probe``): no
socket, no timing. The truth is the same runs at every count (``bracket_of``): a
probe is a copy of the truth's run at its count (the virtual clock is deterministic),
so the searches cost only the twin's own simulations.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from analysis import SloTier, bracket_of, measure, read_run, summarize
from analysis.judge import meets_tier
from replay.ab import CompareOptions, SearchLimits, search_capacity
from replay.twin import load_workload, simulate_level
from tests.support.twin import flat_profile, small_agent_workload

pytestmark = pytest.mark.integration  # a minute or two of simulated levels

DURATION, WARMUP, DRAIN = 60.0, 10.0, 20.0
MAX_USERS = 16
TIER = SloTier(floor_tok_s=40, ttft_s=30)


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_agent_workload(tmp_path_factory.mktemp("wl") / "wl.jsonl")


@pytest.fixture(scope="module")
def truth(workload: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Path, tuple[float | None, float | None]]:
    """Every count's run (kept) and the bracket they give: the simulator's own answer."""
    root = tmp_path_factory.mktemp("truth")
    wl = load_workload(workload)
    verdicts = []
    for u in range(1, MAX_USERS + 1):
        s = simulate_level(flat_profile(), wl, u, DURATION, WARMUP, drain_s=DRAIN, backend="auto",
                           tiers=(TIER,), out_dir=root / f"u{u}").summary
        verdicts.append((float(u), meets_tier(s, TIER)))
    b = bracket_of(verdicts)
    return root, (b.passed, b.failed)


def _runner(workload: Path, truth_runs: Path, broken_from: int | None = None
            ):  # type: ignore[no-untyped-def]
    """A probe runner: the truth's run at that count; ``broken_from``: from that count
    up the server is another, far slower one (the twin fitted below it cannot know)."""
    wl = load_workload(workload)
    ran: list[int] = []

    def run(arm: str, url: str, users: int, run_dir: Path, _stop: object) -> None:
        # the truth's runs ran their whole windows: the stop rule is not applied here
        if broken_from is not None and users >= broken_from:
            simulate_level(flat_profile(2.0), wl, users, DURATION, WARMUP, drain_s=DRAIN,
                           backend="auto", tiers=(TIER,), out_dir=run_dir)
        else:
            shutil.copytree(truth_runs / f"u{users}", run_dir)
        ran.append(users)

    return run, ran


def _search(workload: Path, truth_runs: Path, out: Path, method: str,
            broken_from: int | None = None, start: int = 1):  # type: ignore[no-untyped-def]
    run, ran = _runner(workload, truth_runs, broken_from=broken_from)
    opts = CompareOptions(duration_s=DURATION, warmup_s=WARMUP, drain_s=DRAIN, slo=(TIER,))
    res = search_capacity([("sim", "http://127.0.0.1:9")], workload, out, opts, [TIER],
                          limits=SearchLimits(max_users=MAX_USERS, max_probes=20,
                                              method=method),  # type: ignore[arg-type]
                          run_probe=run, start_users=start)
    doc = orjson.loads((out / "search.json").read_bytes())["results"][0]
    return res.answers[0], ran, doc


def test_twin_search_closes_on_the_truth_bracket_bisection_does_not_in_as_many_runs(
        workload: Path, truth: tuple[Path, tuple[float | None, float | None]],
        tmp_path: Path) -> None:
    runs, bracket = truth
    assert bracket[0] is not None and bracket[1] is not None, bracket  # inside the range
    # from 4 users: the twin's first fit sees batches of 4 and 8, not 1 and 2
    bisect, ran_b, _ = _search(workload, runs, tmp_path / "bisect", "bisect", start=4)
    twin, ran_t, doc = _search(workload, runs, tmp_path / "twin", "twin", start=4)
    capacity = bracket[0]
    for a in (bisect, twin):  # both hold the simulator's answer
        assert a.bracket is not None and a.bracket.failed is not None, a.text()
        assert (a.bracket.passed or 0) <= capacity < a.bracket.failed, a.text()
    # the twin closes on the truth's own bracket; bisection either needs more runs for
    # it or stops wider (a count next to the line that its samples cannot tell)
    assert twin.bracket is not None and (twin.bracket.passed, twin.bracket.failed) == bracket
    assert bisect.bracket is not None
    bisect_width = bisect.bracket.failed - (bisect.bracket.passed or 0)  # type: ignore[operator]
    assert len(ran_t) < len(ran_b) or bisect_width > bracket[1] - bracket[0], (ran_t, ran_b)
    assert any(e["placed_by"] == "twin" for e in doc["evidence"])


def test_a_contradicted_twin_falls_back_to_bisection(
        workload: Path, truth: tuple[Path, tuple[float | None, float | None]],
        tmp_path: Path) -> None:
    # fitted at 1 and 2 users on the fast server, the twin places its probes at 3 or above,
    # where the server is another, slow one: its expected "met" fails, bisection takes over
    twin, ran, doc = _search(workload, truth[0], tmp_path / "twin", "twin", broken_from=3)
    order = [e["users"] for e in doc["evidence"]]
    assert ran[:2] == [1, 2] and set(ran) == set(order)
    first = next(e for e in doc["evidence"] if e["placed_by"] == "twin")
    assert first["verdict"] == "fails" and first["users"] > 3, doc["evidence"]
    notes = doc["twin"]["steps"]
    assert any(f"contradicted at {first['users']} users" in n for n in notes), notes
    # the step after the contradiction is bisection's: halfway between 2 and the failure
    after = ran[ran.index(first["users"]) + 1]
    by = {e["users"]: e["placed_by"] for e in doc["evidence"]}
    assert after == (2 + first["users"]) // 2 and by[after] == "bisect", (ran, by)
    assert twin.bracket is not None and (twin.bracket.passed, twin.bracket.failed) == (2, 3)


def test_probes_stop_early_with_the_verdict_their_whole_window_gives(
        workload: Path, truth: tuple[Path, tuple[float | None, float | None]],
        tmp_path: Path) -> None:
    # the probes run on the twin's clock with the search's stop rule (its default): a
    # probe that stopped early was judged on the window it covered, and that verdict is
    # never the opposite of the same count's whole window (the truth's run there)
    wl = load_workload(workload)
    whole: dict[int, bool | None] = {}
    for u in range(1, MAX_USERS + 1):
        s = read_run(truth[0] / f"u{u}")
        whole[u] = meets_tier(summarize(measure(s), bootstrap=False, tiers=(TIER,)), TIER)

    def run(arm: str, url: str, users: int, run_dir: Path, stop: object) -> None:
        assert stop is not None  # early stop is the search's default
        simulate_level(flat_profile(), wl, users, DURATION, WARMUP, drain_s=DRAIN, backend="auto",
                       tiers=(TIER,), out_dir=run_dir, window_stop=stop)  # type: ignore[arg-type]

    opts = CompareOptions(duration_s=DURATION, warmup_s=WARMUP, drain_s=DRAIN, slo=(TIER,))
    res = search_capacity([("sim", "http://127.0.0.1:9")], workload, tmp_path / "s", opts,
                          [TIER], limits=SearchLimits(max_users=MAX_USERS, max_probes=20),
                          run_probe=run)
    doc = orjson.loads((tmp_path / "s" / "search.json").read_bytes())
    evidence = doc["results"][0]["evidence"]
    stopped = [e for e in evidence if e["stopped_early"]]
    assert stopped, evidence  # the counts far from the line settle early
    for e in stopped:
        assert e["verdict"] in ("meets", "fails") and e["window_s"] < DURATION, e
        assert whole[e["users"]] is not (e["verdict"] == "fails"), (e, whole)
        run_m = read_run(tmp_path / "s" / "runs" / f"sim-u{e['users']}-r0").manifest
        assert run_m.early_stop is not None and run_m.window is not None
        assert e["window_s"] == pytest.approx(run_m.window.end_s - run_m.window.start_s)
    a = res.answers[0]
    capacity = truth[1][0]
    assert a.bracket is not None and capacity is not None
    assert (a.bracket.passed or 0) <= capacity
    assert a.bracket.failed is None or capacity < a.bracket.failed, a.text()
