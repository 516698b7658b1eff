"""Two arms on the same simulated backend must never be called different.

Starts two ``serve-sim`` servers with the same profile and backend (two ports,
nothing else differs), generates a small coding-agent workload, and runs
``agentreplay compare`` once per seed at the given user counts. Prints, per
seed and level, the P90-interactivity ratio, its interval and whether the
difference was called established; ends with how many were (should be 0).
The arms are labelled auto and auto2 so the fairness guard sees one backend.

    python bench/same_backend.py --seeds 5 --users 1,4 --duration 8
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"serve-sim on port {port} did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--users", default="1,4")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--backend", default="auto")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="same-backend-"))
    workload = work / "w.jsonl"
    subprocess.run([sys.executable, "-m", "replay.cli", "traces", "generate", "--sessions", "24",
                    "--seed", "0", "--prompt-scale", "0.05", "--output-scale", "0.2",
                    "--think-scale", "0.02", "-o", str(workload)], check=True,
                   capture_output=True)
    ports = [_free_port(), _free_port()]
    servers = [subprocess.Popen([sys.executable, "-m", "replay.cli", "serve-sim", "--profile",
                                 "kimi-k3-gb300-tp16", "--backend", args.backend,
                                 "--port", str(p)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for p in ports]
    established = total = 0
    try:
        for p in ports:
            _wait(p)
        for seed in range(args.seeds):
            out = work / f"seed{seed}"
            rc = subprocess.run(
                [sys.executable, "-m", "replay.cli", "compare",
                 "--arm", f"auto=http://127.0.0.1:{ports[0]}",
                 "--arm", f"auto2=http://127.0.0.1:{ports[1]}",
                 "--workload", str(workload), "--users", args.users, "--seed", str(seed),
                 "--duration", str(args.duration), "--warmup", str(args.warmup),
                 "--drain", "5", "--out", str(out), "--quiet"],
                capture_output=True, text=True).returncode
            summary = json.loads((out / "summary.json").read_text())
            for level in summary["levels"]:
                for ratios in level["ratios"].values():
                    for r in ratios:
                        if r["metric"] != "interactivity.p90":
                            continue
                        total += 1
                        established += bool(r.get("established"))
                        ci = r.get("ci") or (None, None)
                        print(f"seed {seed} exit {rc} users {level['users']}: ratio "
                              f"{r['ratio']} [{ci[0]}, {ci[1]}] sure={r['sure']} "
                              f"established={r['established']} {r['not_established'] or ''}")
    finally:
        for s in servers:
            s.terminate()
            s.wait(10)
    print(f"established_differences={established} of {total} (same backend: should be 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
