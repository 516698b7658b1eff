"""How much of a twin's held-out error is its step noise: the same twin predicts the
held-out level with its fitted ``step_noise``, with none (the typical step only), with
every step at the noise's mean, and with the noise's top quantile capped.

    python bench/calibrate_real.py --keep DIR        # runs, workload and twin.json
    python bench/calibrate_noise.py DIR [--users 8]

A diagnosis, not a choice: the variant that lands nearest on one run says which part
of the machine's stalls the prediction carried, not which twin to trust (that takes
held-out levels measured on another day).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_KEYS = ("p90_interactivity", "p90_ttft_s", "output_tok_s")


def _variants(profile: dict[str, Any]) -> dict[str, dict[str, Any]]:
    q = list(profile.get("step_noise") or [])
    out = {"as fitted": profile}
    if not q:
        return out
    mean = sum((a + b) / 2 for a, b in zip(q[:-1], q[1:], strict=True)) / (len(q) - 1)
    for name, noise in (("no noise (typical step)", None),
                        (f"every step at the mean ({mean:.2f})", [mean] * len(q)),
                        ("top quantile capped", [*q[:-1], q[-2] * 1.2])):
        p = copy.deepcopy(profile)
        p["step_noise"] = noise
        out[name] = p
    return out


def main() -> None:
    from analysis import read_run
    from replay.twin._calibrate import _shape
    from replay.twin._predict import measured_metrics, predict_level

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="a bench/calibrate_real.py --keep directory")
    ap.add_argument("--users", type=int, default=8, help="the held-out level")
    args = ap.parse_args()
    profile = json.loads((args.dir / "twin.json").read_text())
    profile.pop("calibration", None)
    run_dir = args.dir / "runs" / f"u{args.users}"
    run = read_run(run_dir)
    measured = measured_metrics(run_dir)
    print("measured:", "  ".join(f"{k} {getattr(measured, k):.4g}" for k in _KEYS))
    for name, p in _variants(profile).items():
        pred = predict_level(p, args.dir / "wl.jsonl", args.users, run.manifest.load.duration_s,
                             shape=_shape(run, 1.0))
        errs = [getattr(pred, k) / getattr(measured, k) - 1 for k in _KEYS]
        print(f"{name:34s}", "  ".join(f"{k} {getattr(pred, k):.4g} ({e:+.1%})"
                                       for k, e in zip(_KEYS, errs, strict=True)), flush=True)


if __name__ == "__main__":
    main()
