"""``agentreplay demo`` end to end, checked against the simulator profile's own figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from replay.ab import DEMO_PROFILE
from replay.servers.sim import load_profile
from tests.support.servers import exit_for

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "replay.cli", "demo", "--out", str(out),
                           "--quick"], cwd=ROOT, capture_output=True, timeout=180)
    assert done.returncode == exit_for(out), done.stderr.decode(errors="replace")
    printed = done.stdout.decode()
    report = out / "report.html"
    assert report.exists()
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["verdict"] and summary["verdict"] in " ".join(printed.split())
    html = report.read_text()
    assert summary["verdict"].split(" (")[0] in html
    assert "same GPU count" in html
    prof = load_profile(DEMO_PROFILE).backends
    expected = prof["auto"].step_s_batch1 / prof["latency_specialized"].step_s_batch1
    level = next(lv for lv in summary["levels"] if lv["load"] == {"kind": "users", "value": 1})
    ratio = next(r for r in level["ratios"]["latency_specialized"]
                 if r["metric"] == "interactivity.p90")["ratio"]
    if summary["validity"]["verdict"] == "invalid":
        # a starved simulator (a busy machine) must be stamped, not reported as a speed
        assert done.returncode == 3 and "INVALID" in printed
    else:
        assert ratio == pytest.approx(expected, rel=0.10)
