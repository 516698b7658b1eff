"""Token materialisation: block ids -> token ids inside a model's vocabulary.

Pure and vectorised (numpy). Each (block id, salt) maps to ``block_size``
deterministic token ids drawn with a counter-based mixer (splitmix64), so the
same block is the same tokens in every process. Blocks before a request's
``shared_blocks`` use salt 0 (the system prompt and tools stay shared across
users); later blocks use the caller's per-user salt (two users replaying the
same session do not share by accident). A turn that appends to the whole
previous prompt starts from the previous prompt plus the tokens the server
actually generated, as a real agent would resend them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from traces._models import Request

__all__ = ["Vocab", "block_tokens", "build_prompt"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_PAD_TAG = 0x5DEECE66D1CE4E5B  # separates filler tokens from any block id


@dataclass(frozen=True)
class Vocab:
    """Token ids allowed in prompts: ``[low, size)`` minus ``avoid``."""

    size: int
    low: int = 0
    avoid: frozenset[int] = frozenset()


@lru_cache(maxsize=16)
def _allowed(vocab: Vocab) -> np.ndarray:
    if vocab.size <= vocab.low or vocab.low < 0:
        raise ValueError(f"empty vocabulary range [{vocab.low}, {vocab.size})")
    ids = np.arange(vocab.low, vocab.size, dtype=np.int64)
    if vocab.avoid:
        ids = ids[~np.isin(ids, np.fromiter(vocab.avoid, dtype=np.int64))]
    if not len(ids):
        raise ValueError("every token id in the vocabulary range is avoided")
    if ids[-1] > np.iinfo(np.int32).max:
        raise ValueError("vocabulary ids must fit in int32")
    out = ids.astype(np.int32)
    out.setflags(write=False)
    return out


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wraps modulo 2**64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(z ^ (z >> np.uint64(31)))


def _tokens_for(keys: np.ndarray, block_size: int, vocab: Vocab) -> np.ndarray:
    """(n, block_size) token ids for n uint64 block keys."""
    allowed = _allowed(vocab)
    base = _mix(keys)
    pos = (np.arange(1, block_size + 1, dtype=np.uint64) * np.uint64(_GOLDEN))
    z = _mix(base[:, None] + pos[None, :])
    return allowed[(z % np.uint64(len(allowed))).astype(np.int64)]


def _keys(block_ids: Sequence[int], salts: Sequence[int]) -> np.ndarray:
    ids = np.fromiter((b & _M64 for b in block_ids), dtype=np.uint64, count=len(block_ids))
    s = np.fromiter(((x * _GOLDEN) & _M64 for x in salts), dtype=np.uint64, count=len(salts))
    return _mix(ids ^ _mix(s + np.uint64(1)))


def _u64(values: Sequence[int]) -> np.ndarray:
    """Python ints as uint64 modulo 2**64: one C conversion when they fit in int64."""
    try:
        return np.asarray(values, dtype=np.int64).view(np.uint64)
    except OverflowError:
        return np.fromiter((v & _M64 for v in values), dtype=np.uint64, count=len(values))


def _salt_keys(block_ids: np.ndarray, shared: np.ndarray, salt: int) -> np.ndarray:
    """:func:`_keys` for one salt, with salt 0 where ``shared`` (vectorised)."""
    own = _mix(np.array([((salt * _GOLDEN) & _M64)], dtype=np.uint64) + np.uint64(1))[0]
    zero = _mix(np.array([1], dtype=np.uint64))[0]
    return _mix(block_ids ^ np.where(shared, zero, own))


def block_tokens(block_id: int, salt: int, block_size: int, vocab: Vocab) -> np.ndarray:
    """The ``block_size`` token ids (int32) of one block under one salt."""
    return np.asarray(_tokens_for(_keys([block_id], [salt]), block_size, vocab)[0])


def _filler(n: int, start: int, salt: int, vocab: Vocab) -> np.ndarray:
    """Tokens for positions no block covers (an inconsistent request): still deterministic."""
    key = np.array([(_PAD_TAG ^ ((salt * _GOLDEN) & _M64)) & _M64], dtype=np.uint64)
    pos = np.arange(start + 1, start + n + 1, dtype=np.uint64) * np.uint64(_GOLDEN)
    z = _mix(_mix(key) + pos)
    allowed = _allowed(vocab)
    return allowed[(z % np.uint64(len(allowed))).astype(np.int64)]


def build_prompt(
    request: Request,
    block_size: int,
    vocab: Vocab,
    salt: int,
    prev_prompt: np.ndarray | None,
    prev_output: Sequence[int],
) -> np.ndarray:
    """Exactly ``request.prompt_tokens`` token ids (int32) for this request.

    With a previous prompt whose full blocks are all kept (``prefix_blocks``
    covers them), the prompt starts with ``prev_prompt + prev_output``;
    otherwise with ``prev_prompt[:prefix_blocks * block_size]``. Every later
    position ``p`` takes token ``p % block_size`` of block ``p // block_size``.
    """
    total = request.prompt_tokens
    prefix = request.prefix_blocks
    if prev_prompt is None:
        if prefix:
            raise ValueError("prefix_blocks > 0 needs the previous prompt")
        head = np.empty(0, dtype=np.int32)
    elif prefix >= len(prev_prompt) // block_size:
        out = np.asarray(prev_output, dtype=np.int32).reshape(-1)
        head = np.concatenate([np.asarray(prev_prompt, dtype=np.int32), out])
    else:
        head = np.asarray(prev_prompt[: prefix * block_size], dtype=np.int32)
    if len(head) >= total:
        return np.ascontiguousarray(head[:total])

    start = len(head)
    first_block = start // block_size
    last_block = (total - 1) // block_size
    parts = [head]
    # Positions inside the kept prefix but past the head (prefix longer than
    # what was carried): no block id is known there, use filler tokens.
    gap_end = min(total, prefix * block_size)
    if start < gap_end:
        parts.append(_filler(gap_end - start, start, salt, vocab))
        start = gap_end
        first_block = start // block_size
    if start < total:
        lo = max(first_block, prefix)
        hi = min(last_block + 1, prefix + len(request.new_block_ids))
        if hi > lo:
            ids = _u64(request.new_block_ids[lo - prefix : hi - prefix])
            shared = np.arange(lo, hi) < request.shared_blocks
            stream = _tokens_for(_salt_keys(ids, shared, salt), block_size, vocab).reshape(-1)
            offset = start - lo * block_size
            chunk = stream[offset : offset + (total - start)]
            parts.append(chunk)
            start += len(chunk)
        if start < total:
            parts.append(_filler(total - start, start, salt, vocab))
    return np.ascontiguousarray(np.concatenate(parts).astype(np.int32, copy=False))
