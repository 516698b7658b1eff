"""``agentreplay calibrate``: fit a ``serve-sim`` twin profile to runs of a server.

All fitting is in ``analysis.fit`` and ``replay.twin``; this module parses the
options, writes the twin file and prints the residuals (and held-out predictions)
with rich.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay.twin import Calibration

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit a serve-sim twin profile to runs of a server",
        description="Fit a simulator profile (serve-sim --profile FILE) to run directories "
                    "of one server (agentreplay run --out DIR, or one arm's run directories "
                    "of agentreplay compare --out). Step times come from the token "
                    "timestamps, limits and KV cache from the server's /server_info.",
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (or a folder "
                   "holding the run directories of one server)")
    p.add_argument("-o", "--output", required=True, metavar="TWIN.json",
                   help="profile file to write")
    p.add_argument("--holdout", type=int, action="append", default=[], metavar="LEVEL",
                   help="fit without this level (users), then predict it with the twin "
                        "(simulated time, seconds) and compare with its run; repeatable")
    p.add_argument("--arm", metavar="LABEL",
                   help="use only the runs of this arm (a comparison's directory holds "
                        "several)")
    p.add_argument("--workload", metavar="FILE",
                   help="workload of the held-out runs (default: the path in their run.json)")
    p.add_argument("--keep-predictions", metavar="DIR",
                   help="keep the prediction runs' directories here")
    p.add_argument("--force", action="store_true", help="replace an existing TWIN.json")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from replay.cli._files import check_output_dir, check_output_file
    from replay.errors import ConfigError
    from replay.twin import calibrate

    out = Path(args.output)
    if not out.parent.is_dir():
        raise ConfigError(f"-o {out}: no such directory {out.parent}")
    check_output_file(out, "-o", args.force)  # before the fit: a bad path loses no work
    if args.keep_predictions is not None:
        check_output_dir(args.keep_predictions, "--keep-predictions")
    cal = calibrate(list(args.dirs), holdout=tuple(args.holdout), workload=args.workload,
                    arm=args.arm,
                    keep_dir=args.keep_predictions)
    doc = cal.document()
    _check_twin(doc)
    out.write_text(json.dumps(finite(doc), indent=2, allow_nan=False) + "\n")
    _print(cal, out)
    return 0


def finite(value: Any) -> Any:
    """``value`` with every non-finite number (a server's ``+Inf`` gauge, a NaN mean)
    as null: the twin file is strict JSON, which jq and orjson read."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _check_twin(doc: dict[str, Any]) -> None:
    """The fitted twin loads as a profile (finite, bounded figures) or nothing is written:
    a twin that ``plan --twin`` and ``serve-sim --profile`` would refuse is not written."""
    from pydantic import ValidationError

    from replay.errors import ConfigError
    from replay.servers.sim import SimProfile

    try:
        SimProfile.model_validate({k: v for k, v in doc.items() if k != "calibration"})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(profile)"
        raise ConfigError(f"calibrate: the fit gives no usable twin: field {field}: "
                          f"{str(err['msg']).removeprefix('Value error, ')} (got "
                          f"{err.get('input')!r}); the runs do not pin it down") from None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "-" if x is None else format(x, fmt)


def _print(cal: Calibration, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    f = cal.fit
    prof = cal.profile
    timing = prof["backends"]["auto"]
    console.print(
        f"twin: step {timing['step_s_batch1'] * 1e3:.2f} ms at batch 1, "
        f"{timing['step_s_batch64'] * 1e3:.2f} ms at 64; ctx_ref {prof['ctx_ref_tokens']} "
        f"tokens; prefill {prof['prefill_tokens_per_s']:.4g} tok/s "
        f"(fitted on {f.gaps} gaps, {f.ttfts} idle TTFTs; prefill rate from "
        f"{prof['calibration'].get('prefill_source', 'records')})")
    fitted = set(prof["calibration"]["fitted_levels"])
    t = Table(title="fit residuals per level (batch: decode batch rebuilt from the records; "
                    "running: the server's num_requests_running; stalls: the level's mean "
                    f"step over the typical one, the twin plays {f.noise_mean:.2f}x)")
    for col in ("users", "", "gaps", "batch", "running", "gap ms", "fit ms", "error",
                "stalls", "idle TTFT ms", "fit ms", "cache hits"):
        t.add_column(col, justify="right")
    for lv in cal.levels:
        t.add_row(str(lv.users), "fit" if lv.users in fitted else "held out", str(lv.gaps),
                  f"{lv.mean_batch:.2f}", _num(lv.mean_running_scraped, ".2f"),
                  f"{lv.mean_gap_s * 1e3:.3f}", f"{lv.mean_pred_gap_s * 1e3:.3f}",
                  _pct(lv.gap_error),
                  "-" if lv.stall_factor is None else f"{lv.stall_factor:.2f}x",
                  _num(None if lv.mean_idle_ttft_s is None else lv.mean_idle_ttft_s * 1e3),
                  _num(None if lv.mean_pred_idle_ttft_s is None
                       else lv.mean_pred_idle_ttft_s * 1e3),
                  _pct(lv.cache_hit_share).lstrip("+"))
    console.print(t)
    from analysis.text import plural

    for h in cal.holdouts:
        over = f"the mean of its {len(h.each)} runs" if len(h.each) > 1 else "run"
        iv = prof["calibration"].get("interval") or {}
        rests = f" ({iv['requests']} requests)" if iv.get("checked_users") == h.users else ""
        ht = Table(title=f"held-out level {plural(h.users, 'user')}{rests}: twin prediction "
                         f"vs {over}")
        for col in ("metric", "predicted", "measured", "error"):
            ht.add_column(col, justify="right")
        err = h.errors()
        for key, name in (("p90_interactivity", "P90 interactivity tok/s/user"),
                          ("p90_ttft_s", "P90 TTFT from schedule s"),
                          ("output_tok_s", "output tok/s")):
            ht.add_row(name, _num(h.predicted.as_dict()[key]), _num(h.measured.as_dict()[key]),
                       _pct(err[key]))
        console.print(ht)
    # notes name run directories: soft_wrap keeps a path (and a reason) on one line
    # whatever the console's width, so they can be copied and searched
    for note in prof["calibration"]["assumed"]:
        console.print(f"assumed: {note}", soft_wrap=True)
    for note in prof["calibration"]["notes"]:
        console.print(f"note: {note}", soft_wrap=True)
    for warning in prof["calibration"].get("warnings", []):
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    console.print(f"twin written to {out} (serve-sim --profile {out})", soft_wrap=True)
