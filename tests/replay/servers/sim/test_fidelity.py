"""The simulator against a real vLLM 0.32 server: same shapes, key for key.

Each test makes the request captured in ``tests/fixtures/vllm/`` (see NOTES.md
there) to an in-process ``small`` simulator and compares the structure of the
two answers: SSE framing, the JSON shape (keys and value types at every level)
of each chunk kind, error bodies, ``/v1/models``, the ``/server_info`` key tree
and the ``vllm:`` metric families. Values differ (model, timing, text); shapes
must not. The simulator runs without ``prompt_tokens_details`` (a default real
server's usage keys); the one test with it on checks that it adds just that key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from replay.servers.sim import SimConfig, SimServer
from tests.replay.servers.sim._util import run

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "vllm"
OPTS = {"include_usage": True, "continuous_usage_stats": True}
PROMPT = list(range(10, 40))
MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say something about t12 and t13."}]
# Keys the simulator adds on purpose (documented in replay/servers/sim/_config.py server_info).
SIM_ONLY_INFO = {"simulated", "sim_profile", "sim_profile_description", "sim_acceptance_length",
                 "time_scale", "slowdown",
                 "vllm_config.model_config.hf_config.vocab_size", "vllm_config.device_config.gpu"}
# Every /server_info path the client (replay/client/_probe.py) and analysis/_fairness.py read.
READ_PATHS = [
    "vllm_config.model_config.max_model_len", "vllm_config.model_config.served_model_name",
    "vllm_config.model_config.dtype", "vllm_config.parallel_config.tensor_parallel_size",
    "vllm_config.parallel_config.pipeline_parallel_size",
    "vllm_config.parallel_config.data_parallel_size", "vllm_config.cache_config.block_size",
    "vllm_config.cache_config.cache_dtype", "vllm_config.cache_config.enable_prefix_caching",
    "vllm_config.scheduler_config.max_num_seqs", "vllm_config.speculative_config",
    "vllm_config.additional_config.decode_backend",
]
# Every metric family the client and analysis read, with its Prometheus type.
READ_METRICS = {
    "vllm:prefix_cache_queries": "counter", "vllm:prefix_cache_hits": "counter",
    "vllm:prompt_tokens": "counter", "vllm:prompt_tokens_cached": "counter",
    "vllm:generation_tokens": "counter", "vllm:num_preemptions": "counter",
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge", "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
}


# -- shapes -------------------------------------------------------------------
def shape(v: Any) -> Any:
    """The structure of a JSON value: dict keys and value types, recursively."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return sorted({json.dumps(shape(x), sort_keys=True) for x in v})
    if v is None:
        return "null"
    return type(v).__name__


def leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Every dict path down to a non-dict value, mapped to that value."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            out.update(leaves(v, f"{prefix}.{k}" if prefix else k))
    else:
        out[prefix] = tree
    return out


def sse_events(raw: bytes) -> list[bytes]:
    """Split an SSE body, asserting vLLM's framing: ``data: X\\n\\n`` frames, nothing else."""
    assert raw.endswith(b"data: [DONE]\n\n")
    frames = raw[:-2].split(b"\n\n")
    assert all(f.startswith(b"data: ") and b"\n" not in f for f in frames)
    return [f[6:] for f in frames]


def real_stream(name: str) -> list[Any]:
    events = sse_events((FIX / name).read_bytes())
    assert events[-1] == b"[DONE]"
    return [orjson.loads(e) for e in events[:-1]]


def real_json(name: str) -> Any:
    return json.loads((FIX / name).read_text())


# -- the simulator's answers ----------------------------------------------------
async def _post(s: aiohttp.ClientSession, url: str, body: dict[str, Any],
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    async with s.post(url, json=body, headers=headers) as r:
        return r.status, dict(r.headers), await r.read()


async def _collect(details: bool) -> dict[str, Any]:
    cfg = SimConfig(profile="small", time_scale=20.0, split_tokens=True,
                    prompt_tokens_details=details)
    out: dict[str, Any] = {}
    async with SimServer(cfg) as srv, aiohttp.ClientSession() as s:
        u = srv.url
        out["limit"] = srv.profile.max_model_len
        out["block"] = srv.profile.block_size
        comp = {"prompt": PROMPT, "max_tokens": 5, "ignore_eos": True, "stream": True,
                "stream_options": OPTS}
        out["comp"] = await _post(s, u + "/v1/completions", comp,
                                  {"X-Request-Id": "fixture-req-0001"})
        out["comp_ids"] = await _post(s, u + "/v1/completions",
                                      {**comp, "return_token_ids": True})
        out["chat"] = await _post(s, u + "/v1/chat/completions",
                                  {"messages": MESSAGES, "max_tokens": 5, "ignore_eos": True,
                                   "stream": True, "stream_options": OPTS})
        if not details:
            out["oov"] = await _post(s, u + "/v1/completions",
                                     {**comp, "prompt": [10, 11, 999999]})
            out["too_long"] = await _post(s, u + "/v1/completions",
                                          {**comp, "prompt": [20] * (out["limit"] + 904)})
            for path in ("/v1/models", "/version", "/server_info?config_format=json"):
                async with s.get(u + path) as r:
                    out[path] = (r.status, await r.json())
            async with s.get(u + "/reset_prefix_cache") as r:
                out["reset_get"] = r.status
            async with s.post(u + "/reset_prefix_cache") as r:
                out["reset_post"] = (r.status, await r.json())
            long = {"prompt": list(range(100, 700)), "max_tokens": 2}
            out["metrics"] = []
            for _ in range(3):
                async with s.get(u + "/metrics") as r:
                    out["metrics"].append(await r.text())
                if len(out["metrics"]) < 3:
                    await _post(s, u + "/v1/completions", long)
    return out


@pytest.fixture(scope="module")
def sim(uses_sim: None) -> dict[str, Any]:
    return run(_collect(details=False))


def _sim_stream(got: tuple[int, dict[str, str], bytes]) -> list[Any]:
    status, headers, raw = got
    assert status == 200
    real_headers = real_json("completions_stream_headers.json")
    assert headers["Content-Type"] == real_headers["content-type"]
    events = sse_events(raw)
    return [orjson.loads(e) for e in events[:-1]]


def _kinds(events: list[Any], chat: bool) -> dict[str, Any]:
    """Chunks by kind: role (chat), first, middle, last content chunk, final usage chunk."""
    body = events[1:-1] if chat else events[:-1]
    kinds = {"first": body[0], "middle": body[1], "last": body[-1], "usage": events[-1]}
    if chat:
        kinds["role"] = events[0]
    return kinds


# -- streams --------------------------------------------------------------------
@pytest.mark.parametrize("real_name,key,chat", [
    ("completions_stream.txt", "comp", False),
    ("completions_stream_token_ids.txt", "comp_ids", False),
    ("chat_stream.txt", "chat", True),
])
def test_stream_chunks_have_the_real_shapes(sim, real_name, key, chat) -> None:
    real, mine = real_stream(real_name), _sim_stream(sim[key])
    assert len(mine) == len(real)  # 5 tokens, one per chunk (+ role chunk, + usage chunk)
    rk, mk = _kinds(real, chat), _kinds(mine, chat)
    for kind in rk:
        assert shape(mk[kind]) == shape(rk[kind]), kind
    for ev_real, ev_mine in zip(real, mine, strict=True):
        assert ev_mine["object"] == ev_real["object"]
        assert [c.get("finish_reason") for c in ev_mine["choices"]] == \
            [c.get("finish_reason") for c in ev_real["choices"]]
        assert ev_mine["usage"]["completion_tokens"] == ev_real["usage"]["completion_tokens"]
    assert mk["usage"]["choices"] == [] and mk["last"]["choices"][0]["finish_reason"] == "length"
    assert re.fullmatch(r"vllm-\d+\.\d+\.\d+-[0-9a-f]{8}", mk["usage"]["system_fingerprint"])


def test_request_ids_and_token_id_fields(sim) -> None:
    comp, ids, chat = (_sim_stream(sim[k]) for k in ("comp", "comp_ids", "chat"))
    real_rid = real_stream("completions_stream.txt")[0]["id"]
    assert {e["id"] for e in comp} == {real_rid} == {"cmpl-fixture-req-0001"}
    # without X-Request-Id both invent ``cmpl-``/``chatcmpl-`` + 16 hex digits
    for events, real_name, prefix in ((ids, "completions_stream_token_ids.txt", "cmpl-"),
                                      (chat, "chat_stream.txt", "chatcmpl-")):
        for evs in (events, real_stream(real_name)):
            assert len({e["id"] for e in evs}) == 1
            assert re.fullmatch(prefix + "[0-9a-f]{16}", evs[0]["id"])
    choices = [e["choices"][0] for e in comp[:-1]]
    assert all(c["prompt_token_ids"] is None and c["token_ids"] is None for c in choices)
    choices = [e["choices"][0] for e in ids[:-1]]
    assert choices[0]["prompt_token_ids"] == PROMPT
    assert all(c["prompt_token_ids"] is None for c in choices[1:])
    assert all(len(c["token_ids"]) == 1 for c in choices)
    assert chat[0]["prompt_token_ids"] is None and chat[0]["usage"]["completion_tokens"] == 0
    assert chat[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sim["comp"][1].get("X-Request-Id") is None  # vLLM does not echo it by default


@pytest.mark.sim
def test_prompt_tokens_details_adds_only_that_key() -> None:
    on = run(_collect(details=True))
    for key, name in (("comp", "completions_stream.txt"), ("chat", "chat_stream.txt")):
        for mine, real in zip(_sim_stream(on[key]), real_stream(name), strict=True):
            extra = set(mine["usage"]) - set(real["usage"])
            assert extra == {"prompt_tokens_details"}
            assert set(mine["usage"]["prompt_tokens_details"]) == {"cached_tokens"}


# -- errors ---------------------------------------------------------------------
def test_out_of_vocabulary_is_an_in_stream_error(sim) -> None:
    status, _, raw = sim["oov"]
    mine = sse_events(raw)
    real = sse_events((FIX / "error_oov_stream.txt").read_bytes())
    assert status == 200 and len(mine) == len(real) == 2 and mine[1] == real[1] == b"[DONE]"
    m, r = orjson.loads(mine[0]), orjson.loads(real[0])
    assert shape(m) == shape(r)
    assert {k: m["error"][k] for k in ("type", "param", "code")} == \
        {k: r["error"][k] for k in ("type", "param", "code")} == \
        {"type": "BadRequestError", "param": None, "code": 400}
    assert m["error"]["message"] == r["error"]["message"] == "Token id 999999 is out of vocabulary"


def test_too_long_prompt_is_http_400(sim) -> None:
    top, body = (FIX / "error_too_long.txt").read_text().split("\n\n", 1)
    head, ctype = top.split("\n")
    assert head == "HTTP 400"
    real = json.loads(body)
    status, headers, raw = sim["too_long"]
    mine = orjson.loads(raw)
    assert status == 400 and headers["Content-Type"] == ctype.split(": ", 1)[1]
    assert shape(mine) == shape(real)
    assert mine["error"]["param"] == real["error"]["param"] == "input_tokens"
    assert mine["error"]["type"] == real["error"]["type"]
    n, limit = sim["limit"] + 904, sim["limit"]
    want = re.sub(r"\d{4,}", "N", real["error"]["message"])
    assert re.sub(r"\d{4,}", "N", mine["error"]["message"]) == want
    assert f"{limit} tokens" in mine["error"]["message"] and f"value={n})" in mine["error"][
        "message"]


# -- endpoints --------------------------------------------------------------------
def test_models_and_version_shapes(sim) -> None:
    status, models = sim["/v1/models"]
    assert status == 200 and shape(models) == shape(real_json("models.json"))
    assert models["data"][0]["max_model_len"] == sim["limit"]
    status, version = sim["/version"]
    assert status == 200 and shape(version) == shape(real_json("version.json"))


def test_server_info_covers_the_real_key_tree(sim) -> None:
    status, info = sim["/server_info?config_format=json"]
    assert status == 200
    real = real_json("server_info.json")
    mine_l, real_l = leaves(info), leaves(real)
    for path in READ_PATHS:
        assert path in mine_l and path in real_l, path
        assert type(mine_l[path]) is type(real_l[path]), path
    # the whole real vllm_config and system_env trees are there (vllm_env: environment only)
    missing = {p for p in real_l if p not in mine_l and not p.startswith("vllm_env.")}
    assert missing == set()
    assert isinstance(info["vllm_env"], dict)
    assert set(mine_l) - set(real_l) - {"vllm_env"} == SIM_ONLY_INFO  # {} is a leaf
    # every set real vllm_config value has the sim's type; kv_cache_memory_bytes is unset
    # (None) on a GPU server, set from VLLM_CPU_KVCACHE_SPACE on the CPU one captured
    typed = {p for p in real_l if p.startswith("vllm_config.") and real_l[p] is not None}
    assert {p for p in typed if type(mine_l[p]) is not type(real_l[p])} == {
        "vllm_config.cache_config.kv_cache_memory_bytes"}
    # a value that is a section (dict) in one is a section in the other
    for path in set(real_l) & set(mine_l):
        assert isinstance(mine_l[path], dict) == isinstance(real_l[path], dict), path


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(fams: dict[str, Any], name: str) -> float:
    return sum(s.value for s in fams[name].samples if s.name == name + "_total")


def test_metrics_names_types_labels_and_created(sim) -> None:
    real = _families((FIX / "metrics.txt").read_text())
    mine = _families(sim["metrics"][-1])
    for name, kind in READ_METRICS.items():
        assert real[name].type == mine[name].type == kind, name
        r_labels = {frozenset(s.labels) for s in real[name].samples}
        m_labels = {frozenset(s.labels) for s in mine[name].samples}
        assert m_labels == r_labels, name
        assert {frozenset({"engine", "model_name"})} <= m_labels | {
            frozenset(s.labels) - {"le"} for s in mine[name].samples}
        created = name + "_created"
        assert (created in real) == (created in mine), created
        if created in mine:
            assert mine[created].type == real[created].type == "gauge"
    sim_vllm = {n for n in mine if n.startswith("vllm:")}
    assert sim_vllm <= set(real)  # nothing invented
    # the lines themselves: counters as ``# TYPE NAME_total counter``, as prometheus_client writes
    text = sim["metrics"][-1]
    assert "# TYPE vllm:prefix_cache_queries_total counter" in text
    assert "# TYPE vllm:prefix_cache_queries_total counter" in (FIX / "metrics.txt").read_text()


def test_prefix_cache_counters_move_as_real_ones_do(sim) -> None:
    """NOTES.md: a prompt sent twice after a reset hits whole blocks, counted in tokens."""
    before, once, twice = (_families(t) for t in sim["metrics"])
    d1 = {n: _value(once, n) - _value(before, n) for n in READ_METRICS
          if READ_METRICS[n] == "counter"}
    d2 = {n: _value(twice, n) - _value(once, n) for n in d1}
    bs = sim["block"]
    assert d1["vllm:prefix_cache_queries"] == d2["vllm:prefix_cache_queries"] == 600
    assert d1["vllm:prompt_tokens"] == 600 and d1["vllm:prefix_cache_hits"] == 0
    assert d2["vllm:prefix_cache_hits"] == (599 // bs) * bs  # real: 512 with 128-token blocks
    assert d2["vllm:prompt_tokens_cached"] == d2["vllm:prefix_cache_hits"]


def test_reset_prefix_cache_is_post_only(sim) -> None:
    assert sim["reset_get"] == 405
    assert sim["reset_post"] == (200, {"success": True})


def test_fixture_framing_is_what_the_test_assumes() -> None:
    """The SSE splitter refuses a frame that is not ``data: ...``: a wrong split is caught."""
    with pytest.raises(AssertionError):
        sse_events(b"data: {}\nevent: x\n\ndata: [DONE]\n\n")
