"""Token counting and ``usage`` checks for one streamed answer: pure, no I/O.

A server can report its output three ways: token ids on every chunk
(``return_token_ids``), a cumulative ``usage`` on every chunk
(``continuous_usage_stats``), or neither (text only). :class:`TokenCounter`
fixes ONE of these per stream, at the first chunk that carries output, and
counts every later chunk the same way, so a stream that carries ids *and* a
final usage on a chunk with a choice cannot be counted twice.

The server's final ``usage`` is the count of record only if it is possible:
:func:`clean_usage` rejects values that are not counts (a ``malformed``
event), :func:`usage_problem` names values that are counts but impossible
(``bad_usage``): more completion tokens than were asked for, a count that
disagrees with the token ids that arrived, cached tokens above prompt tokens,
negative numbers.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BY_IDS", "BY_TEXT", "BY_USAGE", "TokenCounter", "clean_usage", "usage_problem"]

BY_IDS: Final = "ids"
BY_USAGE: Final = "usage"
BY_TEXT: Final = "text"

_COUNT_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class TokenCounter:
    """Tokens per chunk under the one rule chosen by the stream's first output.

    ``ids``: ``len(token_ids)``; ``usage``: the rise of the cumulative
    ``completion_tokens`` on chunks that have a choice; ``text``: 1 per chunk
    with text. Chunks before the rule is fixed carry no output by definition.
    """

    __slots__ = ("mode", "streamed", "usage_seen")

    def __init__(self) -> None:
        self.mode: str | None = None
        self.streamed = 0
        self.usage_seen = 0
        """The last ``usage.completion_tokens`` seen on any chunk."""

    def count(self, n_ids: int, usage_tokens: int | None, has_choice: bool,
              has_text: bool) -> int:
        """Tokens carried by one event (added to ``streamed``)."""
        mode = self.mode
        if mode is None:
            if n_ids:
                mode = self.mode = BY_IDS
            elif has_choice and usage_tokens is not None and usage_tokens > self.usage_seen:
                mode = self.mode = BY_USAGE
            elif has_text:
                mode = self.mode = BY_TEXT
        if mode == BY_IDS:
            n = n_ids
        elif mode == BY_USAGE:
            n = usage_tokens - self.usage_seen if (
                has_choice and usage_tokens is not None and usage_tokens > self.usage_seen) else 0
        elif mode == BY_TEXT:
            n = 1 if has_text else 0
        else:
            n = 0
        if usage_tokens is not None:
            self.usage_seen = usage_tokens
        self.streamed += n
        return n


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def clean_usage(usage: object) -> dict[str, object] | None:
    """``usage`` if its token counts are integers (or absent/null), else None: junk
    becomes a ``malformed`` record instead of a crash later. Range checks are
    :func:`usage_problem`'s."""
    if not isinstance(usage, dict):
        return None
    for key in _COUNT_KEYS:
        value = usage.get(key)
        if value is not None and not _is_int(value):
            return None
    details = usage.get("prompt_tokens_details")
    if details is not None:
        if not isinstance(details, dict):
            return None
        cached = details.get("cached_tokens")
        if cached is not None and not _is_int(cached):
            return None
    return usage


def cached_tokens(usage: dict[str, object]) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        cached = details.get("cached_tokens")
        return cached if _is_int(cached) else None  # type: ignore[return-value]
    return None


def usage_problem(usage: dict[str, object], counter: TokenCounter,
                  max_tokens: int | None) -> str | None:
    """Why ``usage`` (already :func:`clean_usage`'d) cannot be true, or None."""
    for key in _COUNT_KEYS:
        value = usage.get(key)
        if isinstance(value, int) and value < 0:
            return f"usage {key} is negative ({value})"
    cached = cached_tokens(usage)
    if cached is not None and cached < 0:
        return f"usage cached_tokens is negative ({cached})"
    prompt = usage.get("prompt_tokens")
    if cached is not None and isinstance(prompt, int) and cached > prompt:
        return f"usage says {cached} cached tokens of a {prompt}-token prompt"
    completion = usage.get("completion_tokens")
    if not isinstance(completion, int):
        return None
    if max_tokens is not None and completion > max_tokens:
        return (f"usage says {completion} completion tokens; {max_tokens} were asked for "
                f"and {counter.streamed} arrived")
    streamed = counter.streamed
    if counter.mode in (BY_IDS, BY_USAGE) and completion != streamed:
        return f"usage says {completion} completion tokens; {streamed} arrived"
    if counter.mode == BY_TEXT and completion < streamed:
        return f"usage says {completion} completion tokens; {streamed} chunks of text arrived"
    return None
