"""The twin's error, measured on hidden profiles it was never tuned on (issue 35).

    python bench/twin_battery.py                       # 40 profiles, seed 1 (~the report)
    python bench/twin_battery.py --quick               # 8 profiles, 60-s levels
    python bench/twin_battery.py --profiles 60 --seed 7 --jobs 4 --real 5
    python bench/twin_battery.py --report DIR/outcomes.jsonl [--rescore]

Each case draws a simulator profile at random (``bench/_battery_draw.py``: batch-1
step 2-60 ms, slope, context reference, prefill 5K-200K tok/s, chunk size, KV
blocks small enough that some preempt, step noise from none to heavy-tailed with a
mean up to 1.5) and a workload, measures the hidden profile's levels on simulated
time, calibrates a twin on 1, 2 and 4 users holding out 8, and compares the twin with
the truth (``bench/_battery_case.py``). ``--real N`` also measures N profiles' held-out
level in real time against ``serve-sim --profile FILE`` over HTTP and prints both
(``bench/_battery_real.py``). Prints the median and p90 of |error| per metric and
kind of question, the interval coverage per question, the capacity per tier, the
``--agents K`` replica counts against N hidden engines measured
(``bench/_battery_agents.py``), and the wall time.
Deterministic for a seed (simulated time; the real-time check aside).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _battery_case import METRICS, Outcome, Settings, read_outcomes, run_case  # noqa: E402
from _battery_draw import draw_case  # noqa: E402
from _battery_table import print_report, targets  # noqa: E402

_ROOT: Path | None = None
_SETTINGS: Settings | None = None
_SEED = 0
_PARTIAL: Path | None = None


def _one(number: int) -> Outcome:
    assert _ROOT is not None and _SETTINGS is not None
    case = draw_case(number, _SEED)
    try:
        return run_case(case, _ROOT, _SETTINGS)
    except Exception as exc:  # a case that cannot run is reported, never hidden
        return _lost(number, f"{type(exc).__name__}: {exc}")


def _lost(number: int, why: str) -> Outcome:
    """A case that failed or whose process died (e.g. killed for memory): reported,
    never hidden or waited on."""
    case = draw_case(number, _SEED)
    return Outcome(number, case.profile["name"], case.noise, {}, {}, error=why)


def run_battery(profiles: int, seed: int, settings: Settings, root: Path,
                jobs: int = 1, progress: bool = True,
                only: list[int] | None = None) -> list[Outcome]:
    """Every case's outcome, in case order (``jobs`` forked processes at a time, one per
    case, so a case's memory goes with its process: ``bench/_battery_pool.py``)."""
    global _ROOT, _SETTINGS, _SEED, _PARTIAL
    _ROOT, _SETTINGS, _SEED = root, settings, seed
    _PARTIAL = root / "outcomes.jsonl"
    _PARTIAL.unlink(missing_ok=True)
    numbers = list(only) if only else list(range(profiles))
    out: list[Outcome] = []
    # a fork per case at --jobs 1 too: one process running case after case grew to
    # 7.8 GB in 11 cases (seed 1, 2026-12-06), on its way out of a 24 GB machine
    from _battery_pool import run_forked

    for o in run_forked(_one, numbers, jobs, _lost):
        out.append(o)
        if progress:
            _progress(o)
    return sorted(out, key=lambda o: o.number)


def _progress(o: Outcome) -> None:
    if _PARTIAL is not None:  # every outcome as it comes: a cut run keeps what it did
        with open(_PARTIAL, "a") as f:
            f.write(json.dumps(asdict(o), default=str) + "\n")
    if o.error:
        print(f"  case {o.number}: FAILED {o.error}", file=sys.stderr, flush=True)
        return
    held = next(r for r in o.rows if r["kind"] == "held-out")
    print(f"  case {o.number:3d} ({o.noise:9s}) {o.wall_s:5.1f} s: held out "
          + "  ".join(f"{k} {held[k]:+.1%}" if held[k] is not None else f"{k} -"
                      for k in METRICS), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=40, help="hidden profiles (default 40)")
    ap.add_argument("--seed", type=int, default=1,
                    help="battery seed (default 1, the reported run; develop on another)")
    ap.add_argument("--quick", action="store_true", help="8 profiles, 120-s levels")
    ap.add_argument("--duration", type=float, default=None,
                    help="simulated seconds per level (default 120, --quick 60)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--real", type=int, default=0,
                    help="also measure this many profiles in real time against serve-sim")
    ap.add_argument("--real-duration", type=float, default=30.0,
                    help="real seconds of each serve-sim level (default 30)")
    ap.add_argument("--work", type=Path, default=None, help="keep runs and twins here")
    ap.add_argument("--json", type=Path, default=None, help="write every outcome here")
    ap.add_argument("--report", type=Path, default=None, metavar="JSONL",
                    help="only print the tables of stored outcomes (a --work DIR's "
                         "outcomes.jsonl, or a cut run's)")
    ap.add_argument("--cases", type=str, default=None, metavar="N,N",
                    help="run only these case numbers of the seed (e.g. one a cut run lost)")
    ap.add_argument("--rescore", action="store_true",
                    help="with --report: judge the interval coverage with today's rule "
                         "(bench/_battery_rescore.py), not the run's")
    args = ap.parse_args(argv)
    if args.report is not None:
        done = read_outcomes(args.report)
        print(f"twin battery (stored): {len(done)} outcomes from {args.report}")
        if args.rescore:
            from _battery_rescore import rescore

            done = rescore(done)
            print("interval coverage judged with today's rule (capacity per tier and "
                  "--agents ranges: the run's)")
        print_report(sorted(done, key=lambda o: o.number), [])
        return 0
    t0 = time.perf_counter()
    profiles = 8 if args.quick and args.profiles == 40 else args.profiles
    duration = args.duration or (60.0 if args.quick else 120.0)
    settings = Settings(duration_s=duration)
    with tempfile.TemporaryDirectory(prefix="twin-battery-") as tmp:
        root = args.work or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        only = [int(x) for x in args.cases.split(",")] if args.cases else None
        outcomes = run_battery(profiles, args.seed, settings, root, args.jobs, only=only)
        real: list[dict[str, Any]] = []
        if args.real:
            from _battery_real import real_checks

            real = real_checks(outcomes[:args.real], args.seed, settings, root,
                               args.real_duration)
    wall = time.perf_counter() - t0
    print(f"twin battery: {profiles} hidden profiles, seed {args.seed}, levels of "
          f"{duration:g} simulated s, fitted on {settings.fitted} held out at "
          f"{settings.holdout}, {args.jobs} job(s)")
    print_report(outcomes, real)
    met = targets(outcomes)
    print(f"wall time {wall:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "settings": asdict(settings),
                                         "outcomes": [asdict(o) for o in outcomes],
                                         "real": real, "targets": met, "wall_s": wall},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
