"""``agentreplay plan``: capacity per SLO tier, measured or modelled.

Given result directories it prints the measured brackets (``analysis.capacity_view``).
With ``--twin FILE`` it runs a ladder of levels on the twin in simulated time
(``replay.twin``), prints each level's P90 interactivity, P90 TTFT (from when the
request was due, as the SLO tiers judge it) and output throughput, then each SLO
tier's modelled capacity and, with ``--agents K``, the replicas (and GPUs) K agents
need. Every twin figure is labelled "modelled (twin)": it comes from a performance
model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analysis.text import plural
from replay.cli._results import (
    EXIT_INVALID,
    analyse,
    check_seed,
    common_flags,
    invalid,
    stored_twin,
    tiers,
    verdict_lines,
)

if TYPE_CHECKING:
    from rich.table import Table

    from analysis import RunData, SloTier
    from analysis.judge import CapacityRow
    from replay.twin import (
        ErrorBand,
        LevelResult,
        PlanSettings,
        PredictionInterval,
        TierCapacity,
    )

__all__ = ["capacity_table", "register"]

LABEL = "modelled (twin)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = subparsers.add_parser(
        "plan", help="print the capacity table: load per arm meeting each SLO tier",
        description="Capacity planning from a sweep of load levels: per arm and SLO tier, the "
                    "measured levels its capacity lies between (the largest level up to which "
                    "every level met the tier, the first that failed), and the arms' capacity "
                    "ratio as far as those brackets bound it. With --twin FILE the levels are "
                    "simulated on the twin (modelled, no server), each tier's capacity with "
                    "the twin's held-out error as a prediction interval, beside the "
                    "measured brackets of any DIR given.")
    plan.add_argument("paths", nargs="*", metavar="DIR",
                      help="run directories, or directories containing run directories")
    common_flags(plan)
    add_twin_flags(plan)
    plan.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    from rich.console import Console

    from analysis import capacity_view

    if args.twin is not None:
        return _twin_plan(args)
    if not args.paths:
        from replay.errors import ConfigError

        raise ConfigError("plan: give result directories (DIR ...), or --twin FILE with "
                          "--workload FILE to plan on a twin")
    _, comparison = analyse(args, args.paths)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table to 80 columns
        console.width = 160
    if comparison.fairness.overridden:
        console.print(f"warning: {comparison.fairness.sentence}", style="bold red",
                      markup=False)
    if comparison.simulated:
        console.print("[SIMULATED] runs served by a performance model, not GPUs",
                      style="yellow", markup=False)
    view = capacity_view(comparison)
    console.print(capacity_table(view))
    if view["others"]:
        console.print("ratio: capacity over the baseline's as bounded by the two brackets "
                      "(A in [a1, a2), B in [b1, b2): B/A between b1/a2 and b2/a1); unknown "
                      "when that range holds 1x (either arm may serve more)",
                      markup=False, highlight=False, soft_wrap=True)
    twin = stored_twin(args.paths[0]) if len(args.paths) == 1 else None
    for line in verdict_lines(comparison, twin):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return EXIT_INVALID if invalid(comparison) else 0


def capacity_table(view: dict[str, Any]) -> Table:
    """The capacity view as rows of (tier, arm) and a ratio row per other arm: five
    columns, so it fits an 80- or 100-column terminal (a column per arm and a ratio
    column did not, and rich cropped the ratio, the answer, off the right edge)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(caption="per GPU: the bracket over the arm's GPU count; tok/s/GPU: decode "
                          "throughput measured at the passing level",
                  title=f"Capacity: measured load ({view['unit']}) bracketing each SLO tier "
                        "(met at the lower level, failed at the upper; nothing interpolated)")
    table.add_column("tier")
    table.add_column("arm")
    table.add_column(Text(f"capacity ({view['unit']})"), justify="right")
    table.add_column("per GPU", justify="right")
    table.add_column("tok/s/GPU", justify="right")
    base = view["arms"][0] if view["arms"] else ""
    for row in view["rows"]:
        first = True
        for a, x in zip(view["arms"], row["arms"], strict=True):
            cells: list[Text | str] = [Text(row["tier"]) if first else "", Text(a or "run")]
            first = False
            if x is None:
                cells += ["not measured", "", ""]
            else:
                cells += [Text(x["users"]), x["per_gpu"], x["decode"]]
            table.add_row(*cells)
        for o, r in zip(view["others"], row["ratios"], strict=True):
            table.add_row("", Text(f"{o} / {base}", style="italic"),
                          Text(r["value"], style="italic"), "", "")
        table.add_section()
    return table


def _twin_plan(args: argparse.Namespace) -> int:
    from replay.errors import ConfigError

    if not 0 <= args.max_failure_share <= 1:
        raise ConfigError(f"--max-failure-share: must be between 0 and 1, got "
                          f"{args.max_failure_share}")
    check_seed(args.seed)
    plan = _fitted_backend(args, plan_settings(args))
    _check_outputs(args, plan)
    if not args.paths:
        return run_twin_plan(args, plan, tiers(args.slo), args.max_failure_share)
    # measured runs given too: the twin is judged on their tiers, its capacities printed
    # beside their brackets (never instead of them), of its own model, backend and
    # replica count only
    runs, comparison = analyse(args, args.paths)
    shown, note = _same_server(plan, runs)
    code = run_twin_plan(args, plan, tuple(comparison.tiers), args.max_failure_share,
                         measured=[r for r in comparison.capacity if r.arm in shown],
                         measured_note=note)
    for line in verdict_lines(comparison, stored_twin(args.paths[0])):  # the decision
        print(line)
    return code


def _fitted_backend(args: argparse.Namespace, plan: PlanSettings) -> PlanSettings:
    """A calibrated twin plans the backend it was fitted on: ``calibrate`` writes the
    fitted steps under both backend names, so another ``--backend`` would label the
    fitted server's capacity with a backend it never measured. Typed, it is refused;
    left at its default, the fitted backend is used."""
    from replay.errors import ConfigError
    from replay.twin import load_twin

    _, calibration = load_twin(plan.twin or "")
    fitted = (calibration or {}).get("decode_backend")
    if fitted not in ("auto", "latency_specialized") or fitted == plan.backend:
        return plan
    if "backend" in getattr(args, "typed", frozenset()):
        raise ConfigError(f"--backend {plan.backend}: the twin {plan.twin} was fitted on "
                          f"runs of backend {fitted}; its steps are that server's (plan "
                          f"--backend {fitted}, or calibrate runs of {plan.backend})")
    return plan.model_copy(update={"backend": fitted})


def _same_server(plan: PlanSettings, runs: Sequence[RunData]) -> tuple[set[str], str]:
    """The arms whose brackets may stand beside the twin (the twin's backend, as fitted,
    and ``--replicas``), and a line saying which were shown and which not. A twin of
    another model than the runs' is refused: its capacity is no answer for them."""
    from replay.errors import ConfigError
    from replay.twin import decode_backend, load_twin

    profile, calibration = load_twin(plan.twin or "")
    models = sorted({r.manifest.model for r in runs} - {profile.model})
    if models:
        raise ConfigError(f"--twin {plan.twin}: a twin of {profile.model}, the runs given "
                          f"beside it are of {', '.join(models)}; plan a twin beside runs "
                          "of its own model")
    fitted = (calibration or {}).get("decode_backend")
    backend = fitted if fitted in ("auto", "latency_specialized") else plan.backend
    arms: dict[str, set[tuple[str, int]]] = {}
    for r in runs:
        arms.setdefault(r.manifest.label, set()).add(
            (decode_backend(r.manifest), max(1, len(r.manifest.replicas))))
    want = (backend, plan.replicas)
    shown = {a for a, kinds in arms.items() if kinds == {want}}
    other = sorted(set(arms) - shown)
    note = (f"measured brackets beside the twin: those of backend {backend} on "
            f"{plural(plan.replicas, 'replica')}, the twin's: "
            f"{', '.join(sorted(a or 'the run' for a in shown)) or 'none of the runs given'}")
    if other:
        note += "; not shown (another backend or replica count): " + ", ".join(
            f"{a or 'the run'} "
            f"({'/'.join(f'{b}, ' + plural(n, 'replica') for b, n in sorted(arms[a]))})"
            for a in other)
    return shown, note


def _check_outputs(args: argparse.Namespace, plan: PlanSettings) -> None:
    """Every path the plan writes, checked before any level is simulated."""
    from pathlib import Path

    from analysis.report import TWIN_PLAN_FILE
    from replay.cli._files import check_output_dir, check_output_file

    if plan.keep_runs is not None:
        check_output_dir(plan.keep_runs, "--keep-runs")
    if args.paths and Path(args.paths[0]).is_dir():
        check_output_file(Path(args.paths[0]) / TWIN_PLAN_FILE, "plan: the twin's estimate",
                          force=True)


def add_twin_flags(p: argparse.ArgumentParser) -> None:
    from replay.knobs import add_knob_flags
    from replay.twin import PlanSettings

    add_knob_flags(p.add_argument_group("twin (simulated time; no server)"), PlanSettings)


def plan_settings(args: argparse.Namespace) -> PlanSettings:
    """The twin plan the flags ask for; a bad value is one line naming its flag."""
    from replay.knobs import from_knobs, knob_values
    from replay.twin import PlanSettings

    return from_knobs(PlanSettings, knob_values(args, PlanSettings))


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _error_line(band: ErrorBand | None) -> str:
    if band is None:
        return ("no prediction interval: the twin has no held-out check (run `agentreplay "
                f"calibrate ... --holdout LEVEL`); its capacities are unchecked [{LABEL}]")
    return f"calibration: {band.text()}; the intervals below include it [{LABEL}]"


def _interval_line(pi: PredictionInterval) -> str:
    return (f"calibration: checked at {pi.checked_users} users ({pi.requests} requests); "
            f"the intervals below are nominal {pi.nominal:.0%} (docs/calibrate.md gives the "
            f"coverage measured on hidden profiles), widening with the distance from "
            f"{pi.checked_users} users; beyond {pi.covered_users:g} users per replica the "
            f"answer is extrapolated [{LABEL}]")


def _against_measured(cap: TierCapacity, measured: Sequence[CapacityRow],
                      twin_gpus: int) -> list[str]:
    """The measured bracket of each arm beside the twin's, per GPU, saying so where the
    measured server and the twin's fleet differ in size; and a caveat where they cannot
    both hold (the measurement wins: the twin is a model of it)."""
    from analysis.report import per_gpu_text
    from replay.twin import outside_measured

    lines = []
    for row in (r for r in measured if r.tier == cap.tier):
        b = row.bracket
        lines.append(f"tier {cap.tier.name}: measured {row.arm}: {b.text('users')} (measured)")
        size = ""
        if row.gpu_count and row.gpu_count != twin_gpus:
            size = (f"; measured on {plural(row.gpu_count, 'GPU')}, the twin on {twin_gpus}: "
                    "compare per GPU, not users")
        lines.append(f"tier {cap.tier.name}: measured {row.arm} per GPU: "
                     f"{per_gpu_text(b.passed, b.failed, row.gpu_count)} (measured{size})")
        if outside_measured(cap.bracket, row.bracket):
            lines.append(f"caveat: tier {cap.tier.name}: the twin's capacity "
                         f"({cap.bracket.text('users')}) lies outside what {row.arm} measured "
                         f"({row.bracket.text('users')}); trust the measurement and "
                         "recalibrate the twin")
    return lines


def run_twin_plan(args: argparse.Namespace, plan: PlanSettings, tiers: tuple[SloTier, ...],
                  max_failure_share: float,
                  measured: Sequence[CapacityRow] = (), measured_note: str | None = None) -> int:
    """Sweep the ladder on the twin and print the levels, capacities and replicas;
    each tier's twin capacity with its prediction interval (from the calibration's
    held-out error) and next to the measured brackets of ``measured``."""
    import os

    from replay.errors import ConfigError
    from replay.twin import (
        Deadlock,
        calibration_error,
        capacities,
        check_bounded,
        extrapolation,
        interval_of,
        interval_text,
        is_what_if,
        level_ladder,
        load_twin,
        load_workload,
        replicas_needed,
        run_ladder,
        tier_interval,
        widened_tiers,
    )

    profile, calibration = load_twin(plan.twin or "")
    pi = interval_of(calibration)
    band = None if pi is not None else calibration_error(calibration)
    widened = {t: widened_tiers(t, band) for t in tiers} if band is not None else {}
    judged = tuple(tiers) + tuple(x for pair in widened.values() for x in pair)
    workload = load_workload(plan.workload or "")
    what_if = pi is not None and is_what_if(pi, workload, plan.think_scale)
    levels = level_ladder(*plan.user_range, plan.levels)
    check_bounded(plan, profile, levels)
    gpus = profile.gpu_count
    out = sys.stdout
    cal = " (calibrated)" if calibration else ""
    shape = plural(plan.replicas, "replica")
    print(f"[SIMULATED] {LABEL}: profile {profile.name}{cal}, {shape} x "
          f"{plural(gpus, 'GPU')}, workload {plan.workload}, {len(levels)} levels of "
          f"{plan.duration_s:g} s (warmup {plan.warmup_s:g} s), simulated time", file=out,
          flush=True)  # before the progress lines (stderr), also when stdout is a pipe

    from analysis.judge import meets_tier
    from analysis.report import per_gpu_text

    def progress(users: int, res: LevelResult) -> None:
        print(f"  level {plural(users, 'user')}: {plural(res.records, 'request')}, "
              f"{res.sim_s:.0f} simulated s in {res.wall_s:.1f} s", file=sys.stderr, flush=True)

    jobs = plan.jobs if plan.jobs is not None else (os.cpu_count() or 1)
    try:
        results = run_ladder(
            profile, workload, levels, jobs=jobs, out_dir=plan.keep_runs, on_level=progress,
            duration=plan.duration_s, warmup=plan.warmup_s, think_scale=plan.think_scale,
            think_time_cap_s=plan.think_time_cap_s, drain_s=plan.drain_s, replicas=plan.replicas,
            seed=args.seed, backend=plan.backend, tiers=judged,
            max_failure_share=max_failure_share)
    except Deadlock as exc:
        raise ConfigError(f"--twin {plan.twin}: {exc}") from None
    print(f"{'users':>6}  {'P90 inter tok/s':>15}  {'P90 TTFT s':>10}  "
          f"{'output tok/s':>12}  {'requests':>8}  {'fail':>5}  tiers met (?: too few "
          "requests to tell)", file=out)
    for users, res in zip(levels, results, strict=True):
        s = res.summary
        met = ",".join(t.name + ("?" if meets_tier(s, t) is None else "") for t in tiers
                       if meets_tier(s, t) is not False) or "none"
        fail = s.counts.failure_share
        print(f"{users:>6}  {_fmt(s.interactivity.p90):>15}  {_fmt(s.ttft_due.p90, '.2f'):>10}"
              f"  {_fmt(s.output_tok_s):>12}  {s.counts.in_window:>8}  "
              f"{_fmt(fail, '.2f'):>5}  {met}", file=out)
    print(_interval_line(pi) if pi is not None else _error_line(band), file=out)
    if measured_note is not None:
        print(measured_note, file=out)
    by_tier = {c.tier: c for c in capacities(levels, results, judged)}
    stored: list[dict[str, object]] = []
    for cap in (by_tier[t] for t in tiers):
        print(f"tier {cap.tier.name}: capacity {cap.bracket.text('users')} [{LABEL}]", file=out)
        per_gpu = per_gpu_text(cap.bracket.passed, cap.bracket.failed, plan.replicas * gpus)
        print(f"tier {cap.tier.name}: per GPU {per_gpu} ({plural(plan.replicas, 'replica')} x "
              f"{plural(gpus, 'GPU')}) [{LABEL}]", file=out)
        interval, far, bounds = None, [], None
        if pi is not None:
            ti = tier_interval(levels, results, cap.tier, pi, plan.replicas, what_if)
            interval, bounds = interval_text(ti.strict, ti.loose), [ti.low, ti.high]
            far = extrapolation(pi, ti.high if ti.high is not None else max(levels),
                                plan.replicas, workload)
            label = f"{LABEL}, prediction interval (nominal {pi.nominal:.0%})"
            if far:
                label += "; extrapolated: " + "; ".join(far)
                interval += " (extrapolated)"
            print(f"tier {cap.tier.name}: {interval} [{label}]", file=out)
        elif cap.tier in widened:
            strict, loose = (by_tier[x].bracket for x in widened[cap.tier])
            interval = interval_text(strict, loose)
            print(f"tier {cap.tier.name}: with the calibration error, "
                  f"{interval} [{LABEL}, prediction interval]", file=out)
        for line in _against_measured(cap, measured, plan.replicas * gpus):
            print(line, file=out)
        stored.append(_tier_record(cap, interval, measured)
                      | {"interval_bracket": bounds, "extrapolated": far})
        if plan.agents is not None:
            n = replicas_needed(plan.agents, cap.users, plan.replicas)
            if n is None:
                need = "cannot be met at any level tried"
            else:
                bound = " at most" if cap.bracket.failed is None else ""
                need = (f"need{bound} {plural(n, 'replica')} = {plural(n * gpus, 'GPU')} "
                        f"({gpus} per replica)")
                if bound:
                    need += "; every level met the tier, raise --users for a tighter answer"
            print(f"tier {cap.tier.name}: {plan.agents} agents {need} [{LABEL}]", file=out)
    if args.paths:  # beside the measured results, for `agentreplay report DIR`
        where = _store(args.paths[0], plan, profile.name, band, levels, results, stored, gpus,
                       None if pi is None else pi.as_dict(),
                       sorted({r.arm for r in measured}))
        print(f"twin estimate stored in {where}; `agentreplay report {args.paths[0]}` shows "
              "it beside the measured capacity", file=out)
    return 0


def _tier_record(cap: TierCapacity, interval: str | None,
                 measured: Sequence[CapacityRow]) -> dict[str, object]:
    from replay.twin import outside_measured, tier_record

    return tier_record(cap, interval, [
        {"arm": r.arm, "text": r.bracket.text("users"),
         "outside": outside_measured(cap.bracket, r.bracket)}
        for r in measured if r.tier == cap.tier])


def _store(directory: str, plan: PlanSettings, profile: str, band: ErrorBand | None,
           levels: Sequence[int], results: Sequence[LevelResult],
           tiers: list[dict[str, object]], gpus_per_replica: int | None = None,
           interval: dict[str, object] | None = None, arms: list[str] | None = None) -> str:
    """``DIR/twin-plan.json``: what the report's twin section shows (derived, like
    report.html: rewritten by the next ``plan --twin ... DIR``); ``arms``: those of DIR
    the twin stands beside (its backend and replica count), none: the decision leaves it
    out."""
    import dataclasses
    from pathlib import Path

    import orjson

    from analysis.report import TWIN_PLAN_FILE
    from replay.twin import level_record

    path = Path(directory) / TWIN_PLAN_FILE
    doc = {"twin": str(plan.twin), "profile": profile, "backend": plan.backend,
           "replicas": plan.replicas, "gpus_per_replica": gpus_per_replica,
           "duration_s": plan.duration_s,
           "error_band": None if band is None else dataclasses.asdict(band),
           "prediction_interval": interval,
           "levels": [level_record(u, r) for u, r in zip(levels, results, strict=True)],
           "tiers": tiers, "arms": arms}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return str(path)
