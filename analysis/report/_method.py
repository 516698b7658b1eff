"""The rules behind the numbers, as the report's methodology section states them.

Written next to the code that applies them (``_measure``, ``_tiers``,
``_capacity``, ``_comparison``, ``_validity``); the thresholds are read from
``Rules``, so the text always shows the values that were applied.
"""

from __future__ import annotations

from analysis.judge import DEFAULT_RULES, Rules
from analysis.metrics import MIN_ALL_MET_REQUESTS

__all__ = ["method_rules"]


def method_rules(rules: Rules = DEFAULT_RULES) -> tuple[str, ...]:
    """One sentence per rule: accounting, censoring, throughput, tiers, capacity,
    evidence and validity."""
    r = rules
    return (
        "Accounting: every request sent inside the steady window (warmup and drain excluded) "
        "ends in exactly one outcome: ok, an error kind, timeout, incomplete (still running "
        "when the drain ended) or cancelled (interrupted by the user). All appear in the "
        "counts; the failure share is (errors + timeouts + incomplete) / (requests sent - "
        "cancelled).",
        "Latency percentiles come from ok requests plus the incomplete ones, which are "
        "right-censored: their TTFT (when no token came) and E2E are at least the time they "
        "ran until the drain cut them. A percentile that a censored value could still move is "
        "shown as a lower bound (\u2265); none is dropped silently. Their TPOT and ITL over "
        "the tokens that arrived before the cut are measured decode rates and count as "
        "they are.",
        "Throughputs count every token that arrived inside the window, whatever the outcome "
        "of its request (ok, failed, incomplete) and whenever it was sent, by chunk arrival "
        "time, divided by the window's length (summed over pooled repeats).",
        "SLO tiers: a level meets a tier when its failure share is at most "
        f"{r.max_failure_share:.0%} and at least 90% of ALL requests sent in the window met "
        "the TTFT-from-schedule ceiling and at least 90% met the interactivity floor (failed "
        "and incomplete requests miss both), i.e. P90 over all requests sent. "
        "Indeterminate: each of those two shares gets its 95% Wilson score interval over "
        "the requests it counts; a level fails when either interval lies wholly below 90% "
        "(or its failure share is above the maximum), meets when both lie at or above 90%, "
        "and is otherwise indeterminate: the sample is on both sides of the line, too few "
        "requests to tell (6 of 7 meeting is indeterminate, not a fail; a level every "
        f"request of which met needs at least {MIN_ALL_MET_REQUESTS} requests to be met). "
        "An indeterminate level is unknown: it ends no capacity bracket and bounds no "
        "ratio, and the SLO search runs it again (pooled) once before stepping over it.",
        "Capacity is a bracket of measured loads (users; sessions/s in open loop), nothing "
        "interpolated: at least the largest level up to which every measured level meets "
        "the tier, below the first level that fails it ('at least N' when all met it, "
        "'below N' when the smallest failed). A level meeting the tier above a failing one "
        "does not move the bracket; it is listed as not monotone. Users per GPU is the "
        "bracket over the arm's GPU count, a bound where the bracket is one ('\u2265 2.50' "
        "for 'at least 40 users' on 16 GPUs); decode tok/s per GPU is measured at the "
        "passing level. The arms' capacity ratio is "
        "bounded by the two brackets (B in [b1, b2), A in [a1, a2): B/A between b1/a2 and "
        "b2/a1); 'unknown' when that range holds 1, i.e. either arm may serve more.",
        "No interactivity: an ok request with fewer than 2 output tokens, or whose tokens all "
        "arrived in one read (a decode time of 0), has no measured TPOT (it is unmeasured, "
        "never 0 or infinitely fast). It is left out of the interactivity distributions, of "
        "the interactivity share and of the share meeting both limits (counted and shown as "
        "'no interactivity'), and still counts in the failure and TTFT shares; a user whose "
        "every answer was too short to rate is left out of the users share.",
        "Drain and censoring: the drain after the window lets the window's requests finish; "
        "by default it lasts the workload's longest answer at a conservative 20 tok/s plus "
        "10 s (at least 30 s). A request still running when it ends is cut (incomplete) and "
        "reported with the tokens it had received of those asked. For a tier, a cut request "
        "that was on pace (first token within the TTFT ceiling, tokens so far at no less "
        "than the floor's rate up to the cut) is censored: left out of that tier's shares, "
        "neither a miss (only the tool's own cut-off stopped it, and a short --drain would "
        "otherwise fail whole levels) nor a hit (how it would have ended is unknown). Every "
        "other cut request is a miss. More than "
        f"{r.drain_cut_caveat:.0%} of the window's requests cut is a caveat naming --drain.",
        "Output length: the client asks for an exact length (min_tokens = max_tokens, "
        "ignore_eos). An ok request with another length than asked, or whose streamed "
        "tokens outnumber the usage count, is an output-length mismatch (a proxy or server "
        "that cut max_tokens does less work per request). Above "
        f"{r.output_mismatch_caveat:.0%} of a run's ok requests it is a caveat, above "
        f"{r.output_mismatch_invalid:.0%} the run is invalid; the interactivity, TPOT, E2E "
        "and session-latency ratios of an arm above "
        f"{r.output_mismatch_caveat:.0%} are never established.",
        "Drift between repeats: with repeats, each run's P90 interactivity, TTFT and E2E get "
        "their own 95% interval (users resampled, widened for few users); two repeats of an "
        "arm further apart than the root-sum-square of their half-widths (in log space, "
        "Bonferroni-scaled for the number of pairs) drifted: a caveat naming the arm, the "
        "metric and the values. When pairing single repeats of the two arms gives a ratio "
        "on the other side of 1 (or within the minimum effect), the drift could flip the "
        "verdict and that level's difference is not established.",
        "95% intervals are percentile bootstrap intervals (1000 seeded replicates) that "
        "resample users, not requests; with pooled repeats they resample runs first, then "
        "users within runs, so drift between runs is inside the interval. With one run per "
        "arm the interval does not cover drift between runs. A ratio's interval is widened "
        "in log space by t(n-1)/z x sqrt(n/(n-1)) for the n users of the smaller arm, the "
        "usual small-sample correction (a plain bootstrap over 4 users calls identical "
        "arms different about three times too often).",
        "Established: a difference is called established only when its 95% interval "
        f"excludes 1, each arm has at least {r.min_users} independent users (across pooled "
        f"runs) and {r.min_requests} requests in the window, the difference is at least "
        f"{r.min_effect:.0%}, and no run of the level is invalid; otherwise it is 'not "
        "established' with the reason.",
        "Validity: each run is valid, valid with caveats, or invalid. Invalid: no request in "
        "the window, every lane out of work before the window ended, the server died or a "
        "failure burst, more than "
        f"{r.max_failure_share:.0%} of requests unable to connect, client schedule-lag P99 above "
        f"{r.schedule_lag_p99_invalid_s * 1e3:.0f} ms or an event-loop stall above "
        f"{r.loop_lag_max_invalid_s * 1e3:.0f} ms, a client schedule lag "
        f"{r.imbalance_factor:g}x higher in one arm than in the other and above "
        f"{r.schedule_lag_p99_caveat_s * 1e3:.0f} ms, a simulated server more than "
        f"{r.sim_lateness_invalid:.0%} late on its profile, output-length mismatches above "
        f"{r.output_mismatch_invalid:.0%}. Caveats: failure share above "
        f"{r.max_failure_share:.0%}, a few connection failures, schedule-lag P99 above "
        f"{r.schedule_lag_p99_caveat_s * 1e3:.0f} ms, client CPU above "
        f"{r.cpu_share_caveat:.0%} of a core, loop stalls above "
        f"{r.loop_lag_max_caveat_s * 1e3:.0f} ms, measured prefix-hit share below "
        f"{r.cache_share_ratio_caveat:.0%} of the expected one or rising by more than "
        f"{r.cache_rise_caveat:.0%} inside the window, lanes out of work early, fewer than "
        f"{r.min_window_requests} requests in a run's window, warmup requests running past "
        f"the window, an interrupted run, output-length mismatches above "
        f"{r.output_mismatch_caveat:.0%}, requests cut by the drain above "
        f"{r.drain_cut_caveat:.0%}, drift between repeats, and a client schedule lag "
        f"{r.imbalance_factor:g}x higher in one arm (above "
        f"{r.imbalance_floor_s * 1e3:.0f} ms).",
        "Open-loop and timestamp-replay runs are grouped by what set their load (sessions "
        "per second; time scale), never called users.",
    )
