"""bench/_stub_server.py: vLLM chunk shapes, write modes and the shared step clock."""

from __future__ import annotations

import asyncio

import orjson
import pytest


class FakeTransport:
    """Records every write, so a test sees exactly what went out and in how many writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> None:
        return None


def _connect(stub, server):
    proto = stub.StubProtocol(server)
    tr = FakeTransport()
    proto.connection_made(tr)
    return proto, tr


def _request(path: str, body: dict) -> bytes:
    raw = orjson.dumps(body)
    return b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (
        path.encode(), len(raw), raw)


def _dechunk(raw: bytes) -> bytes:
    """HTTP head off, chunked body decoded."""
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head
    out = b""
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out += body[:size]
        assert body[size : size + 2] == b"\r\n"
        body = body[size + 2 :]


def _events(payload: bytes) -> list[bytes]:
    return [e[len(b"data: "):] for e in payload.split(b"\n\n") if e]


def test_batch_mode_is_one_write_with_vllm_shapes(stub):
    server = stub.StubServer(step_ms=0, write_mode="batch")
    proto, tr = _connect(stub, server)
    # split across two reads, like a socket may deliver it
    req = _request("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 5, "stream": True,
                                       "stream_options": {"include_usage": True}})
    proto.data_received(req[:10])
    assert tr.writes == []
    proto.data_received(req[10:])
    assert len(tr.writes) == 1
    events = _events(_dechunk(tr.writes[0]))
    assert events[-1] == b"[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    tokens = [c for c in chunks if c["choices"]]
    assert len(tokens) == 5
    assert all(c["object"] == "text_completion" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 4 + ["length"]
    assert "".join(c["choices"][0]["text"] for c in tokens) == stub.TOKEN_TEXT * 5
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5}
    stats = orjson.loads(server.stats.as_json(0, "batch"))
    assert stats["tokens_streamed"] == 5 and stats["requests_finished"] == 1


def test_token_mode_one_event_per_write_and_shared_steps(stub):
    async def scenario():
        server = stub.StubServer(step_ms=0, write_mode="token")
        conns = [_connect(stub, server) for _ in range(3)]
        for i, (proto, _) in enumerate(conns):
            proto.data_received(_request("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "a b"}],
                "max_tokens": 4 + i, "stream": True}))
        for _ in range(200):
            if server.stats.requests_finished == 3:
                break
            await asyncio.sleep(0)
        return server, conns

    server, conns = asyncio.run(scenario())
    for i, (_, tr) in enumerate(conns):
        n = 4 + i
        # head+role chunk, one write per token, then the usage/[DONE] tail
        assert len(tr.writes) == 1 + n + 1
        body = _dechunk(b"".join(tr.writes))
        events = _events(body)
        assert events[-1] == b"[DONE]"
        deltas = [orjson.loads(e)["choices"][0]["delta"] for e in events[:-1]]
        assert deltas[0] == {"role": "assistant", "content": ""}
        assert [d["content"] for d in deltas[1:]] == [stub.TOKEN_TEXT] * n
        for w in tr.writes[1 : n]:
            assert w.count(b"data: ") == 1
    st = server.stats
    # all streams share one step clock: the longest stream sets the step count
    assert st.steps == 6
    assert st.tokens_streamed == 4 + 5 + 6
    assert st.running == 0 and st.max_running == 3
    assert orjson.loads(st.as_json(0, "token"))["mean_running_per_step"] == pytest.approx(15 / 6)


@pytest.mark.parametrize("path,expect", [("/v1/models", b'"id":"stub"'), ("/health", b""),
                                         ("/nope", b"not found")])
def test_plain_endpoints(stub, path, expect):
    server = stub.StubServer(step_ms=0, write_mode="batch")
    proto, tr = _connect(stub, server)
    proto.data_received(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path.encode())
    assert len(tr.writes) == 1
    assert expect in tr.writes[0]
    assert tr.writes[0].startswith(b"HTTP/1.1 404" if path == "/nope" else b"HTTP/1.1 200")


def test_non_streaming_completion(stub):
    server = stub.StubServer(step_ms=10, write_mode="token")
    proto, tr = _connect(stub, server)
    proto.data_received(_request("/v1/completions", {"prompt": "x y", "max_tokens": 3}))
    body = orjson.loads(tr.writes[0].partition(b"\r\n\r\n")[2])
    assert body["choices"][0]["text"] == stub.TOKEN_TEXT * 3
    assert body["usage"]["completion_tokens"] == 3
