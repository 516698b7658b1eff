"""The simulator's deterministic tokenizer (no model files, no downloads).

Text splits into words (``\\w+``), newlines and single other non-space symbols.
A newline is token 8, as real vocabularies have one. Generated token ``N`` reads
``" t" + letters(N)`` (bijective base 26, ``a``..``z``: 16 -> ``" tp"``), one word
of letters only, so the text the simulator generates tokenizes back to the same
ids, a chat client resending it hits the prefix cache, and a client that builds
exact chat prompts from single-token words (``/detokenize``, then ``/tokenize``)
finds them. ``t<digits>`` also reads as token ``<digits>``. Any other piece maps to
``16 + crc32(piece) % (vocab - 16)``. Ids 0..15 are reserved: the chat template
writes ``<role id> content <end id>`` per message and ends with the assistant's
role id.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

__all__ = ["SimTokenizer"]

_PIECE = re.compile(r"\w+|\n|[^\w\s]")
_ROLE_IDS = {"system": 1, "user": 2, "assistant": 3, "tool": 4, "developer": 5}
_OTHER_ROLE = 6
_END = 7
NEWLINE = 8
_FIRST = 16
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_MAX_LETTERS = 5


def letters(n: int) -> str:
    """``n >= 1`` in bijective base 26 (1 -> a, 26 -> z, 27 -> aa): every string of
    letters is exactly one number."""
    out = []
    while n > 0:
        n, r = divmod(n - 1, 26)
        out.append(_LETTERS[r])
    return "".join(reversed(out))


def _letters_value(word: str) -> int:
    n = 0
    for ch in word:
        n = n * 26 + ord(ch) - 96
    return n


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
            if piece == "\n":
                out.append(NEWLINE)
                continue
            if piece[0] == "t" and 1 < len(piece) <= _MAX_LETTERS + 1:
                rest = piece[1:]
                n = -1
                if rest.isdigit():
                    n = int(rest)
                elif rest.isascii() and rest.isalpha() and rest.islower():
                    n = _letters_value(rest)
                if _FIRST <= n < self.vocab_size:
                    out.append(n)
                    continue
            out.append(_FIRST + zlib.crc32(piece.encode()) % span)
        return out

    def token_text(self, token_id: int) -> str:
        """Text of one token: a generated one reads back as itself."""
        if token_id >= _FIRST:
            return " t" + letters(token_id)
        return "\n" if token_id == NEWLINE else f"<|special_{token_id}|>"

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of tokens (a table lookup: this is on the hot path)."""
        texts = self._texts
        if texts is None:
            texts = self._texts = [self.token_text(i) for i in range(self.vocab_size)]
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
