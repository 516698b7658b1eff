"""The interval's scale per question and metric, measured on stored battery outcomes.

    python bench/twin_interval_scale.py DEV/outcomes.jsonl ... [--check FRESH/outcomes.jsonl ...]

For every case and question of the development outcomes, the score is
|log(prediction / truth)| divided by the interval's half-width under today's rule
without its scale (``replay.twin._interval``). The split-conformal quantile of those
scores (the ceil((n + 1) * 0.9)-th smallest of n) is the factor that puts the nominal
share of the development cases inside: it prints as ``SCALE_BY_QUESTION``. With
``--check`` the coverage of the scaled interval is printed on outcomes never used to
choose it (exchangeable cases: at least the nominal share on average), next to the
coverage with today's rule as the code has it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _battery_case import METRICS, Outcome, read_outcomes  # noqa: E402
from _battery_rescore import rescore  # noqa: E402
from _battery_table import coverage as share_inside  # noqa: E402
from _battery_table import error_stats  # noqa: E402

from replay.twin import PredictionInterval  # noqa: E402
from replay.twin._interval import NOMINAL, QUESTIONS, current_rule  # noqa: E402


def load(paths: Sequence[Path]) -> list[Outcome]:
    """The cases with a stored interval whose measured parts the rule applies to."""
    out = [o for path in paths for o in read_outcomes(path)]
    return [o for o in out if not o.error and o.interval and o.interval.get("refits")]


def _pairs(outcomes: Sequence[Outcome], rule: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(question, metric, score) per case, question and metric, ``rule`` in place."""
    out = []
    for o in outcomes:
        assert o.interval is not None
        pi = replace(PredictionInterval(**o.interval), **rule)
        for r in o.rows:
            if r["kind"] not in QUESTIONS:
                continue
            for m in METRICS:
                if r.get(f"{m}_covered") is None:
                    continue
                w = pi.half_width(m, r["per_replica"], r["what_if"], r["replicas"])
                miss = abs(math.log(r[f"{m}_pred"] / r[f"{m}_held"]))
                out.append((r["kind"], m, miss / w if w > 0 else math.inf))
    return out


def conformal(scores: Sequence[float], level: float = NOMINAL) -> float:
    """The ceil((n + 1) * level)-th smallest score (inf: too few to say)."""
    ranked = sorted(scores)
    k = math.ceil((len(ranked) + 1) * level)
    return ranked[k - 1] if k <= len(ranked) else math.inf


def scales(outcomes: Sequence[Outcome]) -> dict[str, dict[str, float]]:
    """Per question and metric, the conformal factor on the unscaled width."""
    pairs = _pairs(outcomes, current_rule() | {"scale": {}})
    return {q: {m: _up(conformal([s for qq, mm, s in pairs if (qq, mm) == (q, m)]))
                for m in METRICS} for q in QUESTIONS}


def _up(x: float) -> float:
    """Two decimals, rounded up (a factor rounded down would cover less than measured)."""
    return x if math.isinf(x) else math.ceil(x * 100 - 1e-9) / 100


def coverage(outcomes: Sequence[Outcome], rule: dict[str, Any]) -> dict[str, Any]:
    """Per question: the share inside under ``rule`` (``_battery_rescore``), over all
    metrics and per metric, judged as the battery's tables judge it, and how many
    judgements (n)."""
    judged = rescore(outcomes, rule)
    out: dict[str, Any] = {}
    for q in QUESTIONS:
        rows = [r for o in judged for r in o.rows if r["kind"] == q]
        n = sum(r.get(f"{m}_covered") is not None for r in rows for m in METRICS)
        out[q] = {"all": share_inside(judged, (q,)), "n": n} | \
            {m: error_stats(judged, (q,), m)["coverage"] for m in METRICS}
    return out


def _print_coverage(title: str, cov: dict[str, Any]) -> None:
    print(title)
    for q, c in cov.items():
        per = " / ".join("-" if c[m] is None else f"{c[m]:.1%}" for m in METRICS)
        print(f"  {q:<9} {c['all']:.1%} of {c['n']:4d}  (interactivity / TTFT / output: {per})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dev", type=Path, nargs="+", help="development outcomes.jsonl files")
    ap.add_argument("--check", type=Path, nargs="*", default=[],
                    help="outcomes never used to choose the scale")
    args = ap.parse_args(argv)
    dev = load(args.dev)
    table = scales(dev)
    print(f"development: {len(dev)} cases from {len(args.dev)} file(s)")
    print("SCALE_BY_QUESTION = {")
    for q, v in table.items():
        print(f'    "{q}": {{' + ", ".join(f'"{m}": {x}' for m, x in v.items()) + "},")
    print("}")
    chosen = current_rule() | {"scale": table}
    _print_coverage("coverage on the development cases, scaled:", coverage(dev, chosen))
    if args.check:
        fresh = load(args.check)
        print(f"check: {len(fresh)} cases never used to choose it")
        _print_coverage("  without a scale:", coverage(fresh, current_rule() | {"scale": {}}))
        _print_coverage("  scaled as measured now:", coverage(fresh, chosen))
        _print_coverage("  scaled as the code has it:", coverage(fresh, current_rule()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
