"""The simulated vLLM server: aiohttp handlers around the clockless ``Engine``.

The engine loop plans a step, sleeps until the step's absolute deadline (a
chain of deadlines on the monotonic clock, so lateness never accumulates) and
then hands each request its tokens. Handlers stream them as vLLM does: one SSE
event per step, or, when a handler is behind, one event holding every pending
token (vLLM merges unconsumed outputs the same way). ``split_tokens`` instead
writes one token per event and one event per write.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replay.errors import ConfigError
from replay.sim._engine import Engine, SimRequest, StepResult
from replay.sim._faults import FaultKind, FaultSpec
from replay.sim._profile import Backend, SimProfile, load_profile
from replay.sim._prometheus import ITL_BUCKETS, TTFT_BUCKETS, Histogram, render_metrics
from replay.sim._protocol import ChatRequest, CompletionRequest, error_body, usage
from replay.sim._tokenizer import SimTokenizer
from replay.sim._truth import TruthRecord
from replay.sim._vllm_tree import BASE_VLLM_CONFIG, SYSTEM_ENV_KEYS

__all__ = ["SimConfig", "SimServer", "server_info"]

_log = logging.getLogger(__name__)
SIM_HEADER = "X-Simulated"
SIM_HEADER_VALUE = "agentreplay"
_LATE_RESET_S = 0.5
"""A step ending this late restarts the deadline chain from now (the loop was starved
for long); shorter lateness is caught up, so the mean step time stays exact."""
_DONE = b"data: [DONE]\n\n"
_MALFORMED = b'data: {"id": "malformed", "choices": [{"text": \n\n'


class SimConfig(BaseModel):
    """Everything a simulated server needs (the ``serve-sim`` options)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    profile: str | SimProfile = "small"
    backend: Backend = "latency_specialized"
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port."""
    time_scale: float = Field(default=1.0, gt=0)
    """Run this many times faster than real time (modelled durations / time_scale)."""
    faults: FaultSpec = Field(default_factory=FaultSpec)
    truth_path: str | None = None
    seed: int = 0
    split_tokens: bool = False
    keep_truth: bool = True
    """Keep truth records in memory (``SimServer.truth``)."""
    prompt_tokens_details: bool = True
    """Report ``usage.prompt_tokens_details.cached_tokens``, as vLLM does only when started
    with ``--enable-prompt-tokens-details`` (off: the usage keys of a default server)."""

    def resolved_profile(self) -> SimProfile:
        if isinstance(self.profile, SimProfile):
            return self.profile
        return load_profile(self.profile)


def server_info(profile: SimProfile, backend: Backend, time_scale: float) -> dict[str, Any]:
    """``/server_info?config_format=json``: vLLM 0.32's key tree, filled from the profile.

    Every key a real server reports is present (``_vllm_tree``); the profile's
    figures overwrite the defaults. Beyond real vLLM: ``model_config.hf_config.vocab_size``
    (real servers do not expose it; the replayer reads it from here),
    ``device_config.gpu``, and the top-level ``simulated``, ``sim_profile``, ``time_scale``.
    """
    spec = profile.speculative
    cfg = copy.deepcopy(BASE_VLLM_CONFIG)
    dtype = profile.dtype if profile.dtype.startswith("torch.") else f"torch.{profile.dtype}"
    cfg["model_config"].update(
        model=profile.model, served_model_name=profile.model, tokenizer=profile.model,
        max_model_len=profile.max_model_len, dtype=dtype,
        hf_config={"vocab_size": profile.vocab_size},
    )
    tp, pp = profile.tensor_parallel_size, profile.pipeline_parallel_size
    cfg["parallel_config"].update(
        tensor_parallel_size=tp, pipeline_parallel_size=pp,
        data_parallel_size=profile.data_parallel_size,
        data_parallel_size_local=profile.data_parallel_size, world_size=tp * pp,
    )
    tokens = profile.num_gpu_blocks * profile.block_size
    cfg["cache_config"].update(
        block_size=profile.block_size, effective_attention_block_size=profile.block_size,
        cache_dtype=profile.cache_dtype, enable_prefix_caching=True,
        gpu_memory_utilization=0.9, num_gpu_blocks=profile.num_gpu_blocks,
        kv_cache_size_tokens=tokens, kv_cache_max_concurrency=tokens / profile.max_model_len,
        kv_cache_memory_bytes=None,
    )
    cfg["scheduler_config"].update(
        max_num_seqs=profile.max_num_seqs,
        max_num_batched_tokens=profile.max_num_batched_tokens,
        max_num_encoder_input_tokens=profile.max_num_batched_tokens,
        encoder_cache_size=profile.max_num_batched_tokens, enable_chunked_prefill=True,
    )
    cfg["speculative_config"] = None if spec is None else {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
    }
    cfg["device_config"] = {"device": "cuda", "gpu": profile.gpu}
    cfg["additional_config"] = {"decode_backend": backend}
    return {
        "vllm_config": cfg,
        "vllm_env": {},
        "system_env": dict.fromkeys(SYSTEM_ENV_KEYS),
        "simulated": True,
        "sim_profile": profile.name,
        "time_scale": time_scale,
    }


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, headers=headers,
                        content_type="application/json")


def _sse(data: Any) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


class _Live:
    """One request in flight: its engine request, pending tokens and truth fields."""

    __slots__ = (
        "req", "pending", "waiter", "finished", "emit_ns", "emit_tokens", "step_start_ns",
        "step_model_ns", "first_token_ns", "scheduled_ns", "last_emit_ns", "stopped", "arrival_ns",
        "sent",
    )

    def __init__(self, req: SimRequest, arrival_ns: int) -> None:
        self.req = req
        self.arrival_ns = arrival_ns
        self.stopped = False
        self.sent = 0
        self.pending: list[int] = []
        self.waiter: asyncio.Future[None] | None = None
        self.finished = False
        self.emit_ns: list[int] = []
        self.emit_tokens: list[int] = []
        self.step_start_ns: list[int] = []
        self.step_model_ns: list[int] = []
        self.first_token_ns: int | None = None
        self.scheduled_ns: int | None = None
        self.last_emit_ns = 0

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def take(self) -> list[int]:
        """Every token not yet taken; waits while there is none and the request runs."""
        while not self.pending and not self.finished and not self.stopped:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
            self.waiter = None
        out = self.pending
        self.pending = []
        return out


class SimServer:
    """In-process simulated server: ``async with SimServer(config) as srv: srv.url``."""

    def __init__(self, config: SimConfig | None = None, **kwargs: Any) -> None:
        self.config = config if config is not None else SimConfig(**kwargs)
        self.profile = self.config.resolved_profile()
        self.backend = self.config.backend
        self.engine = Engine(self.profile, self.backend, seed=self.config.seed)
        self.tokenizer = SimTokenizer(self.profile.vocab_size)
        self.truth: list[TruthRecord] = []
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.model_name = self.profile.model
        self._live: dict[SimRequest, _Live] = {}
        self._seen_ids: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._truth_file: Any = None
        self._info = server_info(self.profile, self.backend, self.config.time_scale)
        digest = hashlib.sha256(f"{self.profile.name}/{self.backend}".encode()).hexdigest()
        self.created = time.time()
        self.fingerprint = f"vllm-{self.profile.vllm_version}-{digest[:8]}"
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def truth_for(self, request_id: str) -> list[TruthRecord]:
        """Truth records of one request id (a retried id has several)."""
        return [t for t in self.truth if t.request_id == request_id]

    # -- lifecycle ----------------------------------------------------------
    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self.config.truth_path:
            try:
                self._truth_file = open(self.config.truth_path, "ab")  # noqa: SIM115
            except OSError as exc:
                raise ConfigError(f"{self.config.truth_path}: cannot write truth log: "
                                  f"{exc.strerror}") from None
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.on_response_prepare.append(self._mark_simulated)
        r = app.router
        r.add_get("/health", self._health)
        r.add_get("/version", self._version)
        r.add_get("/v1/models", self._models)
        r.add_get("/server_info", self._server_info)
        r.add_get("/metrics", self._metrics)
        r.add_post("/tokenize", self._tokenize)
        r.add_post("/reset_prefix_cache", self._reset_prefix_cache)
        r.add_post("/v1/completions", self._completions)
        r.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise ConfigError(f"cannot listen on {self.config.host}:{self.config.port}: "
                              f"{exc.strerror}") from None
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._loop_task = asyncio.create_task(self._engine_loop())

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        for live in self._live.values():
            live.stopped = True
            live._wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._truth_file is not None:
            self._truth_file.close()
            self._truth_file = None

    # -- the engine loop ----------------------------------------------------
    async def _engine_loop(self) -> None:
        try:
            await self._steps()
        except Exception:  # a model bug must not leave every stream hanging
            _log.exception("simulator engine loop failed")
            for live in self._live.values():
                live.stopped = True
                live._wake()
            raise

    async def _steps(self) -> None:
        scale = self.config.time_scale
        base: float | None = None
        while True:
            if not self.engine.has_work():
                self._wake.clear()
                await self._wake.wait()
                base = None
            now = time.monotonic()
            start = base if base is not None and now - base < _LATE_RESET_S else now
            result = self.engine.step()
            duration = result.duration_s / scale
            deadline = start + duration
            delay = deadline - time.monotonic()
            await asyncio.sleep(delay if delay > 0 else 0)
            self._deliver(result, int(start * 1e9), int(duration * 1e9))
            base = deadline

    def _deliver(self, result: StepResult, start_ns: int, model_ns: int) -> None:
        t = time.monotonic_ns()
        live_map = self._live
        for req in result.scheduled:
            live = live_map.get(req)
            if live is not None and live.scheduled_ns is None:
                live.scheduled_ns = start_ns
        for req, tokens in result.emissions:
            live = live_map.get(req)
            if live is None:
                continue
            live.pending.extend(tokens)
            live.emit_ns.append(t)
            live.emit_tokens.append(len(tokens))
            live.step_start_ns.append(start_ns)
            live.step_model_ns.append(model_ns)
            if live.first_token_ns is None:
                live.first_token_ns = t
                self.ttft.observe((t - live.arrival_ns) / 1e9)
            else:
                self.itl.observe((t - live.last_emit_ns) / 1e9)
            live.last_emit_ns = t
            live._wake()
        for req in result.finished:
            live = live_map.get(req)
            if live is not None:
                live.finished = True
                live._wake()

    # -- small endpoints ----------------------------------------------------
    async def _mark_simulated(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers[SIM_HEADER] = SIM_HEADER_VALUE

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        return _json({"version": self.profile.vllm_version})

    async def _models(self, request: web.Request) -> web.Response:
        m = self.model_name
        return _json({"object": "list", "data": [{
            "id": m, "object": "model", "created": int(time.time()), "owned_by": "vllm",
            "root": m, "parent": None, "max_model_len": self.profile.max_model_len,
            "permission": [{
                "id": "modelperm-" + uuid.uuid4().hex[:16], "object": "model_permission",
                "created": int(time.time()), "allow_create_engine": False,
                "allow_sampling": True, "allow_logprobs": True, "allow_search_indices": False,
                "allow_view": True, "allow_fine_tuning": False, "organization": "*",
                "group": None, "is_blocking": False,
            }],
        }]})

    async def _server_info(self, request: web.Request) -> web.Response:
        if request.query.get("config_format", "text") == "json":
            return _json(self._info)
        info = dict(self._info)
        info["vllm_config"] = str(info["vllm_config"])
        return _json(info)

    async def _metrics(self, request: web.Request) -> web.Response:
        text = render_metrics(self.engine, self.model_name, self.ttft, self.itl,
                              created=self.created)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def _reset_prefix_cache(self, request: web.Request) -> web.Response:
        self.engine.cache.reset()
        return _json({"success": True})

    async def _tokenize(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
            if "messages" in body:
                ids = self.tokenizer.apply_chat_template(body["messages"])
            else:
                ids = self._prompt_ids(body.get("prompt"))
        except (orjson.JSONDecodeError, AttributeError, TypeError):
            return _json(error_body("body must be a JSON object with 'prompt' or 'messages'",
                                    400), status=400)
        except _HTTPError as exc:
            return _json(error_body(str(exc), exc.status, param=exc.param), status=exc.status)
        return _json({"count": len(ids), "max_model_len": self.profile.max_model_len,
                      "tokens": ids, "token_strs": None})

    def _prompt_ids(self, prompt: object) -> list[int]:
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
            return prompt  # type: ignore[return-value]
        if isinstance(prompt, list) and len(prompt) == 1:
            return self._prompt_ids(prompt[0])
        raise _HTTPError(400, "the simulator takes one prompt: a string or a list of token ids",
                         "prompt")

    # -- generation -----------------------------------------------------------
    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    def _parse(self, raw: bytes, chat: bool) -> tuple[CompletionRequest | ChatRequest,
                                                      list[int], int]:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _HTTPError(400, f"invalid JSON body: {exc}") from None
        model_cls: type[CompletionRequest] | type[ChatRequest] = (
            ChatRequest if chat else CompletionRequest
        )
        try:
            req = model_cls.model_validate(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise _HTTPError(400, f"{field}: {err['msg']}", field or None) from None
        if req.stream_options is not None and not req.stream:
            raise _HTTPError(400, "Stream options can only be defined when `stream=True`.",
                             "stream_options")
        if req.model is not None and req.model != self.model_name:
            raise _HTTPError(404, f"The model `{req.model}` does not exist.", "model")
        if isinstance(req, ChatRequest):
            prompt = self.tokenizer.apply_chat_template(req.messages)
            asked = req.max_completion_tokens or req.max_tokens
        else:
            prompt = self._prompt_ids(req.prompt)
            asked = req.max_tokens if req.max_tokens is not None else 16
        limit = self.profile.max_model_len
        n = len(prompt)
        if n >= limit:
            raise _HTTPError(400, f"This model's maximum context length is {limit} tokens. "
                             f"However, your prompt contains {n} input tokens, which exceeds "
                             "this limit even without any output tokens. Please reduce the "
                             f"length of the input prompt. (parameter=input_tokens, value={n})",
                             "input_tokens")
        if asked is None:
            asked = limit - n
        if n + asked > limit:
            raise _HTTPError(400, f"'max_tokens' or 'max_completion_tokens' is too large: "
                             f"{asked}. This model's maximum context length is {limit} tokens "
                             f"and your request has {n} input tokens ({asked} > {limit} - {n}).",
                             "max_tokens")
        if req.min_tokens > asked:
            raise _HTTPError(400, f"min_tokens ({req.min_tokens}) must be less than or equal "
                             f"to max_tokens ({asked})", "min_tokens")
        return req, prompt, asked

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = time.monotonic_ns()
        header_id = request.headers.get("X-Request-Id")
        rid = header_id or uuid.uuid4().hex[:16]  # vLLM's random ids: 16 hex digits
        endpoint = "chat" if chat else "completions"
        raw = await request.read()
        faults = self.config.faults
        seen = self._seen_ids.get(rid, 0)
        self._seen_ids[rid] = seen + 1
        # a retry under the same id draws afresh (attempt number in the key)
        fault = faults.pick(self.config.seed, rid if not seen else f"{rid}#{seen}")
        if faults.slow_accept_s:
            await asyncio.sleep(faults.slow_accept_s)
        stream = False
        try:
            parsed, prompt, max_tokens = self._parse(raw, chat)
            stream = parsed.stream
        except _HTTPError as exc:
            self._record(rid, endpoint, stream, "rejected", exc.status, None, arrival)
            return _json(error_body(str(exc), exc.status, param=exc.param), status=exc.status)
        vocab = self.profile.vocab_size
        bad = next((t for t in prompt if t < 0 or t >= vocab), None)
        if bad is not None:
            msg = f"Token id {bad} is out of vocabulary"
            self._record(rid, endpoint, stream, "stream_error" if stream else "rejected",
                         200 if stream else 400, None, arrival, prompt_tokens=len(prompt))
            if not stream:
                return _json(error_body(msg, 400, param="prompt"), status=400)
            resp = await self._open_stream(request)
            await resp.write(_sse(error_body(msg, 400)) + _DONE)
            await resp.write_eof()
            return resp
        if fault == "rate_limit":
            self._record(rid, endpoint, stream, "rejected", 429, fault, arrival,
                         prompt_tokens=len(prompt))
            return _json(error_body("Too many requests (simulated)", 429), status=429,
                         headers={"Retry-After": str(faults.retry_after_s)})
        if fault == "error":
            self._record(rid, endpoint, stream, "rejected", 500, fault, arrival,
                         prompt_tokens=len(prompt))
            return _json(error_body("Internal server error (simulated)", 500), status=500)
        req = self.engine.add(rid, prompt, max_tokens)
        live = _Live(req, arrival)
        self._live[req] = live
        queued = time.monotonic_ns()
        self._wake.set()
        status = "ok"
        http_status = 200
        try:
            if stream:
                resp, status = await self._stream(request, parsed, live, chat, fault, rid)
            else:
                resp = await self._whole(request, parsed, live, chat, fault, rid)
                http_status = resp.status
                if fault == "disconnect":
                    status = "disconnected"
                elif http_status != 200:
                    status = "aborted" if live.stopped else "error"
        except asyncio.CancelledError:
            status = "disconnected"
            raise
        finally:
            if not req.finished:
                self.engine.abort(req)
                if status == "ok":
                    status = "aborted"
            del self._live[req]
            self._record(rid, endpoint, stream, status, http_status, fault, arrival,
                         queued=queued, live=live)
        return resp

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        return resp

    async def _stream(self, request: web.Request, parsed: CompletionRequest | ChatRequest,
                      live: _Live, chat: bool, fault: FaultKind | None,
                      rid: str) -> tuple[web.StreamResponse, str]:
        opts = parsed.stream_options
        include_usage = bool(opts and opts.include_usage)
        continuous = include_usage and bool(opts and opts.continuous_usage_stats)
        want_ids = parsed.return_token_ids
        req = live.req
        n_prompt = req.num_prompt
        created = int(time.time())
        cid = ("chatcmpl-" if chat else "cmpl-") + rid
        obj = "chat.completion.chunk" if chat else "text_completion"
        decode = self.tokenizer.decode
        resp = await self._open_stream(request)
        write: Callable[[bytes], Awaitable[None]] = resp.write
        first = True
        details = self.config.prompt_tokens_details

        def chunk(ids: list[int], finish: str | None) -> bytes:
            # key sets as vLLM serializes them (unset fields are left out)
            nonlocal first
            if chat:
                choice: dict[str, Any] = {"index": 0, "delta": {"content": decode(ids)},
                                          "logprobs": None, "finish_reason": finish}
                if finish is not None:
                    choice["stop_reason"] = None
                choice["token_ids"] = ids if want_ids else None
            else:
                choice = {"index": 0, "text": decode(ids), "logprobs": None,
                          "finish_reason": finish, "stop_reason": None,
                          "prompt_token_ids": req.prompt if want_ids and first else None,
                          "token_ids": ids if want_ids else None}
            first = False
            data: dict[str, Any] = {"id": cid, "object": obj, "created": created,
                                    "model": self.model_name, "choices": [choice]}
            data["usage"] = (
                usage(n_prompt, live.sent, req.cached_tokens, details=details, chat_chunk=chat)
                if continuous else None
            )
            return _sse(data)

        try:
            if chat:
                head: dict[str, Any] = {
                    "id": cid, "object": obj, "created": created, "model": self.model_name,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                 "logprobs": None, "finish_reason": None}],
                    "usage": (usage(n_prompt, 0, 0, details=details, chat_chunk=True)
                              if continuous else None),
                    "prompt_token_ids": req.prompt if want_ids else None,
                    "prompt_text": None,
                }
                await write(_sse(head))
            status = await self._pump(resp, live, chunk, fault, request)
            if status != "ok":
                return resp, status
            if include_usage:
                await write(_sse({"id": cid, "object": obj, "created": created,
                                  "model": self.model_name, "choices": [],
                                  "usage": usage(n_prompt, live.sent, req.cached_tokens,
                                                 details=details),
                                  "system_fingerprint": self.fingerprint}))
            await write(_DONE)
            await resp.write_eof()
        except ConnectionError:
            return resp, "disconnected"  # the client went away
        return resp, "ok"

    async def _pump(self, resp: web.StreamResponse, live: _Live,
                    chunk: Callable[[list[int], str | None], bytes], fault: FaultKind | None,
                    request: web.Request) -> str:
        """Write tokens as they come, injecting the request's fault mid-stream."""
        write = resp.write
        req = live.req
        split = self.config.split_tokens
        trigger = max(1, req.max_tokens // 2)
        faults = self.config.faults
        fired = False
        while True:
            ids = await live.take()
            if live.stopped:
                return "aborted"  # server stopping
            done = live.finished
            if split:
                for j, t in enumerate(ids):
                    live.sent += 1
                    last = done and j == len(ids) - 1
                    await write(chunk([t], "length" if last else None))
            elif ids:
                live.sent += len(ids)
                await write(chunk(ids, "length" if done else None))
            if fault is not None and not fired and live.sent >= trigger and not done:
                fired = True
                if fault == "stream_error":
                    self.engine.abort(req)
                    body = {"error": {"message": "Internal server error (simulated)",
                                      "type": "InternalServerError", "param": None,
                                      "code": 500}}
                    await write(_sse(body) + _DONE)
                    await resp.write_eof()
                    return "stream_error"
                if fault == "disconnect":
                    self.engine.abort(req)
                    transport = request.transport
                    if transport is not None:
                        transport.close()
                    return "disconnected"
                if fault == "stall":
                    await asyncio.sleep(faults.stall_s)
                elif fault == "malformed":
                    await write(_MALFORMED)
            if done:
                return "ok"

    async def _whole(self, request: web.Request, parsed: CompletionRequest | ChatRequest,
                     live: _Live, chat: bool, fault: FaultKind | None,
                     rid: str) -> web.StreamResponse:
        req = live.req
        ids: list[int] = []
        while not live.finished:
            ids.extend(await live.take())
            if live.stopped:
                return _json(error_body("server stopping", 500), status=500)
        faults = self.config.faults
        if fault == "stall":
            await asyncio.sleep(faults.stall_s)
        elif fault == "stream_error":
            return _json(error_body("Internal server error (simulated)", 500), status=500)
        elif fault == "disconnect":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=200)  # never arrives: the connection is gone
        text = self.tokenizer.decode(ids)
        use = usage(req.num_prompt, len(ids), req.cached_tokens,
                    details=self.config.prompt_tokens_details)
        created = int(time.time())
        if chat:
            choice: dict[str, Any] = {
                "index": 0, "message": {"role": "assistant", "content": text,
                                        "reasoning_content": None, "tool_calls": []},
                "logprobs": None, "finish_reason": "length", "stop_reason": None,
            }
            data: dict[str, Any] = {"id": "chatcmpl-" + rid, "object": "chat.completion",
                                    "created": created, "model": self.model_name,
                                    "choices": [choice], "usage": use, "prompt_logprobs": None}
            if parsed.return_token_ids:
                choice["token_ids"] = ids
                data["prompt_token_ids"] = req.prompt
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length",
                      "stop_reason": None, "prompt_logprobs": None}
            if parsed.return_token_ids:
                choice["token_ids"] = ids
                choice["prompt_token_ids"] = req.prompt
            data = {"id": "cmpl-" + rid, "object": "text_completion", "created": created,
                    "model": self.model_name, "choices": [choice], "usage": use}
        if fault == "malformed":
            return web.Response(body=orjson.dumps(data)[:-7], status=200,
                                content_type="application/json")
        return _json(data)

    # -- truth ----------------------------------------------------------------
    def _record(self, rid: str, endpoint: str, stream: bool, status: str, http_status: int,
                fault: str | None, arrival: int, *, prompt_tokens: int = 0,
                queued: int | None = None, live: _Live | None = None) -> None:
        finish = time.monotonic_ns()
        fields: dict[str, Any] = {
            "request_id": rid, "endpoint": endpoint, "stream": stream, "status": status,
            "http_status": http_status, "fault": fault, "arrival_ns": arrival,
            "queued_ns": queued, "finish_ns": finish, "prompt_tokens": prompt_tokens,
        }
        if live is not None:
            req = live.req
            fields.update(
                scheduled_ns=live.scheduled_ns, first_token_ns=live.first_token_ns,
                prompt_tokens=req.num_prompt, max_tokens=req.max_tokens,
                output_tokens=sum(live.emit_tokens), cached_tokens=req.cached_tokens,
                prefill_tokens=req.prefill_computed, queried_tokens=req.queried_tokens,
                hit_tokens=req.hit_tokens, preempted_hit_tokens=req.preempted_hit_tokens,
                preemptions=req.preemptions,
                emit_ns=live.emit_ns, emit_tokens=live.emit_tokens,
                step_start_ns=live.step_start_ns, step_model_ns=live.step_model_ns,
            )
        if self._truth_file is not None:
            self._truth_file.write(orjson.dumps(fields) + b"\n")
            self._truth_file.flush()
        if self.config.keep_truth:
            self.truth.append(TruthRecord.model_construct(**fields))
