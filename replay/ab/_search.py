"""SLO search: per arm, the measured bracket around each tier's capacity, by doubling and bisection.

Each probe is an ordinary short run (``DIR/runs/<arm>-u<users>-r0``) judged by
analysis exactly as a comparison level is: the tier is met when its goodput
entry says so (interactivity floor, TTFT ceiling and failure share), and a run
stamped invalid is no evidence at all (the search for that tier stops and says
why). From the first user count, the load doubles until a tier fails, then the
bracket is halved until it is one user wide, or narrower than the requested
relative width (``precision``: (failed - passed) / passed). The answer is the
same bracket a sweep's capacity table gives (``analysis.bracket_of``): the
largest count up to which every probe met the tier, and the first that failed.
Arms alternate probe by probe (A B, then B A) so that drift of the machine
does not land on one arm. Probes are shared by all tiers; a probe already on
disk (complete) is reused, so an interrupted search resumes; a rerun with other
servers or run settings into the same directory is refused (``search-state.json``),
as a plain comparison's resume is, and a spoiled probe (interrupted, or stamped
invalid: a server that died) is redone, as a comparison's run is.

Running out of probes is an answer too: the bracket as far as it got, said so.

A probe whose sample cannot tell (``indeterminate``: too few requests, a share's
interval holding 90%) is no end of the bracket. The search runs that count once
more (``<arm>-u<users>-r1``, the same settings, so the runs stay comparable) and
judges the two runs pooled, twice the requests; still indeterminate, it steps over
the count (no more repeats: ``MAX_REPEATS``) and the answer names it. The twin's search
defers that repeat (:func:`bounds`' ``defer``): before the first failure it steps over
an indeterminate count at once (a low count's few requests; once a count above it
meets, the bracket leaves it out and the repeat would have bought nothing), and runs
it again only if a failure puts it inside the bracket and the search lands on it.

A probe is asked one question per tier, so it runs only as long as the answer
needs: its window ends once every searched tier's verdict is settled at 99%
whichever way its requests in flight end, and the whole window would still give it
with the rest forecast at the late half's bound against it
(``replay.ab._early_stop.TierStop``, a floor of 40 requests and a quarter of the
window), those requests finish in the drain, and the probe is judged on the window
it covered (``run.json`` records it and ``early_stop``). ``--search-full-window``
runs every window whole.

``DIR/search.json`` holds each answer with its bracket and evidence; the report
of ``DIR`` shows it (``analysis.read_extras``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis import (
    Bracket,
    SloTier,
    Validity,
    bracket_of,
    compare_runs,
    read_run,
)
from analysis.text import plural
from replay.ab._driver import Live, _check_arms, _settings
from replay.ab._early_stop import StopRule, TierStop, settled_at
from replay.ab._options import CompareOptions
from replay.ab._order import PlannedRun, is_run_reusable
from replay.ab._preflight import preflight, public_arms, reset_prefix_cache
from replay.ab._search_answer import Ended, Outcome, Probe, SearchAnswer
from replay.ab._search_file import search_payload
from replay.ab._search_limits import SearchLimits, check_search_start
from replay.ab._search_placement import TwinGuide, TwinTrack
from replay.ab._state import SearchState
from replay.errors import ConfigError
from replay.load import WindowStop, run_load_sync

__all__ = ["SearchAnswer", "SearchResult", "next_probe", "search_capacity", "search_lines"]

MAX_REPEATS = 1
"""Repeats of an indeterminate probe before the search steps over its count."""


@dataclass
class SearchResult:
    out: Path
    report: Path
    answers: list[SearchAnswer]
    simulated: bool
    validity: Validity | None = None
    """The validity of the probes' comparison (the report's), printed last."""


def _bracket(probes: dict[int, Probe], tier: str) -> Bracket | None:
    """The bracket of the probes with evidence for ``tier`` (None without any)."""
    met = {"meets": True, "fails": False, "indeterminate": None}
    known = [(float(u), met[o]) for u, p in probes.items()
             if (o := p.outcomes.get(tier, "invalid")) != "invalid"]
    return bracket_of(known) if known else None


def _exhausted(probes: dict[int, Probe], tier: str, runs: int = MAX_REPEATS) -> list[int]:
    """Counts still indeterminate after ``runs`` runs: stepped over."""
    return [u for u, p in probes.items()
            if p.outcomes.get(tier) == "indeterminate" and p.runs > runs]


def _narrow(lo: int, hi: int, precision: float | None) -> bool:
    return hi - lo <= 1 or (precision is not None and lo > 0 and (hi - lo) / lo <= precision)


def bounds(probes: dict[int, Probe], tier: str, defer: bool = False
           ) -> tuple[int, int | None, list[int]]:
    """The bracket's ends as the search moves them: the largest count up to which every
    probe met (or was stepped over), the first failure (None: none yet), and the
    counts stepped over (indeterminate after their repeat). ``defer``: before the first
    failure an indeterminate count is stepped over at once; its repeat waits until a
    failure above it puts it inside the bracket (below a count that meets, the bracket
    leaves it out anyway)."""
    b = _bracket(probes, tier)
    passed = int(b.passed) if b is not None and b.passed is not None else 0
    hi = int(b.failed) if b is not None and b.failed is not None else None
    runs = 0 if defer and hi is None else MAX_REPEATS
    stuck = [u for u in _exhausted(probes, tier, runs) if hi is None or u < hi]
    return max([passed, *stuck]), hi, stuck  # the search steps over what cannot tell


def next_probe(probes: dict[int, Probe], tier: str, start: int, max_users: int,
               precision: float | None = None, defer: bool = False
               ) -> tuple[int | None, Ended, str]:
    """The next user count to run for a tier, or None with how the search ended
    (``defer``: :func:`bounds`)."""
    if not probes:
        return start, "searching", "searching"
    lo, hi, stuck = bounds(probes, tier, defer)
    if defer and hi is None and lo >= max_users:  # nothing above to defer to: repeat now
        lo, hi, stuck = bounds(probes, tier)
    unsure = (f"; indeterminate at {', '.join(str(u) for u in sorted(stuck))} even "
              "with a repeated probe (too few requests to tell)") if stuck else ""
    if hi is None:
        if lo >= max_users:
            if stuck:
                return None, "indeterminate", (f"searched up to {plural(max_users, 'user')}"
                                               + unsure)
            return None, "at least", (f"every probe up to {plural(max_users, 'user')} met "
                                      "the tier; raise --search-max-users to look further")
        want = min(max(lo * 2, start if lo == 0 else lo + 1), max_users)
    elif _narrow(lo, hi, precision):
        if stuck:
            return None, "indeterminate", "bracketed as far as the samples tell" + unsure
        if lo == 0 and hi == 1:
            return None, "below", "even 1 user fails"
        return None, "bracketed", ("bracketed to one user" if hi - lo <= 1 else
                                   f"bracketed to within {precision:.0%}")
    else:
        want = (lo + hi) // 2 if lo else max(1, min(start, hi) // 2)
        want = max(want, lo + 1)
    outcome = probes[want].outcomes.get(tier, "invalid") if want in probes else None
    if outcome == "invalid":
        return None, "invalid", (f"stopped: the run at {plural(want, 'user')} was invalid "
                                 f"({probes[want].reason})")
    if outcome == "indeterminate":
        return want, "searching", "again: the sample could not tell"
    return want, "searching", "searching"


def _answer(a: SearchAnswer, probes: dict[int, Probe], ended: Ended, how: str) -> None:
    a.bracket, a.ended, a.how = _bracket(probes, a.tier.name), ended, how
    a.evidence = [probes[u] for u in sorted(probes)]


def _judge(run_dirs: Sequence[Path], arm: str, users: int, tiers: Sequence[SloTier],
           opts: CompareOptions) -> Probe:
    """A probe's outcome per tier from its runs (pooled), with analysis' validity rules."""
    runs = [read_run(d) for d in run_dirs]
    run = runs[-1]
    c = compare_runs(runs, tiers=tiers, seed=opts.seed, allow_unfair=True,
                     rules=opts.rules())
    summary = c.levels[0].arms[c.arms[0]] if c.levels else None
    verdict = c.validity.verdict
    if verdict == "invalid" or summary is None:
        reason = "; ".join(r.message for r in c.validity.reasons
                           if r.severity == "invalid")[:300] or "no requests"
        return Probe(users, run.manifest.run_id, verdict, {t.name: "invalid" for t in tiers},
                     reason, runs=len(runs))
    judged = {g.tier.name: g for g in summary.goodput}
    outcomes: dict[str, Outcome] = {
        t.name: judged[t.name].judged() if t.name in judged else "fails" for t in tiers}
    why = {n: judged[n].why for n, o in outcomes.items() if o == "indeterminate"}
    window = run.manifest.window
    settled = {t.name: settled_at(run, t, opts.max_failure_share, StopRule(), opts.duration_s)
               for t in tiers}
    early = run.manifest.early_stop
    return Probe(users, run.manifest.run_id, verdict, outcomes, runs=len(runs), why=why,
                 window_s=None if window is None else window.end_s - window.start_s,
                 settled=settled, stopped_early=None if early is None else early.why)


def _say(live: Live, text: str) -> None:
    if live != "quiet":
        print(f"agentreplay: search: {text}", file=sys.stderr, flush=True)


RunProbe = Callable[[str, str, int, Path, WindowStop | None], None]
"""Runs one probe: (arm, url, users, run directory, the early-stop rule or None). The
default sends the load to the arm's server (``run_load_sync``); a benchmark may run it
on the twin's clock (``simulate_level``'s ``window_stop``)."""


def _probe(arm: str, url: str, users: int, workload: str, out: Path, opts: CompareOptions,
           tiers: Sequence[SloTier], live: Live, repeat: int = 0,
           run_probe: RunProbe | None = None, early_stop: bool = True) -> Probe:
    """Run (or reuse) the probe's ``repeat``-th run and judge it pooled with the ones
    before (more requests to tell by). With ``early_stop`` the run's window ends once
    every tier's verdict is settled (:class:`TierStop`)."""
    dirs = [out / "runs" / PlannedRun(arm, users, r).name for r in range(repeat + 1)]
    run_dir = dirs[-1]
    if not is_run_reusable(run_dir):  # spoiled (interrupted, invalid): redone, as compare does
        if run_dir.exists():
            shutil.rmtree(run_dir)
        _say(live, f"{arm} at {plural(users, 'user')}"
             + (" again (pooled): the sample could not tell" if repeat else ""))
        stop = TierStop(tiers, opts.max_failure_share, opts.duration_s,
                        opts.warmup_s) if early_stop else None
        if run_probe is not None:
            run_probe(arm, url, users, run_dir, stop)
        else:
            reset_prefix_cache(url, opts.api_key_env)
            run_load_sync(opts.config(url, users, arm), workload, run_dir, live=live,
                          window_stop=stop)
    return _judge(dirs, arm, users, tiers, opts)


def _valid_dirs(out: Path, arm: str, probes: dict[int, Probe]) -> list[Path]:
    """The run directories of an arm's probes that are evidence (the twin fits on them)."""
    return [out / "runs" / PlannedRun(arm, u, r).name for u, p in sorted(probes.items())
            if p.validity != "invalid" for r in range(p.runs)]


def close_below(probes: dict[int, Probe], b: Bracket | None,
                precision: float | None = None) -> int | None:
    """Twin search: the next count under the lowest count that could not tell above the
    last count every probe met, when the gap between them is wider than the search's
    width: the twin places its probes at the boundary, where samples are least sure, so
    the answer's lower end is measured below them. The steps down double (one under
    the lowest, then two, four...: the step is twice the distance from the lowest count
    that could not tell to the next one above it) and never pass the gap's midpoint, so
    a line blurred over one count costs one probe and one blurred over many a few, not
    one per count."""
    if b is None or not b.indeterminate:
        return None
    passed = int(b.passed or 0)
    unsure = sorted(int(u) for u in b.indeterminate
                    if u > passed and (b.failed is None or u < b.failed))
    if not unsure:
        return None
    low = unsure[0]
    if _narrow(passed, low, precision):
        return None
    step = 2 * (unsure[1] - low) if len(unsure) > 1 else 1
    want = max(low - step, (passed + low) // 2, passed + 1)
    return want if want not in probes else None


def _met(p: Probe, tier: str) -> bool | None:
    o = p.outcomes.get(tier)
    return True if o == "meets" else False if o == "fails" else None


def search_capacity(
    arms: Sequence[tuple[str, str]], workload: str | os.PathLike[str],
    out: str | os.PathLike[str], opts: CompareOptions, tiers: Sequence[SloTier], *,
    start_users: int = 1, limits: SearchLimits | None = None, live: Live = "quiet",
    run_probe: RunProbe | None = None,
) -> SearchResult:
    """Search each arm's capacity bracket at each tier; write search.json and the report.
    ``run_probe`` runs each probe instead of sending load to the arm's URL (no preflight:
    a benchmark's server on the twin's clock)."""
    from analysis import read_extras, read_runs, report_bundle

    if not tiers:
        raise ConfigError("--search needs at least one tier, e.g. --search 100:15")
    limits = limits or SearchLimits()
    check_search_start(start_users, limits)
    max_users, max_probes, precision = limits.max_users, limits.max_probes, limits.precision
    out_p, path = Path(out), os.fspath(workload)
    labels = [label for label, _ in arms]
    if run_probe is None:  # a benchmark's in-process server may search one arm
        _check_arms(labels)
    # the levels are the search's own; everything else a probe was run with must match
    settings: dict[str, object] = {
        k: v for k, v in _settings(labels, path, opts).items() if k not in ("levels", "repeats")}
    settings["urls"] = public_arms(arms)  # no credentials in the state file
    state = SearchState(out_p, settings)
    if run_probe is None:
        verdict = preflight(arms, opts)
        if verdict.overridden:
            _say(live, f"WARNING: {verdict.sentence} (--allow-unfair)")
    guide = TwinGuide(path, opts.max_failure_share) if limits.method == "twin" else None
    tracks = {(label, t.name): TwinTrack() for label in labels for t in tiers}
    probes: dict[str, dict[int, Probe]] = {label: {} for label in labels}
    answers = {(label, t.name): SearchAnswer(label, t) for label in labels for t in tiers}
    order = list(arms)
    while True:
        progressed = False
        for label, url in order:
            for t in tiers:
                a = answers[(label, t.name)]
                if a.ended != "searching":
                    continue
                want, ended, how = next_probe(probes[label], t.name, start_users, max_users,
                                              precision, defer=guide is not None)
                if want is None and guide is not None and ended == "indeterminate":
                    want = close_below(probes[label], _bracket(probes[label], t.name),
                                       precision)
                    how = "searching" if want is not None else how
                if want is None:
                    _answer(a, probes[label], ended, how)
                    continue
                if sum(p.runs for p in probes[label].values()) >= max_probes:
                    _answer(a, probes[label], "probe limit",
                            f"stopped after {plural(max_probes, 'probe')} "
                            "(--search-max-probes): the bracket as far as it got")
                    continue
                placed_by = "bisect"
                if guide is not None and how == "searching" and want not in probes[label]:
                    lo, hi, _ = bounds(probes[label], t.name, defer=True)
                    verdicts = {u: _met(p, t.name) for u, p in probes[label].items()}
                    placed, why = guide.advise(_valid_dirs(out_p, label, probes[label]),
                                               verdicts, t, lo, hi, max_users,
                                               tracks[(label, t.name)])
                    _say(live, f"{label} at {t.label}: {why}")
                    if placed is not None:
                        want, placed_by = placed, "twin"
                repeat = probes[label][want].runs if want in probes[label] else 0
                before = probes[label][want].placed_by if want in probes[label] else {}
                probes[label][want] = _probe(label, url, want, path, out_p, opts, tiers, live,
                                             repeat, run_probe, not limits.full_window)
                probes[label][want].placed_by.update(before)  # who first chose the count
                probes[label][want].placed_by.setdefault(t.name, placed_by)
                state.ran(PlannedRun(label, want, repeat).name)
                progressed = True
                break  # one probe per arm per turn: arms alternate
        order.reverse()
        if not progressed:
            break
    result = list(answers.values())
    from analysis.report import SEARCH_FILE

    (out_p / SEARCH_FILE).write_bytes(search_payload(result, opts, start_users, max_users,
                                                     precision, limits.method,
                                                     tracks if guide is not None else None,
                                                     not limits.full_window))
    runs = read_runs([out_p / "runs"])
    shown = list(dict.fromkeys([*tiers, *opts.slo]))  # the searched tiers, then --slo's
    comparison = compare_runs(runs, tiers=shown, seed=opts.seed,
                              allow_unfair=opts.allow_unfair, rules=opts.rules())
    files = report_bundle(comparison, runs, extras=read_extras(out_p))
    for name, text in files.items():
        (out_p / name).write_text(text, encoding="utf-8")
    return SearchResult(out=out_p, report=out_p / "report.html", answers=result,
                        simulated=comparison.simulated, validity=comparison.validity)


def search_lines(result: SearchResult) -> list[str]:
    """What the command prints: one line per arm and tier."""
    sim = "[SIMULATED] " if result.simulated else ""
    return [sim + a.text() for a in result.answers]

