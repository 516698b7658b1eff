"""The live view in a real terminal (tmux) through a drain that runs out: it counts
the drain down, then says it is stopping, and the run ends (issue 26: it sat on
"drain remaining 0s" with no message)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from replay.sim import SimServerProcess

REPO = Path(__file__).resolve().parents[2]


def _pane(session: str) -> str:
    out = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                         text=True, check=False)
    return out.stdout


def test_live_view_says_it_is_stopping_after_the_drain(tmp_path: Path) -> None:
    assert shutil.which("tmux"), "tmux is missing: scripts/setup_test_env.sh installs it"
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
        session = f"ar-{uuid.uuid4().hex[:8]}"
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "30",
                        f"cd {shlex.quote(str(REPO))} && {shlex.join(cmd)}; "
                        "echo EXIT=$?; sleep 30"], check=True)
        seen: list[str] = []
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                screen = _pane(session)
                seen.append(screen)
                if "EXIT=" in screen:
                    break
                time.sleep(0.2)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    frames = "\n".join(seen)
    assert re.search(r"drain\s+elapsed \d+s\s+remaining [1-9]", frames), frames[-2000:]
    assert "stopping: drain over" in frames, frames[-2000:]
    assert "EXIT=0" in seen[-1] or "EXIT=3" in seen[-1], seen[-1]
    records = (out / "requests.jsonl").read_text().splitlines()
    assert any('"incomplete"' in line for line in records)
