"""Speed and memory of the workload pipeline: generate+write, read+verify, inspect.

Each phase runs in its own process so its peak RSS is its own. Prints figures,
asserts nothing.

    python bench/traces_bench.py                 # 10,000 sessions
    python bench/traces_bench.py --sessions 500  # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run children with the repository first on the path, whatever the cwd.
REPO = str(Path(__file__).resolve().parents[1])
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)}

def _peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def _phase(name: str, sessions: int, path: str) -> dict[str, float]:
    import traces

    start = time.perf_counter()
    if name == "generate":
        header, it = traces.generate(sessions=sessions, seed=1)
        traces.write_workload(path, header, it)
    elif name == "read":
        for _ in traces.iter_sessions(path):
            pass
    elif name == "inspect":
        traces.inspect_sessions(traces.iter_sessions(path))
    else:
        raise SystemExit(f"unknown phase {name}")
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_rss_mb": _peak_rss_mb()}


def _baseline_rss() -> float:
    out = subprocess.run(
        [sys.executable, "-c",
         "import resource, traces; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
        capture_output=True, text=True, check=True, env=CHILD_ENV,
    )
    return int(out.stdout) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--skip-inspect", action="store_true")
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, args.sessions, args.path)))
        return 0

    base = _baseline_rss()
    phases = ["generate", "read"] + ([] if args.skip_inspect else ["inspect"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.jsonl")
        print(f"sessions: {args.sessions:,} (coding-agent, 128K context, seed 1)")
        print(f"baseline RSS after 'import traces': {base:.0f} MB")
        for phase in phases:
            out = subprocess.run(
                [sys.executable, __file__, "--phase", phase, "--sessions", str(args.sessions),
                 "--path", path], capture_output=True, text=True, check=True, env=CHILD_ENV,
            )
            r = json.loads(out.stdout)
            rate = args.sessions / r["seconds"] if r["seconds"] else float("inf")
            print(f"{phase:>9}: {r['seconds']:7.2f} s  {rate:9,.0f} sessions/s  "
                  f"peak RSS {r['peak_rss_mb']:7.0f} MB")
            if phase == "generate":
                size = os.path.getsize(path)
                print(f"{'':>9}  file {size / 2**20:.1f} MiB, "
                      f"{size / max(args.sessions, 1) / 1024:.1f} KiB per session")
    return 0


if __name__ == "__main__":
    sys.exit(main())
