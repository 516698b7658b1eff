"""The live view in a real terminal (a pseudo-terminal) through a drain that runs out:
it counts the drain down, then says it is stopping, and the run ends (issue 26: it sat
on "drain remaining 0s" with no message).

A pty rather than tmux: the test owns the terminal end to end (no server daemon to
fork, which some CI sandboxes refuse), and reads every byte the view wrote.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from replay.servers.sim import SimServerProcess

pytestmark = pytest.mark.cli

REPO = Path(__file__).resolve().parents[3]
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\r")


def _run_in_terminal(cmd: list[str], deadline_s: float) -> tuple[int | None, str]:
    """Run ``cmd`` with a 160x30 pty as its terminal; return its exit code and screen text."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "30"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(cmd, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        code = proc.wait(timeout=30)
        os.close(master)
    return code, _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def test_live_view_says_it_is_stopping_after_the_drain(tmp_path: Path) -> None:
    workload = tmp_path / "w.jsonl"
    subprocess.run([sys.executable, "-m", "replay.cli", "traces", "generate", "--sessions", "4",
                    "--seed", "0", "--max-context", "4096", "-o", str(workload)], check=True,
                   cwd=REPO, capture_output=True)
    out = tmp_path / "run"
    # 200x slower than the small profile: 4 s steps, so every request outlives the drain
    with SimServerProcess("small", time_scale=0.005) as sim:
        cmd = [sys.executable, "-m", "replay.cli", "run", "--target", sim.url,
               "--workload", str(workload), "--users", "2", "--duration", "2", "--warmup", "0",
               "--drain", "4", "--think-time-cap", "0.1", "--out", str(out)]
        code, screen = _run_in_terminal(cmd, deadline_s=120)
    assert re.search(r"drain\s+elapsed \d+s\s+remaining [1-9]", screen), screen[-2000:]
    assert "stopping: drain over" in screen, screen[-2000:]
    assert code in (0, 3), (code, screen[-2000:])
    records = (out / "requests.jsonl").read_text().splitlines()
    assert any('"incomplete"' in line for line in records)
