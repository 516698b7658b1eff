"""The performance model without a clock: batching, chunked prefill, preemption, speculation."""

from __future__ import annotations

import pytest

from replay.servers.sim import Engine, list_profiles, load_profile


def _drain(engine: Engine) -> list:
    steps = []
    while engine.has_work():
        steps.append(engine.step())
    return steps


def test_profiles_load_and_carry_published_ratios() -> None:
    """Step-time ratios hold at any context (the decode tables are in test_profiles)."""
    assert {"small", "instant", "kimi-k3-gb300-tp16", "kimi-k3-gb300-tp16-dspark"} <= set(
        list_profiles())
    k = load_profile("kimi-k3-gb300-tp16")
    ls, auto = k.backends["latency_specialized"], k.backends["auto"]
    assert auto.step_s_batch1 / ls.step_s_batch1 == pytest.approx(1.88)
    assert auto.step_s_batch64 / ls.step_s_batch64 == pytest.approx(1.62)
    assert k.gpu_count == 16
    for ctx in (0, 10_000, 3_000_000):
        ratio = k.step_s("auto", 1, ctx, 0) / k.step_s("latency_specialized", 1, ctx, 0)
        assert ratio == pytest.approx(1.88)
    d = load_profile("kimi-k3-gb300-tp16-dspark")
    assert d.speculative is not None and d.speculative.num_speculative_tokens == 7
    assert d.speculative.mean_acceptance_length == pytest.approx(6)
    slow, fast = (d.backends[b].step_s_batch1 for b in ("auto", "latency_specialized"))
    assert slow / fast == pytest.approx(842 / 488)


def test_continuous_batching_caps_at_max_num_seqs() -> None:
    profile = load_profile("small").model_copy(update={"max_num_seqs": 4})
    engine = Engine(profile, "auto")
    reqs = [engine.add(f"r{i}", [100 + i] * 20, 10) for i in range(10)]
    steps = _drain(engine)
    assert max(s.decode_batch for s in steps) == 4
    assert all(r.finished and r.num_output == 10 for r in reqs)
    assert engine.counters.generation_tokens == 100
    # later requests start only once earlier ones finish
    assert min(reqs[4].step_ids) > min(reqs[0].step_ids) + 9 - 1


def test_step_time_follows_model() -> None:
    profile = load_profile("small")
    engine = Engine(profile, "latency_specialized")
    for i in range(64):
        engine.add(f"r{i}", [200 + i] * 10, 5)
    steps = _drain(engine)
    full = [s for s in steps if s.decode_batch == 64]
    assert full
    for s in full:
        assert s.duration_s == pytest.approx(
            0.060 * (1 + s.ctx_tokens / profile.ctx_ref_tokens) + s.prefill_tokens / 200000.0)


def test_chunked_prefill_delays_decode() -> None:
    profile = load_profile("small").model_copy(update={"max_num_batched_tokens": 256})
    engine = Engine(profile, "auto")
    a = engine.add("a", [300] * 10, 50)
    for _ in range(3):
        engine.step()
    b = engine.add("b", list(range(1000, 2000)), 2)  # 1000 tokens: 4 chunks of <=255
    chunk_steps = []
    while not b.num_output:
        s = engine.step()
        chunk_steps.append(s)
        assert a in [r for r, _t in s.emissions]  # decode keeps going in every step
        assert s.prefill_tokens <= 255
    assert len(chunk_steps) == 4
    assert sum(s.prefill_tokens for s in chunk_steps) == 1000
    assert all(s.duration_s > profile.step_s("auto", 1, 0, 0) for s in chunk_steps)


def test_preemption_when_kv_is_full_and_everything_finishes() -> None:
    profile = load_profile("small").model_copy(update={
        "num_gpu_blocks": 40, "block_size": 16, "max_model_len": 640, "max_num_seqs": 8,
    })
    engine = Engine(profile, "auto")
    reqs = [engine.add(f"r{i}", [400 + i] * 100, 100) for i in range(6)]
    _drain(engine)
    assert engine.counters.preemptions > 0
    assert engine.counters.preemptions == sum(r.preemptions for r in reqs)
    assert all(r.finished and r.num_output == 100 for r in reqs)
    assert engine.cache.free_blocks == 40
    recomputed = sum(r.prefill_computed for r in reqs) - sum(
        r.num_prompt - r.cached_tokens for r in reqs)
    assert recomputed > 0  # preempted requests recompute prompt + output
    c = engine.counters
    # as vLLM: a victim's re-lookup is counted apart from the exported counters
    assert c.prefix_cache_queries == sum(r.num_prompt for r in reqs)
    assert c.preempted_prefix_cache_queries > 0
    assert c.prefix_cache_hits == sum(r.hit_tokens for r in reqs)
    assert c.preempted_prefix_cache_hits == sum(r.preempted_hit_tokens for r in reqs)


def test_speculative_decoding_counts_and_acceptance() -> None:
    profile = load_profile("kimi-k3-gb300-tp16-dspark")
    engine = Engine(profile, "auto")
    req = engine.add("x", [500] * 3, 601)
    steps = _drain(engine)
    decode = [s for s in steps if s.decode_batch]
    c = engine.counters
    assert req.num_output == 601
    assert len(decode) == 100  # first token from prefill, then 6 tokens per step
    assert c.spec_drafts == 100 and c.spec_draft_tokens == 700
    assert 1 + c.spec_accepted_tokens / c.spec_drafts == pytest.approx(6)


def test_speculative_acceptance_distribution_is_sampled() -> None:
    base = load_profile("kimi-k3-gb300-tp16-dspark")
    spec = base.speculative.model_copy(update={"acceptance_pmf": [0.5, 0, 0, 0, 0, 0, 0, 0.5]})
    engine = Engine(base.model_copy(update={"speculative": spec}), "auto", seed=3)
    engine.add("x", [500] * 3, 100_000)
    for _ in range(2001):
        engine.step()
    c = engine.counters
    assert c.spec_drafts == 2000
    assert c.spec_accepted_tokens / c.spec_drafts == pytest.approx(3.5, abs=0.25)
    assert c.spec_accepted_tokens % 7 == 0


def test_outputs_are_deterministic_and_in_vocab() -> None:
    runs = []
    for _ in range(2):
        engine = Engine(load_profile("small"), "auto", seed=7)
        req = engine.add("same-id", [20] * 5, 50)
        _drain(engine)
        runs.append(req.tokens[5:])
    assert runs[0] == runs[1]
    assert all(16 <= t < 32000 for t in runs[0])
