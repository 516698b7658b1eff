"""Time and peak memory to analyse a run of 1,000,000 request records.

Writes a synthetic run directory (1000 users x 1000 requests, 8 streamed
chunks each, 2% failures, server metrics every second), then analyses it in a
fresh child process (read + every metric with bootstrap intervals) and prints
wall time and the child's peak RSS. Goal: < 10 s and < 2 GB.

    python bench/analysis_bench.py [--records N] [--keep DIR] [--report]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

CHILD = r"""
import resource, sys, time
c0 = time.process_time()
t0 = time.perf_counter()
from analysis import analyse_run, read_run
t1 = time.perf_counter()
run = read_run(sys.argv[1])
t2 = time.perf_counter()
read_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
summary = analyse_run(run)
t3 = time.perf_counter()
extra = ""
if sys.argv[2] == "1":
    from analysis import compare_runs, render_report
    html = render_report(compare_runs([run]), [run])
    extra = f" report={time.perf_counter() - t3:.2f}s ({len(html) / 1e6:.1f} MB)"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
cpu = time.process_time() - c0
print(f"records={len(run.requests):,} import={t1 - t0:.2f}s read={t2 - t1:.2f}s "
      f"metrics={t3 - t2:.2f}s total={t3 - t0:.2f}s cpu={cpu:.2f}s "
      f"peak_rss={peak:,.0f} MB (after reading: {read_peak:,.0f} MB){extra}")
with open("/proc/loadavg") as f:
    print("  load average:", f.read().split()[0], "(other processes share the CPUs)")
print(f"  P90 TTFT={summary.ttft.p90:.4f}s CI={summary.ttft.p90_ci} "
      f"P90 interactivity={summary.interactivity.p90:.1f} tok/s/user "
      f"decode={summary.decode_tok_s:,.0f} tok/s ITL samples={summary.itl.count:,}")
"""


def write_run(root: Path, n: int, users: int = 1000, chunks: int = 8) -> None:
    """A run directory with n records; vectorised generation, orjson per line."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    per_user = -(-n // users)
    user = np.repeat(np.arange(users), per_user)[:n]
    turn = np.tile(np.arange(per_user), users)[:n]
    duration = 3600.0
    sent = np.sort(rng.uniform(0, duration, n))
    ttft = rng.lognormal(-1.0, 0.5, n)
    tpot = rng.lognormal(-4.0, 0.3, n)
    out = rng.integers(16, 400, n)
    prompt = rng.integers(1000, 100_000, n)
    ok = rng.random(n) > 0.02
    step = out // chunks
    manifest = {
        "run_id": "bench", "label": "auto", "target": "sim", "model": "bench-model",
        "gpu_count": 8,
        "server_info": {"vllm_config": {"parallel_config": {"tensor_parallel_size": 8}}},
        "workload": {"fingerprint": "bench"},
        "load": {"users": users, "duration_s": duration, "warmup_s": 0, "drain_s": 0},
        "window": {"start_s": 0.0, "end_s": duration},
        "clock": {"t0_wall": "2026-12-01T00:00:00Z", "t0_monotonic_ns": 0},
        "started_at": "2026-12-01T00:00:00Z", "complete": True, "tool_version": "bench",
    }
    (root / "run.json").write_bytes(orjson.dumps(manifest))
    with open(root / "requests.jsonl", "wb") as f:
        buf = []
        for i in range(n):
            s = float(sent[i])
            if ok[i]:
                first = s + float(ttft[i])
                k = int(step[i])
                toks = [1] + [k] * (chunks - 2) + [int(out[i]) - 1 - k * (chunks - 2)]
                times = [first + float(tpot[i]) * (1 + k * j) for j in range(chunks)]
                times[0] = first
                rec = {
                    "id": f"r{i}", "user": int(user[i]), "session": f"s{user[i]}-{turn[i] // 40}",
                    "session_instance": int(turn[i] // 40), "turn": int(turn[i] % 40),
                    "status": "ok", "due_s": s, "sent_s": s, "first_token_s": first,
                    "last_token_s": first + float(tpot[i]) * (int(out[i]) - 1),
                    "chunk_times_s": times, "chunk_tokens": toks,
                    "prompt_tokens": int(prompt[i]), "output_tokens_asked": int(out[i]),
                    "output_tokens": int(out[i]), "cached_tokens": int(prompt[i]) // 2,
                    "expected_cached_tokens": int(prompt[i]) // 2,
                }
            else:
                rec = {
                    "id": f"r{i}", "user": int(user[i]), "session": f"s{user[i]}",
                    "turn": int(turn[i] % 40), "status": "error", "error_kind": "http_500",
                    "error_message": "boom", "due_s": s, "sent_s": s,
                    "prompt_tokens": int(prompt[i]), "output_tokens_asked": int(out[i]),
                    "output_tokens": 0,
                }
            buf.append(orjson.dumps(rec))
            if len(buf) >= 10_000:
                f.write(b"\n".join(buf) + b"\n")
                buf = []
        if buf:
            f.write(b"\n".join(buf) + b"\n")
    with open(root / "server_metrics.jsonl", "wb") as f:
        for t in range(int(duration) + 1):
            f.write(orjson.dumps({"t_s": float(t), "values": {
                "vllm:prefix_cache_hits_total": 500.0 * t,
                "vllm:prefix_cache_queries_total": 1000.0 * t,
                "vllm:kv_cache_usage_perc": 0.5}}) + b"\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--keep", type=Path, help="write (or reuse) the run directory here")
    p.add_argument("--report", action="store_true", help="also render the HTML report")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp) / "run"
        if not (root / "requests.jsonl").exists():
            t = time.perf_counter()
            write_run(root, args.records)
            size = (root / "requests.jsonl").stat().st_size / 1e6
            print(f"wrote {args.records:,} records ({size:,.0f} MB) in "
                  f"{time.perf_counter() - t:.1f}s")
        repo = Path(__file__).resolve().parent.parent
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), "1" if args.report else "0"],
            cwd=repo, capture_output=True, text=True,
        )
        print(child.stdout, end="")
        if child.returncode:
            print(child.stderr, file=sys.stderr)
            return child.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
