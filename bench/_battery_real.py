"""The battery's real-time check: the simulated-time truth is what ``serve-sim`` does.

The bulk of the battery measures hidden profiles on simulated time (the twin's
engines). For a few profiles the held-out level is also measured the way a user
would: ``serve-sim --profile FILE`` on 127.0.0.1 and ``agentreplay run`` over HTTP,
in real time; the same level on simulated time (same workload, seed and window) is
printed beside it. They agree when the simulated value lies inside the real run's
95% bootstrap interval (the two draw different step noise and the real one runs on
a shared machine, so they are two samples of one level, not one number).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from _battery_case import METRICS, Outcome, Settings
from _battery_draw import draw_case, write_workload_spec

WARMUP_S = 5.0
DRAIN_S = 30.0


def _metrics(summary: Any) -> tuple[dict[str, float | None], dict[str, Any]]:
    values = {"p90_interactivity": summary.interactivity.p90,
              "p90_ttft_s": summary.ttft_due.p90, "output_tok_s": summary.output_tok_s}
    ci = {"p90_interactivity": summary.interactivity.p90_ci,
          "p90_ttft_s": summary.ttft_due.p90_ci, "output_tok_s": None}
    return values, ci


def real_check(number: int, seed: int, users: int, root: Path, duration_s: float) -> dict[str, Any]:
    """One profile's level in real time against serve-sim and on simulated time."""
    from analysis import read_run
    from analysis.judge import analyse_run
    from replay.cli import main
    from replay.servers.sim import SimProfile, SimServerProcess
    from replay.twin import load_workload, simulate_level

    case = draw_case(number, seed)
    where = root / f"case-{number:03d}" / "real"
    where.mkdir(parents=True, exist_ok=True)
    prof = where / "hidden.json"
    prof.write_text(json.dumps(case.profile))
    wl = write_workload_spec(case.workload, root / "workloads" / f"{case.workload.name}.jsonl")
    run = where / f"u{users}"
    with SimServerProcess(str(prof), "auto") as srv, contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", "--target", srv.url, "--workload", str(wl), "--users", str(users),
                     "--warmup", str(WARMUP_S), "--duration", str(duration_s), "--drain",
                     str(DRAIN_S), "--out", str(run), "--quiet", "--seed", "0"])
    real, real_ci = _metrics(analyse_run(read_run(run), tiers=(), assess=False))
    sim = simulate_level(SimProfile.model_validate(case.profile), load_workload(wl), users,
                         duration_s, WARMUP_S, drain_s=DRAIN_S, seed=0, backend="auto",
                         tiers=())
    simv, _ = _metrics(sim.summary)
    out: dict[str, Any] = {"case": number, "users": users, "exit": code,
                           "real": real, "real_ci": real_ci, "simulated": simv}
    parts, agree = [], []
    for m in METRICS:
        r, s, ci = real[m], simv[m], real_ci[m]
        inside = None if ci is None or s is None else ci[0] <= s <= ci[1]
        if inside is not None:
            agree.append(inside)
        err = "-" if not r or s is None else f"{s / r - 1:+.1%}"
        parts.append(f"{m} real {r or 0:.4g} sim {s or 0:.4g} ({err}"
                     + ("" if inside is None else
                        f", {'inside' if inside else 'OUTSIDE'} real 95% CI") + ")")
    out["agree"] = all(agree)
    out["line"] = (f"case {number} at {users} users, {duration_s:g} s (exit {code}): "
                   + "; ".join(parts))
    return out


def real_checks(outcomes: list[Outcome], seed: int, settings: Settings, root: Path,
                duration_s: float) -> list[dict[str, Any]]:
    """The real-time check of each given case (run one after another: real time)."""
    return [real_check(o.number, seed, settings.holdout, root, duration_s)
            for o in outcomes if not o.error]
