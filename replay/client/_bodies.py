"""Request bodies and the client's prediction of prefix-cache reuse.

Bodies are built as bytes straight from numpy token arrays with orjson
(``OPT_SERIALIZE_NUMPY``), so a 100K-token prompt costs well under a millisecond
to encode instead of a Python list round trip.

Carrying generated tokens: with token-id prompts, vLLM only returns the ids of
what it generated when ``return_token_ids`` is on (without logprobs). The price
is that its first chunk echoes the whole prompt's ids (``prompt_token_ids``); the
SSE parser's line limit is sized for that and ``bench/client_bench.py`` measures
it. ``carry_output=False`` turns it off (the next turn then resends workload
blocks instead of the server's tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import orjson

from replay.client._chat import ChatCodec

if TYPE_CHECKING:
    from replay.client._outcome import StreamOutcome

__all__ = [
    "BodySpec",
    "CacheMark",
    "ChainEncoder",
    "Hashed",
    "PrefixCacheModel",
    "build_body",
    "chat_text",
    "ids_text",
    "prefix_keys",
]

_BODY_OPTS = orjson.OPT_SERIALIZE_NUMPY


@dataclass(frozen=True, slots=True)
class BodySpec:
    """What every request of a run shares."""

    model: str
    api: Literal["completions", "chat"] = "completions"
    carry_output: bool = True
    """Ask for ``return_token_ids`` so the next turn resends the server's tokens."""
    chat: ChatCodec | None = None
    """Chat mode: words that tokenize exactly, and the template's ids (see
    :mod:`replay.client._chat`); without it chat text is approximate."""


def ids_text(ids: np.ndarray) -> bytes:
    """Token ids as the inside of a JSON array (``1,2,3``)."""
    return orjson.dumps(np.ascontiguousarray(ids, dtype=np.int32), option=_BODY_OPTS)[1:-1]


def build_body(spec: BodySpec, prompt: np.ndarray, output_tokens: int,
               *, prompt_text: bytes | None = None) -> bytes:
    """The JSON body of one streamed request with its output length forced;
    ``prompt_text`` is :func:`ids_text` of ``prompt`` when the caller has it."""
    body: dict[str, object] = {
        "model": spec.model,
        "max_tokens": int(output_tokens),
        "min_tokens": int(output_tokens),
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.0,
    }
    if spec.carry_output:
        body["return_token_ids"] = True
    if spec.api == "chat":
        content = spec.chat.text(prompt) if spec.chat is not None else chat_text(prompt)
        body["messages"] = [{"role": "user", "content": content}]
        return orjson.dumps(body, option=_BODY_OPTS)
    text = ids_text(prompt) if prompt_text is None else prompt_text
    return b"".join((orjson.dumps(body)[:-1], b',"prompt":[', text, b"]}"))


_WORDS: dict[int, np.ndarray] = {}


def chat_text(ids: np.ndarray) -> str:
    """Deterministic text for token ids: one short word per id (``t<id>``).

    A stand-in for servers without ``/tokenize``: a real tokenizer splits each
    word into several tokens, so lengths and shared prefixes are NOT exact; chat
    runs use :class:`~replay.client._chat.ChatCodec` wherever the server has one."""
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size == 0:
        return ""
    top = int(arr.max()) + 1
    table = _WORDS.get(0)
    if table is None or table.size < top:
        size = max(top, 1 << 16)
        table = np.array([f"t{i}" for i in range(size)], dtype=object)
        _WORDS[0] = table
    return " ".join(table[arr].tolist())


_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, elementwise on uint64 (wraps modulo 2**64)."""
    z = (z ^ (z >> np.uint64(30))) * _M2
    z = (z ^ (z >> np.uint64(27))) * _M3
    return z ^ (z >> np.uint64(31))


_POS: dict[int, np.ndarray] = {}


def _position_keys(bs: int) -> np.ndarray:
    keys = _POS.get(bs)
    if keys is None:
        keys = _mix(np.arange(1, bs + 1, dtype=np.uint64) * _M1) | np.uint64(1)
        _POS[bs] = keys
    return keys


def prefix_keys(ids: np.ndarray, bs: int, start: int = 0,
                carry: int = 0) -> tuple[np.ndarray, int]:
    """One 64-bit key per full block naming the whole prefix up to that block.

    Vectorised stand-in for vLLM's hash chain: each block's content hash (mixed with
    its position in the sequence) is summed cumulatively, so key ``k`` depends on
    every token of blocks ``0..k``; the running sum is returned to continue later.
    Collisions between different prefixes have probability ~2**-64 per pair.
    """
    full = int(ids.size) // bs
    if full == 0:
        return np.empty(0, dtype=np.uint64), carry
    with np.errstate(over="ignore"):
        blocks = ids[: full * bs].astype(np.uint64).reshape(full, bs)
        content = _mix((blocks * _position_keys(bs)).sum(axis=1, dtype=np.uint64))
        index = np.arange(start + 1, start + full + 1, dtype=np.uint64)
        terms = _mix(content ^ (index * _M1))
        sums = np.cumsum(terms, dtype=np.uint64) + np.uint64(carry)
        keys = _mix(sums ^ _mix(index))
    return keys, int(sums[-1])


@dataclass(frozen=True, slots=True)
class Hashed:
    """A prompt's block keys (see :func:`prefix_keys`), kept so that a later prompt
    starting with the same blocks hashes only what it adds."""

    ids: np.ndarray
    keys: list[int]
    carry: int
    tail: np.ndarray
    """Tokens after the last full block."""
    shift: int = 0
    """Tokens the server puts before the workload's (a chat template's header):
    the workload's shared prefix ends this much later in ``ids``."""


@dataclass(slots=True)
class CacheMark:
    """Where a prompt's key chain ended, so the server's generated tokens can be
    appended to the model without rehashing the prompt."""

    expected: int | None
    """Prompt tokens an infinite cache could reuse; None when that rests on a race the
    client cannot see (:meth:`PrefixCacheModel.observe`)."""
    blocks: int
    carry: int
    tail: np.ndarray
    """Tokens after the last full block."""
    scope: object
    replica: int = 0
    """The server the prompt is sent to (a fleet's replica; ``replay.load._routing``)."""


class PrefixCacheModel:
    """An infinite prefix cache with the server's block size, fed the exact ids sent.

    vLLM rules: only whole blocks hit, a block hits only if every block before it
    hit too (vLLM's hash chain; here one key per prefix, see :func:`prefix_keys`),
    and the last prompt token is always computed, so a prompt of ``n`` tokens
    reuses at most ``(n - 1) // block_size`` blocks. After a response, the full
    blocks of prompt plus generated tokens (all but the last, whose KV is never
    computed) are cached too, as the server does. Prefixes inside the workload's
    shared prefix go to a run-wide set; longer ones to a set per session instance
    (its salt makes them unreachable from anywhere else), dropped when the
    instance ends so memory stays bounded on long runs. Every prefix of a stored
    prefix is stored too, so the longest hit is found by binary search.

    A run-wide block hits only once the server has computed it: a request that
    brings new shared blocks (``owner``, its outcome) makes them hits when its first
    token has arrived, as a server caches a prompt's blocks after its prefill step;
    lanes that start together with one system prompt all miss it, as they do on the
    server. An owner that failed before any token hands them to the next request.

    Which of two requests sent together the server schedules first is not the
    client's to know: a request whose reusable prefix stops at a shared block whose
    owner has no first token yet may find it computed (the owner's prefill ended
    before this one was scheduled) or not. Its expectation is then unknown (None),
    not a guess: the rest are exact for an infinite cache.
    """

    def __init__(self, block_size: int) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.block_size = block_size
        self._shared: set[int] = set()
        self._scopes: dict[object, set[int]] = {}
        self._pending: dict[int, StreamOutcome] = {}
        """Shared blocks whose owner had no first token yet when last looked at."""

    def hash_prompt(self, prompt: np.ndarray, base: Hashed | None = None,
                    shift: int = 0) -> Hashed:
        """Keys of the prompt's full blocks, the chain carry and the leftover tail: the
        costly part, done while the lane thinks (before the request is due). Blocks
        that ``base`` (an earlier prompt) already hashed are not hashed again.
        ``prompt`` is what the server tokenizes; ``shift`` see :attr:`Hashed.shift`."""
        ids = np.ascontiguousarray(prompt, dtype=np.int32)
        bs = self.block_size
        done, keys, carry = 0, [], 0
        if base is not None:
            upto = len(base.keys) * bs
            if ids.size >= upto and np.array_equal(ids[:upto], base.ids[:upto]):
                done, keys, carry = len(base.keys), base.keys, base.carry
        more, carry = prefix_keys(ids[done * bs:], bs, done, carry)
        if more.size:
            keys = keys + more.tolist()
        return Hashed(ids=ids, keys=keys, carry=carry, tail=ids[len(keys) * bs:].copy(),
                      shift=shift)

    def observe(self, prompt: np.ndarray, shared_tokens: int, scope: object,
                hashed: Hashed | None = None, owner: StreamOutcome | None = None) -> CacheMark:
        """The tokens this prompt can reuse (``.expected``); its blocks are remembered.
        Call it when the request is sent (order matters between lanes); pass
        ``hashed`` from :meth:`hash_prompt` to keep the send path cheap, and the
        request's outcome as ``owner`` so its new shared blocks wait for its prefill."""
        h = hashed if hashed is not None else self.hash_prompt(prompt)
        keys, carry, tail = h.keys, h.carry, h.tail
        n = int(h.ids.size)  # what the server receives (a chat template included)
        shared_tokens += h.shift
        local = self._scopes.setdefault(scope, set())
        shared = self._shared
        pending = self._pending
        lo, hi = 0, len(keys)  # keys[:lo] hit; keys[hi:] miss
        while lo < hi:
            mid = (lo + hi) // 2
            k = keys[mid]
            if (k in shared and (not pending or self._computed(k))) or k in local:
                lo = mid + 1
            else:
                hi = mid
        matched = lo
        n_usable = (n - 1) // self.block_size if n > 0 else 0
        # stopped at a block another request is computing right now: a race, unknown
        racing = pending.get(keys[matched]) if matched < min(n_usable, len(keys)) else None
        raced = racing is not None and not _failed_unstarted(racing)
        limit = min(shared_tokens // self.block_size, len(keys))
        if matched < limit:
            new = keys[matched:limit]
            shared.update(new)
            if owner is not None:
                for k in new:
                    held = pending.get(k)
                    if held is None or _failed_unstarted(held):
                        pending[k] = owner
        local.update(keys[max(matched, limit):])
        return CacheMark(expected=None if raced else min(matched, n_usable) * self.block_size,
                         blocks=len(keys), carry=carry, tail=tail, scope=scope)

    def _computed(self, key: int) -> bool:
        """Whether a shared block is in the server's cache by now (its owner's prefill
        ended: a first token arrived)."""
        owner = self._pending.get(key)
        if owner is None:
            return True
        if owner.chunk_ns:
            del self._pending[key]
            return True
        return False

    def extend(self, mark: CacheMark, output_ids: list[int] | np.ndarray) -> None:
        """Remember the blocks completed by the generated tokens (all but the last)."""
        if len(output_ids) < 2:
            return
        seq = np.concatenate([mark.tail, np.asarray(output_ids[:-1], dtype=np.int32)])
        keys, _ = prefix_keys(seq, self.block_size, mark.blocks, mark.carry)
        if keys.size:
            self._scopes.setdefault(mark.scope, set()).update(keys.tolist())

    def end_scope(self, scope: object) -> None:
        """Forget a finished session instance's private blocks."""
        self._scopes.pop(scope, None)


class ChainEncoder:
    """Bodies and block keys for the successive prompts of one agent chain.

    Each turn resends the whole history, so a prompt usually starts with the
    previous one: only the tokens it adds are encoded to JSON and hashed, and the
    body is the previous turn's text plus theirs. A 100K-token context then costs
    a copy of its bytes per turn, not an encode (~0.5 ms) and a hash (~0.5 ms).
    A prompt that does not start with the previous one (a compacted history) is
    encoded from scratch.
    """

    def __init__(self, spec: BodySpec, cache: PrefixCacheModel) -> None:
        self._spec = spec
        self._cache = cache
        self._ids: np.ndarray | None = None
        self._text = b""
        self._hashed: Hashed | None = None

    def prepare(self, prompt: np.ndarray, output_tokens: int) -> tuple[bytes, Hashed]:
        """The request body and the prompt's block keys."""
        ids = np.ascontiguousarray(prompt, dtype=np.int32)
        text = None
        codec = self._spec.chat if self._spec.api == "chat" else None
        if codec is not None:  # hash what the server tokenizes: template and words
            body = build_body(self._spec, ids, output_tokens)
            self._hashed = self._cache.hash_prompt(codec.server_ids(ids), self._hashed,
                                                   shift=len(codec.prefix_ids))
            return body, self._hashed
        if self._spec.api != "chat":
            prev = self._ids
            if prev is not None and prev.size and ids.size >= prev.size and np.array_equal(
                    ids[:prev.size], prev):
                rest = ids[prev.size:]
                text = self._text + b"," + ids_text(rest) if rest.size else self._text
            else:
                text = ids_text(ids)
            self._ids, self._text = ids, text
        body = build_body(self._spec, ids, output_tokens, prompt_text=text)
        self._hashed = self._cache.hash_prompt(ids, self._hashed)
        return body, self._hashed


def _failed_unstarted(owner: StreamOutcome) -> bool:
    """The request ended without a token: it computed no block the server kept."""
    return owner.status != "ok" and not owner.chunk_ns
