"""Twin sweep speed: ``plan --twin`` over a ladder of levels, in simulated time.

Times the sweep ``agentreplay plan --twin`` runs (by default 20 levels, users 1:256,
900 s window + 120 s warmup + 30 s drain each) and prints wall seconds, CPU seconds
(this process and its level workers) and simulated seconds per wall second, per
level and in total. A workload is generated when none is given (``coding-agent``
profile, 256 sessions, at the profile's context).

    python bench/twin_bench.py [--twin replay/servers/sim/profiles/kimi-k3-gb300-tp16.json]
        [--workload FILE] [--users 1:256] [--levels 20] [--duration 900] [--jobs N]

These are figures of the machine (other load slows them); no test asserts them.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from replay.twin import LevelResult, level_ladder, load_twin, load_workload, run_ladder
from traces import generate_trace, write_workload


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    profiles = here / "replay/servers/sim/profiles"
    ap.add_argument("--twin", default=str(profiles / "kimi-k3-gb300-tp16.json"))
    ap.add_argument("--workload")
    ap.add_argument("--users", default="1:256")
    ap.add_argument("--levels", type=int, default=20)
    ap.add_argument("--duration", type=float, default=900.0)
    ap.add_argument("--warmup", type=float, default=120.0)
    ap.add_argument("--drain", type=float, default=30.0)
    ap.add_argument("--think-scale", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    profile, _cal = load_twin(args.twin)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.workload
        if path is None:
            trace = generate_trace("coding-agent", sessions=256, seed=0,
                                   max_context=profile.max_model_len)
            path = str(Path(tmp) / "wl.jsonl")
            write_workload(path, trace.header, trace.sessions)
        workload = load_workload(path)
        lo, hi = (int(x) for x in args.users.split(":"))
        levels = level_ladder(lo, hi, args.levels)
        print(f"twin {profile.name}: {len(levels)} levels {levels[0]}..{levels[-1]} users, "
              f"{args.duration:g} s window, jobs {args.jobs}", flush=True)
        cpu0, wall0 = _cpu_s(), time.perf_counter()

        def show(users: int, r: LevelResult) -> None:
            print(f"  {users:>4} users: {r.records:>5} requests {r.steps:>7} steps "
                  f"{r.sim_s:>6.0f} sim s  wall {r.wall_s:5.2f} s  cpu {r.cpu_s:5.2f} s",
                  flush=True)

        results = run_ladder(profile, workload, levels, jobs=args.jobs, on_level=show,
                             duration=args.duration, warmup=args.warmup, drain_s=args.drain,
                             think_scale=args.think_scale)
        wall, cpu = time.perf_counter() - wall0, _cpu_s() - cpu0
    sim = sum(r.sim_s for r in results)
    print(f"sweep: wall {wall:.1f} s, cpu {cpu:.1f} s, {sim:.0f} simulated s, "
          f"{sim / wall:.0f} simulated s per wall s ({sim / cpu:.0f} per cpu s)")


if __name__ == "__main__":
    main()
