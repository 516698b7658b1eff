"""Writing a request's answer: SSE streams and whole JSON bodies, as vLLM shapes them.

A stream writes one SSE event per engine step, or, when the handler is behind,
one event holding every pending token (vLLM merges unconsumed outputs the same
way); ``split_tokens`` writes one token per event and one event per write. Faults
drawn for a request (``_faults``) are injected here, mid-stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from replay.servers.sim._engine import Engine
from replay.servers.sim._faults import FaultKind, FaultSpec
from replay.servers.sim._live import Live
from replay.servers.sim._protocol import ChatRequest, CompletionRequest, error_body, usage
from replay.servers.sim._tokenizer import SimTokenizer

__all__ = ["DONE", "Responder", "json_response", "open_stream", "sse"]

DONE = b"data: [DONE]\n\n"
_MALFORMED = b'data: {"id": "malformed", "choices": [{"text": \n\n'


def json_response(data: Any, status: int = 200,
                  headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, headers=headers,
                        content_type="application/json")


def sse(data: Any) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def open_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(request)
    return resp


class Responder:
    """Answers generation requests for one server (its model, tokenizer and faults)."""

    def __init__(self, engine: Engine, tokenizer: SimTokenizer, model_name: str,
                 fingerprint: str, faults: FaultSpec, *, split_tokens: bool,
                 prompt_tokens_details: bool) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.fingerprint = fingerprint
        self.faults = faults
        self.split_tokens = split_tokens
        self.details = prompt_tokens_details

    async def stream(self, request: web.Request, parsed: CompletionRequest | ChatRequest,
                     live: Live, chat: bool, fault: FaultKind | None,
                     rid: str) -> tuple[web.StreamResponse, str]:
        """Stream the tokens as they come; the second value is the truth status."""
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
        model = self.model_name
        details = self.details
        resp = await open_stream(request)
        write: Callable[[bytes], Awaitable[None]] = resp.write
        first = True

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
                                    "model": model, "choices": [choice]}
            data["usage"] = (
                usage(n_prompt, live.sent, req.cached_tokens, details=details, chat_chunk=chat)
                if continuous else None
            )
            return sse(data)

        try:
            if chat:
                head: dict[str, Any] = {
                    "id": cid, "object": obj, "created": created, "model": model,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                 "logprobs": None, "finish_reason": None}],
                    "usage": (usage(n_prompt, 0, 0, details=details, chat_chunk=True)
                              if continuous else None),
                    "prompt_token_ids": req.prompt if want_ids else None,
                    "prompt_text": None,
                }
                await write(sse(head))
            status = await self._pump(resp, live, chunk, fault, request)
            if status != "ok":
                return resp, status
            if include_usage:
                await write(sse({"id": cid, "object": obj, "created": created,
                                 "model": model, "choices": [],
                                 "usage": usage(n_prompt, live.sent, req.cached_tokens,
                                                details=details),
                                 "system_fingerprint": self.fingerprint}))
            await write(DONE)
            await resp.write_eof()
        except ConnectionError:
            return resp, "disconnected"  # the client went away
        return resp, "ok"

    async def _pump(self, resp: web.StreamResponse, live: Live,
                    chunk: Callable[[list[int], str | None], bytes], fault: FaultKind | None,
                    request: web.Request) -> str:
        """Write tokens as they come, injecting the request's fault mid-stream."""
        write = resp.write
        req = live.req
        split = self.split_tokens
        trigger = max(1, req.max_tokens // 2)
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
                    await write(sse(body) + DONE)
                    await resp.write_eof()
                    return "stream_error"
                if fault == "disconnect":
                    self.engine.abort(req)
                    transport = request.transport
                    if transport is not None:
                        transport.close()
                    return "disconnected"
                if fault == "stall":
                    await asyncio.sleep(self.faults.stall_s)
                elif fault == "malformed":
                    await write(_MALFORMED)
            if done:
                return "ok"

    async def whole(self, request: web.Request, parsed: CompletionRequest | ChatRequest,
                    live: Live, chat: bool, fault: FaultKind | None,
                    rid: str) -> web.StreamResponse:
        """Wait for every token, then answer one JSON body."""
        req = live.req
        ids: list[int] = []
        while not live.finished:
            ids.extend(await live.take())
            if live.stopped:
                return json_response(error_body("server stopping", 500), status=500)
        if fault == "stall":
            await asyncio.sleep(self.faults.stall_s)
        elif fault == "stream_error":
            return json_response(error_body("Internal server error (simulated)", 500),
                                 status=500)
        elif fault == "disconnect":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=200)  # never arrives: the connection is gone
        text = self.tokenizer.decode(ids)
        use = usage(req.num_prompt, len(ids), req.cached_tokens, details=self.details)
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
        return json_response(data)
