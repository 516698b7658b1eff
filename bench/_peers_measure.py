"""How bench/peers.py measures one tool: the stub as a pinned child, CPU samples, the window.

A tool runs as a subprocess pinned to one core while the stub server
(``bench/_stub_server.py``) runs pinned to another. Every ``interval`` the
harness samples the tool's process-tree CPU (psutil), the stub's own CPU and the
tokens the stub has written; :func:`steady_window` then cuts the stretch between
10% and 90% of the run's tokens, so startup, report writing and drain stay out
of the figures.
"""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

STUB = Path(__file__).resolve().parent / "_stub_server.py"
WINDOW = (0.10, 0.90)
"""Steady window: between these fractions of the run's streamed tokens."""


@dataclass(frozen=True)
class Sample:
    """One look at a running tool: seconds, client CPU-seconds, server tokens so far."""

    t: float
    cpu: float
    tokens: int
    server_cpu: float = 0.0


@dataclass(frozen=True)
class Window:
    """Differences between two samples: what the figures are computed over."""

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
    ok_exits: frozenset[int] = frozenset({0})
    """Exit statuses of a run that finished and wrote its results (agentreplay's 3: done,
    stamped invalid; a starved client still streamed every token it counts)."""


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
    if proc.returncode not in cmd.ok_exits:
        raise RuntimeError(f"exit {proc.returncode}; see {log}")
    return samples, whole_cpu, wall, tokens
