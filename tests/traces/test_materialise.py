"""Token materialisation: exact lengths, vocabulary, salts, carried outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from traces import Request, Vocab, block_tokens, build_prompt

V = Vocab(size=1000, low=10, avoid=frozenset({11, 12, 500}))
BS = 16


def test_block_tokens_deterministic_in_range_and_avoiding_specials() -> None:
    a = block_tokens(42, 7, BS, V)
    assert a.dtype == np.int32 and a.shape == (BS,)
    assert np.array_equal(a, block_tokens(42, 7, BS, V))
    many = np.concatenate([block_tokens(b, s, BS, V) for b in range(300) for s in (0, 1)])
    assert many.min() >= 10 and many.max() < 1000
    assert not np.isin(many, [11, 12, 500]).any()
    assert len(np.unique(many)) > 900  # spread over the vocabulary
    assert not np.array_equal(a, block_tokens(43, 7, BS, V))
    assert not np.array_equal(a, block_tokens(42, 8, BS, V))


@pytest.mark.cli
def test_block_tokens_same_in_another_process() -> None:
    # The same block must be the same tokens for every client process, or a
    # server's prefix cache would see different prompts from different runs.
    import subprocess
    import sys

    code = ("from traces import Vocab, block_tokens; "
            "print(block_tokens(123456789, 42, 8, Vocab(size=32000, low=5)).tolist())")
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=repo)
    here = block_tokens(123456789, 42, 8, Vocab(size=32_000, low=5)).tolist()
    assert out.stdout.strip() == str(here)


def test_tiny_vocab_and_bad_vocab() -> None:
    only = block_tokens(5, 0, 8, Vocab(size=4, low=3))
    assert set(only.tolist()) == {3}
    with pytest.raises(ValueError):
        block_tokens(5, 0, 8, Vocab(size=3, low=3))
    with pytest.raises(ValueError):
        block_tokens(5, 0, 8, Vocab(size=2, avoid=frozenset({0, 1})))


def _first(tokens: int = 40, ids: tuple[int, ...] = (1, 2, 3), shared: int = 1) -> Request:
    return Request(prompt_tokens=tokens, output_tokens=4, new_block_ids=ids,
                   shared_blocks=shared)


def test_first_prompt_is_the_blocks_with_salt_after_shared() -> None:
    req = _first()
    p = build_prompt(req, BS, V, salt=9, prev_prompt=None, prev_output=())
    assert p.dtype == np.int32 and len(p) == 40
    assert np.array_equal(p[:16], block_tokens(1, 0, BS, V))  # shared: salt 0
    assert np.array_equal(p[16:32], block_tokens(2, 9, BS, V))
    assert np.array_equal(p[32:], block_tokens(3, 9, BS, V)[:8])  # partial block cut
    other_user = build_prompt(req, BS, V, salt=10, prev_prompt=None, prev_output=())
    assert np.array_equal(p[:16], other_user[:16])  # intended sharing stays
    assert not np.array_equal(p[16:], other_user[16:])  # accidental sharing goes


def test_append_carries_previous_prompt_and_actual_output() -> None:
    prev = build_prompt(_first(), BS, V, 9, None, ())
    generated = [777, 778, 779]
    # 40 prompt tokens = 2 full blocks + partial: keeping 2 blocks appends.
    nxt = Request(prompt_tokens=70, output_tokens=4, prefix_blocks=2, new_block_ids=(4, 5, 6),
                  shared_blocks=1)
    p = build_prompt(nxt, BS, V, 9, prev, generated)
    assert len(p) == 70
    assert np.array_equal(p[:40], prev)
    assert p[40:43].tolist() == generated
    # The rest: position p takes token p % BS of block p // BS (blocks 2, 3, 4).
    stream = np.concatenate([block_tokens(b, 9, BS, V) for b in (4, 5, 6)])
    assert np.array_equal(p[43:], stream[43 - 32:70 - 32])


def test_append_longer_than_prompt_is_truncated() -> None:
    prev = build_prompt(_first(), BS, V, 9, None, ())
    nxt = Request(prompt_tokens=41, output_tokens=1, prefix_blocks=2, new_block_ids=(4,))
    p = build_prompt(nxt, BS, V, 9, prev, [1, 2, 3, 4, 5])
    assert len(p) == 41 and np.array_equal(p[:40], prev) and p[40] == 1


def test_compaction_keeps_only_the_prefix_blocks() -> None:
    prev = build_prompt(_first(tokens=48, ids=(1, 2, 3)), BS, V, 9, None, ())
    nxt = Request(prompt_tokens=35, output_tokens=1, prefix_blocks=1, new_block_ids=(8, 9, 10),
                  shared_blocks=1)
    p = build_prompt(nxt, BS, V, 9, prev, [5, 5, 5])
    assert len(p) == 35
    assert np.array_equal(p[:16], prev[:16])
    assert np.array_equal(p[16:32], block_tokens(8, 9, BS, V))
    assert np.array_equal(p[32:], block_tokens(9, 9, BS, V)[:3])  # output not carried


def test_inconsistent_request_is_padded_to_exact_length() -> None:
    req = Request(prompt_tokens=50, output_tokens=1, new_block_ids=(1,))  # 1 block for 50
    p = build_prompt(req, BS, V, 3, None, ())
    assert len(p) == 50 and p.min() >= 10
    assert np.array_equal(p, build_prompt(req, BS, V, 3, None, ()))


def test_prefix_without_previous_prompt_is_a_programming_error() -> None:
    req = Request(prompt_tokens=32, output_tokens=1, prefix_blocks=1, new_block_ids=(1,))
    with pytest.raises(ValueError):
        build_prompt(req, BS, V, 0, None, ())
