"""Block-level prefix cache with LRU eviction inside a fixed KV capacity (vLLM v1 rules).

A sequence's KV lives in blocks of ``block_size`` tokens. A full block is named
by a hash chain: hash(previous block's hash, the block's token ids), so a block
hits only when its whole prefix matches. Blocks no request holds sit in a free
queue, oldest first; they stay reusable until taken for new data (LRU). A
request frees its blocks tail first, so its deepest blocks are evicted first.
Only whole blocks hit, and the last prompt token is always recomputed: a prompt
of ``n`` tokens hits at most ``(n - 1) // block_size`` blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["PrefixCache", "block_hashes"]


def block_hashes(token_ids: Sequence[int], block_size: int, start: int = 0,
                 parent: int | None = None, end: int | None = None) -> list[int]:
    """Chain hashes of the full blocks of ``token_ids[:end]`` from block index ``start``."""
    out: list[int] = []
    h = parent if parent is not None else 0
    stop = len(token_ids) if end is None else min(end, len(token_ids))
    for i in range(start * block_size, stop - block_size + 1, block_size):
        h = hash((h, tuple(token_ids[i:i + block_size])))
        out.append(h)
    return out


class PrefixCache:
    """KV blocks: free LRU queue, hash -> block map, per-block reference counts."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self._cached: dict[int, int] = {}

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    @property
    def used_blocks(self) -> int:
        return self.num_blocks - len(self._free)

    def usage(self) -> float:
        """Fraction of blocks held by requests (vllm:kv_cache_usage_perc)."""
        return self.used_blocks / self.num_blocks

    def longest_hit(self, hashes: Sequence[int], num_tokens: int) -> list[int]:
        """Cached blocks matching the leading ``hashes``, capped so the last token is computed."""
        cap = (num_tokens - 1) // self.block_size
        out: list[int] = []
        for h in hashes[:cap]:
            b = self._cached.get(h)
            if b is None:
                break
            out.append(b)
        return out

    def touch(self, blocks: Sequence[int]) -> None:
        """Take a reference on cached blocks (removing them from the free queue)."""
        for b in blocks:
            if self._ref[b] == 0:
                del self._free[b]
            self._ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        """``n`` fresh blocks, evicting least recently freed ones; None if too few free."""
        if n > len(self._free):
            return None
        out: list[int] = []
        for _ in range(n):
            b, _none = self._free.popitem(last=False)
            h = self._hash[b]
            if h is not None:
                if self._cached.get(h) == b:
                    del self._cached[h]
                self._hash[b] = None
            self._ref[b] = 1
            out.append(b)
        return out

    def register(self, block: int, h: int) -> None:
        """Name a block that just became full; a hash already cached keeps its block."""
        if self._hash[block] is None and h not in self._cached:
            self._hash[block] = h
            self._cached[h] = block

    def free(self, blocks: Sequence[int]) -> None:
        """Drop a request's references, tail first, so deep blocks are evicted first."""
        for b in reversed(blocks):
            self._ref[b] -= 1
            if self._ref[b] == 0:
                self._free[b] = None

    def reset(self) -> bool:
        """Forget every cached hash (POST /reset_prefix_cache)."""
        for b in self._cached.values():
            self._hash[b] = None
        self._cached.clear()
        return True
