"""Soak: 1,000 users against the simulated server for a long time; does the client leak
or fall behind?

Starts ``agentreplay serve-sim`` and ``agentreplay run`` as subprocesses, samples the
client's RSS every interval, reads its ``requests.jsonl`` as it grows and prints the
schedule lag (request sent minus request due) of the requests sent in each interval.
At the end it says whether memory stayed flat (< 5% growth after warmup), whether
lag drifted (later intervals' P99 lag well above the early ones'), whether every
request is accounted for (each recorded once, every record with an outcome) and
the run's own validity stamp (a starved simulator on a busy machine is stamped
invalid for speed verdicts: that says nothing about the client's soak).

    python bench/soak.py --minutes 30          # for the record
    python bench/soak.py --minutes 2           # CI-sized
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from replay.servers.sim import SimServerProcess, load_profile
from traces import Request, Session, WorkloadHeader, write_workload

_BLOCK = 16


def _workload(path: Path, sessions: int, turns: int, output: int, think_s: float) -> Path:
    out = []
    for s in range(sessions):
        reqs = []
        first = 1_000 * (s + 1)
        for t in range(turns):
            reqs.append(Request(
                prompt_tokens=(t + 1) * 4 * _BLOCK, output_tokens=output, prefix_blocks=t * 4,
                new_block_ids=tuple(range(first + 4 * t, first + 4 * t + 4)),
                think_time_s=think_s if t else 0.0))
        out.append(Session(id=f"s{s}", requests=tuple(reqs)))
    write_workload(path, WorkloadHeader(source="soak", block_size=_BLOCK), out)
    return path


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class _Tail:
    """Reads the complete lines appended to a file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.rest = b""
        self.ids: set[str] = set()
        self.repeats = 0
        self.statuses: dict[str, int] = {}

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        recs = [orjson.loads(x) for x in lines if x.strip()]
        for rec in recs:
            self.repeats += rec["id"] in self.ids
            self.ids.add(rec["id"])
            self.statuses[rec["status"]] = self.statuses.get(rec["status"], 0) + 1
        return recs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds per row")
    ap.add_argument("--think", type=float, default=5.0, help="think time between turns, s")
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--speedup", type=float, default=10.0,
                    help="sim speed-up (1,000 running requests make slow steps)")
    args = ap.parse_args()
    warm_s = min(10.0, 0.2 * args.minutes * 60)  # users start staggered over it
    duration = args.minutes * 60 - warm_s
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    wl = _workload(tmp / "wl.jsonl", sessions=200, turns=8, output=args.output_tokens,
                   think_s=args.think)
    profile = load_profile("small").model_copy(update={
        "max_num_seqs": 2048, "num_gpu_blocks": 400_000, "max_num_batched_tokens": 65536})
    (tmp / "profile.json").write_text(profile.model_dump_json())
    out = tmp / "run"
    print(f"soak: {args.users} users, {args.minutes:g} min, think {args.think:g} s, "
          f"{args.output_tokens} output tokens, sim profile 'small' (max_num_seqs 2048, "
          f"speedup {args.speedup:g}), users staggered over a {warm_s:g} s warmup; "
          f"run dir {out}", flush=True)
    with SimServerProcess(str(tmp / "profile.json"), time_scale=args.speedup) as srv:
        cmd = [sys.executable, "-m", "replay.cli", "run", "--target", srv.url,
               "--workload", str(wl), "--users", str(args.users), "--duration", str(duration),
               "--warmup", str(warm_s), "--drain", "10", "--out", str(out), "--quiet",
               "--metrics-interval", "5"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        tail = _Tail(out / "requests.jsonl")
        rows: list[tuple[float, float, int, float, float, float, float]] = []
        buckets: dict[int, list[tuple[float, bool]]] = {}
        t_start = time.monotonic()
        print(f"{'sent at':>7} {'RSS MiB':>8} {'sent':>6} {'ok %':>6} {'lag p50 ms':>11} "
              f"{'lag p99 ms':>11} {'lag max ms':>11}", flush=True)
        k = 1
        while proc.poll() is None:
            time.sleep(max(0.0, t_start + k * args.interval - time.monotonic()))
            rss = _rss_mib(proc.pid)
            for rec in tail.read():
                b = int(rec["sent_s"] // args.interval)
                buckets.setdefault(b, []).append((rec["sent_s"] - rec["due_s"],
                                                  rec["status"] == "ok"))
            # a request is recorded when it ends: report sends two intervals late
            done = buckets.pop(k - 3, None) if k >= 3 else None
            if rss is not None and k >= 3 and k * args.interval <= warm_s + duration + 1e-9:
                lag = np.array([x for x, _ in done]) * 1e3 if done else np.array([np.nan])
                ok = 100 * np.mean([o for _, o in done]) if done else float("nan")
                row = ((k - 3) * args.interval, rss, len(done or ()), ok,
                       float(np.percentile(lag, 50)), float(np.percentile(lag, 99)),
                       float(np.max(lag)))
                rows.append(row)
                print(f"{row[0]:7.0f} {row[1]:8.1f} {row[2]:6d} {row[3]:6.1f} {row[4]:11.2f} "
                      f"{row[5]:11.2f} {row[6]:11.2f}", flush=True)
            k += 1
        err = proc.stderr.read().decode() if proc.stderr else ""
        tail.read()
    if proc.returncode not in (0, 3):  # 3: stamped invalid, still a finished run
        print(f"soak: the run failed ({proc.returncode}): {err[-2000:]}")
        return 1
    if not rows:
        print("soak: too short for a row; give more --minutes")
        return 1
    # a row's RSS is sampled two intervals after the sends it shows the lag of
    warm = max(1, int(np.ceil(0.2 * len(rows))))
    rss = np.array([r[1] for r in rows])
    base, last = float(rss[warm - 1]), float(rss[-1])
    growth = (last - base) / base
    p99 = np.array([r[5] for r in rows[warm:] if r[2] > 0])
    third = max(1, len(p99) // 3)
    early, late = float(np.mean(p99[:third])), float(np.mean(p99[-third:]))
    drift = late > 1.5 * early + 2.0
    print(f"memory: {base:.1f} MiB after warmup -> {last:.1f} MiB at the end "
          f"({100 * growth:+.1f}%): {'FLAT' if growth < 0.05 else 'GREW'} (limit +5%)")
    print(f"schedule lag P99: {early:.2f} ms early -> {late:.2f} ms late: "
          f"{'DRIFTED' if drift else 'no drift'} (drift = late > 1.5 x early + 2 ms)")
    total = sum(tail.statuses.values())
    by = ", ".join(f"{k} {v:,}" for k, v in sorted(tail.statuses.items()))
    print(f"accounting: {total:,} records ({by}); {tail.repeats} recorded twice, "
          f"{len(tail.rest)} bytes of a half line: "
          f"{'ALL ACCOUNTED' if not tail.repeats and not tail.rest else 'LOST OR DOUBLED'}")
    stamp = [ln.strip() for ln in err.splitlines()
             if ln.startswith(("agentreplay: run ", "  "))]
    print("run validity (stamped by the run): " + ("; ".join(stamp) or "none printed"))
    if not os.environ.get("SOAK_KEEP"):
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
