"""The HTTP surface: vLLM's shapes, errors, /metrics against the truth log."""

from __future__ import annotations

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from replay.servers.sim import SimConfig, SimServer, SimTokenizer
from tests.replay.servers.sim._util import body, run, stream


def _sim(**kw) -> SimServer:
    kw.setdefault("time_scale", 20.0)
    return SimServer(SimConfig(**kw))


@pytest.mark.sim
def test_completion_stream_shape_and_usage() -> None:
    async def go():
        async with _sim() as srv, aiohttp.ClientSession() as s:
            got = await stream(s, srv.url + "/v1/completions",
                               body([20, 21, 22, 23], 5,
                                    stream_options={"include_usage": True,
                                                    "continuous_usage_stats": True}),
                               headers={"X-Request-Id": "req-1"})
            return got, srv.truth
    got, truth = run(go())
    assert got.status == 200 and got.done
    assert got.headers["X-Simulated"] == "agentreplay"
    assert got.headers["Content-Type"].startswith("text/event-stream")
    events = got.json_events()
    content, final = events[:-1], events[-1]
    assert all(e["id"] == "cmpl-req-1" and e["object"] == "text_completion" for e in events)
    assert content[0]["choices"][0]["prompt_token_ids"] == [20, 21, 22, 23]
    assert [e["usage"]["completion_tokens"] for e in content] == [1, 2, 3, 4, 5]
    assert [e["choices"][0]["finish_reason"] for e in content] == [None] * 4 + ["length"]
    ids = got.token_ids()
    tk = SimTokenizer(32000)
    assert "".join(e["choices"][0]["text"] for e in content) == tk.decode(ids)
    assert tk.encode(tk.decode(ids)) == ids
    assert final["choices"] == []
    assert final["usage"] == {"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9,
                              "prompt_tokens_details": {"cached_tokens": 0}}
    (rec,) = truth
    assert rec.request_id == "req-1" and rec.status == "ok" and rec.output_tokens == 5
    assert rec.arrival_ns <= rec.queued_ns <= rec.scheduled_ns <= rec.first_token_ns
    assert rec.first_token_ns == rec.emit_ns[0] and rec.finish_ns >= rec.emit_ns[-1]


@pytest.mark.sim
def test_chat_stream_nonstream_and_usage_null() -> None:
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi t40"}]

    async def go():
        async with _sim() as srv, aiohttp.ClientSession() as s:
            st = await stream(s, srv.url + "/v1/chat/completions",
                              {"messages": msgs, "max_tokens": 3, "stream": True})
            async with s.post(srv.url + "/v1/chat/completions",
                              json={"messages": msgs, "max_completion_tokens": 4}) as r:
                whole = await r.json()
            async with s.post(srv.url + "/tokenize", json={"messages": msgs}) as r:
                tok = await r.json()
            return st, whole, tok
    st, whole, tok = run(go())
    events = st.json_events()
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" and e["usage"] is None for e in events)
    assert len(events) == 4  # role chunk + 3 tokens, no usage chunk without include_usage
    assert whole["object"] == "chat.completion"
    assert whole["choices"][0]["message"]["content"].count(" t") == 4
    assert whole["usage"]["completion_tokens"] == 4
    expected = SimTokenizer(32000).apply_chat_template(msgs)
    assert whole["usage"]["prompt_tokens"] == tok["count"] == len(expected)
    assert tok["tokens"] == expected and 40 in expected


def test_generated_text_tokenizes_back_to_its_ids() -> None:
    tk = SimTokenizer(32000)
    ids = [16, 17, 41, 42, 999, 31999]
    text = tk.decode(ids)
    assert tk.encode(text) == ids
    # one word of letters per token: what a chat client looks for to build exact prompts
    assert all(w.isalpha() for w in text.split())
    assert tk.encode("hello, world") == tk.encode("hello ,world")
    assert len(tk.encode("hello, world")) == 3
    assert tk.encode("a\nb") == [tk.encode("a")[0], 8, tk.encode("b")[0]]  # newline: 1 token
    assert tk.encode("t40 t999") == [40, 999]  # digits read as ids too


@pytest.mark.sim
def test_detokenize_is_the_inverse_of_tokenize() -> None:
    async def go():
        async with _sim() as srv, aiohttp.ClientSession() as s:
            async with s.post(srv.url + "/detokenize",
                              json={"model": "sim/small", "tokens": [20, 8, 300, 8]}) as r:
                text = (await r.json())["prompt"]
            async with s.post(srv.url + "/tokenize",
                              json={"prompt": text, "add_special_tokens": False}) as r:
                back = (await r.json())["tokens"]
            async with s.post(srv.url + "/detokenize", json={"tokens": [32000]}) as r:
                bad = r.status, await r.json()
            return text, back, bad
    text, back, bad = run(go())
    assert text.split("\n") == [" tt", " tkn", ""] and back == [20, 8, 300, 8]
    assert bad[0] == 400 and "out of vocabulary" in bad[1]["error"]["message"]


@pytest.mark.sim
def test_errors_use_vllm_shapes() -> None:
    async def go():
        out = {}
        async with _sim() as srv, aiohttp.ClientSession() as s:
            url = srv.url + "/v1/completions"
            for name, b in {
                "too_long": {"prompt": [20] * 8192, "max_tokens": 1},
                "max_tokens": {"prompt": [20] * 100, "max_tokens": 8100},
                "oov": {"prompt": [20, 32000], "max_tokens": 2},
                "model": {"prompt": [20], "model": "other", "max_tokens": 2},
                "bad_json": None,
                "stream_options": {"prompt": [20], "max_tokens": 2,
                                   "stream_options": {"include_usage": True}},
            }.items():
                kw = {"data": b"{nope"} if b is None else {"json": b}
                async with s.post(url, **kw) as r:
                    out[name] = (r.status, await r.json())
            out["oov_stream"] = await stream(s, url, body([20, 40000], 2))
        return out
    out = run(go())
    for name, code in (("too_long", 400), ("max_tokens", 400), ("oov", 400), ("model", 404),
                       ("bad_json", 400), ("stream_options", 400)):
        status, payload = out[name]
        assert status == code, name
        assert set(payload["error"]) == {"message", "type", "param", "code"}
        assert payload["error"]["code"] == code
    assert "maximum context length is 8192" in out["too_long"][1]["error"]["message"]
    assert out["oov"][1]["error"]["message"] == "Token id 32000 is out of vocabulary"
    st = out["oov_stream"]
    assert st.status == 200 and st.done
    (err,) = st.json_events()
    assert err["error"]["code"] == 400
    assert err["error"]["message"] == "Token id 40000 is out of vocabulary"


@pytest.mark.sim
def test_info_endpoints_and_backends_differ_only_in_decode_backend() -> None:
    async def go(backend):
        async with _sim(backend=backend) as srv, aiohttp.ClientSession() as s:
            async with s.get(srv.url + "/server_info?config_format=json") as r:
                info = await r.json()
                assert r.headers["X-Simulated"] == "agentreplay"
            async with s.get(srv.url + "/v1/models") as r:
                models = await r.json()
            async with s.get(srv.url + "/version") as r:
                version = await r.json()
            async with s.get(srv.url + "/health") as r:
                health = r.status
            return info, models, version, health
    (a, models, version, health), (b, *_rest) = run(go("auto")), run(go("latency_specialized"))
    assert health == 200 and "version" in version
    assert models["data"][0]["max_model_len"] == 8192 and models["data"][0]["id"] == "sim/small"
    assert a["simulated"] is True and a["sim_profile"] == "small"
    cfg = a["vllm_config"]
    assert cfg["additional_config"] == {"decode_backend": "auto"}
    assert cfg["parallel_config"]["tensor_parallel_size"] == 1
    assert cfg["cache_config"]["block_size"] == 16 and cfg["speculative_config"] is None
    assert b["vllm_config"]["additional_config"] == {"decode_backend": "latency_specialized"}
    b["vllm_config"]["additional_config"] = cfg["additional_config"]
    assert a == b


@pytest.mark.sim
def test_metrics_counters_equal_truth_totals() -> None:
    shared = list(range(1000, 1100))

    async def go():
        async with _sim(profile="kimi-k3-gb300-tp16-dspark", time_scale=50.0) as srv, \
                aiohttp.ClientSession() as s:
            url = srv.url + "/v1/completions"
            for i in range(3):
                await stream(s, url, body(shared + [2000 + i] * (i + 1), 20 + i))
            async with s.post(url, json={"prompt": shared + [7] * 70, "max_tokens": 9}) as r:
                assert r.status == 200
            async with s.get(srv.url + "/metrics") as r:
                text = await r.text()
            return text, list(srv.truth), list(srv.steps)
    text, truth, steps = run(go())
    samples = {}
    kinds = {}
    for fam in text_string_to_metric_families(text):
        kinds[fam.name] = fam.type
        for smp in fam.samples:
            assert smp.name.startswith(("vllm:", "vllm_sim:"))
            if smp.name.endswith(("_total", "_count")) or fam.type == "gauge":
                assert smp.labels == {"engine": "0", "model_name": "moonshotai/Kimi-K3"}
                samples[smp.name] = smp.value
    assert kinds["vllm:time_to_first_token_seconds"] == "histogram"
    assert kinds["vllm:prefix_cache_queries"] == "counter"
    total = lambda f: sum(getattr(t, f) for t in truth)  # noqa: E731
    assert samples["vllm:prefix_cache_queries_total"] == total("queried_tokens")
    assert samples["vllm:prefix_cache_hits_total"] == total("hit_tokens") > 0
    assert samples["vllm:prompt_tokens_total"] == total("prompt_tokens")
    assert samples["vllm:prompt_tokens_cached_total"] == total("cached_tokens")
    assert samples["vllm:generation_tokens_total"] == total("output_tokens") == 20 + 21 + 22 + 9
    assert samples["vllm:num_preemptions_total"] == total("preemptions")
    assert samples["vllm:time_to_first_token_seconds_count"] == len(truth)
    assert samples["vllm:inter_token_latency_seconds_count"] == sum(
        len(t.emit_ns) - 1 for t in truth)
    assert samples["vllm:num_requests_running"] == 0
    drafts = samples["vllm:spec_decode_num_drafts_total"]
    assert drafts == sum(len(t.emit_ns) - 1 for t in truth)
    assert samples["vllm:spec_decode_num_draft_tokens_total"] == 7 * drafts
    assert 1 + samples["vllm:spec_decode_num_accepted_tokens_total"] / drafts == pytest.approx(6)
    # the simulator's own lateness counters are the sums of its step log
    assert samples["vllm_sim:engine_step_model_seconds_total"] == pytest.approx(
        sum(st.model_s for st in steps), rel=1e-12, abs=1e-12)
    assert samples["vllm_sim:engine_step_actual_seconds_total"] == pytest.approx(
        sum(st.actual_s for st in steps), rel=1e-12, abs=1e-12)
    assert sum(st.emitted_tokens for st in steps) == total("output_tokens")


@pytest.mark.sim
def test_prefix_cache_reported_in_usage_and_reset() -> None:
    prompt = list(range(3000, 3100))

    async def go():
        async with _sim() as srv, aiohttp.ClientSession() as s:
            url = srv.url + "/v1/completions"
            first = await stream(s, url, body(prompt, 2))
            second = await stream(s, url, body(prompt, 2))
            async with s.post(srv.url + "/reset_prefix_cache") as r:
                assert r.status == 200
            third = await stream(s, url, body(prompt, 2))
        return [x.json_events()[-1]["usage"]["prompt_tokens_details"]["cached_tokens"]
                for x in (first, second, third)]
    assert run(go()) == [0, 96, 0]


@pytest.mark.sim
def test_request_overhead_is_spent_before_the_engine() -> None:
    """``request_overhead_s`` (scaled like every modelled time) passes between arrival
    and the engine queue: the truth log shows it, and the first token comes after it."""
    from replay.servers.sim import load_profile

    profile = load_profile("small").model_copy(update={"request_overhead_s": 2.0})

    async def go():
        async with _sim(profile=profile) as srv, aiohttp.ClientSession() as s:
            got = await stream(s, srv.url + "/v1/completions", body([20, 21, 22], 3),
                               headers={"X-Request-Id": "o"})
            return got, srv.truth_for("o")
    got, (rec,) = run(go())
    assert got.done and rec.status == "ok" and rec.output_tokens == 3
    assert rec.queued_ns - rec.arrival_ns >= 2.0 / 20.0 * 1e9  # 0.1 s at time_scale 20
    assert rec.first_token_ns - rec.arrival_ns >= 2.0 / 20.0 * 1e9


@pytest.mark.sim
def test_busy_overhead_is_spent_by_a_request_that_finds_the_engine_busy() -> None:
    """``request_overhead_busy_s`` replaces the overhead for a request that arrives while
    the engine has work: the truth log shows the first (idle) request entering the
    engine after 2 model seconds, the second, sent while the first decodes, after 0.2."""
    import asyncio

    from replay.servers.sim import load_profile

    profile = load_profile("small").model_copy(update={"request_overhead_s": 2.0,
                                                       "request_overhead_busy_s": 0.2})

    async def go():
        async with _sim(profile=profile) as srv, aiohttp.ClientSession() as s:
            url = srv.url + "/v1/completions"
            first = asyncio.create_task(stream(s, url, body([20, 21, 22], 400),
                                               headers={"X-Request-Id": "idle"}))
            for _ in range(1000):  # until the first is in the engine (0.1 s)
                if srv.engine.has_work():
                    break
                await asyncio.sleep(0.005)
            await stream(s, url, body([30, 31, 32], 3), headers={"X-Request-Id": "busy"})
            await first
            return srv.truth_for("idle")[0], srv.truth_for("busy")[0]
    idle, busy = run(go())
    assert idle.queued_ns - idle.arrival_ns >= 2.0 / 20.0 * 1e9  # 0.1 s at time_scale 20
    assert 0.2 / 20.0 * 1e9 <= busy.queued_ns - busy.arrival_ns < 0.05 * 1e9


@pytest.mark.sim
def test_truth_file_is_jsonl_flushed_per_request(tmp_path) -> None:
    path = tmp_path / "truth.jsonl"

    async def go():
        async with _sim(truth_path=str(path)) as srv, aiohttp.ClientSession() as s:
            for i in range(3):
                await stream(s, srv.url + "/v1/completions", body([20 + i] * 3, 2),
                             headers={"X-Request-Id": f"id{i}"})
                assert len(path.read_bytes().splitlines()) == i + 1
            return [t.model_dump() for t in srv.truth]
    mem = run(go())
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [x["request_id"] for x in lines] == ["id0", "id1", "id2"]
    assert [x["output_tokens"] for x in lines] == [2, 2, 2]
    assert lines == mem


@pytest.mark.sim
def test_split_tokens_writes_one_token_per_event_and_instant_is_fast() -> None:
    async def go(split: bool):
        async with SimServer(SimConfig(profile="instant", split_tokens=split)) as srv, \
                aiohttp.ClientSession() as s:
            got = await stream(s, srv.url + "/v1/completions", body([20] * 3, 600),
                               headers={"X-Request-Id": "i"})
            return got, srv.truth_for("i")
    (merged, truth_m), (split, _t) = run(go(False)), run(go(True))
    assert len(merged.token_ids()) == len(split.token_ids()) == 600
    assert merged.token_ids() == split.token_ids()  # same id => same tokens
    content = [e for e in split.json_events() if e["choices"]]
    assert len(content) == 600 and all(len(e["choices"][0]["token_ids"]) == 1 for e in content)
    assert truth_m[0].emit_tokens == [1, 256, 256, 87]  # prefill token, then bursts
    assert len([e for e in merged.json_events() if e["choices"]]) <= 4


def test_sim_package_exports_are_sorted_and_complete() -> None:
    import importlib

    sim = importlib.import_module("replay.servers.sim")
    public = sorted(n for n in dir(sim) if not n.startswith("_")
                    and not isinstance(getattr(sim, n), type(importlib)))
    assert sim.__all__ == sorted(sim.__all__)
    assert set(sim.__all__) == set(public)


@pytest.mark.sim
def test_nonstream_disconnect_and_stream_error_faults() -> None:
    from replay.servers.sim import parse_faults

    async def go(spec: str):
        cfg = SimConfig(time_scale=50.0, faults=parse_faults(spec))
        async with SimServer(cfg) as srv, aiohttp.ClientSession() as s:
            try:
                async with s.post(srv.url + "/v1/completions",
                                  json={"prompt": [20], "max_tokens": 4}) as r:
                    return r.status, await r.read(), srv.truth[0].status
            except aiohttp.ClientError as exc:
                return type(exc), b"", srv.truth[0].status
    status, _b, truth_status = run(go("disconnect_rate=1"))
    assert status is aiohttp.ServerDisconnectedError and truth_status == "disconnected"
    status, raw, truth_status = run(go("stream_error_rate=1"))
    assert status == 500 and orjson.loads(raw)["error"]["code"] == 500
    assert truth_status == "error"
