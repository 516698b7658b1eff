"""Request bodies and the client's expected prefix-cache reuse."""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.client._bodies import BodySpec, ChainEncoder, PrefixCacheModel, build_body, chat_text
from replay.client._stream import StreamOutcome
from tests.support.fuzz import examples


def test_completions_body_forces_output_and_streams() -> None:
    prompt = np.arange(5, 105, dtype=np.int32)
    body = orjson.loads(build_body(BodySpec(model="m"), prompt, 37))
    assert body["prompt"] == list(range(5, 105))
    assert body["max_tokens"] == body["min_tokens"] == 37
    assert body["ignore_eos"] is True and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["return_token_ids"] is True
    plain = orjson.loads(build_body(BodySpec(model="m", carry_output=False), prompt, 3))
    assert "return_token_ids" not in plain


def test_chat_body_has_one_word_per_token() -> None:
    prompt = np.array([3, 70000, 3], dtype=np.int32)
    body = orjson.loads(build_body(BodySpec(model="m", api="chat"), prompt, 4))
    assert body["messages"] == [{"role": "user", "content": "t3 t70000 t3"}]
    assert chat_text(np.array([], dtype=np.int32)) == ""


def _reference(prompts: list[tuple[list[int], list[int]]], bs: int) -> list[int]:
    """Independent model: a set of token-tuple prefixes at block boundaries."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for prompt, output in prompts:
        n = len(prompt)
        hit = 0
        for k in range(1, n // bs + 1):
            if tuple(prompt[: k * bs]) in seen:
                hit = k
            else:
                break
        out.append(min(hit, (n - 1) // bs) * bs)
        seq = prompt + output[:-1]
        for k in range(1, len(seq) // bs + 1):
            seen.add(tuple(seq[: k * bs]))
    return out


def test_prefix_model_matches_reference() -> None:
    rng = np.random.default_rng(3)
    bs = 4
    prompts: list[tuple[list[int], list[int]]] = []
    history: list[int] = []
    for _ in range(30):
        r = rng.random()
        if r < 0.3:
            history = history[: int(rng.integers(0, len(history) + 1))]
        elif r < 0.4:
            history = []
        history = history + [int(x) for x in rng.integers(0, 5, size=int(rng.integers(1, 9)))]
        out = [int(x) for x in rng.integers(0, 5, size=int(rng.integers(0, 6)))]
        prompts.append((list(history), out))
        history = history + out
    model = PrefixCacheModel(bs)
    got = []
    for prompt, out in prompts:
        mark = model.observe(np.array(prompt, dtype=np.int32), 0, "scope")
        model.extend(mark, out)
        got.append(mark.expected)
    assert got == _reference(prompts, bs)
    assert any(g > 0 for g in got)


def test_last_token_always_computed() -> None:
    model = PrefixCacheModel(4)
    p = np.arange(8, dtype=np.int32)
    assert model.observe(p, 0, 1).expected == 0
    assert model.observe(p, 0, 1).expected == 4  # (8 - 1) // 4 blocks at most


def test_scopes_isolate_private_blocks_and_share_the_shared_prefix() -> None:
    model = PrefixCacheModel(4)
    p = np.arange(16, dtype=np.int32)
    model.observe(p, 8, "a")
    assert model.observe(p, 8, "b").expected == 8  # only the two shared blocks
    model.end_scope("a")
    assert model.observe(p, 8, "a").expected == 8


def test_shared_blocks_hit_only_once_their_owner_had_a_first_token() -> None:
    """As the server caches a prompt's blocks after its prefill step: the first sender
    of a system prompt misses it; one sent while that owner has no first token may
    find it computed or not (the server's scheduling order: unknown, None); once the
    first answer began, later ones hit; an owner that failed before any token leaves
    the blocks to the next sender."""
    model = PrefixCacheModel(4)
    p = np.arange(16, dtype=np.int32)
    first = StreamOutcome()
    assert model.observe(p, 8, "a", owner=first).expected == 0
    assert model.observe(p, 8, "b", owner=StreamOutcome()).expected is None  # a race
    first.chunk_ns.append(1)
    assert model.observe(p, 8, "c", owner=StreamOutcome()).expected == 8

    model = PrefixCacheModel(4)
    dead, heir = StreamOutcome(), StreamOutcome()
    model.observe(p, 8, "a", owner=dead)
    dead.fail("error", "http_500")
    assert model.observe(p, 8, "b", owner=heir).expected == 0
    heir.chunk_ns.append(1)  # the blocks are now the heir's, and it began
    assert model.observe(p, 8, "c", owner=StreamOutcome()).expected == 8


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["extend", "compact", "fresh", "same"]),
                          st.integers(0, 70)), min_size=1, max_size=8),
       st.sampled_from([1, 4, 16]))
def test_chain_encoder_matches_encoding_from_scratch(steps: list, bs: int) -> None:
    """Whatever the chain does (grow, compact, start over), the incremental body and
    keys are exactly what encoding and hashing the whole prompt give."""
    rng = np.random.default_rng(len(steps) * 100 + bs)
    spec = BodySpec(model="m")
    enc = ChainEncoder(spec, PrefixCacheModel(bs))
    prompt = np.zeros(0, dtype=np.int32)
    for kind, n in steps:
        new = rng.integers(0, 50_000, size=n).astype(np.int32)
        if kind == "extend":
            prompt = np.concatenate([prompt, new])
        elif kind == "compact":
            prompt = np.concatenate([prompt[: len(prompt) // 2], new])
        elif kind == "fresh":
            prompt = new
        body, hashed = enc.prepare(prompt, 7)
        plain = {**orjson.loads(build_body(spec, prompt[:0], 7)), "prompt": prompt.tolist()}
        assert body == orjson.dumps(plain)
        assert body == build_body(spec, prompt, 7)
        again = PrefixCacheModel(bs).hash_prompt(prompt)
        assert hashed.keys == again.keys and hashed.carry == again.carry
        assert np.array_equal(hashed.tail, again.tail)
