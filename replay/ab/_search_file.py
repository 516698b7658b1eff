"""What ``DIR/search.json`` holds: each answer with its bracket, its probes' evidence
(verdict, window covered, where the early-stop rule settled it, who placed the count)
and, for the twin's search, the twin's steps; the early-stop rule in words."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from replay.ab._early_stop import Settled, StopRule
from replay.ab._options import CompareOptions
from replay.ab._search_answer import SearchAnswer
from replay.ab._search_placement import TwinTrack

__all__ = ["EARLY_STOP_NOTE", "search_payload"]


def _settled_payload(s: Settled | None) -> dict[str, object] | None:
    return None if s is None else {"verdict": s.verdict, "window_s": s.window_s,
                                   "requests": s.requests, "why": s.why}


EARLY_STOP_NOTE = (
    "Early stop (rule): a probe's verdict is settled once the requests known then decide "
    "it whichever way those in flight end, each share's 99% Wilson interval wholly above "
    "or below 90% (or the failure share over the maximum), and the whole window would "
    "still give it, judged at 95%, with the rest of it (the send rate so far over the "
    "time left) meeting each limit at the late half's 99% bound against the verdict (the "
    "requests sent in the second half of the window so far; for fails the upper bound, "
    f"at least {StopRule().fail_floor:.0%}; for meets the lower): the first minutes, "
    "where contexts are still growing, do not decide alone; after at least "
    f"{StopRule().min_requests} requests and {StopRule().min_fraction:.0%} of the window, "
    f"looked at every {StopRule().step_s:g} s. A probe stops there (stopped_early says "
    "why; window_s is the window it covered, the one it is judged on; its requests in "
    "flight finish in the drain); with --search-full-window each probe runs its whole "
    "window and settled.window_s is where the rule would have stopped it.")


def search_payload(answers: Sequence[SearchAnswer], opts: CompareOptions, start: int,
                   max_users: int, precision: float | None, method: str = "bisect",
                   tracks: dict[tuple[str, str], TwinTrack] | None = None,
                   early_stop: bool = True) -> bytes:
    results = [{
        "arm": a.arm, "tier": a.tier.label, "tier_name": a.tier.name, "answer": a.answer(),
        "users": a.users,
        "bracket": [a.bracket.passed, a.bracket.failed] if a.bracket else [None, None],
        "passed_above": a.bracket.passed_above if a.bracket else [],
        "indeterminate": a.bracket.indeterminate if a.bracket else [],
        "ended": a.ended, "how": a.how,
        "evidence": [{"users": p.users, "run": p.run, "validity": p.validity,
                      "verdict": p.outcomes.get(a.tier.name, "invalid"),
                      "reason": p.reason or p.why.get(a.tier.name, ""),
                      "runs": p.runs, "placed_by": p.placed_by.get(a.tier.name, "bisect"),
                      "window_s": p.window_s, "stopped_early": p.stopped_early,
                      "settled": _settled_payload(p.settled.get(a.tier.name))}
                     for p in a.evidence],
        "twin": None if tracks is None else {
            "placed": (tk := tracks[(a.arm, a.tier.name)]).placed,
            "contradicted": tk.misses, "steps": tk.notes},
    } for a in answers]
    width = "one user" if precision is None else f"{precision:.0%} (or one user)"
    return orjson.dumps({
        "kind": "agentreplay-search", "start_users": start, "max_users": max_users,
        "precision": precision, "duration_s": opts.duration_s, "warmup_s": opts.warmup_s,
        "method": method, "early_stop": EARLY_STOP_NOTE,
        "full_window": not early_stop,
        "summary": "Per arm, the measured user counts each tier's capacity lies between: the "
                   "largest count up to which every probe met the tier, and the first that "
                   "failed (nothing interpolated). From the first count the load doubles "
                   f"until the tier fails, then the bracket is halved to {width} wide. Each "
                   "probe is a short run judged with the same validity rules; an invalid run "
                   "is no evidence.",
        "results": results}, option=orjson.OPT_INDENT_2)
