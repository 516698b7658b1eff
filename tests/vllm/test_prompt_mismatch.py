"""Prompt length mismatches are counted like output mismatches (no server here).

A server whose ``usage.prompt_tokens`` differs from what the workload meant (a chat
template or tokenizer the client did not account for) shows up in the counts.
"""

from __future__ import annotations

from pathlib import Path

from analysis import measure, read_run, summarize
from tests.analysis.builders import make_run, rec


def test_prompt_mismatches_of_ok_requests_are_counted(tmp_path: Path) -> None:
    records = [
        rec(0, prompt_tokens=100, prompt_tokens_server=100),
        rec(1, prompt_tokens=100, prompt_tokens_server=297),  # re-tokenized: counted
        rec(2, prompt_tokens=100),  # server gave no usage: not judged
        rec(3, prompt_tokens=100, prompt_tokens_server=99, status="error",
            error_kind="http_500"),  # failed: not an ok request
    ]
    run = make_run(tmp_path / "run", records)
    summary = summarize(measure(read_run(run)), bootstrap=False, tiers=())
    assert summary.counts.prompt_mismatch == 1
    assert summary.counts.output_mismatch == 0
