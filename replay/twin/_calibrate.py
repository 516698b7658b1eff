"""``calibrate``: read run directories, fit the twin, predict held-out levels.

Runs are grouped by load level (users). Every run must come from one server (one
target label and model); a comparison's directory holds several arms, so its arm's
arm is picked with ``arm`` (its runs' label).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from analysis import RunData, judge_fairness, read_run
from analysis.fit import (
    PrefillCheck,
    StepFit,
    StepSamples,
    TtftSamples,
    between_runs_by_metric,
    fit_steps,
    level_stall_factor,
    overhead_given_rate,
    predict_gap,
    prefill_check,
    prefill_pinned,
    running_at,
    step_samples,
    ttft_samples,
)
from analysis.read import find_run_dirs
from analysis.schema import level_of
from replay.errors import ConfigError
from replay.twin._busy_overhead import busy_overhead, with_busy_overhead
from replay.twin._fitted_profile import clock_scale, decode_backend, step_budget, twin_profile
from replay.twin._holdout import holdout_interval, measured_level
from replay.twin._interval import METRICS, PredictionInterval, with_between_runs
from replay.twin._level_facts import LevelFacts
from replay.twin._misfit import misfit_warnings
from replay.twin._predict import (
    LevelMetrics,
    LoadShape,
    mean_metrics,
    measured_metrics,
    predict_level,
)
from replay.twin._refit import refit_profiles

__all__ = ["Calibration", "Holdout", "LevelFacts", "calibrate"]


@dataclass(frozen=True)
class Holdout:
    users: int
    run: str
    predicted: LevelMetrics
    measured: LevelMetrics
    """The level's runs' mean (``each``: every run's own)."""
    each: tuple[LevelMetrics, ...] = ()

    def errors(self) -> dict[str, float | None]:
        """Relative error of each prediction (None where either side has no value)."""
        p, m = self.predicted.as_dict(), self.measured.as_dict()
        out: dict[str, float | None] = {}
        for k, pv in p.items():
            mv = m[k]
            out[k] = pv / mv - 1 if pv is not None and mv else None
        return out


@dataclass
class Calibration:
    profile: dict[str, Any]
    fit: StepFit
    levels: list[LevelFacts]
    holdouts: list[Holdout] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """The twin file: the profile plus its ``calibration`` block."""
        return self.profile


def _runs(dirs: list[str], arm: str | None) -> list[RunData]:
    found = find_run_dirs(dirs)
    runs = [read_run(d) for d in found]
    if arm is not None:
        arms = sorted({r.manifest.label for r in runs})
        runs = [r for r in runs if r.manifest.label == arm]
        if not runs:
            raise ConfigError(f"--arm {arm}: no run of that arm; the runs' arms: "
                              f"{', '.join(arms) or '(none)'}")
    if not runs:
        raise ConfigError(f"no run directories found in {', '.join(dirs)}")
    labels = sorted({(r.manifest.label, r.manifest.model) for r in runs})
    if len(labels) > 1:
        shown = ", ".join(f"{lab or '(no label)'} / {m}" for lab, m in labels)
        raise ConfigError(f"the runs come from several servers ({shown}); pick one arm "
                          "with --arm LABEL")
    other = next((r for r in runs if level_of(r.manifest).kind != "users"), None)
    if other is not None:
        raise ConfigError(f"{other.path}: a run at {level_of(other.manifest).label}; calibrate "
                          "fits closed-loop levels (users), so give it runs made with --users")
    _one_engine(runs)
    _one_config(runs)
    scales = {clock_scale(r.manifest) for r in runs}
    if len(scales) > 1:
        raise ConfigError(f"the runs were made at different sim time scales {sorted(scales)}; "
                          "calibrate runs of one server setting")
    return runs


def _one_engine(runs: list[RunData]) -> None:
    """A twin is one engine: runs against a fleet (several ``--target``) are refused.
    Their records say which replica served each request, but a fleet's steps, scrapes
    and held-out level are the fleet's (its routing, its replicas' caches), and a twin
    fitted to them as one engine over-stated capacity silently; ``plan --twin --replicas
    N`` answers for the fleet from a twin of one of its servers."""
    fleet = next((r for r in runs if len(r.manifest.replicas) > 1), None)
    if fleet is not None:
        raise ConfigError(f"{fleet.path}: measured against a {len(fleet.manifest.replicas)}-"
                          "replica fleet; calibrate fits one engine: give it runs against "
                          "one of those servers, then plan --twin --replicas "
                          f"{len(fleet.manifest.replicas)} for the fleet")


_SERVER_FIELDS = ("vllm_config.", "vllm_env.", "command.", "model", "gpu_count", "api",
                  "simulated")


def _one_config(runs: list[RunData]) -> None:
    """Every run from one server configuration: what ``compare``'s fairness judge diffs
    (the ``/server_info`` config, environment, model, GPUs), the decode backend
    included; the workload and load settings may differ (they are the levels)."""
    verdict = judge_fairness([r.manifest for r in runs], allow_unfair=True,
                             require_config=False)
    diffs = [d for d in verdict.differences if d.verdict in ("refused", "allowed")
             and d.field.startswith(_SERVER_FIELDS)]
    if diffs:
        d = diffs[0]
        path = {r.manifest.run_id: r.path for r in runs}.get(d.run, d.run)
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        raise ConfigError(f"the runs come from different server configurations: {path} "
                          f"differs from {runs[0].path} in {d.field} ({d.other} vs "
                          f"{d.baseline}){more}; calibrate the runs of one configuration")


def _hit_share(run: RunData) -> float | None:
    r = run.requests
    ok = (r.cached_tokens >= 0) & (r.prompt_tokens > 0)
    return float(r.cached_tokens[ok].sum() / r.prompt_tokens[ok].sum()) if ok.any() else None


def _running(run: RunData) -> tuple[float | None, float | None]:
    """Mean scraped ``num_requests_running`` over the run and the records' count then."""
    got = run.metrics.get("num_requests_running")
    if got is None or not np.isfinite(got).any():
        return None, None
    t = run.metrics.t_s[np.isfinite(got)]
    return float(np.nanmean(got)), float(running_at(run.requests, t).mean())


def _facts(users: int, runs: list[RunData], fit: StepFit, s: StepSamples,
           t: TtftSamples) -> LevelFacts:
    m = (s.group == users) & (s.batch >= 1)
    pred = predict_gap(fit, s)[m]
    idle = (t.group == users) & t.alone
    rate_inv = 1 / fit.prefill_tokens_per_s if fit.prefill_tokens_per_s else 0.0
    scraped = [v for v in (_running(r) for r in runs) if v[0] is not None]
    hits = [h for h in (_hit_share(r) for r in runs) if h is not None]
    return LevelFacts(
        users=users, runs=[r.path for r in runs], gaps=int(m.sum()),
        mean_batch=float(s.batch[m].mean()) if m.any() else 0.0,
        mean_running_scraped=float(np.mean([v[0] for v in scraped])) if scraped else None,
        mean_running_records=float(np.mean([v[1] for v in scraped])) if scraped else None,
        mean_gap_s=float(s.gap_s[m].mean()) if m.any() else 0.0,
        mean_pred_gap_s=float(pred.mean()) if m.any() else 0.0,
        mean_idle_ttft_s=float(t.ttft_s[idle].mean()) if idle.any() else None,
        mean_pred_idle_ttft_s=float(fit.ttft_overhead_s + rate_inv * fit.noise_mean
                                    * t.uncached_tokens[idle].mean()) if idle.any() else None,
        cache_hit_share=float(np.mean(hits)) if hits else None,
        stall_factor=level_stall_factor(fit, s, users),
        idle_ttfts=int(idle.sum()),
    )


def _workload_of(run: RunData, override: str | None) -> str:
    """The held-out run's workload file: ``--workload`` or the path in its run.json,
    checked against the fingerprint the run recorded (another file predicts nothing)."""
    from traces import read_header

    path = run.manifest.workload.path
    cands = [Path(override)] if override else (
        [Path(path), Path(run.path) / path] if path else [])
    for cand in cands:
        if cand.is_file():
            got = read_header(str(cand)).fingerprint
            want = run.manifest.workload.fingerprint
            if got != want:
                raise ConfigError(f"{cand}: not the workload of {run.path} (fingerprint "
                                  f"{got[:12]}, the run's {want[:12]})")
            return str(cand)
    if override:
        raise ConfigError(f"--workload {override}: no such file")
    raise ConfigError(f"{run.path}: its workload file {path!r} is not found from here; "
                      "pass --workload FILE")


def _shape(run: RunData, scale: float) -> LoadShape:
    load = run.manifest.load
    return LoadShape(warmup_s=load.warmup_s * scale, drain_s=load.drain_s * scale,
                     seed=load.seed, api=load.api, think_scale=load.think_scale * scale,
                     think_time_cap_s=None if load.think_time_cap_s is None
                     else load.think_time_cap_s * scale, warmup_start=load.warmup_start)


def calibrate(dirs: list[str], *, holdout: tuple[int, ...] = (), workload: str | None = None,
              arm: str | None = None,
              keep_dir: str | os.PathLike[str] | None = None) -> Calibration:
    """Fit a twin to the runs in ``dirs`` (without the ``holdout`` levels), then predict
    each held-out level with it and measure the real run of that level."""
    runs = _runs(dirs, arm)
    by_level: dict[int, list[RunData]] = {}
    for r in runs:
        by_level.setdefault(int(level_of(r.manifest).value), []).append(r)
    missing = [u for u in holdout if u not in by_level]
    if missing:
        raise ConfigError(f"--holdout {missing[0]}: no run at {missing[0]} users among "
                          f"the levels {sorted(by_level)}")
    fitted = [u for u in sorted(by_level) if u not in holdout]
    if not fitted:
        raise ConfigError("every level is held out: nothing is left to fit on")
    steps, ttfts = [], []
    for u in sorted(by_level):
        for r in by_level[u]:
            budget = step_budget(r.manifest)
            steps.append(step_samples(r.requests, group=u, chunk_tokens=budget))
            ttfts.append(ttft_samples(r.requests, group=u, chunk_tokens=budget))
    per_run = [(r, t) for r, t in zip([r for u in sorted(by_level) for r in by_level[u]],
                                      ttfts, strict=True)]
    s_all, t_all = StepSamples.concat(steps), TtftSamples.concat(ttfts)
    use = np.isin(s_all.group, fitted)
    use_t = np.isin(t_all.group, fitted)
    s_fit = StepSamples(**{k: getattr(s_all, k)[use] for k in s_all.__dataclass_fields__})
    t_fit = TtftSamples(**{k: getattr(t_all, k)[use_t] for k in t_all.__dataclass_fields__})
    try:
        fit = fit_steps(s_fit, t_fit)
    except ValueError as exc:
        raise ConfigError(f"cannot fit: {exc}; run longer or at more users") from None
    first = runs[0].manifest
    scale = clock_scale(first)
    fitted_runs = [(r, t) for r, t in per_run if int(level_of(r.manifest).value) in fitted]
    fit, source = _prefill_from_histograms(fit, t_fit, fitted_runs)
    profile, assumed = twin_profile(fit, first, scale)
    backend = decode_backend(first)
    busy = busy_overhead(profile, t_fit,
                         simulate=_simulate_as_run(by_level, workload, backend, scale),
                         idle_s=fit.ttft_overhead_s, scale=scale, seed=first.load.seed)
    profile = with_busy_overhead(profile, busy, scale)
    levels = [_facts(u, by_level[u], fit, s_all, t_all) for u in sorted(by_level)]
    cal = Calibration(profile, fit, levels)
    interval = None
    for u in holdout:
        run = by_level[u][0]
        load = run.manifest.load
        kept = None if keep_dir is None else Path(keep_dir) / f"predict-u{u}"
        pred = predict_level(profile, _workload_of(run, workload), u, load.duration_s * scale,
                             shape=_shape(run, scale), backend=backend, keep_dir=kept)
        each = tuple(measured_metrics(r.path) for r in by_level[u])
        cal.holdouts.append(Holdout(u, run.path, pred.scaled(scale), mean_metrics(list(each)),
                                    each))
        if u == max(holdout):
            refits = refit_profiles(
                s_fit, t_fit, lambda s, t: _prefill_from_histograms(
                    fit_steps(s, t), t, fitted_runs)[0],
                lambda f: with_busy_overhead(twin_profile(f, first, scale)[0], busy, scale),
                seed=load.seed)
            interval = holdout_interval(
                profile, _workload_of(run, workload), u, load.duration_s * scale,
                _shape(run, scale), backend, [measured_level(r.path) for r in by_level[u]],
                max(by_level), _longest_request(runs), scale,
                run.manifest.workload.fingerprint, refits=refits, main=pred.as_dict())
    profile["calibration"] = _block(cal, fitted, holdout, assumed, scale, backend)
    profile["calibration"]["busy_overhead"] = None if busy is None else busy.as_dict(scale)
    profile["calibration"]["notes"] += [] if busy is None else [busy.note()]
    if interval is not None:
        interval = _widen_by_repeats(interval, by_level, cal.holdouts)
        profile["calibration"]["interval"] = interval.as_dict()
        profile["calibration"]["notes"] += interval.notes
    profile["calibration"]["notes"] += _invalid_notes(runs)
    profile["calibration"]["notes"] += _stall_notes(levels, fit.noise_mean, holdout)
    checks = [(r.path, c) for r, t in per_run
              if (c := _histogram_check(r, t, fit)) is not None]
    profile["calibration"]["prefill_histogram"] = [
        {"run": path, "requests": c.requests, "measured_s": c.measured_s,
         "predicted_s": c.predicted_s, "relative_error": c.error,
         "implied_prefill_tokens_per_s": None if c.rate_tokens_per_s is None
         else c.rate_tokens_per_s / scale} for path, c in checks]
    profile["calibration"]["prefill_source"] = source
    profile["calibration"]["warnings"] = misfit_warnings(levels, fit, fitted, checks)
    return cal


def _simulate_as_run(by_level: dict[int, list[RunData]], workload: str | None, backend: str,
                     scale: float) -> Callable[[dict[str, Any], int, Path], None]:
    """The twin at one level as that level's first run loaded its server (its workload,
    duration, shape and seed), its records kept in a directory."""
    def simulate(profile: dict[str, Any], users: int, out: Path) -> None:
        run = by_level[users][0]
        predict_level(profile, _workload_of(run, workload), users,
                      run.manifest.load.duration_s * scale, shape=_shape(run, scale),
                      backend=backend, keep_dir=out)
    return simulate


def _widen_by_repeats(interval: PredictionInterval, by_level: dict[int, list[RunData]],
                      holdouts: list[Holdout]) -> PredictionInterval:
    """The interval widened by how far repeated runs of one level differ (every level
    measured more than once, fitted or held out): the in-run bootstrap and the twin's
    seeds do not see what changes between runs (``analysis.fit.between_runs``)."""
    held = {h.users: [m.as_dict() for m in h.each] for h in holdouts}
    runs = {u: held.get(u) or [measured_metrics(r.path).as_dict() for r in rs]
            for u, rs in by_level.items() if len(rs) >= 2}
    between = between_runs_by_metric(runs, METRICS)
    if not between:
        return interval
    levels = max(b.levels for b in between.values())
    note = (f"between-run spread (log sd, {levels} repeated level(s)): "
            + ", ".join(f"{k} {b.sd:.1%} on {b.dof} dof" for k, b in between.items())
            + "; the interval is widened where it exceeds the twin's seed spread")
    return replace(with_between_runs(interval, between), notes=[*interval.notes, note])


def _prefill_from_histograms(fit: StepFit, t: TtftSamples,
                             runs: list[tuple[RunData, TtftSamples]]) -> tuple[StepFit, str]:
    """The prefill rate from the server's ``request_prefill_time_seconds`` where the
    records cannot tell it from the overhead (``prefill_pinned``: idle prompts all of
    one size) and the histogram was scraped; the overhead then from the idle TTFTs.
    Otherwise the records' fit stands (the histogram still checks it)."""
    idle = t.alone & (t.ttft_s > 0)
    if prefill_pinned(t.uncached_tokens[idle]):
        return fit, "records (idle TTFTs)"
    rates = [c.rate_tokens_per_s for r, rt in runs
             if (c := _histogram_check(r, rt, fit)) is not None and c.rate_tokens_per_s]
    if not rates:
        return fit, "records (idle TTFTs of one size: the rate and overhead are not told apart)"
    rate = float(np.median(rates))
    overhead = overhead_given_rate(t.ttft_s[idle], t.uncached_tokens[idle], rate,
                                   fit.noise)
    return (replace(fit, prefill_tokens_per_s=rate, ttft_overhead_s=overhead),
            "vllm:request_prefill_time_seconds (idle TTFTs of one size)")


def _histogram_check(run: RunData, t: TtftSamples, fit: StepFit) -> PrefillCheck | None:
    """The server's prefill-time histogram against the fit, where it was scraped."""
    total = run.metrics.get("request_prefill_time_seconds_sum")
    count = run.metrics.get("request_prefill_time_seconds_count")
    if total is None or count is None:
        return None
    return prefill_check(run.requests, run.metrics.t_s, total, count, fit, t.uncached_tokens,
                         t.alone, t.batch_at_send, step_budget(run.manifest))


def _longest_request(runs: list[RunData]) -> int:
    """The longest request (prompt + asked output) the runs sent: beyond it, an answer
    is extrapolated."""
    return max((int(np.max(r.requests.prompt_tokens + r.requests.output_tokens_asked,
                           initial=0)) for r in runs), default=0)


def _invalid_notes(runs: list[RunData]) -> list[str]:
    """Runs stamped invalid: what they measured is partly the client's (late sends, a
    stalled loop), so a twin fitted on them, or checked against them, inherits it."""
    out = []
    for r in runs:
        v = r.manifest.validity
        if v is not None and v.verdict == "invalid":
            codes = ", ".join(sorted({x.code for x in v.reasons if x.severity == "invalid"}))
            out.append(f"{r.path}: stamped invalid ({codes}): the fit and any held-out error "
                       "there measure the client's trouble too; rerun on a quieter machine")
    return out


_STALL_TOLERANCE = 0.10
"""A held-out level whose stall factor is further than this from the fitted one is named."""


def _stall_notes(levels: list[LevelFacts], noise_mean: float,
                 holdout: tuple[int, ...]) -> list[str]:
    """Held-out levels that ran under other stalls than the fitted ones: the twin plays
    the fitted levels' back, so part of the held-out error is the machine's, not the
    model's."""
    out = []
    for lv in levels:
        if lv.users not in holdout or lv.stall_factor is None or not noise_mean:
            continue
        off = lv.stall_factor / noise_mean - 1
        if abs(off) > _STALL_TOLERANCE:
            out.append(f"{lv.users} users (held out): its steps ran at {lv.stall_factor:.2f}x "
                       f"the typical step, the fitted levels' at {noise_mean:.2f}x "
                       f"({off:+.0%}): the stalls differed between the runs, and the "
                       "held-out error carries that difference")
    return out


def _notes(levels: list[LevelFacts]) -> list[str]:
    """Levels where the server counted clearly more running requests than the records
    show (another client on the server, or requests queued)."""
    out = []
    for lv in levels:
        scraped, seen = lv.mean_running_scraped, lv.mean_running_records
        if scraped is not None and seen is not None and scraped - seen > max(0.5, 0.2 * seen):
            out.append(f"{lv.users} users: the server reported {scraped:.1f} requests running "
                       f"on average, these records {seen:.1f} (another client, or a queue?)")
    return out


def _block(cal: Calibration, fitted: list[int], holdout: tuple[int, ...], assumed: list[str],
           scale: float, backend: str) -> dict[str, Any]:
    f = cal.fit
    return {
        "tool": "agentreplay calibrate",
        "runs": [p for lv in cal.levels for p in lv.runs],
        "fitted_levels": fitted,
        "holdout_levels": list(holdout),
        "decode_backend": backend,
        "clock_scale": scale,
        "assumed": assumed,
        "notes": _notes(cal.levels),
        "fit": {"step_s_batch1": f.step_s_batch1 * scale,
                "slope_s_per_seq": f.slope_s_per_seq * scale,
                "ctx_ref_tokens": f.ctx_ref_tokens,
                "prefill_tokens_per_s": f.prefill_tokens_per_s / scale,
                "ttft_overhead_s": f.ttft_overhead_s * scale,
                "step_noise_mean": f.noise_mean,
                "step_noise_p50": f.noise[len(f.noise) // 2] if f.noise else None,
                "step_noise_p90": f.noise[len(f.noise) * 9 // 10] if f.noise else None,
                "gaps": f.gaps, "idle_ttfts": f.ttfts, "cost": f.cost},
        "levels": [{**lv.__dict__, "gap_error": lv.gap_error} for lv in cal.levels],
        "holdouts": [{"users": h.users, "run": h.run, "predicted": h.predicted.as_dict(),
                      "measured": h.measured.as_dict(), "relative_error": h.errors(),
                      "measured_runs": [m.as_dict() for m in h.each]}
                     for h in cal.holdouts],
    }
