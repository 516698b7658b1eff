"""How much load one client process can drive: streamed tokens per client CPU-second
and P99 schedule lag, against the zero-cost ``instant`` simulated server running in
its own process (pinned to another core when there is one).

    python bench/client_bench.py            # 64 and 1,000 users, 100-token prompts;
                                            # 64 users, 100,000-token prompts
    python bench/client_bench.py --quick    # shorter runs

Also prints the per-request costs that grow with the prompt: materialising the
ids, hashing them for the expected-cache model, encoding the body, and parsing
the first chunk that echoes the prompt's ids (``return_token_ids``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay._client import _drop_prompt_ids  # noqa: E402
from replay._config import RunConfig  # noqa: E402
from replay._prompts import BodySpec, PrefixCacheModel, build_body  # noqa: E402
from replay._run import run_load  # noqa: E402
from replay.sim import SimServerProcess, load_profile  # noqa: E402
from traces._io import write_workload  # noqa: E402
from traces._materialise import Vocab, build_prompt  # noqa: E402
from traces._models import Request, Session, WorkloadHeader  # noqa: E402

BS = 16


def _workload(path: Path, prompt: int, output: int, sessions: int) -> Path:
    nblocks = -(-prompt // BS)
    out = []
    for s in range(sessions):
        ids = tuple(range(s * nblocks + 1, (s + 1) * nblocks + 1))
        out.append(Session(id=f"s{s}", requests=(Request(
            prompt_tokens=prompt, output_tokens=output, new_block_ids=ids),)))
    write_workload(path, WorkloadHeader(source="bench", block_size=BS), out)
    return path


def _pin(pid: int, cpu: int) -> bool:
    try:
        os.sched_setaffinity(pid, {cpu})
        return True
    except (AttributeError, OSError):
        return False


def _one(tmp: Path, profile: Path, users: int, prompt: int, output: int, duration: float,
         carry: bool) -> dict[str, float]:
    wl = _workload(tmp / f"wl-{prompt}.jsonl", prompt, output, sessions=64)
    with SimServerProcess(str(profile), startup_timeout_s=60) as srv:
        pinned = False
        if (os.cpu_count() or 1) >= 2 and srv.proc is not None:
            pinned = _pin(srv.proc.pid, 1) and _pin(0, 0)
        cfg = RunConfig(target=srv.url, users=users, duration_s=duration, warmup_s=1.0,
                        drain_s=5.0, metrics_interval_s=None, carry_output=carry,
                        first_token_timeout_s=120.0)
        cpu0 = time.process_time()
        wall0 = time.monotonic()
        run = asyncio.run(run_load(cfg, wl, tmp / f"run-{users}-{prompt}-{carry}"))
        cpu = time.process_time() - cpu0
        wall = time.monotonic() - wall0
    if pinned:
        _pin(0, 0)
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    recs = [orjson.loads(line) for line in (run / "requests.jsonl").read_bytes().splitlines()]
    tokens = sum(r["output_tokens"] for r in recs)
    lag = np.array([r["sent_s"] - r["due_s"] for r in recs if r["phase"] == "measure"])
    ok = sum(1 for r in recs if r["status"] == "ok")
    return {
        "users": users, "prompt": prompt, "carry": carry, "requests": len(recs), "ok": ok,
        "tokens": tokens, "cpu_s": cpu, "wall_s": wall, "tok_per_cpu_s": tokens / cpu,
        "tok_per_s": tokens / wall, "lag_p99_ms": float(np.percentile(lag, 99)) * 1e3
        if lag.size else float("nan"), "pinned": pinned,
    }


def _micro(prompt: int, reps: int) -> dict[str, float]:
    vocab = Vocab(size=32000)
    nblocks = -(-prompt // BS)
    req = Request(prompt_tokens=prompt, output_tokens=256,
                  new_block_ids=tuple(range(1, nblocks + 1)))
    spec = BodySpec(model="m")
    cache = PrefixCacheModel(BS)
    t_build = t_hash = t_body = t_echo = t_skip = 0.0
    for i in range(reps):
        t = time.perf_counter()
        ids = build_prompt(req, BS, vocab, i + 1, None, ())
        t_build += time.perf_counter() - t
        t = time.perf_counter()
        cache.hash_prompt(ids)
        t_hash += time.perf_counter() - t
        t = time.perf_counter()
        body = build_body(spec, ids, 256)
        t_body += time.perf_counter() - t
        chunk = orjson.dumps({"choices": [{"text": "x", "token_ids": [1],
                                           "prompt_token_ids": ids.tolist()}]})
        t = time.perf_counter()
        orjson.loads(chunk)
        t_echo += time.perf_counter() - t
        t = time.perf_counter()
        orjson.loads(_drop_prompt_ids(chunk))
        t_skip += time.perf_counter() - t
    return {"prompt": prompt, "build_ms": t_build / reps * 1e3, "hash_ms": t_hash / reps * 1e3,
            "body_ms": t_body / reps * 1e3, "body_kb": len(body) / 1024,
            "echo_parse_ms": t_echo / reps * 1e3, "echo_skip_ms": t_skip / reps * 1e3,
            "echo_kb": len(chunk) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs")
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args()
    duration = args.duration or (3.0 if args.quick else 8.0)

    print("per-request client costs (mean):")
    for prompt in (100, 100_000):
        m = _micro(prompt, 20 if prompt > 1000 else 200)
        print(f"  prompt {prompt:>7,}: materialise {m['build_ms']:.3f} ms  hash "
              f"{m['hash_ms']:.3f} ms  body {m['body_ms']:.3f} ms ({m['body_kb']:.0f} KiB)  "
              f"first chunk {m['echo_kb']:.0f} KiB: full decode {m['echo_parse_ms']:.3f} ms, "
              f"client path (echo cut) {m['echo_skip_ms']:.3f} ms")

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        profile = tmp / "instant.json"
        # Room for 64 users x 100K-token prompts without preemption.
        profile.write_text(load_profile("instant").model_copy(
            update={"num_gpu_blocks": 600_000}).model_dump_json())
        cases = [(64, 100, 1024, True), (1000, 100, 1024, True), (64, 100_000, 256, True),
                 (64, 100_000, 256, False)]
        print(f"\nagainst the instant sim ({duration:.0f} s measured per case):")
        for users, prompt, output, carry in cases:
            r = _one(tmp, profile, users, prompt, output, duration, carry)
            print(f"  users {users:>5}  prompt {prompt:>7,}  output {output:>5}  "
                  f"return_token_ids {'on ' if carry else 'off'}: "
                  f"{r['tok_per_cpu_s']:>10,.0f} tok/client-CPU-s  {r['tok_per_s']:>10,.0f} "
                  f"tok/s  lag P99 {r['lag_p99_ms']:7.1f} ms  requests {r['requests']:>6} "
                  f"(ok {r['ok']}){'  pinned' if r['pinned'] else ''}")


if __name__ == "__main__":
    main()
