"""The captured vLLM fixtures say what NOTES.md says (others build on these shapes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"


def _events(name: str) -> list[str]:
    raw = (FIXTURES / name).read_bytes().decode()
    assert raw.endswith("data: [DONE]\n\n")
    blocks = [b for b in raw.split("\n\n") if b]
    assert all(b.startswith("data: ") for b in blocks)
    return [b[len("data: "):] for b in blocks]


@pytest.mark.parametrize(
    ("name", "prompt_tokens"),
    [
        ("completions_stream.txt", 30),
        ("completions_stream_token_ids.txt", 30),
        ("chat_stream.txt", 38),
    ],
)
def test_streams_end_with_usage_chunk_then_done(name: str, prompt_tokens: int) -> None:
    events = _events(name)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    final = chunks[-1]
    assert final["choices"] == []
    assert final["usage"]["prompt_tokens"] == prompt_tokens
    assert final["usage"]["completion_tokens"] == 5
    content = [c for c in chunks[:-1] if c["usage"]["completion_tokens"] > 0]
    assert [c["usage"]["completion_tokens"] for c in content] == [1, 2, 3, 4, 5]
    assert content[-1]["choices"][0]["finish_reason"] == "length"


def test_token_ids_stream_echoes_prompt_once() -> None:
    chunks = [json.loads(e) for e in _events("completions_stream_token_ids.txt")[:-1]]
    assert chunks[0]["choices"][0]["prompt_token_ids"] == list(range(10, 40))
    assert all(c["choices"][0]["prompt_token_ids"] is None for c in chunks[1:-1])
    assert all(len(c["choices"][0]["token_ids"]) == 1 for c in chunks[:-1])


def test_request_id_header_sets_the_body_id() -> None:
    ids = {json.loads(e)["id"] for e in _events("completions_stream.txt")[:-1]}
    assert ids == {"cmpl-fixture-req-0001"}


def test_oov_error_is_an_sse_event() -> None:
    events = _events("error_oov_stream.txt")
    assert len(events) == 2
    error = json.loads(events[0])["error"]
    assert error["code"] == 400
    assert "out of vocabulary" in error["message"]


def test_too_long_is_http_400() -> None:
    head, body = (FIXTURES / "error_too_long.txt").read_text().split("\n\n", 1)
    assert head.splitlines()[0] == "HTTP 400"
    assert json.loads(body)["error"]["param"] == "input_tokens"


def test_server_info_and_metrics_facts() -> None:
    config = json.loads((FIXTURES / "server_info.json").read_text())["vllm_config"]
    assert config["additional_config"] == {"decode_backend": "auto"}
    assert config["cache_config"]["block_size"] == 128
    metrics = (FIXTURES / "metrics.txt").read_text()
    values = {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("vllm:") and 'model_name="tiny"}' in line
    }
    # queries count prompt tokens; hits count whole 128-token blocks' tokens
    assert values["vllm:prefix_cache_queries_total"] == values["vllm:prompt_tokens_total"]
    assert values["vllm:prefix_cache_hits_total"] % 128 == 0
    assert values["vllm:prefix_cache_hits_total"] == values["vllm:prompt_tokens_cached_total"]
