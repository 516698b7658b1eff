"""Validity: whether a run or a comparison can carry a verdict, with named reasons.

Each check looks at facts the run recorded (records, counters, the manifest's
client health, coverage and server watch) against a threshold of ``Rules`` and
adds a reason with a stable code. Any ``invalid`` reason makes the verdict
``invalid`` (no difference is then called established); ``caveat`` reasons make
it ``caveats``. Pure functions: no clock, no network.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.judge._rules import DEFAULT_RULES, Rules
from analysis.metrics import RunSummary
from analysis.read import RunData, steady_window
from analysis.schema import ClientHealth, ErrorKind, Severity, Validity, ValidityReason, Verdict
from analysis.text import plural, verb

__all__ = ["LENGTH_SENSITIVE", "assess_comparison", "assess_run", "length_evidence",
           "merge_validity", "mismatch_share"]

_CONNECT_KINDS = (ErrorKind.CONNECT, ErrorKind.TIMEOUT_CONNECT)


def _verdict(reasons: list[ValidityReason]) -> Validity:
    sev = {r.severity for r in reasons}
    verdict: Verdict = "invalid" if "invalid" in sev else "caveats" if sev else "valid"
    return Validity(verdict=verdict, reasons=reasons)


class _Found:
    def __init__(self) -> None:
        self.reasons: list[ValidityReason] = []

    def add(self, code: str, severity: Severity, message: str) -> None:
        self.reasons.append(ValidityReason(code=code, severity=severity, message=message))


_THINK_FIX = ("(the workload's think times outlast the run: cap them with --think-time-cap S, "
              "scale them with --think-scale F, or lengthen --duration)")
_THINK_FIX_SCENARIO = ("(the workload's think times outlast the run: the scenario's rules fix "
                       "them, so lengthen --duration)")


def _think_fix(scenario: str | None) -> str:
    """The remedy for think times that outlast the run: a scenario's rules set the think
    times (and its own idle cap), so only a longer run is open to its user."""
    return _THINK_FIX_SCENARIO if scenario else _THINK_FIX


def _early_text(early: int, lanes: int, load_kind: str, scenario: str | None) -> str:
    """Why lanes stopped early, in the terms of the load: a closed-loop user stops when its
    next turn is due after the run (it is thinking), a plan or trace when it has ended."""
    if load_kind == "users":
        return (f"{early} of {plural(lanes, 'user')} had no turn due before the run's end "
                "(the next one came after it) " + _think_fix(scenario))
    return f"the arrival plan or trace ended before the window did ({early} of {lanes})"


def _coverage(run: RunData, s: RunSummary, found: _Found, rules: Rules) -> None:
    m, r = run.manifest, run.requests
    window = steady_window(run)
    if window is None:
        found.add("window_missing", "invalid", "the run has no steady window (no request was "
                  "sent after warmup)")
        return
    start, end = window
    early = m.coverage.lanes_done_before_window_end if m.coverage else 0
    lanes = m.coverage.lanes if m.coverage else 0
    warm = (r.sent_s < start) & (np.fmax(r.end_s, r.last_token_s) >= end) \
        | (r.sent_s < start) & (r.status == "incomplete")
    n_warm = int(warm.sum())
    if s.counts.in_window == 0:
        causes = []
        if n_warm:
            causes.append(f"{plural(n_warm, 'warmup request')} {verb(n_warm, 'was', 'were')} "
                          "still running through the window "
                          "(longer --duration or fewer --users)")
        if early:
            causes.append(_early_text(early, lanes, m.load_kind, m.scenario))
        if not causes and m.load_kind == "users":
            causes.append("every user was thinking through the whole window "
                          + _think_fix(m.scenario))
        found.add("window_empty", "invalid", "no request was sent in the steady window"
                  + (": " + "; ".join(causes) if causes else ""))
        return
    if n_warm:
        found.add("warmup_overrun", "caveat", f"{plural(n_warm, 'warmup request')} "
                  f"{verb(n_warm, 'was', 'were')} still running "
                  "at the window's end (their tokens count in throughput; longer --warmup)")
    if early:
        sev: Severity = "invalid" if lanes and early >= lanes else "caveat"
        found.add("lanes_done_early", sev, _early_text(early, lanes, m.load_kind, m.scenario)
                  + ": the load fell during the window")
    if s.counts.in_window < rules.min_window_requests:
        found.add("window_thin", "caveat", f"only {plural(s.counts.in_window, 'request')} sent in "
                  f"the window (fewer than {rules.min_window_requests})")


def _failures(run: RunData, s: RunSummary, found: _Found, rules: Rules) -> None:
    c = s.counts
    if c.failure_share is not None and c.failure_share > rules.max_failure_share:
        found.add("failures", "caveat", f"{c.failure_share:.1%} of requests sent in the "
                  f"window failed or were incomplete ({c.error} error, {c.timeout} timeout, "
                  f"{c.incomplete} incomplete{f', {c.lost} lost' if c.lost else ''}): above "
                  f"{rules.max_failure_share:.0%}, every SLO tier fails"
                  + (" (but for requests cut by the drain while on pace for its floor)"
                     if c.incomplete else ""))
    sent = c.in_window - c.cancelled
    if c.incomplete and sent and c.incomplete / sent > rules.drain_cut_caveat:
        got = f"{c.cut_received / c.cut_asked:.0%}" if c.cut_asked else "none"
        found.add("drain_cut", "caveat", f"{c.incomplete} of {plural(sent, 'request')} sent "
                  f"in the window ({c.incomplete / sent:.1%}) "
                  f"{verb(c.incomplete, 'was', 'were')} still running when the drain "
                  f"ended {run.manifest.load.drain_s:g} s after the window (they had "
                  f"received {c.cut_received:,} of the {c.cut_asked:,} tokens asked, {got}): "
                  "--drain was too short for them (leave it unset: the default covers the "
                  "workload's longest answer)")
    conn = sum(c.by_error_kind.get(k, 0) for k in _CONNECT_KINDS)
    if conn and sent and conn / sent > rules.max_failure_share:
        found.add("server_unreachable", "invalid", f"{conn} of {plural(sent, 'request')} "
                  "sent in the window could not connect to the server: it was down or refusing "
                  "connections, so nothing about its speed was measured")
    elif conn:
        found.add("connection_failures", "caveat", f"{plural(conn, 'request')} could not "
                  "connect to the server")
    watch = run.manifest.server_watch
    if watch is not None and watch.server_died:
        found.add("server_died", "invalid", "the server died during the run"
                  + (f": {watch.detail}" if watch.detail else ""))
    window = steady_window(run)
    if window is None:
        return
    r = run.requests
    start, end = window
    q3 = start + 0.75 * (end - start)
    counted = (r.status != "cancelled") & (r.sent_s >= start) & (r.sent_s < end)
    # a request the drain cut is no sign of a dead server: the last quarter's requests
    # are the ones a short drain cuts (drain_cut says so); a dead server's requests end
    # in errors and timeouts
    bad = counted & (r.status != "ok") & (r.status != "incomplete")
    tail = counted & (r.sent_s >= q3)
    head = counted & (r.sent_s < q3)
    n_tail = int(tail.sum())
    if n_tail >= rules.failure_burst_min:
        tail_share = float((bad & tail).sum() / n_tail)
        head_share = float((bad & head).sum() / head.sum()) if head.any() else 0.0
        if tail_share >= rules.failure_burst_share and head_share < tail_share / 2:
            found.add("failure_burst", "invalid", f"{tail_share:.0%} of requests failed in "
                      f"the last quarter of the window against {head_share:.0%} before: the "
                      "server died or restarted")


def _workers(run: RunData, found: _Found, rules: Rules) -> None:
    """Workers lost mid-run (``worker_lost``): how many users stopped and requests
    went unrecorded; tiny shares are a caveat (``Rules.worker_lost_caveat_share``)."""
    m = run.manifest
    gone = [w for w in m.worker_info if w.lost]
    if not gone:
        return
    users = sum(w.users for w in gone)
    total = sum(w.users for w in m.worker_info) or m.load.users or 0
    lost = int((run.requests.status == "lost").sum())
    n = len(run.requests.status)
    cap = rules.worker_lost_caveat_share
    tiny = users <= cap * max(total, 1) and lost <= cap * max(n, 1)
    detail = "; ".join(f"worker {w.index}: {w.lost_detail or 'lost'}" for w in gone)
    found.add("worker_lost", "caveat" if tiny else "invalid",
              f"{plural(len(gone), 'worker')} lost mid-run ({detail}): {users} of "
              f"{plural(total, 'user')} stopped early and {plural(lost, 'request')} in flight "
              f"or due on them {verb(lost, 'is', 'are')} recorded "
              f"as lost (outcome unknown)")


def _client(run: RunData, s: RunSummary, found: _Found, rules: Rules) -> None:
    h = run.manifest.client_health
    lag = h.schedule_lag_p99_s if h and h.schedule_lag_p99_s is not None else s.schedule_lag.p99
    if lag is not None and lag > rules.schedule_lag_p99_caveat_s:
        sev: Severity = "invalid" if lag > rules.schedule_lag_p99_invalid_s else "caveat"
        found.add("client_schedule_lag", sev, f"the client sent requests late: schedule lag "
                  f"P99 {lag * 1e3:.0f} ms (above {rules.schedule_lag_p99_caveat_s * 1e3:.0f} "
                  "ms; a loaded machine or too few --workers)")
    if h is None:
        return
    if h.cpu_share is not None and h.cpu_share > rules.cpu_share_caveat:
        found.add("client_cpu", "caveat", f"the client used {h.cpu_share:.0%} of a core: it "
                  "may have been the bottleneck (use --workers)")
    if h.loop_lag_max_s is not None and h.loop_lag_max_s > rules.loop_lag_max_caveat_s:
        sev = "invalid" if h.loop_lag_max_s > rules.loop_lag_max_invalid_s else "caveat"
        found.add("client_loop_stall", sev, f"the client's event loop stalled for "
                  f"{h.loop_lag_max_s * 1e3:.0f} ms during the window{_stall_why(h)}")


_STALL_WHY = {
    "busy": "running the client's own code",
    "gc": "in a garbage collection",
    "starved": "runnable but waiting for a CPU another process held (pin the server "
               "and the client to separate cores)",
    "blocked": "in a blocking call",
}


def _stall_why(h: ClientHealth) -> str:
    """What the loop was doing in its stalls (``replay.load``'s watchdog), if seen."""
    if not h.loop_stall_kinds:
        return ""
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(h.loop_stall_kinds.items(),
                                                     key=lambda kv: -kv[1]))
    text = f" ({kinds})"
    if h.loop_stalls:
        top = h.loop_stalls[0]
        where = f" at {_where(top.frames)}" if top.frames and top.kind != "starved" else ""
        text += f"; the longest ({top.lag_s * 1e3:.0f} ms) {_STALL_WHY[top.kind]}{where}"
    return text


def _where(frames: Sequence[str]) -> str:
    """The innermost frame, and the client's own innermost frame (``replay/``) below it
    when the stall sat in a library (a lock, a socket): the line a user can act on."""
    ours = next((f for f in frames if f.startswith("replay/")), None)
    if ours is None or ours == frames[0]:
        return frames[0]
    return f"{frames[0]} in {ours}"


def _server_model(s: RunSummary, found: _Found, rules: Rules) -> None:
    late = s.sim_lateness
    if late is not None and late > rules.sim_lateness_invalid:
        found.add("sim_late", "invalid", f"the simulated server's engine steps took "
                  f"{late:.0%} longer than its profile (starved of CPU?): its timing is not "
                  "the modelled one, so no speed verdict")


def _cache(s: RunSummary, found: _Found, rules: Rules) -> None:
    p = s.prefix
    if p.measured_share is not None and p.expected_share:
        if p.measured_share < rules.cache_share_ratio_caveat * p.expected_share:
            found.add("cache_cold", "caveat", f"measured prefix-hit share {p.measured_share:.1%}"
                      f" against {p.expected_share:.1%} expected: the cache was cold or too "
                      "small (a longer --warmup warms it)")
    first, second = p.measured_share_halves
    if s.counts.in_window < rules.min_requests:
        return  # a handful of requests per half: their shares say nothing about a trend
    if first is not None and second is not None and second - first > rules.cache_rise_caveat:
        found.add("cache_warming", "caveat", f"prefix-hit share rose from {first:.1%} to "
                  f"{second:.1%} inside the window: the cache was still warming (longer "
                  "--warmup)")


def mismatch_share(s: RunSummary) -> float | None:
    """ok requests whose output length was not the one asked for, over ok requests."""
    c = s.counts
    return c.output_mismatch / c.ok if c.ok else None


LENGTH_SENSITIVE = frozenset({"interactivity.p90", "interactivity.p50", "interactivity_user.p90",
                              "tpot.p90", "e2e.p90", "session_latency.p90"})
"""Ratios that shorter answers than asked change (less work per request): never
established for an arm whose output-length mismatches exceed the caveat share."""
def length_evidence(key: str, arms: dict[str, RunSummary], rules: Rules) -> str | None:
    """Why a length-sensitive ratio cannot be established: an arm got answers of
    other lengths than asked (a proxy or server cut max_tokens)."""
    if key not in LENGTH_SENSITIVE:
        return None
    for arm, s in arms.items():
        share = mismatch_share(s)
        if share is not None and share > rules.output_mismatch_caveat:
            return (f"{s.counts.output_mismatch} of arm {arm!r}'s {s.counts.ok} ok requests "
                    f"({share:.0%}) got answers of another length than asked: its latencies "
                    "are not of the same work")
    return None


def _lengths(s: RunSummary, found: _Found, rules: Rules) -> None:
    share = mismatch_share(s)
    if share is None or share <= rules.output_mismatch_caveat:
        return
    sev: Severity = "invalid" if share > rules.output_mismatch_invalid else "caveat"
    limit = rules.output_mismatch_invalid if sev == "invalid" else rules.output_mismatch_caveat
    found.add("output_mismatch", sev, f"{s.counts.output_mismatch} of "
              f"{plural(s.counts.ok, 'ok request')} ({share:.1%}, above {limit:.0%}) got an "
              "answer of another length than asked (fewer tokens despite ignore_eos, or a "
              "usage count disagreeing with the stream): a proxy or the server cut max_tokens, "
              "so the work measured is not the workload's (its E2E and interactivity are not "
              "comparable)")


def assess_run(
    run: RunData, *, rules: Rules = DEFAULT_RULES, summary: RunSummary | None = None
) -> Validity:
    """The validity of one run from its records, counters and manifest."""
    if summary is None:
        from analysis.metrics import measure, summarize

        summary = summarize(measure(run), bootstrap=False, tiers=(),
                            max_failure_share=rules.max_failure_share)
    found = _Found()
    _coverage(run, summary, found, rules)
    _failures(run, summary, found, rules)
    _client(run, summary, found, rules)
    _workers(run, found, rules)
    _server_model(summary, found, rules)
    _cache(summary, found, rules)
    _lengths(summary, found, rules)
    if run.incomplete:
        found.add("run_incomplete", "caveat", "the run did not finish normally: "
                  + "; ".join(run.reasons))
    if run.metrics.dropped:
        shown = ", ".join(f"{k} ({n}x)" for k, n in list(run.metrics.dropped.items())[:5])
        more = len(run.metrics.dropped) - 5
        found.add("server_metric_unbelievable", "caveat",
                  f"the server's /metrics gave non-finite, negative or absurd values for "
                  f"{shown}{f' and {more} more' if more > 0 else ''}: those scrapes' "
                  "values are kept as missing, not as if true")
    if run.manifest.interrupted:
        found.add("run_interrupted", "caveat", "the run was interrupted: its window is "
                  "shorter than planned and requests in flight were cancelled")
    return _verdict(found.reasons)


def merge_validity(parts: Sequence[tuple[str, Validity]]) -> Validity:
    """One verdict from several (the worst), each reason prefixed by its source."""
    reasons = [ValidityReason(code=r.code, severity=r.severity, message=f"{name}: {r.message}")
               for name, v in parts for r in v.reasons]
    return _verdict(reasons)


def _lag(s: RunSummary) -> float | None:
    return s.schedule_lag.p99


def assess_comparison(
    runs: Sequence[tuple[str, Validity]], levels: Sequence[tuple[str, dict[str, RunSummary]]],
    *, rules: Rules = DEFAULT_RULES,
) -> Validity:
    """The runs' verdicts merged, plus imbalance of client health between arms at
    each level (``levels``: (level label, summary per arm))."""
    merged = merge_validity(runs)
    found = _Found()
    found.reasons = list(merged.reasons)
    for label, arms in levels:
        lags = {a: _lag(s) for a, s in arms.items() if _lag(s) is not None}
        if len(lags) < 2:
            continue
        hi_arm = max(lags, key=lambda a: lags[a] or 0.0)
        lo_arm = min(lags, key=lambda a: lags[a] or 0.0)
        hi, lo = lags[hi_arm] or 0.0, lags[lo_arm] or 0.0
        if hi > rules.imbalance_floor_s and hi > rules.imbalance_factor * max(lo, 1e-6):
            sev: Severity = "invalid" if hi > rules.schedule_lag_p99_caveat_s else "caveat"
            found.add("client_imbalance", sev, f"at {label} the client's schedule lag "
                      f"P99 was {hi * 1e3:.1f} ms in arm {hi_arm!r} against {lo * 1e3:.1f} ms "
                      f"in {lo_arm!r}: the arms ran on differently loaded clients")
    return _verdict(found.reasons)
