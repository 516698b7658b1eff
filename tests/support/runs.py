"""Reading run directories and truth logs back, checking their counts; the CLI in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson

from analysis import (
    RequestRecord,
    RunManifest,
    RunSummary,
    read_run,
)
from analysis.judge import analyse_run
from analysis.read import steady_window
from replay.load import RunConfig
from replay.servers.sim import TruthRecord


def is_number(cell: str) -> bool:
    """A CSV cell that is a plain number (a leading sign is then not a formula)."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


REPO = Path(__file__).resolve().parents[2]


def records(run: Path) -> list[RequestRecord]:
    with open(run / "requests.jsonl", "rb") as fh:
        return [RequestRecord.model_validate(orjson.loads(line)) for line in fh if line.strip()]


def manifest(run: Path) -> RunManifest:
    return RunManifest.model_validate_json((run / "run.json").read_bytes())


def truth_file(path: Path) -> list[TruthRecord]:
    if not path.exists():
        return []
    with open(path, "rb") as fh:
        return [TruthRecord.model_validate(orjson.loads(line)) for line in fh if line.strip()]


def cfg(url: str, **kw: object) -> RunConfig:
    base: dict[str, object] = dict(target=url, users=4, duration_s=1.5, warmup_s=0.2,
                                   drain_s=2.0, metrics_interval_s=0.5, warmup_start="start")
    base.update(kw)
    return RunConfig(**base)  # type: ignore[arg-type]


def check_counts(run: Path, truth: list[TruthRecord]) -> RunSummary:
    """The accounting every faulty run must satisfy; returns the analysis summary.

    Client side: each request id recorded once; requests in the steady window add up
    (ok + every error kind + timeouts + cancelled) and the summary's counts equal a
    count made here from the raw records. Server side: every request the server saw
    is recorded by the client, and a request the server finished ok is ok on the
    client unless the client cancelled it or timed it out first. Latency samples
    come from ok requests only.
    """
    recs = records(run)
    by_id = {r.id: r for r in recs}
    assert len(by_id) == len(recs), "a request id was recorded twice"
    for t in truth:
        r = by_id.get(t.request_id)
        assert r is not None, f"server saw {t.request_id} but the client has no record"
        if t.status == "ok" and r.status not in ("cancelled", "incomplete", "timeout"):
            assert r.status == "ok", (t, r)
        if r.status == "ok":
            assert t.status == "ok", (t, r)
    data = read_run(run)
    summary = analyse_run(data)
    window = steady_window(data)
    assert window is not None
    start, end = window
    win = [r for r in recs if start <= r.sent_s < end]
    c = summary.counts
    assert c.total_records == len(recs)
    assert c.in_window == len(win)
    ok = sum(r.status == "ok" for r in win)
    assert c.ok == ok
    assert c.ok + c.error + c.timeout + c.incomplete + c.cancelled == c.in_window
    want = Counter(r.error_kind or r.status for r in win if r.status != "ok")
    assert c.by_error_kind == dict(want)
    assert sum(c.by_error_kind.values()) == c.in_window - c.ok
    assert c.error == sum(r.status == "error" for r in win)
    assert c.timeout == sum(r.status == "timeout" for r in win)
    if c.in_window:
        assert c.error_rate is not None and abs(c.error_rate - c.error / c.in_window) < 1e-12
    # errors never enter latency statistics
    assert summary.ttft.count == summary.e2e.count == ok
    ok_e2e = [r.last_token_s - r.sent_s for r in win if r.status == "ok"
              and r.last_token_s is not None]
    if ok_e2e and summary.e2e.p99 is not None:
        assert summary.e2e.p99 <= max(ok_e2e) + 1e-9
    return summary


def cli(*args: str, env: dict[str, str] | None = None,
        timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``agentreplay ARGS`` in a child process, output captured."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1")
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "replay.cli", *args], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def server_timed(run: Path, truth_logs: list[str], dest: Path) -> Path:
    """A copy of ``run`` whose token times are the simulators' own delivery times (their
    truth logs), not the moments the client read them.

    What a client that never ran late reading its streams would have measured: a
    starved client reads tokens late and unevenly, which stretches the slow tail of
    its TPOT (CI at load 13: a 4-user level 20% under the twin with the simulators on
    time). Truth times are absolute monotonic ns, the run's are seconds since its
    ``t0_monotonic_ns``: on one machine the two compare directly."""
    import shutil

    shutil.copytree(run, dest)
    t0 = orjson.loads((run / "run.json").read_bytes())["clock"]["t0_monotonic_ns"]
    emits = {}
    for log in truth_logs:
        for line in Path(log).read_bytes().splitlines():
            if line.strip():
                t = orjson.loads(line)
                if t["emit_ns"]:
                    emits[t["request_id"]] = (t["emit_ns"], t["emit_tokens"])
    out = []
    for line in (run / "requests.jsonl").read_bytes().splitlines():
        r = orjson.loads(line)
        if r["id"] in emits and r["first_token_s"] is not None:
            times = [(ns - t0) / 1e9 for ns in emits[r["id"]][0]]
            r.update(first_token_s=times[0], last_token_s=times[-1], chunk_times_s=times,
                     chunk_tokens=emits[r["id"]][1],
                     end_s=max(r["end_s"] or times[-1], times[-1]))
        out.append(orjson.dumps(r))
    (dest / "requests.jsonl").write_bytes(b"\n".join(out) + b"\n")
    return dest
