"""Search bench: twin-guided search against plain bisection on hidden serve-sim profiles.

Each case draws a hidden simulator profile and workload as the twin battery does
(``_battery_draw.draw_case``, with this bench's own seed, so no profile is one a test
uses) and an SLO tier whose capacity lies inside the search's range (the floor is the
hidden profile's P90 interactivity at a drawn count). The "server" is the hidden
profile on the twin's virtual clock (``replay.twin.simulate_level``: the real lanes,
the simulator's engine, a client's run directory), as the battery measures; each probe
is such a run, judged by ``compare --search``'s own code (``search_capacity`` with a
``run_probe``). GPU-seconds are simulated seconds of the probe runs (warmup, window,
drain) x 1 GPU.

Truth: the hidden profile's own answer, bisected over the counts with the probes'
own settings and engine seed (the virtual clock is deterministic: a probe at a count
is the truth's run there; a level the judge cannot tell counts as not failed); a
bracket holds the truth when passed <= truth capacity < failed. Longer "truth" runs
were tried first and held by neither method: a coding-agent workload's contexts grow
through a run, so a 4x longer run is another load, not a better-measured one.

Early stop is projected (the run loop has no stop hook): a probe's cost up to where
the rule settled it (``replay.ab._early_stop``) plus the drain its in-flight requests
needed; the table counts probes whose settled verdict differs from the full window's.

    PYTHONPATH=.:bench python bench/search_bench.py --cases 8 --out /tmp/search-bench
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _battery_draw import draw_case, write_workload_spec

SEED = 4242
"""This bench's draw (the battery's default is another; tests use fixed profiles)."""
DURATION_S, WARMUP_S, DRAIN_S = 240.0, 60.0, 60.0
THINK_SCALE = 0.2
"""Think times x0.2: more requests a window, so fewer levels the judge cannot tell."""
MAX_USERS = 128
LIVE: Any = "quiet"


def _sim(profile: Any, wl: Any, users: int, duration: float, engine_seed: int,
         tier: Any, out: Path | None = None) -> Any:
    from replay.twin import simulate_level

    return simulate_level(profile, wl, users, duration, WARMUP_S, drain_s=DRAIN_S,
                          think_scale=THINK_SCALE,
                          backend="auto", tiers=(tier,), out_dir=out, engine_seed=engine_seed)


def _draw_tier(profile: Any, wl: Any, rng: np.random.Generator, engine_seed: int) -> Any:
    """A tier whose capacity is near a drawn count (6 to 64 users)."""
    from analysis import SloTier

    target = int(round(math.exp(rng.uniform(math.log(6), math.log(64)))))
    s = _sim(profile, wl, target, DURATION_S, engine_seed,
             SloTier(floor_tok_s=1, ttft_s=1)).summary
    floor = max(1.0, float(s.interactivity.p90 or 1.0))
    ttft = max(1.0, 3 * float(s.ttft_due.p90 or 1.0))
    return SloTier(floor_tok_s=round(floor, 1), ttft_s=round(ttft, 1)), target


def _truth(profile: Any, wl: Any, tier: Any, engine_seed: int) -> tuple[int, int]:
    """(truth capacity, long runs used): bisection on long runs of the hidden profile."""
    from analysis.judge import meets_tier

    cache: dict[int, bool] = {}

    def ok(u: int) -> bool:
        if u not in cache:
            s = _sim(profile, wl, u, DURATION_S, engine_seed, tier).summary
            cache[u] = meets_tier(s, tier) is not False
        return cache[u]

    if not ok(1):
        return 0, len(cache)
    if ok(MAX_USERS):
        return MAX_USERS, len(cache)
    a, b = 1, MAX_USERS
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if ok(mid) else (a, mid)
    return a, len(cache)


def _projected(run_dir: Path, settled_s: float | None, full_s: float) -> float:
    """Simulated seconds the probe needed had it stopped where the rule settled it."""
    if settled_s is None:
        return full_s
    from analysis import read_run
    from analysis.read import steady_window

    run = read_run(run_dir)
    w = steady_window(run)
    if w is None:
        return full_s
    r = run.requests
    stop = w[0] + settled_s
    sent = (r.sent_s >= w[0]) & (r.sent_s < stop)
    ends = r.end_s[sent]
    drain = float(np.nanmax(ends) - stop) if ends.size and np.isfinite(ends).any() else 0.0
    return min(full_s, w[0] + settled_s + min(DRAIN_S, max(0.0, drain)))


def _search(method: str, case: Any, tier: Any, wl_path: Path, wl: Any, root: Path,
            engine_seed: int) -> dict[str, Any]:
    from replay.ab import CompareOptions, SearchLimits, search_capacity
    from replay.servers.sim import SimProfile

    hidden = SimProfile.model_validate(case.profile)
    cost: dict[Path, float] = {}

    def run_probe(arm: str, url: str, users: int, run_dir: Path) -> None:
        res = _sim(hidden, wl, users, DURATION_S, engine_seed, tier, out=run_dir)
        cost[run_dir] = res.sim_s

    opts = CompareOptions(duration_s=DURATION_S, warmup_s=WARMUP_S, drain_s=DRAIN_S,
                          think_scale=THINK_SCALE, slo=(tier,))
    out = root / method
    t0 = time.perf_counter()
    res = search_capacity([("hidden", "http://127.0.0.1:9")], wl_path, out, opts, [tier],
                          start_users=1, run_probe=run_probe, live=LIVE,
                          limits=SearchLimits(max_users=MAX_USERS, max_probes=20,
                                              method=method))  # type: ignore[arg-type]
    a = res.answers[0]
    full = sum(cost.values())
    early, disagree = 0.0, 0
    for run_dir, sim_s in cost.items():
        p = next(p for p in a.evidence if run_dir.name.startswith(f"hidden-u{p.users}-r"))
        st = p.settled.get(tier.name)
        early += _projected(run_dir, None if st is None else st.window_s, sim_s)
        verdict = p.outcomes.get(tier.name)
        if st is not None and st.verdict != verdict:
            disagree += 1
    b = a.bracket
    return {"method": method, "probes": len(cost), "gpu_s": full, "gpu_s_early": early,
            "passed": None if b is None else b.passed, "failed": None if b is None else b.failed,
            "ended": a.ended, "twin_placed": sum(1 for p in a.evidence
                                                 if p.placed_by.get(tier.name) == "twin"),
            "early_disagree": disagree, "cpu_s": time.perf_counter() - t0}


def _holds(r: dict[str, Any], truth: int) -> bool:
    lo = r["passed"] or 0
    hi = r["failed"]
    return lo <= truth and (hi is None or truth < hi)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=8)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", default="/tmp/search-bench")
    ap.add_argument("--live", action="store_true", help="print each search step")
    args = ap.parse_args(argv)
    global LIVE
    LIVE = "plain" if args.live else "quiet"
    from replay.servers.sim import SimProfile
    from replay.twin import load_workload

    root = Path(args.out)
    rows = []
    for n in range(args.first, args.first + args.cases):
        case = draw_case(n, args.seed)
        wl_path = write_workload_spec(case.workload, root / "workloads" /
                                      f"{case.workload.name}.jsonl")
        wl = load_workload(wl_path)
        hidden = SimProfile.model_validate(case.profile)
        engine_seed = 1000 + n
        rng = np.random.default_rng([args.seed, n, 7])
        tier, target = _draw_tier(hidden, wl, rng, engine_seed)
        truth, _ = _truth(hidden, wl, tier, engine_seed)
        row: dict[str, Any] = {"case": n, "tier": tier.name, "target": target,
                               "truth": truth}
        for method in ("bisect", "twin"):
            r = _search(method, case, tier, wl_path, wl, root / f"case-{n:03d}", engine_seed)
            r["holds"] = _holds(r, truth)
            row[method] = r
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    (root / "results.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))
    return 0


def table(rows: list[dict[str, Any]]) -> str:
    """The comparison table (markdown)."""
    out = ["| case | tier | truth | bisect bracket | probes | GPU-s | holds | twin bracket "
           "| probes (twin-placed) | GPU-s | holds | twin+early GPU-s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def br(r: dict[str, Any]) -> str:
        p = "-" if r["passed"] is None else f"{r['passed']:g}"
        f = "-" if r["failed"] is None else f"{r['failed']:g}"
        return f"{p}-{f} ({r['ended']})"

    for row in rows:
        b, t = row["bisect"], row["twin"]
        out.append(f"| {row['case']} | {row['tier']} | {row['truth']} | {br(b)} | "
                   f"{b['probes']} | {b['gpu_s']:.0f} | {'yes' if b['holds'] else 'NO'} | "
                   f"{br(t)} | {t['probes']} ({t['twin_placed']}) | {t['gpu_s']:.0f} | "
                   f"{'yes' if t['holds'] else 'NO'} | {t['gpu_s_early']:.0f} |")
    if rows:
        def tot(m: str, k: str) -> float:
            return float(sum(r[m][k] for r in rows))
        out.append(f"| all | | | {sum(r['bisect']['holds'] for r in rows)}/{len(rows)} hold | "
                   f"{tot('bisect', 'probes'):.0f} | {tot('bisect', 'gpu_s'):.0f} | | "
                   f"{sum(r['twin']['holds'] for r in rows)}/{len(rows)} hold | "
                   f"{tot('twin', 'probes'):.0f} | {tot('twin', 'gpu_s'):.0f} | | "
                   f"{tot('twin', 'gpu_s_early'):.0f} |")
        out.append("")
        out.append(f"twin / bisect GPU-seconds: {tot('twin', 'gpu_s') / tot('bisect', 'gpu_s'):.2f}"
                   f"; with early stop (projected): "
                   f"{tot('twin', 'gpu_s_early') / tot('bisect', 'gpu_s'):.2f}; bisect with "
                   f"early stop: {tot('bisect', 'gpu_s_early') / tot('bisect', 'gpu_s'):.2f}; "
                   f"settled verdicts that differ from the full window's: "
                   f"{sum(r[m]['early_disagree'] for r in rows for m in ('bisect', 'twin'))}")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
