"""One ``agentreplay demo --quick`` run, as a user starts it, for the tests that read it.

The quick demo takes about a minute on the 2-core machine; the end-to-end demo test
(tests/replay/ab/test_demo.py) and the browser's first-screen check of its report
(tests/analysis/report/test_browser.py) read the same run (the ``quick_demo`` session
fixture of tests/conftest.py) instead of running it twice.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_S = 180


@dataclass(frozen=True)
class DemoRun:
    """What the command left: its output folder, exit code, stdout and stderr."""

    out: Path
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def report(self) -> Path:
        return self.out / "report.html"


def run_quick_demo(out: Path) -> DemoRun:
    """``python -m replay.cli demo --out OUT --quick`` from the repository root."""
    done = subprocess.run([sys.executable, "-m", "replay.cli", "demo", "--out", str(out),
                           "--quick"], cwd=ROOT, capture_output=True, timeout=DEMO_TIMEOUT_S)
    return DemoRun(out, done.returncode, done.stdout, done.stderr)
