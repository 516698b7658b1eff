"""bench/peers.py end to end, briefly: stream mode for the bare loop, agentreplay and
``vllm bench serve`` (the vLLM CPU venv, so tier ``vllm``: CI installs it), and the
lines a reader takes figures from, parsed. No speed is asserted, nor that agentreplay's
run is stamped valid (on a starved machine it is not: exit 3, said on its line); the
figures are checked against each other (the printed ratio and busy shares against the
results file) and against the stub's truth (users, tokens per answer, step)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.vllm import vllm_python

pytestmark = pytest.mark.vllm

REPO = Path(__file__).resolve().parents[2]
USERS = 8
RUN_LINE = re.compile(
    r"^(?P<tool>\S+)\s+stream\s+steady\s+(?P<rate>[\d,]+) tok/CPU-s\s+[\d,]+ tok/s "
    r"\(client\s+(?P<client>\d+)%, server\s+(?P<server>\d+)% busy\).* "
    r"tpot (?P<tpot>[\d.]+) ms \(server (?P<step>[\d.]+) ms\) mean running (?P<running>[\d.]+)"
    r"(  run stamped (?P<stamp>invalid.*))?$")
RATIO_LINE = re.compile(
    r"^ratio_vs_best_peer_stream=(?P<ratio>[\d.]+) best_peer=vllm "
    r"stub_busy=(?P<stub_ours>\d+)%/(?P<stub_peer>\d+)% "
    r"client_busy=(?P<cl_ours>\d+)%/(?P<cl_peer>\d+)%(?P<flags>( [a-z-]+)*)$")


def test_stream_mode_runs_and_prints_parseable_lines(tmp_path):
    venv = vllm_python().parent.parent
    work = tmp_path / "runs"
    env = {**os.environ, "AGENTREPLAY_VLLM_VENV": str(venv), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "peers.py"), "--tools", "bare,agentreplay,vllm",
         "--modes", "stream", "--stream-users", str(USERS), "--duration", "2",
         "--work", str(work)],
        capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()

    runs = {m["tool"]: m for m in map(RUN_LINE.match, lines) if m}
    assert set(runs) == {"bare", "agentreplay", "vllm"}, done.stdout[-3000:]
    saved = {r["tool"]: r for r in json.loads((work / "results.json").read_text())}
    for tool, m in runs.items():
        r = saved[tool]
        assert r["ok"] and r["mode"] == "stream" and r["users"] == USERS
        # the stub never ran more streams than the users asked for, and stepped
        assert 0 < float(m["running"]) <= USERS and r["max_running"] <= USERS
        assert float(m["step"]) == pytest.approx(r["true_tpot_ms"], abs=5e-4)
        assert float(m["tpot"]) == pytest.approx(r["tpot_ms"], abs=5e-4)
        assert abs(int(m["rate"].replace(",", "")) - r["steady_tokens_per_cpu_s"]) <= 1
        assert abs(int(m["server"]) - 100 * r["server_busy"]) <= 1

    # agentreplay's run finished (exit 0 or 3) whatever the machine's speed; a starved
    # client's run is stamped invalid (exit 3, schedule lag) and the line says so:
    # the stamp is asserted to be the run's own, not to be valid
    manifest = json.loads((work / "agentreplay-stream" / "run" / "run.json").read_text())
    verdict = manifest["validity"]["verdict"]
    stamp = runs["agentreplay"]["stamp"]
    assert saved["agentreplay"]["validity"].split()[0] == verdict
    assert (stamp is not None) == (verdict == "invalid"), (stamp, verdict)
    if stamp is not None:
        assert stamp == saved["agentreplay"]["validity"]

    # every answer agentreplay recorded carried the stub's 256 tokens
    records = [json.loads(x) for x in
               (work / "agentreplay-stream" / "run" / "requests.jsonl").read_text().splitlines()]
    ok = [r for r in records if r["status"] == "ok"]
    assert ok and {r["output_tokens"] for r in ok} == {256}

    # the ratio line is the last line and agrees with the per-run figures
    ratio = RATIO_LINE.match(lines[-1])
    assert ratio is not None, lines[-1]
    ours, peer = saved["agentreplay"], saved["vllm"]
    want = ours["steady_tokens_per_cpu_s"] / peer["steady_tokens_per_cpu_s"]
    assert float(ratio["ratio"]) == pytest.approx(want, abs=0.006)
    # printed rounded to whole percent: within one of the saved shares
    assert abs(int(ratio["stub_ours"]) - 100 * ours["server_busy"]) <= 1
    assert abs(int(ratio["stub_peer"]) - 100 * peer["server_busy"]) <= 1
    assert abs(int(ratio["cl_peer"]) - 100 * peer["client_busy"]) <= 1
    flags = ratio["flags"].split()
    assert ("server-bound" in flags) == (max(int(ratio["stub_ours"]), int(ratio["stub_peer"])) > 60)
    assert ("peer-underloaded" in flags) == (peer["client_busy"] < 0.5)
