"""``DecodeRun`` leaves the engine exactly as the same number of ``step()`` calls would:
same tokens, step ids, step durations, counters and KV cache (blocks, LRU order)."""

from __future__ import annotations

import random

import pytest

from replay.servers.sim import DecodeRun, Engine, load_profile


def _arrivals(seed: int) -> dict[int, list[tuple[str, list[int], int]]]:
    """Requests to add before given step indices (shared prefixes, so the cache hits)."""
    rng = random.Random(seed)
    plan: dict[int, list[tuple[str, list[int], int]]] = {}
    base = [rng.randrange(16, 4000) for _ in range(300)]
    for i in range(40):
        at = rng.randrange(0, 1500)
        prompt = base[: rng.randrange(1, 300)] + [rng.randrange(16, 4000)
                                                  for _ in range(rng.randrange(1, 200))]
        plan.setdefault(at, []).append((f"r{i}", prompt, rng.randrange(2, 400)))
    return plan


def _state(e: Engine) -> tuple[object, ...]:
    reqs = sorted(e.running, key=lambda r: r.rid)
    return (
        [(r.rid, r.tokens, r.step_ids, r.blocks, r.num_computed) for r in reqs],
        [r.rid for r in e.waiting], vars(e.counters), list(e.cache._free),
        dict(e.cache._cached), list(e.cache._ref),
    )


@pytest.mark.parametrize(("seed", "blocks", "noise"), [
    (0, 4000, None), (1, 4000, None), (2, 90, None), (3, 4000, (0.5, 1.0, 1.2, 8.0))])
def test_decode_run_matches_step_by_step(seed: int, blocks: int,
                                         noise: tuple[float, ...] | None) -> None:
    """With ``step_noise`` too: each step's factor is its index's, drawn alike both ways."""
    profile = load_profile("small").model_copy(update={"num_gpu_blocks": blocks,
                                                       "step_noise": noise})
    plan = _arrivals(seed)
    slow, fast = Engine(profile, "auto", seed=seed), Engine(profile, "auto", seed=seed)
    t_slow: list[float] = []
    t_fast: list[float] = []
    done_slow: dict[str, int] = {}
    done_fast: dict[str, int] = {}
    rng = random.Random(seed + 100)
    bulk_steps = 0
    for i in range(4000):  # the step-by-step engine: one step per index
        for rid, prompt, n in plan.get(i, []):
            slow.add(rid, prompt, n)
        if slow.has_work():
            r = slow.step()
            t_slow.append(r.duration_s)
            done_slow.update({q.rid: r.index for q in r.finished})
    i = 0
    while i < 4000:  # the bulk engine: runs that stop before the next arrival
        for rid, prompt, n in plan.get(i, []):
            fast.add(rid, prompt, n)
        if not fast.has_work():
            i += 1
            continue
        nxt = min((a for a in plan if a > i), default=4000)
        run = DecodeRun(fast)
        if run.steps >= 2:
            k = min(run.steps, nxt - i, rng.randrange(1, run.steps + 1))
            durations = run.durations()[:k].tolist()
            first = fast.counters.steps
            finished = run.apply(k)
            t_fast.extend(durations)
            done_fast.update({q.rid: first + k - 1 for q in finished})
            bulk_steps += k
            i += k
        else:
            r = fast.step()
            t_fast.append(r.duration_s)
            done_fast.update({q.rid: r.index for q in r.finished})
            i += 1
    assert bulk_steps > 100  # the fast path really ran
    assert t_fast == t_slow
    if noise is not None:  # the factors really vary, within the quantiles given
        plain = Engine(profile.model_copy(update={"step_noise": None}), "auto", seed=seed)
        base = []
        for i in range(4000):
            for rid, prompt, n in plan.get(i, []):
                plain.add(rid, prompt, n)
            if plain.has_work():
                base.append(plain.step().duration_s)
        ratios = [a / b for a, b in zip(t_slow, base, strict=True) if b > 0]
        assert min(ratios) >= 0.5 - 1e-9 and max(ratios) <= 8.0 + 1e-9
        assert max(ratios) > 4 and min(ratios) < 0.8
    assert done_fast == done_slow
    assert _state(fast) == _state(slow)


def test_decode_run_refuses_what_it_cannot_do() -> None:
    profile = load_profile("small")
    e = Engine(profile, "auto")
    assert DecodeRun(e).steps == 0  # nothing runs
    e.add("a", [100] * 40, 50)
    assert DecodeRun(e).steps == 0  # waiting for prefill
    e.step()
    run = DecodeRun(e)
    assert run.steps == 49  # decoding: up to the step that finishes it
    assert DecodeRun(e, horizon_s=0.0).steps == 2  # no more than can start by then (+1)
    with pytest.raises(ValueError):
        run.apply(50)
    spec = load_profile("kimi-k3-gb300-tp16-dspark")
    s = Engine(spec, "auto")
    s.add("a", [100] * 40, 50)
    s.step()
    assert DecodeRun(s).steps == 0  # speculation draws acceptances step by step
