"""Request intake: a POST body checked as vLLM checks it, into a prompt and a token limit.

Error messages and ``param`` values follow vLLM 0.32/0.33 word for word where a
client might match on them (context length, max_tokens, min_tokens, unknown model).
"""

from __future__ import annotations

import orjson
from pydantic import ValidationError

from replay.servers.sim._protocol import ChatRequest, CompletionRequest
from replay.servers.sim._tokenizer import SimTokenizer
from traces import first_problem

__all__ = ["HTTPError", "Intake"]


class HTTPError(Exception):
    """A request the server answers with an error status (and vLLM's ``param``)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


class Intake:
    """Parses and validates requests for one served model."""

    def __init__(self, model_name: str, max_model_len: int, tokenizer: SimTokenizer) -> None:
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.tokenizer = tokenizer

    def prompt_ids(self, prompt: object) -> list[int]:
        """Token ids of a completions ``prompt``: a string, token ids, or a list of one."""
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
            return prompt
        if isinstance(prompt, list) and len(prompt) == 1:
            return self.prompt_ids(prompt[0])
        raise HTTPError(400, "the simulator takes one prompt: a string or a list of token ids",
                        "prompt")

    def parse(self, raw: bytes, chat: bool) -> tuple[CompletionRequest | ChatRequest,
                                                     list[int], int]:
        """The validated request, its prompt token ids and its output token limit."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise HTTPError(400, f"invalid JSON body: {exc}") from None
        model_cls: type[CompletionRequest] | type[ChatRequest] = (
            ChatRequest if chat else CompletionRequest
        )
        try:
            req = model_cls.model_validate(body)
        except ValidationError as exc:
            problem = first_problem(exc)
            raise HTTPError(400, f"{problem.field or ''}: {problem.raw}", problem.field) from None
        if req.stream_options is not None and not req.stream:
            raise HTTPError(400, "Stream options can only be defined when `stream=True`.",
                            "stream_options")
        if req.model is not None and req.model != self.model_name:
            raise HTTPError(404, f"The model `{req.model}` does not exist.", "model")
        if isinstance(req, ChatRequest):
            prompt = self.tokenizer.apply_chat_template(req.messages)
            asked = req.max_completion_tokens or req.max_tokens
        else:
            prompt = self.prompt_ids(req.prompt)
            asked = req.max_tokens if req.max_tokens is not None else 16
        limit = self.max_model_len
        n = len(prompt)
        if n >= limit:
            raise HTTPError(400, f"This model's maximum context length is {limit} tokens. "
                            f"However, your prompt contains {n} input tokens, which exceeds "
                            "this limit even without any output tokens. Please reduce the "
                            f"length of the input prompt. (parameter=input_tokens, value={n})",
                            "input_tokens")
        if asked is None:
            asked = limit - n
        if n + asked > limit:
            raise HTTPError(400, f"'max_tokens' or 'max_completion_tokens' is too large: "
                            f"{asked}. This model's maximum context length is {limit} tokens "
                            f"and your request has {n} input tokens ({asked} > {limit} - {n}).",
                            "max_tokens")
        if req.min_tokens > asked:
            raise HTTPError(400, f"min_tokens ({req.min_tokens}) must be less than or equal "
                            f"to max_tokens ({asked})", "min_tokens")
        return req, prompt, asked
