"""OpenAI/vLLM HTTP payloads: request models, error bodies, response chunks.

Shapes follow vLLM's OpenAI-compatible server (0.32/0.33): errors are
``{"error": {"message", "type", "param", "code"}}``; stream chunks carry
``usage: null`` unless usage is reported; the final usage chunk has no choices.
``usage.prompt_tokens_details.cached_tokens`` is reported unless
``SimConfig.prompt_tokens_details`` is off (vLLM reports it only with
``--enable-prompt-tokens-details``). The simulator never samples an end of
sequence token: every request runs to ``max_tokens`` (finish_reason ``length``),
so ``ignore_eos`` changes nothing; ``min_tokens`` is only validated.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatRequest",
    "CompletionRequest",
    "StreamOptions",
    "error_body",
    "usage",
]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False
    continuous_usage_stats: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    min_tokens: int = Field(default=0, ge=0)
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool = False


class CompletionRequest(_Common):
    """POST /v1/completions (one prompt: text or token ids)."""

    prompt: str | list[int] | list[str] | list[list[int]]


class ChatRequest(_Common):
    """POST /v1/chat/completions."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


def error_body(message: str, code: int, err_type: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    """vLLM's ErrorResponse."""
    kind = err_type or {
        400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError",
        500: "InternalServerError",
    }.get(code, "Error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def usage(prompt: int, completion: int, cached: int, *, details: bool = True,
          chat_chunk: bool = False) -> dict[str, Any]:
    """vLLM's UsageInfo as it serializes; ``details`` adds ``prompt_tokens_details``
    (``--enable-prompt-tokens-details``), ``chat_chunk`` the ``completion_tokens_details:
    null`` that chat stream chunks (not the final usage chunk) carry."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }
    if chat_chunk:
        out["completion_tokens_details"] = None
    if details:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out
