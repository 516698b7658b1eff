"""How much load one agentreplay client drives: streamed tokens per client CPU-second,
achieved tokens/s, P99 schedule lag and peak RSS, against ``bench/_stub_server.py``
(near-zero server cost) with the server pinned to one core and the client to another.

    python bench/client_bench.py                 # every section below (~3 min)
    python bench/client_bench.py --quick         # shorter runs
    python bench/client_bench.py --sections scaling --workers 1,2,4 --scale-cores 0-3

Sections (``--sections``, comma list):

- ``micro``: per-request client costs that grow with the prompt (materialise, hash,
  encode the body, parse a first chunk that echoes the prompt's ids), and the
  transport floor: CPU a bare aiohttp loop (no parsing, no records) spends per
  request with 100-token and 100,000-token bodies.
- ``saturated``: the stub steps back to back (``--step-ms 0``), so the client is the
  bottleneck; 64, 256, 1,000 users at 100-token prompts, 64 users at fresh
  100,000-token prompts and at 100K-124K prompts of 20-turn sessions that resend
  their history.
- ``paced``: the stub steps every ``--paced-step-ms`` (a server's decode step), so the
  client is loaded but not saturated; 100-token prompts against 100K-124K history
  prompts at the same users: the per-stream token rate the client measures
  (1/TPOT), the server's true step rate and the achieved tokens/s. A long prompt
  must not slow the stream (vLLM issue #39963: the throughput of ``vllm bench
  serve`` collapses at 50K+ contexts from client-side limits).
- ``scaling``: the same load with ``--workers 1`` on one core and ``--workers N``
  on ``--scale-cores`` (the stub shares the first of them: it is ~3% busy), in
  A B B A order ``--scale-repeats`` times, so achieved tokens/s shows how far
  worker processes scale when the server is not the bottleneck.

The client is ``agentreplay run`` in its own process (``taskset``), so its CPU is
user+sys of every client process (the workers too), sampled with psutil over the
measured window only (startup and drain left out); tokens are the output tokens
whose chunks arrived in that window. Peak RSS is the largest client process.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from replay.client._bodies import BodySpec, ChainEncoder, PrefixCacheModel, build_body  # noqa: E402
from replay.client._events import _drop_prompt_ids  # noqa: E402
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
    if proc.returncode not in (0, 3):  # 3: stamped invalid (a saturated client), figures stand
        raise SystemExit(f"client failed ({proc.returncode}): {err[-2000:]}")
    man = orjson.loads((run / "run.json").read_bytes())
    t0 = int(man["clock"]["t0_monotonic_ns"])
    w0, w1 = t0 + int(warmup * 1e9), t0 + int((warmup + duration) * 1e9)
    ts = np.array([t for t, _ in samples], dtype=np.float64)
    cs = np.array([c for _, c in samples])
    cpu = float(np.interp(w1, ts, cs) - np.interp(w0, ts, cs))
    tokens = 0
    lags: list[float] = []
    tpots: list[float] = []
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
            if r["status"] == "ok" and r["output_tokens"] > 1:
                tpots.append((r["last_token_s"] - r["first_token_s"]) / (r["output_tokens"] - 1))
    tpot = float(np.mean(tpots)) if tpots else float("nan")
    return {"tokens": tokens, "cpu_s": cpu, "tok_per_cpu_s": tokens / cpu if cpu else 0.0,
            "tok_per_s": tokens / duration, "requests": n, "ok": n_ok,
            "lag_p99_ms": float(np.percentile(lags, 99)) * 1e3 if lags else float("nan"),
            "rss_mib": peak / 2**20, "tpot_ms": tpot * 1e3,
            "stream_tok_s": 1.0 / tpot if tpot > 0 else float("nan")}


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


@contextlib.contextmanager
def _stub(core: str, write_mode: str, step_ms: float = 0.0) -> Iterator[str]:
    """A stub server pinned to ``core``; yields its URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([*_taskset(core), sys.executable, str(STUB), "--port", str(port),
                             "--write-mode", write_mode, "--step-ms", str(step_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_up(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _stub_reset(url: str) -> None:
    req = urllib.request.Request(f"{url}/stats/reset", data=b"", method="POST")
    urllib.request.urlopen(req, timeout=5).read()


def _stub_stats(url: str) -> dict[str, object]:
    return orjson.loads(urllib.request.urlopen(f"{url}/stats", timeout=5).read())


_BARE = r"""
import asyncio, sys, time
import aiohttp, uvloop
url, lanes, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bodies = [line for line in sys.stdin.buffer.read().split(b"\n") if line]

async def main():
    async with aiohttp.ClientSession(read_bufsize=1 << 20) as s:
        async def lane(k):
            for i in range(k):
                async with s.post(url, data=bodies[i % len(bodies)]) as r:
                    async for _ in r.content.iter_any():
                        pass
        await asyncio.gather(*[lane(4) for _ in range(lanes)])
        c0 = time.process_time()
        await asyncio.gather(*[lane(reps) for _ in range(lanes)])
        print((time.process_time() - c0) / (lanes * reps))

uvloop.run(main())
"""


def _bare_post(url: str, cores: str, prompt: int, output: int, lanes: int = 16,
               reps: int = 60) -> float:
    """Client CPU seconds per request of a bare aiohttp loop that posts a body of
    ``prompt`` token ids and reads the stream without parsing it: the transport
    floor under any client's per-request cost."""
    rng = np.random.default_rng(prompt)
    spec = BodySpec(model="m", carry_output=False)
    bodies = b"\n".join(build_body(spec, rng.integers(0, 32000, prompt, dtype=np.int32),
                                    output) for _ in range(4))
    out = subprocess.run([*_taskset(cores), sys.executable, "-c", _BARE,
                          f"{url}/v1/completions", str(lanes), str(reps)],
                         input=bodies, capture_output=True, check=True)
    return float(out.stdout.decode().split()[-1])


def _shape(prompt: int, turns: int, grow: int) -> str:
    if turns == 1:
        return f"prompt {prompt:>7,}"
    return f"prompt {prompt // 1000:>3}K-{(prompt + (turns - 1) * grow) // 1000}K " \
           f"({turns} turns, history resent)"


def _row(users: int, prompt: int, output: int, w: int, turns: int, grow: int,
         r: dict[str, float]) -> str:
    return (f"  users {users:>5}  {_shape(prompt, turns, grow)}  output {output}  workers {w}: "
            f"{r['tok_per_cpu_s']:>9,.0f} tok/client-CPU-s  {r['tok_per_s']:>9,.0f} tok/s  "
            f"lag P99 {r['lag_p99_ms']:6.2f} ms  peak RSS {r['rss_mib']:5.0f} MiB  "
            f"requests {r['requests']:>6} (ok {r['ok']})")


def _section_micro(args: argparse.Namespace) -> None:
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
    with _stub(args.server_core, args.write_mode) as url:
        short = _bare_post(url, args.client_cores, 100, 256)
        long = _bare_post(url, args.client_cores, 100_000, 256)
    print(f"  transport floor (bare aiohttp loop, no parsing, 16 lanes, 256-token streams): "
          f"{short * 1e3:.3f} ms CPU per request at 100-token prompts, {long * 1e3:.3f} ms at "
          f"100,000 (+{(long - short) * 1e3:.3f} ms to send the body); its per-token rate "
          f"at 100,000 is {short / long:.0%} of that at 100")


def _section_saturated(args: argparse.Namespace, tmp: Path) -> None:
    cases = [(64, 100, 256, 1, 1, 0), (256, 100, 256, 1, 1, 0), (1000, 100, 256, 1, 1, 0),
             (64, 100_000, 256, 1, 1, 0), (64, 100_000, 256, 1, 20, GROW)]
    print(f"\nsaturated: bench/_stub_server.py steps back to back ({args.write_mode} writes, "
          f"core {args.server_core}); client on cores {args.client_cores}; "
          f"{args.duration:.0f} s measured after {args.warmup:.0f} s warmup; "
          f"{os.cpu_count()} CPUs:")
    rates = {}
    with _stub(args.server_core, args.write_mode) as url:
        for users, prompt, output, w, turns, grow in cases:
            r = _one(tmp, url, users, prompt, output, args.duration, args.warmup, w,
                     args.client_cores, turns, grow)
            rates[f"{users}-{prompt}-{turns}"] = r["tok_per_cpu_s"]
            print(_row(users, prompt, output, w, turns, grow, r))
    short, hist = rates["64-100-1"], rates["64-100000-20"]
    print(f"  100K-124K history prompts: {hist / short:.0%} of the 100-token tokens per "
          f"client CPU-second at 64 users")


def _section_paced(args: argparse.Namespace, tmp: Path) -> None:
    step = args.paced_step_ms
    users = args.paced_users
    print(f"\npaced: the stub steps every {step:g} ms (true TPOT {step:g} ms, "
          f"{args.write_mode} writes: one write per stream per step), {users} users:")
    got = {}
    for prompt, turns, grow in ((100, 1, 0), (100_000, 20, GROW)):
        with _stub(args.server_core, args.write_mode, step) as url:
            _stub_reset(url)
            r = _one(tmp, url, users, prompt, 256, args.duration, args.warmup, 1,
                     args.client_cores, turns, grow)
            st = _stub_stats(url)
        true_step = float(st["mean_step_ms"] or "nan")
        got[prompt] = r
        print(f"  {_shape(prompt, turns, grow)}: per-stream {r['stream_tok_s']:7.1f} tok/s "
              f"(client TPOT {r['tpot_ms']:.3f} ms, server step {true_step:.3f} ms, "
              f"{(r['tpot_ms'] - true_step) / true_step:+.1%})  achieved {r['tok_per_s']:>8,.0f} "
              f"tok/s  client CPU {r['cpu_s'] / args.duration:.0%} of a core  "
              f"lag P99 {r['lag_p99_ms']:6.2f} ms  requests {r['requests']} (ok {r['ok']})")
    a, b = got[100], got[100_000]
    print(f"  100K-124K vs 100-token prompts: per-stream rate "
          f"{b['stream_tok_s'] / a['stream_tok_s']:.3f}x, achieved tok/s "
          f"{b['tok_per_s'] / a['tok_per_s']:.3f}x (goal: within 10%)")


def _section_scaling(args: argparse.Namespace, tmp: Path) -> None:
    counts = [int(w) for w in args.workers.split(",")]
    users = args.scale_users
    # A B B A (repeated): drift on a shared machine hits both alike
    order = (counts + counts[::-1]) * args.scale_repeats
    print(f"\nscaling: {users} users, 100-token prompts, stub on core {args.scale_server_core} "
          f"(back-to-back steps, shared with the client there); runs in the order "
          f"{' '.join(map(str, order))}:")
    rates: dict[int, list[float]] = {w: [] for w in counts}
    with _stub(args.scale_server_core, args.write_mode) as url:
        for w in order:
            cores = args.client_cores if w == 1 else args.scale_cores
            r = _one(tmp, url, users, 100, 256, args.duration, args.warmup, w, cores)
            rates[w].append(r["tok_per_s"])
            print(f"  workers {w} on cores {cores:<5}: {r['tok_per_s']:>9,.0f} tok/s  "
                  f"{r['tok_per_cpu_s']:>9,.0f} tok/client-CPU-s  lag P99 "
                  f"{r['lag_p99_ms']:6.2f} ms  peak RSS {r['rss_mib']:4.0f} MiB  "
                  f"requests {r['requests']} (ok {r['ok']})")
    base = float(np.mean(rates[counts[0]]))
    for w in counts[1:]:
        print(f"  workers {w} vs {counts[0]}: {float(np.mean(rates[w])) / base:.2f}x achieved "
              f"tok/s (mean of {len(rates[w])} runs each)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs")
    ap.add_argument("--sections", default="micro,saturated,paced,scaling")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per case")
    ap.add_argument("--server-core", default="0")
    ap.add_argument("--client-cores", default="1", help="taskset list for the client")
    ap.add_argument("--write-mode", choices=("batch", "token"), default="batch")
    ap.add_argument("--paced-step-ms", type=float, default=5.0)
    ap.add_argument("--paced-users", type=int, default=64)
    ap.add_argument("--workers", default="1,2", help="worker counts for the scaling section")
    ap.add_argument("--scale-cores", default="0,1", help="client cores for workers > 1")
    ap.add_argument("--scale-server-core", default="0")
    ap.add_argument("--scale-users", type=int, default=256)
    ap.add_argument("--scale-repeats", type=int, default=2)
    args = ap.parse_args()
    args.duration = args.duration or (4.0 if args.quick else 10.0)
    args.warmup = 2.0
    sections = args.sections.split(",")
    unknown = set(sections) - {"micro", "saturated", "paced", "scaling"}
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as d:
        if "micro" in sections:
            _section_micro(args)
        if "saturated" in sections:
            _section_saturated(args, Path(d))
        if "paced" in sections:
            _section_paced(args, Path(d))
        if "scaling" in sections:
            _section_scaling(args, Path(d))


if __name__ == "__main__":
    main()
