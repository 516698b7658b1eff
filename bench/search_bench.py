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

Three searches per case: bisection running every probe's whole window (the baseline,
``--search-full-window``), bisection with early stop, and the twin-guided search with
early stop (``compare --search``'s default: a probe's window ends once its verdict is
settled, ``replay.ab._early_stop.TierStop``, and its requests in flight drain). Early
stop is real: the probe's simulated seconds end with its drain. "early" counts the
probes whose window ended early; "differ" those among them whose verdict is not the
one the hidden profile gives that count on a whole window (the truth's run there;
a count the whole window cannot tell either is not counted).

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
REPEAT_SEED = 7919
"""A repeated probe's engine seed is the case's plus this (fresh step noise)."""
RUNS = (("bisect", "bisect", False), ("bisect_early", "bisect", True),
        ("twin", "twin", True), ("oracle", "oracle", True))
"""(row key, --search-method, early stop): the baseline first. ``oracle`` is no
method: the twin's search with the twin replaced by the truth (:class:`OracleGuide`),
the least any placement could spend under the same probe rules."""
LIVE: Any = "quiet"
PRECISION: float | None = None
"""``--precision``: the bracket's relative width to stop at (None: one user)."""


def _sim(profile: Any, wl: Any, users: int, duration: float, engine_seed: int,
         tier: Any, out: Path | None = None, stop: Any = None) -> Any:
    from replay.twin import simulate_level

    return simulate_level(profile, wl, users, duration, WARMUP_S, drain_s=DRAIN_S,
                          think_scale=THINK_SCALE, backend="auto", tiers=(tier,), out_dir=out,
                          engine_seed=engine_seed, window_stop=stop)


def _draw_tier(profile: Any, wl: Any, rng: np.random.Generator, engine_seed: int) -> Any:
    """A tier whose capacity is near a drawn count (6 to 64 users)."""
    from analysis import SloTier

    target = int(round(math.exp(rng.uniform(math.log(6), math.log(64)))))
    s = _sim(profile, wl, target, DURATION_S, engine_seed,
             SloTier(floor_tok_s=1, ttft_s=1)).summary
    floor = max(1.0, float(s.interactivity.p90 or 1.0))
    ttft = max(1.0, 3 * float(s.ttft_due.p90 or 1.0))
    return SloTier(floor_tok_s=round(floor, 1), ttft_s=round(ttft, 1)), target


class Truth:
    """The hidden profile's whole-window verdicts (cached): meets, fails or None."""

    def __init__(self, profile: Any, wl: Any, tier: Any, engine_seed: int) -> None:
        self.profile, self.wl, self.tier, self.engine_seed = profile, wl, tier, engine_seed
        self.verdicts: dict[int, bool | None] = {}

    def verdict(self, u: int) -> bool | None:
        from analysis.judge import meets_tier

        if u not in self.verdicts:
            s = _sim(self.profile, self.wl, u, DURATION_S, self.engine_seed, self.tier).summary
            self.verdicts[u] = meets_tier(s, self.tier)
        return self.verdicts[u]


def _truth(truth: Truth) -> tuple[int, int]:
    """(truth capacity, runs used): bisection on the hidden profile's whole windows."""
    cache = truth.verdicts

    def ok(u: int) -> bool:
        return truth.verdict(u) is not False

    if not ok(1):
        return 0, len(cache)
    if ok(MAX_USERS):
        return MAX_USERS, len(cache)
    a, b = 1, MAX_USERS
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if ok(mid) else (a, mid)
    return a, len(cache)


class OracleGuide:
    """Places probes as the twin would if it were exact: at the truth's capacity ``t``
    (expected to meet) and ``t + 1`` (expected to fail), from the same first two levels,
    under the same rules (repeats, early stop, the bracket's lower end)."""

    def __init__(self, truth: int) -> None:
        self.truth = truth

    def advise(self, dirs: Any, verdicts: Any, tier: Any, lo: int, hi: int | None,
               max_users: int, track: Any) -> tuple[int | None, str]:
        if len(verdicts) < 2:
            return None, "oracle: too few levels"
        top = hi - 1 if hi is not None else max_users
        t = min(max(self.truth, lo), top)
        u = next((u for u in ((t + 1, t) if hi is None else (t, t + 1))
                  if lo < u <= top and verdicts.get(u) is None), None)
        why = "oracle: truth already probed" if u is None else f"oracle: {u}"
        track.notes.append(why)
        if u is not None:
            track.placed += 1
        return u, why


def _search(method: str, early_stop: bool, case: Any, tier: Any, wl_path: Path, wl: Any,
            root: Path, engine_seed: int, truth: Truth, truth_capacity: int
            ) -> dict[str, Any]:
    from replay.ab import CompareOptions, search_capacity
    from replay.servers.sim import SimProfile

    hidden = SimProfile.model_validate(case.profile)
    cost: dict[Path, float] = {}

    def run_probe(arm: str, url: str, users: int, run_dir: Path, stop: Any) -> None:
        # a repeat (``-r1``) is a fresh sample of the server's noise, as on a real server:
        # on the virtual clock the same engine seed would replay the first run exactly,
        # and the judge would pool each request twice (an interval too narrow)
        repeat = int(run_dir.name.rsplit("-r", 1)[1])
        res = _sim(hidden, wl, users, DURATION_S, engine_seed + REPEAT_SEED * repeat, tier,
                   out=run_dir, stop=stop)
        cost[run_dir] = res.sim_s

    opts = CompareOptions(duration_s=DURATION_S, warmup_s=WARMUP_S, drain_s=DRAIN_S,
                          think_scale=THINK_SCALE, slo=(tier,))
    name = f"{method}-{'early' if early_stop else 'full'}"
    out = root / name
    t0 = time.perf_counter()
    import replay.ab._search as search_mod

    guide = search_mod.TwinGuide
    if method == "oracle":  # the twin's search, its guide told the truth
        search_mod.TwinGuide = lambda *_: OracleGuide(truth_capacity)  # type: ignore
        method = "twin"
    try:
        res = _run_search(search_capacity, out, opts, tier, wl_path, run_probe, method,
                          early_stop)
    finally:
        search_mod.TwinGuide = guide  # type: ignore[misc]
    return _row(res, name, cost, tier, truth, t0)


def _run_search(search_capacity: Any, out: Path, opts: Any, tier: Any, wl_path: Path,
                run_probe: Any, method: str, early_stop: bool) -> Any:
    from replay.ab import SearchLimits

    return search_capacity([("hidden", "http://127.0.0.1:9")], wl_path, out, opts, [tier],
                          start_users=1, run_probe=run_probe, live=LIVE,
                          limits=SearchLimits(max_users=MAX_USERS, max_probes=20,
                                              precision=PRECISION,
                                              method=method,  # type: ignore[arg-type]
                                              full_window=not early_stop))


def _row(res: Any, name: str, cost: dict[Path, float], tier: Any, truth: Truth,
         t0: float) -> dict[str, Any]:
    a = res.answers[0]
    stopped, differ = 0, 0
    for run_dir in cost:
        from analysis import read_run

        m = read_run(run_dir).manifest
        if m.early_stop is None:
            continue
        stopped += 1
        users = int(m.load.users or 0)
        settled = "meets" if tier.name + " meets" in m.early_stop.why else "fails"
        whole = truth.verdict(users)  # None: the whole window cannot tell either
        if whole is not None and whole is not (settled == "meets"):
            differ += 1
    b = a.bracket
    return {"method": name, "probes": len(cost), "gpu_s": sum(cost.values()),
            "passed": None if b is None else b.passed, "failed": None if b is None else b.failed,
            "ended": a.ended, "twin_placed": sum(1 for p in a.evidence
                                                 if p.placed_by.get(tier.name) == "twin"),
            "stopped_early": stopped, "differ": differ, "cpu_s": time.perf_counter() - t0}


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
    ap.add_argument("--precision", type=float, default=None,
                    help="stop at a bracket this wide relative to its lower end (or one "
                         "user), as --search-precision; default: one user")
    ap.add_argument("--runs", default=",".join(k for k, _, _ in RUNS),
                    help="which searches (comma-separated row keys; the table needs bisect)")
    args = ap.parse_args(argv)
    runs = [r for r in RUNS if r[0] in args.runs.split(",")]
    global LIVE, PRECISION
    LIVE = "plain" if args.live else "quiet"
    PRECISION = args.precision
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
        hidden_truth = Truth(hidden, wl, tier, engine_seed)
        truth, _ = _truth(hidden_truth)
        row: dict[str, Any] = {"case": n, "tier": tier.name, "target": target,
                               "truth": truth}
        for key, method, early in runs:
            r = _search(method, early, case, tier, wl_path, wl, root / f"case-{n:03d}",
                        engine_seed, hidden_truth, truth)
            r["holds"] = _holds(r, truth)
            row[key] = r
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    (root / "results.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))
    return 0


def table(rows: list[dict[str, Any]]) -> str:
    """The comparison table (markdown): per search, its bracket, probes (twin-placed),
    probes stopped early (of them, verdicts the whole window would not give), GPU-s."""
    heads = {"bisect": "bisect, whole windows", "bisect_early": "bisect + early stop",
             "twin": "twin + early stop", "oracle": "oracle + early stop"}
    keys = [k for k, _, _ in RUNS if rows and k in rows[0]]
    if "bisect" not in keys:
        return json.dumps(rows, indent=1)
    out = ["| case | tier | truth | " + " | ".join(
        f"{heads[k]}: bracket | probes | early (differ) | GPU-s | holds" for k in keys) + " |",
        "|---|---|---|" + "---|---|---|---|---|" * len(keys)]

    def br(r: dict[str, Any]) -> str:
        p = "-" if r["passed"] is None else f"{r['passed']:g}"
        f = "-" if r["failed"] is None else f"{r['failed']:g}"
        return f"{p}-{f} ({r['ended']})"

    def cells(r: dict[str, Any]) -> str:
        placed = f" ({r['twin_placed']})" if r["twin_placed"] else ""
        return (f"{br(r)} | {r['probes']}{placed} | {r['stopped_early']} ({r['differ']}) | "
                f"{r['gpu_s']:.0f} | {'yes' if r['holds'] else 'NO'}")

    for row in rows:
        out.append(f"| {row['case']} | {row['tier']} | {row['truth']} | "
                   + " | ".join(cells(row[k]) for k in keys) + " |")
    if rows:
        def tot(m: str, k: str) -> float:
            return float(sum(r[m][k] for r in rows))

        out.append("| all | | | " + " | ".join(
            f"{sum(r[k]['holds'] for r in rows)}/{len(rows)} hold | {tot(k, 'probes'):.0f} | "
            f"{tot(k, 'stopped_early'):.0f} ({tot(k, 'differ'):.0f}) | {tot(k, 'gpu_s'):.0f} | "
            for k in keys) + " |")
        out.append("")
        base = tot("bisect", "gpu_s")
        out.append("GPU-seconds against bisection on whole windows: " + "; ".join(
            f"{heads[k]} {tot(k, 'gpu_s') / base:.2f}" for k in keys[1:]))
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
