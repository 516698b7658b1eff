"""The prefix cache gives exactly the hits an independent LRU reference predicts."""

from __future__ import annotations

import random

import pytest

from replay.servers.sim import Engine, PrefixCache, load_profile


def _profile(num_blocks: int, block_size: int = 4, max_len: int = 48):
    return load_profile("small").model_copy(update={
        "num_gpu_blocks": num_blocks, "block_size": block_size, "max_model_len": max_len,
        "max_num_batched_tokens": 4096,
    })


class ReferenceLRU:
    """Slots stamped (finish order, -depth); allocation takes the smallest stamp.

    A different formulation from the implementation (explicit stamps and a min
    search rather than a free queue), following vLLM's rules as documented:
    whole blocks only, the last prompt token always computed, a finished
    request's deepest block evicted first.
    """

    def __init__(self, num_blocks: int, bs: int) -> None:
        self.bs = bs
        self.free: dict[int, tuple[tuple[int, int], tuple[int, ...] | None]] = {
            i: ((-1, i), None) for i in range(num_blocks)
        }
        self.time = 0
        self.evictions = 0

    def run(self, seq: list[int], prompt_len: int) -> int:
        """One request alone: ``seq`` is prompt + the output tokens whose KV got computed."""
        bs = self.bs
        keys = [tuple(seq[: (i + 1) * bs]) for i in range(len(seq) // bs)]
        named = {key: slot for slot, (_s, key) in self.free.items() if key is not None}
        hits = 0
        for key in keys[: (prompt_len - 1) // bs]:
            if key not in named:
                break
            hits += 1
        held = [named[k] for k in keys[:hits]]
        for slot in held:
            del self.free[slot]
        need = -(-len(seq) // bs) - hits
        new = sorted(self.free, key=lambda s: self.free[s][0])[:need]
        for slot in new:
            self.evictions += self.free[slot][1] is not None
            del self.free[slot]
        held += new
        # name the newly full blocks unless another free slot already holds the key
        names: list[tuple[int, ...] | None] = [keys[i] if i < hits else None for i in range(hits)]
        present = {key for (_s, key) in self.free.values() if key is not None}
        for i in range(hits, len(held)):
            key = keys[i] if i < len(keys) else None
            names.append(key if key is not None and key not in present else None)
        for depth, slot in enumerate(held):
            self.free[slot] = ((self.time, -depth), names[depth])
        self.time += 1
        return hits * bs


def _prompts(rng: random.Random, n: int, max_len: int) -> list[tuple[list[int], int]]:
    shared = [[rng.randrange(16, 32000) for _ in range(rng.randrange(4, 24))] for _ in range(4)]
    out = []
    for _ in range(n):
        p = list(rng.choice(shared)) if rng.random() < 0.8 else []
        if p and rng.random() < 0.5:
            p += rng.choice(shared)
        p += [rng.randrange(16, 32000) for _ in range(rng.randrange(1, 10))]
        p = p[: max_len - 8]
        out.append((p, rng.choice([1, 1, 2, 5, 7])))
    return out


@pytest.mark.parametrize("num_blocks,seed", [(12, 0), (12, 1), (20, 2), (1000, 3)])
def test_serial_hits_match_reference(num_blocks: int, seed: int) -> None:
    profile = _profile(num_blocks)
    engine = Engine(profile, "auto", seed=seed)
    ref = ReferenceLRU(num_blocks, profile.block_size)
    rng = random.Random(seed)
    total_hits = 0
    for k, (prompt, max_tokens) in enumerate(_prompts(rng, 60, profile.max_model_len)):
        req = engine.add(f"r{k}", prompt, max_tokens)
        while engine.has_work():
            engine.step()
        assert req.finished and req.num_output == max_tokens
        kv = req.tokens[: len(prompt) + max_tokens - 1]
        expected = ref.run(kv, len(prompt))
        assert req.hit_tokens == expected, f"request {k}"
        assert req.cached_tokens == expected
        total_hits += expected
    assert total_hits > 0
    assert (ref.evictions > 0) == (num_blocks < 100)
    assert engine.counters.prefix_cache_hits == total_hits
    assert engine.cache.free_blocks == num_blocks


def test_fully_cached_prompt_recomputes_last_token() -> None:
    profile = _profile(100, block_size=4)
    engine = Engine(profile, "auto")
    prompt = list(range(100, 112))  # exactly 3 blocks
    for rid in ("a", "b"):
        req = engine.add(rid, prompt, 1)
        while engine.has_work():
            engine.step()
    assert req.hit_tokens == (len(prompt) - 1) // 4 * 4 == 8
    assert req.prefill_computed == 4


def test_partial_block_never_hits() -> None:
    cache = PrefixCache(8, 4)
    from replay.servers.sim import block_hashes

    hashes = block_hashes([1, 2, 3, 4, 5, 6], 4)
    assert len(hashes) == 1  # the 2-token tail is not a block
    assert cache.longest_hit(hashes, 6) == []


def test_lru_evicts_oldest_free_block_first() -> None:
    profile = _profile(6, block_size=4, max_len=24)
    engine = Engine(profile, "auto")
    a = [16] * 8 + [17]   # 2 full blocks + 1 token -> 3 blocks
    b = [18] * 8 + [19]   # 3 blocks
    c = [20] * 4 + [21]   # 2 blocks: evicts a's tail block (1 unnamed partial + oldest)
    for rid, p in (("a", a), ("b", b), ("c", c), ("a2", a)):
        req = engine.add(rid, p, 1)
        while engine.has_work():
            engine.step()
    # c took a's partial block and a's second block (deepest first): a keeps only block 0
    assert req.hit_tokens == 4
