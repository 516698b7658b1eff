"""``agentreplay demo``: a whole A/B comparison against two simulated servers.

Two ``serve-sim`` children (profile ``kimi-k3-gb300-tp16``, backends ``auto``
and ``latency_specialized``, the same simulated GPUs) and a small coding-agent
workload scaled down so that a turn fits a short run: prompts x0.05, outputs x0.1 (at
most 256 tokens), think times x0.005 (a hundred ms or so between turns, so every user
issues many requests inside a steady window of a few seconds). After the runs a twin is
fitted per arm on its own runs (``replay.twin.arm_twins``). Everything is labelled
simulated in the results, the twins modelled.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from replay.ab._driver import CompareResult, Live, compare_arms
from replay.ab._options import CompareOptions

if TYPE_CHECKING:
    from traces import Request

__all__ = ["DEMO_PROFILE", "DemoSettings", "demo_settings", "run_demo"]

DEMO_PROFILE = "kimi-k3-gb300-tp16"


@dataclass(frozen=True)
class DemoSettings:
    levels: tuple[int, ...]
    duration_s: float
    warmup_s: float
    drain_s: float
    sessions: int
    prompt_scale: float = 0.05
    think_scale: float = 0.005
    output_scale: float = 0.1
    """Outputs shortened too: a turn takes well under a second, so every user's requests
    fall inside a window of a few seconds (not one request spanning it)."""
    max_output_tokens: int = 256
    """The longest answer (the 99th percentile at x0.1 is about 350 tokens): the drain
    waits for the window's last answer, and an uncapped 1,500-token one held the slowest
    levels 10-25 s past their window."""


def demo_settings(quick: bool = False) -> DemoSettings:
    """The demo's size: about two minutes (quick: about a minute).

    The levels show capacity: at the 100 tok/s/user tier the simulated ``auto`` backend
    meets it at 4 users (P90 interactivity ~125) and fails at 16 (~78), while
    ``latency_specialized`` meets it at 16 (~142) and fails at 40 (~77), so both arms
    are bracketed at that tier and the capacity ratio is decided (margins of 10% or
    more on every side, as the twin of the demo's profile predicts them). Every level
    has at least 4 users per arm, so each interactivity ratio can be established (a
    1-user level never can: no interval). Quick keeps the two smaller levels."""
    # 10 s windows and think times x0.005 give the 4-user level about 50 requests, so it
    # can be told met when all meet (35 all meeting is the least that reads "met"; one
    # slow request among 50 reads indeterminate, 48 of 49 too: the tier rule; 12 s windows
    # tolerated one, but ran the demo past two minutes); the 3.5 s warmup lets 40 new
    # sessions through their first (uncached) prompts, so the prefix-hit share is steady
    # in the window (2 s left it rising from ~70% to ~96%: a cache_warming caveat); the
    # drain covers the longest answer (256 tokens) at the slowest level's ~45
    # tok/s/user, so no request is cut (drain_cut), and ends as soon as the window's
    # requests are done
    levels = (4, 16) if quick else (4, 16, 40)
    return DemoSettings(levels=levels, duration_s=10.0, warmup_s=3.5, drain_s=15.0,
                        sessions=24)


def _capped(requests: tuple[Request, ...], cap: int) -> tuple[Request, ...]:
    """The requests with every answer (their subagents' too) at most ``cap`` tokens."""
    return tuple(r.model_copy(update={
        "output_tokens": min(r.output_tokens, cap),
        "subagents": tuple(sub.model_copy(update={"requests": _capped(sub.requests, cap)})
                           for sub in r.subagents)}) for r in requests)


def _workload(path: Path, s: DemoSettings) -> None:
    from traces import generate, write_workload

    header, sessions = generate("coding-agent", sessions=s.sessions, seed=0, block_size=64,
                                prompt_scale=s.prompt_scale, think_scale=s.think_scale,
                                output_scale=s.output_scale)
    header = header.model_copy(update={"params": {**header.params,
                                                  "max_output_tokens": s.max_output_tokens}})
    write_workload(path, header, (x.model_copy(update={"requests": _capped(
        x.requests, s.max_output_tokens)}) for x in sessions))


def run_demo(out: str | os.PathLike[str] = "results/demo", *, quick: bool = False,
             live: Live = "plain") -> CompareResult:
    """Start two simulated servers, compare them at a few user counts, write the report.

    A previous demo in ``out`` is replaced (the command refuses that without
    ``--force``; the demo is not resumable: it is short).
    """
    import shutil

    from replay.servers.sim import SimServerProcess

    s = demo_settings(quick)
    out_p = Path(out)
    # a previous demo's runs and state go (only those: --out may hold other files)
    shutil.rmtree(out_p / "runs", ignore_errors=True)
    for name in ("comparison.json", "twin-plan.json", "twin-auto.json",
                 "twin-latency_specialized.json"):
        (out_p / name).unlink(missing_ok=True)
    out_p.mkdir(parents=True, exist_ok=True)
    workload = out_p / "workload.jsonl"
    _workload(workload, s)
    with contextlib.ExitStack() as stack:
        arms = []
        for backend in ("auto", "latency_specialized"):
            srv = stack.enter_context(SimServerProcess(DEMO_PROFILE, backend))
            arms.append((backend, srv.url))
        # each arm's modelled DCGM exporter, so the report shows energy per token
        opts = CompareOptions(levels=s.levels, duration_s=s.duration_s, warmup_s=s.warmup_s,
                              drain_s=s.drain_s, repeats=1, metrics_interval_s=1.0,
                              gpu_metrics=tuple(f"{b}={u}/dcgm/metrics" for b, u in arms))
        return compare_arms(arms, workload, out_p, opts, live=live,
                            after_load=lambda: _twins(out_p, [b for b, _ in arms], s, live))


def _twins(out: Path, arms: list[str], s: DemoSettings, live: Live) -> None:
    """Each arm's twin, fitted on its runs and planned on the demo's ladder, stored
    where the report and the decision find it (``twin-plan.json``)."""
    import sys
    import time

    from analysis import DEFAULT_TIERS
    from replay.twin import arm_twins

    say = (lambda text: None) if live == "quiet" else (
        lambda text: print(f"agentreplay: {text}", file=sys.stderr, flush=True))
    say(f"fitting a twin per arm on its runs (held out: {s.levels[1]} users) and planning "
        "it on simulated time (modelled)")
    t0 = time.monotonic()
    # simulated time is cheap: 2x the window gives each twin level twice the requests
    _, problems = arm_twins(out, arms, s.levels, duration_s=2 * s.duration_s,
                             warmup_s=s.warmup_s, drain_s=s.drain_s, tiers=DEFAULT_TIERS)
    for line in problems:
        say(line)
    say(f"twins fitted and planned in {time.monotonic() - t0:.1f} s")
