"""``agentreplay plan --twin FILE``: capacity planning on the twin, in simulated time.

The flags are added to ``plan`` by :func:`add_twin_flags`; :func:`run_twin_plan`
runs the ladder of levels (``replay.twin``), prints each level's P90
interactivity, P90 TTFT (from when the request was due, as the SLO tiers judge
it) and output throughput, then each SLO tier's
modelled capacity and, with ``--agents K``, the replicas (and GPUs) K agents need.
Every figure is labelled "modelled (twin)": it comes from a performance model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis import SloTier
    from analysis.judge import CapacityRow
    from replay.twin import ErrorBand, LevelResult, TierCapacity

__all__ = ["add_twin_flags", "run_twin_plan"]

LABEL = "modelled (twin)"


def add_twin_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("twin (simulated time; no server)")
    g.add_argument("--twin", metavar="FILE",
                   help="plan on a twin file (a simulator profile, e.g. from `agentreplay "
                        "calibrate`) instead of measured runs")
    g.add_argument("--workload", metavar="FILE", help="with --twin: the workload to replay")
    g.add_argument("--users", metavar="LO:HI", default="1:256",
                   help="with --twin: the range of concurrent users")
    g.add_argument("--levels", type=int, default=20,
                   help="with --twin: load levels, spaced geometrically over --users")
    g.add_argument("--duration", type=float, default=900.0, metavar="S",
                   help="with --twin: measured window per level (simulated seconds)")
    g.add_argument("--warmup", type=float, default=120.0, metavar="S",
                   help="with --twin: warmup per level (simulated seconds)")
    g.add_argument("--drain", type=float, default=30.0, metavar="S",
                   help="with --twin: drain per level (simulated seconds)")
    g.add_argument("--think-scale", type=float, default=1.0, metavar="X",
                   help="with --twin: multiply every think time")
    g.add_argument("--think-time-cap", type=float, metavar="S",
                   help="with --twin: cap every (scaled) think time (default: no cap)")
    g.add_argument("--replicas", type=int, default=1, metavar="N",
                   help="with --twin: N engines behind session-affinity routing")
    g.add_argument("--agents", type=int, metavar="K",
                   help="with --twin: say how many replicas (and GPUs) K agents need per tier")
    g.add_argument("--backend", choices=("latency_specialized", "auto"),
                   default="latency_specialized", help="with --twin: the decode backend")
    g.add_argument("--jobs", type=int, metavar="N",
                   help="with --twin: levels simulated at once, one process each "
                        "(default: the CPU count)")
    g.add_argument("--keep-runs", metavar="DIR",
                   help="with --twin: keep each level's run directory under DIR "
                        "(`agentreplay report` reads them) (default: not kept)")


def _users_range(text: str) -> tuple[int, int]:
    from replay.errors import ConfigError

    lo, sep, hi = text.partition(":")
    try:
        a, b = (int(lo), int(hi)) if sep else (int(text), int(text))
    except ValueError:
        raise ConfigError(f"--users {text}: give LO:HI, whole numbers, e.g. 1:256") from None
    if a < 1 or b < a:
        raise ConfigError(f"--users {text}: need 1 <= LO <= HI, e.g. 1:256")
    return a, b


def _check(args: argparse.Namespace) -> None:
    from replay.errors import ConfigError

    if not args.workload:
        raise ConfigError("--twin needs --workload FILE (the workload to replay)")
    for flag, value, low in (("--levels", args.levels, 1), ("--replicas", args.replicas, 1),
                             ("--agents", args.agents, 1), ("--jobs", args.jobs, 1)):
        if value is not None and value < low:
            raise ConfigError(f"{flag}: must be >= {low}, got {value}")
    for flag, value in (("--duration", args.duration),):
        if not value > 0:
            raise ConfigError(f"{flag}: must be > 0, got {value}")
    for flag, value in (("--warmup", args.warmup), ("--drain", args.drain),
                        ("--think-scale", args.think_scale),
                        ("--think-time-cap", args.think_time_cap)):
        if value is not None and value < 0:
            raise ConfigError(f"{flag}: must be >= 0, got {value}")


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _error_line(band: ErrorBand | None) -> str:
    if band is None:
        return ("no prediction interval: the twin has no held-out check (run `agentreplay "
                f"calibrate ... --holdout LEVEL`); its capacities are unchecked [{LABEL}]")
    return f"calibration: {band.text()}; the intervals below include it [{LABEL}]"


def _against_measured(cap: TierCapacity, measured: Sequence[CapacityRow]) -> list[str]:
    """The measured bracket of each arm beside the twin's, and a caveat where they
    cannot both hold (the measurement wins: the twin is a model of it)."""
    from replay.twin import outside_measured

    lines = []
    for row in (r for r in measured if r.tier == cap.tier):
        lines.append(f"tier {cap.tier.name}: measured {row.arm}: "
                     f"{row.bracket.text('users')} (measured)")
        if outside_measured(cap.bracket, row.bracket):
            lines.append(f"caveat: tier {cap.tier.name}: the twin's capacity "
                         f"({cap.bracket.text('users')}) lies outside what {row.arm} measured "
                         f"({row.bracket.text('users')}); trust the measurement and "
                         "recalibrate the twin")
    return lines


def run_twin_plan(args: argparse.Namespace, tiers: tuple[SloTier, ...],
                  max_failure_share: float,
                  measured: Sequence[CapacityRow] = ()) -> int:
    """Sweep the ladder on the twin and print the levels, capacities and replicas;
    each tier's twin capacity with its prediction interval (from the calibration's
    held-out error) and next to the measured brackets of ``measured``."""
    import os

    from replay.twin import (
        calibration_error,
        capacities,
        interval_text,
        level_ladder,
        load_twin,
        load_workload,
        replicas_needed,
        run_ladder,
        widened_tiers,
    )

    _check(args)
    profile, calibration = load_twin(args.twin)
    band = calibration_error(calibration)
    widened = {t: widened_tiers(t, band) for t in tiers} if band is not None else {}
    judged = tuple(tiers) + tuple(x for pair in widened.values() for x in pair)
    lo, hi = _users_range(args.users)
    workload = load_workload(args.workload)
    levels = level_ladder(lo, hi, args.levels)
    gpus = profile.gpu_count
    out = sys.stdout
    cal = " (calibrated)" if calibration else ""
    print(f"[SIMULATED] {LABEL}: profile {profile.name}{cal}, {args.replicas} replica(s) x "
          f"{gpus} GPU(s), workload {args.workload}, {len(levels)} levels of "
          f"{args.duration:g} s (warmup {args.warmup:g} s), simulated time", file=out)
    print(f"{'users':>6}  {'P90 inter tok/s':>15}  {'P90 TTFT s':>10}  "
          f"{'output tok/s':>12}  {'requests':>8}  {'fail':>5}  tiers met", file=out)

    from analysis.judge import meets_tier

    def progress(users: int, res: LevelResult) -> None:
        print(f"  level {users} users: {res.records} requests, {res.sim_s:.0f} simulated s in "
              f"{res.wall_s:.1f} s", file=sys.stderr, flush=True)

    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    results = run_ladder(
        profile, workload, levels, jobs=jobs, out_dir=args.keep_runs, on_level=progress,
        duration=args.duration, warmup=args.warmup, think_scale=args.think_scale,
        think_cap_s=args.think_time_cap, drain_s=args.drain, replicas=args.replicas,
        seed=args.seed, backend=args.backend, tiers=judged, max_failure_share=max_failure_share)
    for users, res in zip(levels, results, strict=True):
        s = res.summary
        met = ",".join(t.name for t in tiers if meets_tier(s, t)) or "none"
        fail = s.counts.failure_share
        print(f"{users:>6}  {_fmt(s.interactivity.p90):>15}  {_fmt(s.ttft_due.p90, '.2f'):>10}"
              f"  {_fmt(s.output_tok_s):>12}  {s.counts.in_window:>8}  "
              f"{_fmt(fail, '.2f'):>5}  {met}", file=out)
    print(_error_line(band), file=out)
    by_tier = {c.tier: c for c in capacities(levels, results, judged)}
    stored: list[dict[str, object]] = []
    for cap in (by_tier[t] for t in tiers):
        print(f"tier {cap.tier.name}: capacity {cap.bracket.text('users')} [{LABEL}]", file=out)
        interval = None
        if cap.tier in widened:
            strict, loose = (by_tier[x].bracket for x in widened[cap.tier])
            interval = interval_text(strict, loose)
            print(f"tier {cap.tier.name}: with the calibration error, "
                  f"{interval} [{LABEL}, prediction interval]", file=out)
        for line in _against_measured(cap, measured):
            print(line, file=out)
        stored.append(_tier_record(cap, interval, measured))
        if args.agents is not None:
            n = replicas_needed(args.agents, cap.users, args.replicas)
            if n is None:
                need = "cannot be met at any level tried"
            else:
                bound = " at most" if cap.bracket.failed is None else ""
                need = f"need{bound} {n} replica(s) = {n * gpus} GPU(s) ({gpus} per replica)"
                if bound:
                    need += "; every level met the tier, raise --users for a tighter answer"
            print(f"tier {cap.tier.name}: {args.agents} agents {need} [{LABEL}]", file=out)
    if args.paths:  # beside the measured results, for `agentreplay report DIR`
        where = _store(args, profile.name, band, levels, results, stored)
        print(f"twin estimate stored in {where}; `agentreplay report {args.paths[0]}` shows "
              "it beside the measured capacity", file=out)
    return 0


def _tier_record(cap: TierCapacity, interval: str | None,
                 measured: Sequence[CapacityRow]) -> dict[str, object]:
    from replay.twin import outside_measured

    return {"tier": cap.tier.name, "floor": cap.tier.floor_tok_s, "ttft": cap.tier.ttft_s,
            "bracket": [cap.bracket.passed, cap.bracket.failed],
            "text": cap.bracket.text("users"), "interval": interval,
            "measured": [{"arm": r.arm, "text": r.bracket.text("users"),
                          "outside": outside_measured(cap.bracket, r.bracket)}
                         for r in measured if r.tier == cap.tier]}


def _store(args: argparse.Namespace, profile: str, band: ErrorBand | None,
           levels: Sequence[int], results: Sequence[LevelResult],
           tiers: list[dict[str, object]]) -> str:
    """``DIR/twin-plan.json``: what the report's twin section shows (derived, like
    report.html: rewritten by the next ``plan --twin ... DIR``)."""
    import dataclasses
    from pathlib import Path

    import orjson

    from analysis.report import TWIN_PLAN_FILE

    path = Path(args.paths[0]) / TWIN_PLAN_FILE
    doc = {"twin": str(args.twin), "profile": profile, "backend": args.backend,
           "replicas": args.replicas, "duration_s": args.duration,
           "error_band": None if band is None else dataclasses.asdict(band),
           "levels": [{"users": u, "p90_interactivity": r.summary.interactivity.p90,
                       "p90_ttft_due_s": r.summary.ttft_due.p90,
                       "output_tok_s": r.summary.output_tok_s}
                      for u, r in zip(levels, results, strict=True)],
           "tiers": tiers}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return str(path)
