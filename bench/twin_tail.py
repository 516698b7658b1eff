"""Where the twin battery's P90 TTFT tail comes from: bias or the measurement's noise.

    python bench/twin_tail.py --work DIR --seed 77 [--worst 6] [--seeds 6]

Reads a battery run's stored outcomes (``DIR/outcomes.jsonl``, ``bench/twin_battery.py
--work DIR``), takes the worst held-out and 2x P90 TTFT errors, and runs each such
level again with ``--seeds`` workload orders (load seeds) and step-noise seeds on both
sides: the hidden profile (the
truth) and the fitted twin (``DIR/case-NNN/twin.json``). It prints, per case, the
single-run error the battery reported, the error of the twin's mean over them against
the truth's mean (the bias: what a fit could fix) and the spread of each side over
seeds (the noise: what no fit can), with the case's profile facts (step noise,
preemption, prefill rate fitted/true, chunk size) to classify the case by.
Simulated time: deterministic for the seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _battery_case import TRUTH_ENGINE_SEED, Settings, _sim  # noqa: E402
from _battery_draw import draw_case, write_workload_spec  # noqa: E402


def _log_sd(vals: list[float]) -> float:
    logs = [math.log(v) for v in vals if v and v > 0]
    if len(logs) < 2:
        return 0.0
    m = sum(logs) / len(logs)
    return math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))


def _gmean(vals: list[float]) -> float:
    logs = [math.log(v) for v in vals if v and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True, help="the battery's seed")
    ap.add_argument("--worst", type=int, default=6)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--duration", type=float, default=120.0)
    args = ap.parse_args(argv)
    from replay.servers.sim import SimProfile
    from replay.twin import load_workload

    rows = []
    for line in (args.work / "outcomes.jsonl").read_text().splitlines():
        o = json.loads(line)
        if o.get("error"):
            continue
        for r in o["rows"]:
            if r["kind"] in ("held-out", "2x") and r["p90_ttft_s"] is not None:
                rows.append((abs(r["p90_ttft_s"]), o, r))
    rows.sort(key=lambda x: -x[0])
    s = Settings(duration_s=args.duration)
    print("case cond      users noise     preempt chunk  prefill fit/true  b64 fit/true "
          "| single  bias(mean/mean)  truth sd  twin sd")
    for _err, o, r in rows[:args.worst]:
        case = draw_case(o["number"], args.seed)
        hidden = SimProfile.model_validate(case.profile)
        twin_doc = json.loads((args.work / f"case-{o['number']:03d}" / "twin.json").read_text())
        twin = SimProfile.model_validate(twin_doc)
        wl = load_workload(write_workload_spec(case.workload, args.work / "tail" /
                                               f"{case.workload.name}.jsonl"))
        users = r["users"]
        truth = [_sim(hidden, wl, users, s, seed=k,
                      engine_seed=TRUTH_ENGINE_SEED + o["number"] + 37 * k)
                 .summary.ttft_due.p90 for k in range(args.seeds)]
        pred = [_sim(twin, wl, users, s, seed=k, engine_seed=7 + 37 * k).summary.ttft_due.p90
                for k in range(args.seeds)]
        fit, tp = o["fit"], o["truth_profile"]
        rate = fit.get("prefill_tokens_per_s") or 0.0
        b64 = twin_doc["backends"]["auto"]["step_s_batch64"] / tp["step_s_batch64"]
        print(f"{o['number']:4d} {r['condition']:9s} {users:5d} {o['noise']:9s} "
              f"{str(o['preempted']):7s} {tp['max_num_batched_tokens']:5d} "
              f"{rate / tp['prefill_tokens_per_s'] if rate else float('nan'):8.2f}x "
              f"{b64:12.2f}x | {r['p90_ttft_s']:+6.1%}  "
              f"{_gmean(pred) / _gmean(truth) - 1:+14.1%}  {_log_sd(truth):8.1%} "
              f"{_log_sd(pred):7.1%}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
