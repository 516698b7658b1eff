"""How much load one agentreplay client drives: streamed tokens per client CPU-second,
achieved tokens/s, P99 schedule lag and peak RSS, against ``bench/_stub_server.py``
(near-zero server cost) with the server pinned to one core and the client to another.

    python bench/client_bench.py                 # 64, 256, 1,000 users at 100-token
                                                 # prompts; 64 users at 100,000 tokens;
                                                 # 1,000 users with --workers 2
    python bench/client_bench.py --quick         # shorter runs
    python bench/client_bench.py --client-cores 1,2,3 --workers 1,2   # scaling

The client is ``agentreplay run`` in its own process (``taskset``), so its CPU is
user+sys of every client process (the workers too), sampled with psutil over the
measured window only (startup and drain left out); tokens are the output tokens
whose chunks arrived in that window. Peak RSS is the largest client process.
Also prints the per-request costs that grow with the prompt (materialise, hash,
encode the body, parse a first chunk that echoes the prompt's ids).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from replay._client import _drop_prompt_ids  # noqa: E402
from replay._prompts import BodySpec, ChainEncoder, PrefixCacheModel, build_body  # noqa: E402
from traces._io import read_workload, write_workload  # noqa: E402
from traces._materialise import Vocab, build_prompt  # noqa: E402
from traces._models import Request, Session, WorkloadHeader  # noqa: E402

BS = 16
GROW = 1_280
"""Tokens a session turn adds to the history (a tool result and the reply)."""
STUB = REPO / "bench" / "_stub_server.py"


def _workload(path: Path, prompt: int, output: int, sessions: int, turns: int = 1,
              grow: int = 0) -> Path:
    """``sessions`` sessions of ``turns`` requests; turn k resends turn k-1's whole
    prompt plus ``grow`` new tokens (an agent's history), so prompts run from
    ``prompt`` to ``prompt + (turns - 1) * grow`` tokens."""
    span = -(-(prompt + turns * grow) // BS)
    out = []
    for s in range(sessions):
        reqs = []
        prev = 0
        for k in range(turns):
            tokens = prompt + k * grow
            first = prev // BS if k else 0
            ids = tuple(range(s * span + first + 1, s * span + -(-tokens // BS) + 1))
            reqs.append(Request(prompt_tokens=tokens, output_tokens=output,
                                prefix_blocks=first, new_block_ids=ids))
            prev = tokens
        out.append(Session(id=f"s{s}", requests=tuple(reqs)))
    write_workload(path, WorkloadHeader(source="bench", block_size=BS), out)
    return path


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _taskset(cores: str) -> list[str]:
    return ["taskset", "-c", cores] if shutil.which("taskset") else []


def _tree(proc: object) -> tuple[float, int]:
    """(user+sys CPU seconds, largest RSS) over a process and its live children."""
    import psutil

    assert isinstance(proc, psutil.Process)
    cpu, rss = 0.0, 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return cpu, rss
    for p in procs:
        try:
            t = p.cpu_times()
            cpu += t.user + t.system
            rss = max(rss, p.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            pass
    return cpu, rss


def _one(tmp: Path, url: str, users: int, prompt: int, output: int, duration: float,
         warmup: float, workers: int, cores: str, turns: int = 1,
         grow: int = 0) -> dict[str, float]:
    import psutil

    wl = _workload(tmp / f"wl-{prompt}-{output}-{turns}.jsonl", prompt, output, sessions=64,
                   turns=turns, grow=grow)
    run = tmp / f"run-{users}-{prompt}-{workers}-{turns}"
    shutil.rmtree(run, ignore_errors=True)
    cmd = [*_taskset(cores), sys.executable, "-m", "replay.cli", "run", "--target", url,
           "--workload", str(wl), "--users", str(users), "--duration", str(duration),
           "--warmup", str(warmup), "--drain", "10", "--out", str(run), "--vocab-size",
           "32000", "--metrics-interval", "0", "--quiet", "--workers", str(workers)]
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE)
    ps = psutil.Process(proc.pid)
    samples: list[tuple[int, float]] = []
    peak = 0
    while proc.poll() is None:
        cpu, rss = _tree(ps)
        samples.append((time.monotonic_ns(), cpu))
        peak = max(peak, rss)
        time.sleep(0.1)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"client failed ({proc.returncode}): {err[-2000:]}")
    man = orjson.loads((run / "run.json").read_bytes())
    t0 = int(man["clock"]["t0_monotonic_ns"])
    w0, w1 = t0 + int(warmup * 1e9), t0 + int((warmup + duration) * 1e9)
    ts = np.array([t for t, _ in samples], dtype=np.float64)
    cs = np.array([c for _, c in samples])
    cpu = float(np.interp(w1, ts, cs) - np.interp(w0, ts, cs))
    tokens = 0
    lags: list[float] = []
    n_ok = n = 0
    for line in (run / "requests.jsonl").read_bytes().splitlines():
        r = orjson.loads(line)
        n += 1
        n_ok += r["status"] == "ok"
        for t, k in zip(r["chunk_times_s"], r["chunk_tokens"], strict=True):
            if warmup <= t < warmup + duration:
                tokens += k
        if r["phase"] == "measure":
            lags.append(r["sent_s"] - r["due_s"])
    return {"tokens": tokens, "cpu_s": cpu, "tok_per_cpu_s": tokens / cpu if cpu else 0.0,
            "tok_per_s": tokens / duration, "requests": n, "ok": n_ok,
            "lag_p99_ms": float(np.percentile(lags, 99)) * 1e3 if lags else float("nan"),
            "rss_mib": peak / 2**20}


def _micro(prompt: int, reps: int) -> dict[str, float]:
    """Mean per-request costs of a fresh prompt (every request a new session)."""
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


def _micro_turns(prompt: int, turns: int) -> dict[str, float]:
    """Mean per-request costs along one session whose turns resend the history:
    materialise the new blocks, then body and keys from the previous turn's."""
    path = Path(tempfile.mkdtemp()) / "wl.jsonl"
    sess = read_workload(_workload(path, prompt, 256, 1, turns, GROW)).sessions[0]
    vocab = Vocab(size=32000)
    enc = ChainEncoder(BodySpec(model="m"), PrefixCacheModel(BS))
    t_build = t_prep = 0.0
    prev = None
    for req in sess.requests:
        t = time.perf_counter()
        ids = build_prompt(req, BS, vocab, 1, prev, ())
        t_build += time.perf_counter() - t
        t = time.perf_counter()
        enc.prepare(ids, 256)
        t_prep += time.perf_counter() - t
        prev = ids
    shutil.rmtree(path.parent)
    return {"build_ms": t_build / turns * 1e3, "prep_ms": t_prep / turns * 1e3}


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit("stub server exited")
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("stub server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per case")
    ap.add_argument("--server-core", default="0")
    ap.add_argument("--client-cores", default="1", help="taskset list for the client")
    ap.add_argument("--workers", default=None,
                    help="comma list of worker counts for the 1,000-user scaling rows "
                    "(default 1,2)")
    ap.add_argument("--write-mode", choices=("batch", "token"), default="batch")
    args = ap.parse_args()
    duration = args.duration or (4.0 if args.quick else 10.0)
    warmup = 2.0

    print("per-request client costs (mean):")
    for prompt in (100, 100_000):
        m = _micro(prompt, 20 if prompt > 1000 else 200)
        print(f"  prompt {prompt:>7,}: materialise {m['build_ms']:.3f} ms  hash "
              f"{m['hash_ms']:.3f} ms  body {m['body_ms']:.3f} ms ({m['body_kb']:.0f} KiB)  "
              f"first chunk {m['echo_kb']:.0f} KiB: full decode {m['echo_parse_ms']:.3f} ms, "
              f"client path (echo cut) {m['echo_skip_ms']:.3f} ms")
    m = _micro_turns(100_000, 20)
    print(f"  prompt 100K-124K, 20 turns resending the history: materialise "
          f"{m['build_ms']:.3f} ms  body + hash from the previous turn {m['prep_ms']:.3f} ms")

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    stub = subprocess.Popen([*_taskset(args.server_core), sys.executable, str(STUB), "--port",
                             str(port), "--write-mode", args.write_mode],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_up(url, stub)
        workers = [int(w) for w in (args.workers or "1,2").split(",")]
        # (users, prompt, output, workers, turns per session, tokens added per turn)
        cases = [(64, 100, 256, 1, 1, 0), (256, 100, 256, 1, 1, 0), (1000, 100, 256, 1, 1, 0),
                 (64, 100_000, 256, 1, 1, 0), (64, 100_000, 256, 1, 20, GROW)]
        cases += [(1000, 100, 256, w, 1, 0) for w in workers if w != 1]
        print(f"\nagainst bench/_stub_server.py ({args.write_mode} writes, core "
              f"{args.server_core}); client on cores {args.client_cores}; {duration:.0f} s "
              f"measured after {warmup:.0f} s warmup; {os.cpu_count()} CPUs:")
        with tempfile.TemporaryDirectory() as d:
            for users, prompt, output, w, turns, grow in cases:
                r = _one(Path(d), url, users, prompt, output, duration, warmup, w,
                         args.client_cores, turns, grow)
                shape = (f"prompt {prompt:>7,}" if turns == 1 else
                         f"prompt {prompt // 1000:>3}K-{(prompt + (turns - 1) * grow) // 1000}K "
                         f"({turns} turns, history resent)")
                print(f"  users {users:>5}  {shape}  output {output}  workers {w}: "
                      f"{r['tok_per_cpu_s']:>9,.0f} tok/client-CPU-s  {r['tok_per_s']:>9,.0f} "
                      f"tok/s  lag P99 {r['lag_p99_ms']:6.2f} ms  peak RSS "
                      f"{r['rss_mib']:5.0f} MiB  requests {r['requests']:>6} (ok {r['ok']})")
    finally:
        stub.terminate()
        stub.wait(10)


if __name__ == "__main__":
    main()
