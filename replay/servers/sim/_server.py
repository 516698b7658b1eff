"""The simulated vLLM server: the aiohttp app, its routes, and the truth logs.

Generation requests pass through ``Intake`` (validation as vLLM does it), the
``Engine`` (via ``StepLoop``, the real-time clock of its steps) and ``Responder``
(SSE or JSON bodies, injected faults); every one ends in a ``TruthRecord``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from typing import IO, Any

import orjson
from aiohttp import web

from replay.errors import ConfigError
from replay.servers.sim._config import SimConfig, server_info, step_log_path
from replay.servers.sim._dcgm import DCGM_PATH, PowerMeter
from replay.servers.sim._engine import Engine, SimRequest
from replay.servers.sim._intake import HTTPError, Intake
from replay.servers.sim._live import Live
from replay.servers.sim._prometheus import Histogram, render_metrics
from replay.servers.sim._protocol import error_body
from replay.servers.sim._respond import DONE, Responder, json_response, open_stream, sse
from replay.servers.sim._steploop import StepLoop
from replay.servers.sim._tokenizer import SimTokenizer
from replay.servers.sim._truth import StepTruth, TruthRecord

__all__ = ["SimServer"]

SIM_HEADER = "X-Simulated"
SIM_HEADER_VALUE = "agentreplay"


class SimServer:
    """In-process simulated server: ``async with SimServer(config) as srv: srv.url``."""

    def __init__(self, config: SimConfig | None = None, **kwargs: Any) -> None:
        self.config = config if config is not None else SimConfig(**kwargs)
        cfg = self.config
        self.profile = cfg.resolved_profile()
        self.backend = cfg.backend
        self.engine = Engine(self.profile, self.backend, seed=cfg.seed)
        self.tokenizer = SimTokenizer(self.profile.vocab_size)
        self.truth: list[TruthRecord] = []
        self.steps: list[StepTruth] = []
        """Every engine step (``keep_truth``): modelled and actual durations."""
        self.model_name = self.profile.model
        self._live: dict[SimRequest, Live] = {}
        self._seen_ids: dict[str, int] = {}
        wants_steps = cfg.keep_truth or cfg.truth_path is not None
        self.loop = StepLoop(self.engine, self._live, time_scale=cfg.time_scale,
                             slowdown=cfg.slowdown,
                             on_step=self._on_step if wants_steps else None)
        self._loop_task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._truth_file: IO[bytes] | None = None
        self._step_file: IO[bytes] | None = None
        self._info = server_info(self.profile, self.backend, cfg.time_scale, cfg.slowdown)
        digest = hashlib.sha256(f"{self.profile.name}/{self.backend}".encode()).hexdigest()
        self.created = time.time()
        self.fingerprint = f"vllm-{self.profile.vllm_version}-{digest[:8]}"
        self.intake = Intake(self.model_name, self.profile.max_model_len, self.tokenizer)
        self.responder = Responder(
            self.engine, self.tokenizer, self.model_name, self.fingerprint, cfg.faults,
            split_tokens=cfg.split_tokens, prompt_tokens_details=cfg.prompt_tokens_details)
        self.power = PowerMeter(self.profile)
        """The modelled DCGM exporter behind ``GET /dcgm/metrics``."""
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def ttft(self) -> Histogram:
        return self.loop.ttft

    @property
    def itl(self) -> Histogram:
        return self.loop.itl

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
        path = self.config.truth_path
        if path:
            try:
                self._truth_file = open(path, "ab")  # noqa: SIM115
                self._step_file = open(step_log_path(path), "ab")  # noqa: SIM115
            except OSError as exc:
                self._close_logs()
                raise ConfigError(f"{path}: cannot write truth log: {exc.strerror}") from None
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.on_response_prepare.append(self._mark_simulated)
        r = app.router
        r.add_get("/health", self._health)
        r.add_get("/version", self._version)
        r.add_get("/v1/models", self._models)
        r.add_get("/server_info", self._server_info)
        r.add_get("/metrics", self._metrics)
        r.add_get(DCGM_PATH, self._dcgm)
        r.add_post("/tokenize", self._tokenize)
        r.add_post("/detokenize", self._detokenize)
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
            self._close_logs()
            raise ConfigError(f"cannot listen on {self.config.host}:{self.config.port}: "
                              f"{exc.strerror}") from None
        sockets = getattr(site._server, "sockets", None)  # an asyncio Server once started
        assert sockets
        self.port = int(sockets[0].getsockname()[1])
        self._loop_task = asyncio.create_task(self.loop.run())

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        self.loop.stop_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._close_logs()

    def _close_logs(self) -> None:
        for f in (self._truth_file, self._step_file):
            if f is not None:
                f.close()
        self._truth_file = self._step_file = None

    # -- small endpoints ----------------------------------------------------
    async def _mark_simulated(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers[SIM_HEADER] = SIM_HEADER_VALUE

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        return json_response({"version": self.profile.vllm_version})

    async def _models(self, request: web.Request) -> web.Response:
        m = self.model_name
        return json_response({"object": "list", "data": [{
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
            return json_response(self._info)
        info = dict(self._info)
        info["vllm_config"] = str(info["vllm_config"])
        return json_response(info)

    async def _metrics(self, request: web.Request) -> web.Response:
        loop = self.loop
        text = render_metrics(self.engine, self.model_name, loop.ttft, loop.itl,
                              created=self.created, step_model_s=loop.model_s_total,
                              step_actual_s=loop.actual_s_total, phases=loop.phases)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def _dcgm(self, request: web.Request) -> web.Response:
        """The modelled DCGM exporter (``replay.servers.sim._dcgm``)."""
        text = self.power.render(self.loop.actual_s_total)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def _reset_prefix_cache(self, request: web.Request) -> web.Response:
        self.engine.cache.reset()
        return json_response({"success": True})

    async def _tokenize(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
            if "messages" in body:
                ids = self.tokenizer.apply_chat_template(body["messages"])
            else:
                ids = self.intake.prompt_ids(body.get("prompt"))
        except (orjson.JSONDecodeError, AttributeError, TypeError):
            return json_response(error_body(
                "body must be a JSON object with 'prompt' or 'messages'", 400), status=400)
        except HTTPError as exc:
            return json_response(error_body(str(exc), exc.status, param=exc.param),
                                 status=exc.status)
        return json_response({"count": len(ids), "max_model_len": self.profile.max_model_len,
                              "tokens": ids, "token_strs": None})

    async def _detokenize(self, request: web.Request) -> web.Response:
        try:
            ids = orjson.loads(await request.read())["tokens"]
            if not (isinstance(ids, list) and all(type(t) is int for t in ids)):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return json_response(error_body("body must be a JSON object with 'tokens': "
                                            "a list of token ids", 400), status=400)
        bad = next((t for t in ids if not 0 <= t < self.profile.vocab_size), None)
        if bad is not None:
            return json_response(error_body(f"Token id {bad} is out of vocabulary", 400,
                                            param="tokens"), status=400)
        return json_response({"prompt": self.tokenizer.decode(ids)})

    # -- generation -----------------------------------------------------------
    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

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
            parsed, prompt, max_tokens = self.intake.parse(raw, chat)
            stream = parsed.stream
        except HTTPError as exc:
            self._record(rid, endpoint, stream, "rejected", exc.status, None, arrival)
            return json_response(error_body(str(exc), exc.status, param=exc.param),
                                 status=exc.status)
        vocab = self.profile.vocab_size
        bad = next((t for t in prompt if t < 0 or t >= vocab), None)
        if bad is not None:
            msg = f"Token id {bad} is out of vocabulary"
            self._record(rid, endpoint, stream, "stream_error" if stream else "rejected",
                         200 if stream else 400, None, arrival, prompt_tokens=len(prompt))
            if not stream:
                return json_response(error_body(msg, 400, param="prompt"), status=400)
            resp = await open_stream(request)
            await resp.write(sse(error_body(msg, 400)) + DONE)
            await resp.write_eof()
            return resp
        if fault == "rate_limit":
            self._record(rid, endpoint, stream, "rejected", 429, fault, arrival,
                         prompt_tokens=len(prompt))
            return json_response(error_body("Too many requests (simulated)", 429), status=429,
                                 headers={"Retry-After": str(faults.retry_after_s)})
        if fault == "error":
            self._record(rid, endpoint, stream, "rejected", 500, fault, arrival,
                         prompt_tokens=len(prompt))
            return json_response(error_body("Internal server error (simulated)", 500),
                                 status=500)
        overhead = self.profile.overhead_s(self.engine.has_work())
        if overhead:
            try:
                await asyncio.sleep(overhead / self.config.time_scale)
            except asyncio.CancelledError:
                self._record(rid, endpoint, stream, "disconnected", 200, fault, arrival,
                             prompt_tokens=len(prompt))
                raise
        req = self.engine.add(rid, prompt, max_tokens)
        live = Live(req, arrival)
        self._live[req] = live
        queued = live.queued_ns = time.monotonic_ns()
        self.loop.notify()
        status = "ok"
        http_status = 200
        try:
            if stream:
                resp, status = await self.responder.stream(request, parsed, live, chat, fault,
                                                           rid)
            else:
                resp = await self.responder.whole(request, parsed, live, chat, fault, rid)
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

    # -- truth ----------------------------------------------------------------
    def _on_step(self, step: StepTruth) -> None:
        if self._step_file is not None:
            self._step_file.write(orjson.dumps(step.__dict__) + b"\n")
        if self.config.keep_truth:
            self.steps.append(step)

    def _record(self, rid: str, endpoint: str, stream: bool, status: str, http_status: int,
                fault: str | None, arrival: int, *, prompt_tokens: int = 0,
                queued: int | None = None, live: Live | None = None) -> None:
        finish = time.monotonic_ns()
        fields: dict[str, Any] = {
            "request_id": rid, "endpoint": endpoint, "stream": stream, "status": status,
            "http_status": http_status, "fault": fault, "arrival_ns": arrival,
            "queued_ns": queued, "finish_ns": finish, "prompt_tokens": prompt_tokens,
        }
        if live is not None:
            req = live.req
            scheduled = live.scheduled_ns
            if scheduled is not None and queued is not None:
                # a step planned while the loop woke up may start on the chain before a
                # request that joined it was queued
                scheduled = max(scheduled, queued)
            fields.update(
                scheduled_ns=scheduled, first_token_ns=live.first_token_ns,
                prompt_tokens=req.num_prompt, max_tokens=req.max_tokens,
                output_tokens=sum(live.emit_tokens), cached_tokens=req.cached_tokens,
                prefill_tokens=req.prefill_computed, queried_tokens=req.queried_tokens,
                hit_tokens=req.hit_tokens, preempted_hit_tokens=req.preempted_hit_tokens,
                preemptions=req.preemptions,
                emit_ns=live.emit_ns, emit_tokens=live.emit_tokens,
                step_start_ns=live.step_start_ns, step_model_ns=live.step_model_ns,
                step_actual_ns=live.step_actual_ns,
            )
        if self._step_file is not None:
            self._step_file.flush()  # the steps behind this request are on disk first
        if self._truth_file is not None:
            self._truth_file.write(orjson.dumps(fields) + b"\n")
            self._truth_file.flush()
        if self.config.keep_truth:
            self.truth.append(TruthRecord.model_construct(**fields))
