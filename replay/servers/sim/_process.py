"""A simulated server in a child process: ``with SimServerProcess(...) as srv: srv.url``."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import IO, Any

from replay.errors import TargetError

__all__ = ["SimServerProcess", "free_port"]


_URL = re.compile(r"SIMULATED vLLM at http://\S+:(\d+) ")


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (bind to 0, read it back, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class SimServerProcess:
    """Runs ``agentreplay serve-sim`` in a child process; always stops it on exit."""

    def __init__(self, profile: str = "small", backend: str = "latency_specialized", *,
                 host: str = "127.0.0.1", port: int | None = None, time_scale: float = 1.0,
                 slowdown: float = 1.0,
                 faults: str | None = None, truth_path: str | None = None, seed: int = 0,
                 split_tokens: bool = False, startup_timeout_s: float = 120.0,
                 extra_args: list[str] | None = None) -> None:
        self.host = host
        self.port = port or 0
        """0 until started when no port was given: the child binds port 0 and reports it."""
        self.startup_timeout_s = startup_timeout_s
        """How long /health may take to answer: a deadline for a child that hangs, not a
        speed (one that exits is reported at once). A starved 2-core machine took over
        30 s to start Python and bind."""
        args = [
            sys.executable, "-m", "replay.cli", "serve-sim", "--profile", profile,
            "--backend", backend, "--host", host, "--port", str(self.port),
            "--speedup", repr(time_scale), "--seed", str(seed),
        ]
        if slowdown != 1.0:
            args += ["--slowdown", repr(slowdown)]
        if faults:
            args += ["--faults", faults]
        if truth_path:
            args += ["--truth", truth_path]
        if split_tokens:
            args.append("--split-tokens")
        self.args = args + list(extra_args or [])
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> SimServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._log = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self._output()
                self.stop()
                raise TargetError(f"serve-sim exited with code {self.proc.returncode}: {out}")
            if not self.port:
                found = _URL.search(self._output())
                if found is None:
                    time.sleep(0.05)
                    continue
                self.port = int(found.group(1))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        self.stop()
        raise TargetError(f"serve-sim did not answer /health within {self.startup_timeout_s} s")

    def _output(self) -> str:
        if self._log is None:
            return ""
        fd = self._log.fileno()
        size = os.fstat(fd).st_size
        # pread leaves the offset the child shares with us alone
        return os.pread(fd, size, 0).decode(errors="replace").strip()[-2000:]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; idempotent."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __del__(self) -> None:  # last resort: never leave a child behind
        proc: Any = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
