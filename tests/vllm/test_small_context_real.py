"""A generated workload scaled to the tiny model's 4,096-token context, replayed on the
real vLLM CPU server (issue 17's check for ``traces generate --max-context``).

The server is the referee: it rejects any request whose prompt plus output exceeds
its ``max_model_len`` (HTTP 400), so a workload that did not fit shows up as error
records. Users start mid-session (warmup ``midway``), where the contexts are largest.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import RequestRecord
from replay.cli import main
from replay.servers.launch._launcher import LaunchedArm
from tests.support.vllm import MAX_MODEL_LEN
from traces import iter_sessions, read_header

pytestmark = pytest.mark.vllm


def test_generated_4096_workload_replays_without_context_errors(
    vllm_server: LaunchedArm, tmp_path: Path,
) -> None:
    wl = tmp_path / "w4k.jsonl"
    assert main(["traces", "generate", "--sessions", "20", "--seed", "0", "--max-context",
                 str(MAX_MODEL_LEN), "-o", str(wl)]) == 0
    header = read_header(wl)
    assert header.max_context == MAX_MODEL_LEN
    largest = max(r.prompt_tokens + r.output_tokens for s in iter_sessions(wl)
                  for r in s.requests)
    assert MAX_MODEL_LEN // 2 < largest <= MAX_MODEL_LEN  # scaled to fit, not shrunk away

    out = tmp_path / "run"
    code = main(["run", "--target", vllm_server.url, "--workload", str(wl), "--users", "4",
                 "--warmup", "3", "--duration", "15", "--drain", "20",
                 "--think-time-cap", "0.5", "--out", str(out), "--quiet",
                 "--metrics-interval", "0"])
    assert code in (0, 3)  # 3: a busy shared CPU may stamp the client's health invalid
    recs = [RequestRecord.model_validate(orjson.loads(line))
            for line in (out / "requests.jsonl").read_bytes().splitlines()]
    errors = [r for r in recs if r.status in ("error", "timeout")]
    assert not errors, [(r.http_status, r.error_kind, r.error_message) for r in errors[:3]]
    ok = [r for r in recs if r.status == "ok"]
    assert len(ok) >= 8
    assert all(r.prompt_tokens_server == r.prompt_tokens for r in ok)
    assert all(r.output_tokens == r.output_tokens_asked for r in ok)
    assert max(r.prompt_tokens + r.output_tokens_asked for r in ok) > MAX_MODEL_LEN // 4
