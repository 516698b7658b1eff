"""SLO search: per arm, the largest user count meeting each tier, by bracketing and bisection.

Each probe is an ordinary short run (``DIR/runs/<arm>-u<users>-r0``) judged by
analysis exactly as a comparison level is: the tier is met when its goodput
entry says so (interactivity floor, TTFT ceiling and failure share), and a run
stamped invalid is no evidence at all (the search for that tier stops and says
why). From the first user count, the load doubles until a tier fails, then the
bracket [largest met, smallest failed] is halved until it is one user wide.
Arms alternate probe by probe (A B, then B A) so that drift of the machine
does not land on one arm. Probes are shared by all tiers; a probe already on
disk (complete) is reused, so an interrupted search resumes.

``DIR/search.json`` holds each answer with its bracket and evidence; the report
of ``DIR`` shows it (``analysis.read_extras``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson

from analysis import SEARCH_FILE, SloTier, compare_runs, read_run
from replay.ab._driver import Live
from replay.ab._options import CompareOptions
from replay.ab._order import PlannedRun, is_run_complete
from replay.ab._preflight import preflight, reset_prefix_cache
from replay.errors import ConfigError
from replay.load import run_load_sync
from replay.text import plural

__all__ = ["SearchAnswer", "SearchResult", "next_probe", "search_capacity", "search_lines"]

Outcome = Literal["meets", "fails", "invalid"]
DEFAULT_MAX_USERS = 256
DEFAULT_MAX_PROBES = 12


@dataclass(frozen=True)
class Probe:
    """One short run's evidence: per tier met or not, or no evidence (invalid)."""

    users: int
    run: str
    validity: str
    outcomes: dict[str, Outcome]
    reason: str = ""


@dataclass
class SearchAnswer:
    """One arm and tier: the answer, its bracket, how it ended and the probes behind it."""

    arm: str
    tier: SloTier
    users: int | None = None
    bracket: tuple[int | None, int | None] = (None, None)
    how: str = "searching"
    evidence: list[Probe] = field(default_factory=list)

    def text(self) -> str:
        lo, hi = self.bracket
        if self.users is None:
            return f"{self.arm} at {self.tier.label}: {self.how}"
        prefix = "\u2265 " if self.how.startswith("at least") else ""
        span = f"bracket {lo}\u2013{hi}" if hi is not None else f"met up to {lo}"
        users = plural(self.users, "user")
        return f"{self.arm} at {self.tier.label}: {prefix}{users} ({span}; {self.how})"


@dataclass
class SearchResult:
    out: Path
    report: Path
    answers: list[SearchAnswer]
    simulated: bool


def next_probe(probes: dict[int, Probe], tier: str, start: int, max_users: int
               ) -> tuple[int | None, str]:
    """The next user count to run for a tier, or None with how the search ended."""
    outcome = {u: p.outcomes.get(tier, "invalid") for u, p in probes.items()}
    if not outcome:
        return start, "searching"
    fails = sorted(u for u, o in outcome.items() if o == "fails")
    hi = fails[0] if fails else None
    passes = sorted(u for u, o in outcome.items() if o == "meets" and (hi is None or u < hi))
    lo = passes[-1] if passes else 0
    if hi is None:
        if lo >= max_users:
            return None, f"at least: every probe up to {plural(max_users, 'user')} met the tier"
        want = min(max(lo * 2, start if lo == 0 else lo + 1), max_users)
    elif hi - lo <= 1:
        return None, ("none: even 1 user fails" if lo == 0 else "bracketed to one user")
    else:
        want = (lo + hi) // 2 if lo else max(1, min(start, hi) // 2)
        want = max(want, lo + 1)
    if outcome.get(want) == "invalid":
        return None, (f"stopped: the run at {plural(want, 'user')} was invalid "
                      f"({probes[want].reason})")
    return want, "searching"


def _answer(a: SearchAnswer, probes: dict[int, Probe], how: str) -> None:
    name = a.tier.name
    fails = sorted(u for u, p in probes.items() if p.outcomes.get(name) == "fails")
    hi = fails[0] if fails else None
    passes = sorted(u for u, p in probes.items()
                    if p.outcomes.get(name) == "meets" and (hi is None or u < hi))
    lo = passes[-1] if passes else None
    a.users, a.bracket, a.how = lo, (lo, hi), how
    a.evidence = [probes[u] for u in sorted(probes)]
    above = [u for u in passes if hi is not None and u > hi]
    if above:
        a.how += f"; not monotone: met again at {above} users"


def _judge(run_dir: Path, arm: str, users: int, tiers: Sequence[SloTier],
           opts: CompareOptions) -> Probe:
    """A probe's outcome per tier from its run, with analysis' validity rules."""
    run = read_run(run_dir)
    c = compare_runs([run], tiers=tiers, seed=opts.seed, allow_unfair=True,
                     rules=opts.rules())
    summary = c.levels[0].arms[c.arms[0]] if c.levels else None
    verdict = c.validity.verdict
    if verdict == "invalid" or summary is None:
        reason = "; ".join(r.message for r in c.validity.reasons
                           if r.severity == "invalid")[:300] or "no requests"
        return Probe(users, run.manifest.run_id, verdict, {t.name: "invalid" for t in tiers},
                     reason)
    met = {g.tier.name: g.meets for g in summary.goodput}
    return Probe(users, run.manifest.run_id, verdict,
                 {t.name: "meets" if met.get(t.name) else "fails" for t in tiers})


def _say(live: Live, text: str) -> None:
    if live != "quiet":
        print(f"agentreplay: search: {text}", file=sys.stderr, flush=True)


def _probe(arm: str, url: str, users: int, workload: str, out: Path, opts: CompareOptions,
           tiers: Sequence[SloTier], live: Live) -> Probe:
    run_dir = out / "runs" / PlannedRun(arm, users, 0).name
    if not is_run_complete(run_dir):
        if run_dir.exists():
            shutil.rmtree(run_dir)
        reset_prefix_cache(url, opts.api_key_env)
        _say(live, f"{arm} at {plural(users, 'user')}")
        run_load_sync(opts.config(url, users, arm), workload, run_dir, live=live)
    return _judge(run_dir, arm, users, tiers, opts)


def _payload(answers: Sequence[SearchAnswer], opts: CompareOptions, start: int,
             max_users: int) -> bytes:
    results = [{
        "arm": a.arm, "tier": a.tier.label, "tier_name": a.tier.name, "answer":
        ("none" if a.users is None else ("\u2265 " if a.how.startswith("at least") else "")
         + plural(a.users, "user")),
        "users": a.users, "bracket": list(a.bracket), "how": a.how,
        "evidence": [{"users": p.users, "run": p.run, "validity": p.validity,
                      "verdict": p.outcomes.get(a.tier.name, "invalid"),
                      "reason": p.reason} for p in a.evidence],
    } for a in answers]
    return orjson.dumps({
        "kind": "agentreplay-search", "start_users": start, "max_users": max_users,
        "duration_s": opts.duration_s, "warmup_s": opts.warmup_s,
        "summary": "Largest user count meeting each tier, per arm: from the first count the "
                   "load doubles until the tier fails, then the bracket is halved to one user. "
                   "Each probe is a short run judged with the same validity rules; an invalid "
                   "run is no evidence.",
        "results": results}, option=orjson.OPT_INDENT_2)


def search_capacity(
    arms: Sequence[tuple[str, str]], workload: str | os.PathLike[str],
    out: str | os.PathLike[str], opts: CompareOptions, tiers: Sequence[SloTier], *,
    start_users: int = 1, max_users: int = DEFAULT_MAX_USERS,
    max_probes: int = DEFAULT_MAX_PROBES, live: Live = "quiet",
) -> SearchResult:
    """Search each arm's capacity at each tier; write search.json and the report."""
    from analysis import read_extras, read_runs, report_bundle

    if not tiers:
        raise ConfigError("--search needs at least one tier, e.g. --search 100:15")
    if not 1 <= start_users <= max_users:
        raise ConfigError(f"--users {start_users}: the search starts at 1 to "
                          f"{plural(max_users, 'user')}")
    out_p, path = Path(out), os.fspath(workload)
    verdict = preflight(arms, opts)
    if verdict.overridden:
        _say(live, f"WARNING: {verdict.sentence} (--allow-unfair)")
    probes: dict[str, dict[int, Probe]] = {label: {} for label, _ in arms}
    answers = {(label, t.name): SearchAnswer(label, t) for label, _ in arms for t in tiers}
    order = list(arms)
    while True:
        progressed = False
        for label, url in order:
            for t in tiers:
                a = answers[(label, t.name)]
                if a.how != "searching":
                    continue
                want, how = next_probe(probes[label], t.name, start_users, max_users)
                if want is None or len(probes[label]) >= max_probes:
                    _answer(a, probes[label], how if want is None else
                            f"stopped after {max_probes} probes")
                    continue
                probes[label][want] = _probe(label, url, want, path, out_p, opts, tiers, live)
                progressed = True
                break  # one probe per arm per turn: arms alternate
        order.reverse()
        if not progressed:
            break
    result = list(answers.values())
    (out_p / SEARCH_FILE).write_bytes(_payload(result, opts, start_users, max_users))
    runs = read_runs([out_p / "runs"])
    comparison = compare_runs(runs, tiers=tiers, seed=opts.seed,
                              allow_unfair=opts.allow_unfair, rules=opts.rules())
    files = report_bundle(comparison, runs, extras=read_extras(out_p))
    for name, text in files.items():
        (out_p / name).write_text(text, encoding="utf-8")
    return SearchResult(out=out_p, report=out_p / "report.html", answers=result,
                        simulated=comparison.simulated)


def search_lines(result: SearchResult) -> list[str]:
    """What the command prints: one line per arm and tier."""
    sim = "[SIMULATED] " if result.simulated else ""
    return [sim + a.text() for a in result.answers]

