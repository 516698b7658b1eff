"""The simulator's deterministic tokenizer (no model files, no downloads).

Text splits into words (``\\w+``) and single non-space symbols. A word of the
form ``t<N>`` with ``N`` in the ordinary range is token ``N`` (so the text the
simulator generates, ``" t<N>"`` per token, tokenizes back to the same ids and
a chat client resending it hits the prefix cache); any other piece maps to
``16 + crc32(piece) % (vocab - 16)``. Ids 0..15 are reserved: the chat
template writes ``<role id> content <end id>`` per message and ends with the
assistant's role id.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

__all__ = ["SimTokenizer"]

_PIECE = re.compile(r"\w+|[^\w\s]")
_ROLE_IDS = {"system": 1, "user": 2, "assistant": 3, "tool": 4, "developer": 5}
_OTHER_ROLE = 6
_END = 7
_FIRST = 16


class SimTokenizer:
    """Text <-> token ids for a vocabulary of ``vocab_size`` ids."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._texts: list[str] | None = None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        out: list[int] = []
        span = self.vocab_size - _FIRST
        for piece in _PIECE.findall(text):
            if piece[0] == "t" and piece[1:].isdigit() and len(piece) < 12:
                n = int(piece[1:])
                if _FIRST <= n < self.vocab_size:
                    out.append(n)
                    continue
            out.append(_FIRST + zlib.crc32(piece.encode()) % span)
        return out

    def token_text(self, token_id: int) -> str:
        """Text of one generated token."""
        return f" t{token_id}"

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of generated tokens (a table lookup: this is on the hot path)."""
        texts = self._texts
        if texts is None:
            texts = self._texts = [f" t{i}" for i in range(self.vocab_size)]
        return "".join(map(texts.__getitem__, token_ids))

    def apply_chat_template(self, messages: Sequence[dict[str, object]]) -> list[int]:
        """Prompt ids of a chat: each message as role id, content ids, end id."""
        out: list[int] = []
        for m in messages:
            out.append(_ROLE_IDS.get(str(m.get("role", "")), _OTHER_ROLE))
            out.extend(self.encode(_content_text(m.get("content"))))
            out.append(_END)
        out.append(_ROLE_IDS["assistant"])
        return out


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return " ".join(parts)
    return str(content)
