"""Exact prompts on the chat API: text that the server tokenizes to the ids we mean.

The chat API takes text, and the server applies its chat template and tokenizer.
To send a workload's token counts and shared prefixes exactly, the client needs
words that tokenize as one token each and do not merge with their neighbours.
For byte-level BPE and SentencePiece vocabularies these are the tokens made of a
leading space and letters (``" cache"``): the pre-tokenizer splits text at those
spaces, so a run of them tokenizes back to exactly the same ids.

:func:`fetch_chat_codec` asks the server itself (no tokenizer on the client):

1. ``/detokenize`` of ``[0, NL, 1, NL, 2, ...]`` names the tokens (``NL`` is the
   newline token; a chunk whose text does not split into one line per id, because
   some token holds a newline, is skipped);
2. ``/tokenize`` of the candidates' concatenation keeps those that come back
   exactly (``add_special_tokens`` off);
3. ``/tokenize`` with ``messages`` (the chat template applied, as a chat request
   is) of two different contents gives the template's ids before and after the
   content, and proves the content is tokenized as planned.

A prompt of ``n`` workload ids then becomes ``prefix + words[ids[:n-P-S] % W] +
suffix``: exactly ``n`` server tokens (when ``n >= P + S``), the same workload ids
give the same text, and :meth:`ChatCodec.server_ids` is that exact sequence, which
the prefix-cache model hashes so that predicted hits follow vLLM's real blocks.

The preflight is bounded whatever the server answers: at most
:data:`MAX_PREFLIGHT_REQUESTS` requests and :data:`MAX_PREFLIGHT_S` seconds in
all, each answer read up to a size limit, and a chunk is bisected only when its
text has *more* lines than ids (a token holding a newline), so a server answering
``""`` costs one request per chunk, not a bisection down to single ids.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import aiohttp
import numpy as np
import orjson

from replay.client._limits import read_limited
from replay.errors import TargetError

__all__ = ["MAX_PREFLIGHT_REQUESTS", "MAX_PREFLIGHT_S", "ChatCodec", "fetch_chat_codec"]

_WORD = re.compile(r" [A-Za-z]{2,24}")
_DETOK_CHUNK = 512
_MIN_SPLIT = 1
_WANT_WORDS = 8192
_MIN_WORDS = 16
_MAX_SCAN = 1 << 18
_VERIFY_CHUNK = 256
MAX_PREFLIGHT_REQUESTS = 8192
"""Requests the chat preflight may send in all (a well-behaved vLLM needs a few
hundred)."""
MAX_PREFLIGHT_S = 300.0
"""Seconds the chat preflight may take in all."""


class _Budget:
    """What is left of the preflight's requests and time; the first request past
    either ends it with one line naming the limit."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.left = MAX_PREFLIGHT_REQUESTS
        self.until = time.monotonic() + MAX_PREFLIGHT_S

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0 or time.monotonic() > self.until:
            raise TargetError(
                f"{self.root}: the chat preflight (/tokenize, /detokenize) did not finish "
                f"within {MAX_PREFLIGHT_REQUESTS} requests and {MAX_PREFLIGHT_S:g} s; "
                "the server's tokenizer answers do not fit (use --api completions)")


@dataclass(frozen=True)
class ChatCodec:
    """Workload ids to chat text, and the exact ids the server will see."""

    word_ids: tuple[int, ...]
    """Server token ids of the single-token words, in table order."""
    words: tuple[str, ...]
    prefix_ids: tuple[int, ...]
    """The chat template's ids before the content (BOS, role header...)."""
    suffix_ids: tuple[int, ...]
    """... and after it (end of turn, generation prompt)."""
    _table: np.ndarray = field(init=False, repr=False, compare=False)
    _id_table: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.words or len(self.words) != len(self.word_ids):
            raise ValueError("a chat codec needs words and their ids, one for one")
        object.__setattr__(self, "_table", np.array(self.words, dtype=object))
        object.__setattr__(self, "_id_table", np.array(self.word_ids, dtype=np.int64))

    @property
    def overhead(self) -> int:
        """Template tokens around the content."""
        return len(self.prefix_ids) + len(self.suffix_ids)

    def _content(self, ids: np.ndarray) -> np.ndarray:
        arr = np.asarray(ids, dtype=np.int64)
        keep = max(0, arr.size - self.overhead)
        return arr[:keep] % len(self.words)

    def text(self, ids: np.ndarray) -> str:
        """The user message content for a prompt of ``len(ids)`` server tokens."""
        return "".join(self._table[self._content(ids)].tolist())

    def server_ids(self, ids: np.ndarray) -> np.ndarray:
        """The token ids the server builds from :meth:`text` (template included)."""
        content = self._id_table[self._content(ids)]
        return np.concatenate([np.asarray(self.prefix_ids, dtype=np.int64), content,
                               np.asarray(self.suffix_ids, dtype=np.int64)]).astype(np.int32)


async def _post(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                body: dict[str, object], budget: _Budget) -> dict[str, object]:
    budget.spend()
    left = budget.until - time.monotonic()
    timeout = aiohttp.ClientTimeout(total=max(1.0, min(60.0, left)), sock_connect=10)
    try:
        async with session.post(url, data=orjson.dumps(body), timeout=timeout,
                                headers={**headers, "Content-Type": "application/json"}) as r:
            status = r.status
            raw = await read_limited(r, url)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise TargetError(f"{url}: {type(exc).__name__}: {exc}") from None
    if status != 200:
        raise TargetError(f"{url} answered HTTP {status}: chat mode needs vLLM's /tokenize "
                          "and /detokenize to build exact prompts")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise TargetError(f"{url}: not JSON") from None
    if not isinstance(data, dict):
        raise TargetError(f"{url}: not a JSON object")
    return data


async def _tokenize(session: aiohttp.ClientSession, root: str, headers: dict[str, str],
                    body: dict[str, object], budget: _Budget) -> list[int]:
    data = await _post(session, f"{root}/tokenize", headers, body, budget)
    tokens = data.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise TargetError(f"{root}/tokenize: no token list in the answer")
    return tokens


async def _candidates(session: aiohttp.ClientSession, root: str, headers: dict[str, str],
                      model: str, vocab_size: int, newline: int,
                      budget: _Budget) -> dict[int, str]:
    found: dict[int, str] = {}
    for start in range(0, min(vocab_size, _MAX_SCAN), _DETOK_CHUNK):
        pending = [list(range(start, min(start + _DETOK_CHUNK, vocab_size)))]
        while pending:
            ids = pending.pop()
            seq = [x for i in ids for x in (i, newline)]
            data = await _post(session, f"{root}/detokenize", headers,
                               {"model": model, "tokens": seq}, budget)
            text = data.get("prompt")
            parts = text.split("\n") if isinstance(text, str) else []
            if len(parts) == len(ids) + 1:
                found.update((i, p) for i, p in zip(ids, parts, strict=False)
                             if _WORD.fullmatch(p))
            elif len(parts) > len(ids) + 1 and len(ids) > _MIN_SPLIT:
                # a token holds a newline: lines do not align (fewer lines, or no
                # text: the server dropped something, and halving would not help)
                half = len(ids) // 2
                pending += [ids[:half], ids[half:]]
        if len(found) >= _WANT_WORDS:
            break
    return found


async def _verified(session: aiohttp.ClientSession, root: str, headers: dict[str, str],
                    model: str, cands: dict[int, str], budget: _Budget) -> list[int]:
    """The candidates whose concatenation tokenizes back to exactly themselves."""
    keep: list[int] = []
    pending = [list(cands)[i:i + _VERIFY_CHUNK] for i in range(0, len(cands), _VERIFY_CHUNK)]
    while pending:
        group = pending.pop()
        got = await _tokenize(session, root, headers, {
            "model": model, "prompt": "".join(cands[i] for i in group),
            "add_special_tokens": False}, budget)
        if got == group:
            keep += group
        elif len(group) > 1:
            half = len(group) // 2
            pending += [group[:half], group[half:]]
    return sorted(keep)


def _split_template(a: list[int], b: list[int]) -> tuple[int, int]:
    """Lengths of the common prefix and common suffix of two tokenized chats."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


async def fetch_chat_codec(session: aiohttp.ClientSession, root: str,
                           headers: dict[str, str], model: str,
                           vocab_size: int) -> ChatCodec:
    """Build the codec from the server's tokenizer and chat template (see module doc)."""
    budget = _Budget(root)
    newline = await _tokenize(session, root, headers,
                              {"model": model, "prompt": "\n", "add_special_tokens": False},
                              budget)
    if len(newline) != 1:
        raise TargetError(f"{root}: a newline is not one token; chat mode cannot build "
                          "exact prompts for this tokenizer (use --api completions)")
    cands = await _candidates(session, root, headers, model, vocab_size, newline[0], budget)
    ids = await _verified(session, root, headers, model, cands, budget)
    if len(ids) < _MIN_WORDS:
        raise TargetError(f"{root}: only {len(ids)} single-token words in the vocabulary; "
                          "chat mode cannot build exact prompts (use --api completions)")
    words = [cands[i] for i in ids]
    probes = (ids[: min(16, len(ids) // 2)], ids[len(ids) // 2:][:16])
    chats = []
    for group in probes:
        content = "".join(cands[i] for i in group)
        chats.append(await _tokenize(session, root, headers, {
            "model": model, "messages": [{"role": "user", "content": content}],
            "add_generation_prompt": True}, budget))
    p, s = _split_template(*chats)
    for group, chat in zip(probes, chats, strict=True):
        if chat[p:len(chat) - s] != group:
            raise TargetError(f"{root}: the chat template changes the message text "
                              "(e.g. trims it), so prompts cannot be exact; use --api "
                              "completions")
    first = chats[0]
    return ChatCodec(word_ids=tuple(ids), words=tuple(words), prefix_ids=tuple(first[:p]),
                     suffix_ids=tuple(first[len(first) - s:]))
