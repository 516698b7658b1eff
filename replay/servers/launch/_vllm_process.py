"""One server subprocess: start in its own process group, wait for health, stop.

vLLM starts helper processes (engine core, workers). Starting the server as a
session leader puts all of them in one process group, so stopping signals the
whole group and nothing is left holding a port or GPU memory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from analysis import REDACTED
from replay.errors import TargetError
from replay.servers.launch._pin import cpu_list, pin_group
from replay.servers.launch._secrets import redact_args, scrub_file, secret_values

__all__ = ["ServerProcess", "group_members", "log_tail", "port_is_free"]

LOG_TAIL_LINES = 25


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a server log, for error messages."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on host:port (so /health answers can only be ours)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or "0.0.0.0", port))
        except OSError:
            return False
    return True


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group; Linux reads /proc.

    Zombies are skipped: an orphaned helper that already exited may wait to
    be reaped by an init that never does, yet it holds nothing.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """A Ctrl-C (or a SIGTERM turned into one) that comes inside is raised on the way
    out, not in the middle.

    Around ``Popen``: a ``KeyboardInterrupt`` raised after the child was forked but
    before ``Popen`` returned leaves a server nobody holds the pid of, so ``stop()``
    cannot reach it; it comes up seconds later on the port the next run wants. Only
    Python's own handler raises mid-call; any other handler (an event loop's) is left
    alone.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    came: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if came:
            raise KeyboardInterrupt


class ServerProcess:
    """A server subprocess that is always stopped by ``stop()``, whatever happened."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], log_path: Path, label: str,
        cpus: tuple[int, ...] | None = None,
    ) -> None:
        self.cpus = cpus
        """CPUs the server is confined to (None: wherever the OS puts it)."""
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.label = label
        self._secrets = secret_values(self.argv, self.env)
        """What the log must not keep: scrubbed from it once the server stopped."""
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id (and process group id) of the server, once started."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log, _interrupts_held():
            log.write(f"# agentreplay launch: {redact_args(self.argv)!r}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise TargetError(f"arm {self.label}: cannot start {self.argv[0]}: {exc}") from None
            if self.cpus is not None:  # before it starts a thread or child: they inherit it
                try:
                    os.sched_setaffinity(self._proc.pid, self.cpus)
                except OSError as exc:
                    raise TargetError(f"arm {self.label}: cannot pin it to CPUs "
                                      f"{cpu_list(self.cpus)}: {exc.strerror or exc}") from None

    def repin(self) -> int:
        """Pin any of the group's threads found outside its CPUs again (a process that
        set its own affinity meanwhile); how many were moved."""
        if self.cpus is None or self._proc is None:
            return 0
        return pin_group(group_members(self._proc.pid), self.cpus)

    def _died(self, what: str) -> TargetError:
        return TargetError(
            f"arm {self.label}: {what}; last lines of {self.log_path}:\n"
            f"{self._scrubbed(log_tail(self.log_path))}"
        )

    def _scrubbed(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def wait_healthy(self, url: str, timeout: float, poll_interval: float = 0.5) -> float:
        """Poll ``/health`` until it answers 200; return the seconds it took.

        Fails early, with the log tail, when the process exits first.
        """
        assert self._proc is not None, "start() first"
        started = time.monotonic()
        deadline = started + timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise self._died(f"server exited with code {code} before /health answered")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2.0) as resp:
                    if resp.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            if time.monotonic() >= deadline:
                raise self._died(f"/health did not answer within {timeout:.0f} s")
            time.sleep(poll_interval)

    def terminate(self) -> None:
        """Ask the whole group to exit (SIGTERM), without waiting."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the whole group, then SIGKILL whatever is left after ``grace`` s."""
        proc = self._proc
        if proc is None:
            return
        pgid = proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            kill_deadline = time.monotonic() + 10.0
            while _group_alive(pgid) and time.monotonic() < kill_deadline:
                time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)
        scrub_file(self.log_path, self._secrets)  # what the server printed of its secrets
