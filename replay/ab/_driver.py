"""An A/B comparison end to end: fairness preflight, interleaved runs, resume, report.

:func:`compare_arms` drives servers that are already up (one URL per arm);
``replay.ab._launched`` starts vLLM arms itself (sequential or side by side) and
always stops them. Both write into one directory::

    DIR/comparison.json     settings, plan, arms, each run's status, fairness
    DIR/runs/<name>/        one run directory per planned run (PlannedRun.name)
    DIR/logs/               launched servers' logs
    DIR/report.html, summary.json, requests.csv

The settings are stored so that rerunning the same command resumes (runs whose
directory is complete are skipped) and a different command is refused rather
than mixed into the same results.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from analysis import (
    Comparison,
    Rules,
    SloTier,
    Validity,
)
from replay.ab._options import CompareOptions
from replay.ab._order import (
    PlannedRun,
    is_run_complete,
    is_run_reusable,
    plan_runs,
    run_verdict,
)
from replay.ab._preflight import (
    preflight,
    public_arms,
    reset_prefix_cache,
)
from replay.ab._state import State, check_resume, missing_runs
from replay.errors import ConfigError, TargetError
from replay.load import (
    ServerWatchHook,
    check_time_controls,
    label_problem,
    rejudge_scenarios,
    run_load_sync,
)
from traces import read_header

__all__ = ["CompareResult", "Live", "compare_arms", "preflight", "reset_prefix_cache",
           "write_report"]

Live = Literal["rich", "plain", "quiet"]


@dataclass
class CompareResult:
    out: Path
    report: Path
    verdict: str
    fairness_sentence: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    validity: Validity | None = None
    """The comparison's validity (its runs' merged, plus imbalance between arms)."""


def _settings(arms: Sequence[str], workload: str, opts: CompareOptions) -> dict[str, Any]:
    header = read_header(workload)
    if header.arrival != "closed" and opts.rates is None and opts.levels != (1,):
        raise ConfigError(f"--users: {workload} replays its own arrival times (arrival mode "
                          f"{header.arrival!r}), so users do not set its load; drop --users "
                          "(or give --rate for open-loop levels)")
    check_time_controls(opts, header.arrival, workload, rated=opts.rates is not None)
    return {**opts.resume_settings(), "arms": list(arms),
            "workload_fingerprint": header.fingerprint}


def _say(live: Live, text: str) -> None:
    if live != "quiet":
        print(f"agentreplay: {text}", file=sys.stderr, flush=True)


def _execute(runs: Sequence[PlannedRun], url_of: Callable[[str], str], workload: str,
             out: Path, opts: CompareOptions, state: State, live: Live, total: int,
             done_before: int, watch_of: Callable[[str], ServerWatchHook] | None = None) -> int:
    """Run (or skip, when complete and not stamped invalid) each planned run in order;
    returns runs seen. ``watch_of(arm)``: the launched server's watch, read by the run."""
    seen = done_before
    said = False  # the default drain's line: every run of the comparison has the same
    for run in runs:
        seen += 1
        run_dir = out / "runs" / run.name
        if is_run_reusable(run_dir):
            _say(live, f"run {seen}/{total} {run.name}: already complete, skipped")
            state.record(run, status="complete", skipped=True)
            continue
        if is_run_complete(run_dir) and not (run_dir / "requests.jsonl").is_file():
            _say(live, f"run {seen}/{total} {run.name}: its requests.jsonl is missing, redone")
        elif is_run_complete(run_dir):
            _say(live, f"run {seen}/{total} {run.name}: stamped invalid before, redone")
        if run_dir.exists():
            shutil.rmtree(run_dir)
        url = url_of(run.arm)
        reset = reset_prefix_cache(url, opts.api_key_env)
        _say(live, f"run {seen}/{total} {run.name}: {run.level} on {run.arm} "
                   f"(prefix cache {'reset' if reset else 'not reset: warmup only'})")
        state.record(run, status="running", prefix_cache_reset=reset, skipped=False)
        try:
            run_load_sync(opts.config(url, run.users, run.arm, rate=run.rate), workload,
                          run_dir, live=live, watch=watch_of(run.arm) if watch_of else None,
                          say_drain=not said)
            said = True
        except BaseException:
            state.record(run, status="interrupted")
            raise
        state.record(run, status="complete" if is_run_complete(run_dir) else "incomplete",
                     validity=run_verdict(run_dir))
    return seen


def write_report(out: Path, *, allow_unfair: bool, seed: int = 0,
                 rules: Rules | None = None,
                 tiers: Sequence[SloTier] = ()) -> tuple[Path, Comparison]:
    """Compare the runs under ``out/runs``; write report.html and its data files
    (``analysis.report_bundle``: summary.json, levels.csv, requests.csv, the schema),
    with the experiment file or search stored in ``out`` shown in the report; judged at
    ``tiers`` (``--slo``; empty: the default tiers)."""
    from analysis import DEFAULT_TIERS, compare_runs, read_extras, read_runs, report_bundle

    runs = read_runs([out / "runs"])
    rejudge_scenarios(runs)  # a reused run's stamps: from its evidence, not read back
    comparison = compare_runs(runs, allow_unfair=allow_unfair, seed=seed,
                              tiers=tuple(tiers) or DEFAULT_TIERS,
                              rules=rules or Rules(), missing=missing_runs(out))
    for name, text in report_bundle(comparison, runs, extras=read_extras(out)).items():
        (out / name).write_text(text, encoding="utf-8")
    return out / "report.html", comparison


def _finish(out: Path, state: State, opts: CompareOptions, live: Live) -> CompareResult:
    report, comparison = write_report(out, allow_unfair=opts.allow_unfair, seed=opts.seed,
                                      rules=opts.rules(), tiers=opts.slo)
    state.data["report"] = report.name
    state.data["validity"] = comparison.validity.model_dump(mode="json")
    state.save()
    runs = [dict(name=k, **v) for k, v in state.data["runs"].items()]
    return CompareResult(out=out, report=report, verdict=comparison.verdict,
                         fairness_sentence=comparison.fairness.sentence, runs=runs,
                         validity=comparison.validity)


def _interrupt_self() -> None:
    """A launched server died: stop the run in progress as Ctrl-C would (it closes,
    stamped ``server_died`` by its watch), from the watcher's thread."""
    os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def _server_deaths(watching: Sequence[ServerWatchHook]) -> Iterator[None]:
    """Turn the interrupt of a dead server's watcher into one clear error (exit 2);
    the stopped run is not reusable, so rerunning the command redoes it."""
    try:
        yield
    except KeyboardInterrupt:
        dead = [w for w in watching if w.died]
        if not dead:
            raise
        raise TargetError(f"{dead[0].detail}: the comparison stopped and the run was "
                          "stamped invalid; see the server log in logs/, then rerun the "
                          "same command to redo it") from None


def _check_arms(labels: Sequence[str]) -> None:
    if len(labels) < 2:
        raise ConfigError("a comparison needs at least two --arm")
    if len(set(labels)) != len(labels):
        raise ConfigError("--arm labels must be distinct: " + ", ".join(labels))
    _check_arm_dirs(labels)


def _check_arm_dirs(labels: Sequence[str]) -> None:
    """Each arm's runs go to ``runs/<label>-...``: a label that cannot name a directory
    found again (:func:`replay.load.label_problem`: a leading dot, a path separator), or
    two labels that name one directory on a case-blind disk (``A`` and ``a``), are
    refused before anything is loaded."""
    from replay.ab._order import _safe

    taken: dict[str, str] = {}
    for label in labels:
        problem = label_problem(label)
        if problem is not None:
            raise ConfigError(f"--arm: {problem}")
        safe = _safe(label)
        other = taken.setdefault(safe.casefold(), label)
        if other != label:
            raise ConfigError(f"--arm labels {other!r} and {label!r} would share the run "
                              f"directories runs/{safe}-...; make them differ in letters, "
                              "digits, '-', '_' or '.'")


def compare_arms(arms: Sequence[tuple[str, str]], workload: str | os.PathLike[str],
                 out: str | os.PathLike[str], opts: CompareOptions, *,
                 live: Live = "quiet",
                 before_load: Callable[[], None] | None = None,
                 after_load: Callable[[], None] | None = None) -> CompareResult:
    """Compare servers already running: preflight, A B B A runs, report (resumable).

    ``before_load`` runs once the settings and servers passed their checks, before the
    first run: warnings given there precede the load, and a refusal stays one line.
    ``after_load`` runs once every run is done, before the report: what it stores in
    ``out`` (the demo's twins) the report shows."""
    labels = [label for label, _ in arms]
    _check_arms(labels)
    path = os.fspath(workload)
    out_p = Path(out)
    settings = _settings(labels, path, opts)
    plan = plan_runs(labels, opts.levels, opts.repeats, rates=opts.rates)
    check_resume(out_p, settings)
    verdict = preflight(arms, opts)
    if verdict.overridden:
        _say(live, f"WARNING: {verdict.sentence} (--allow-unfair)")
    state = State(out_p, settings, plan, public_arms(arms), "urls")
    state.data["preflight"] = verdict.model_dump(mode="json")
    state.save()
    if before_load is not None:
        before_load()
    urls = dict(arms)
    _execute(plan, urls.__getitem__, path, out_p, opts, state, live, len(plan), 0)
    if after_load is not None:
        after_load()
    return _finish(out_p, state, opts, live)
