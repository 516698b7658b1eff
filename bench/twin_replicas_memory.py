"""Twin memory against the replica count: ``plan --twin --replicas N`` peak RSS.

Runs ``agentreplay plan --twin`` in a child process for each replica count (one level,
a few users, a short simulated window, ``--jobs 1``) and prints each child's peak
resident memory (``ru_maxrss`` from ``wait4``) and wall seconds, and the memory per
extra replica. Before issue 38 a replica cost about 0.55 MiB whether a user reached it
or not (its KV cache lists and an 8192-id output table, built up front): 4096
replicas took 2.4 GB. ``--code DIR`` runs another checkout's code (e.g. main's) for a
before/after pair in one sitting.

    python bench/twin_replicas_memory.py [--replicas 1,256,1024,4096] [--users 8]
        [--twin replay/servers/sim/profiles/small.json] [--code DIR]

These are figures of the machine; no test asserts them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from traces import generate_trace, write_workload


def _peak_rss_mib(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """Peak RSS (MiB), wall seconds and the exit status of one child."""
    env = dict(os.environ, PYTHONPATH=str(cwd))
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stderr is not None and proc.returncode:
        sys.stderr.write(proc.stderr.read().decode()[-2000:])
    return usage.ru_maxrss / 1024, wall, proc.returncode


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--twin", default=str(here / "replay/servers/sim/profiles/small.json"))
    ap.add_argument("--replicas", default="1,256,1024,4096")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--code", type=Path, default=here,
                    help="the checkout whose replay.cli runs (default: this one)")
    args = ap.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        wl = Path(tmp) / "wl.jsonl"
        trace = generate_trace("coding-agent", sessions=32, seed=0, max_context=8192)
        write_workload(wl, trace.header, trace.sessions)
        print(f"# code {args.code}; twin {Path(args.twin).name}; users {args.users}; "
              f"{args.duration:g} s window; one level; --jobs 1")
        print(f"{'replicas':>8} {'peak RSS MiB':>13} {'wall s':>7}  exit")
        first: tuple[int, float] | None = None
        for n in counts:
            argv = [sys.executable, "-m", "replay.cli", "plan", "--twin", args.twin,
                    "--workload", str(wl), "--users", f"{args.users}:{args.users}",
                    "--levels", "1", "--duration", f"{args.duration:g}", "--warmup", "0",
                    "--drain", "5", "--jobs", "1", "--replicas", str(n)]
            rss, wall, code = _peak_rss_mib(argv, args.code)
            print(f"{n:>8} {rss:>13.1f} {wall:>7.1f}  {code}", flush=True)
            if first is None:
                first = (n, rss)
            elif n > first[0]:
                per = (rss - first[1]) * 1024 / (n - first[0])
                print(f"{'':>8} {per:>10.1f} KiB per replica beyond {first[0]}")


if __name__ == "__main__":
    main()
