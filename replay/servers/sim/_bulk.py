"""Many pure-decode engine steps at once, exactly as that many ``Engine.step()`` calls.

While nothing waits and every running request decodes one token a step (no
speculation, no burst), the next steps are fixed until a request finishes: each
emits one token per request and the step time follows from the batch and the
context, which grows by the batch each step. :class:`DecodeRun` plans such a
run (``steps``: how many may go at once; ``durations``), and ``apply(k)`` makes
the engine's state what ``k`` ``step()`` calls would have left: the same
tokens, step ids, counters and KV blocks, taken in the same order (step, then
admission order), so later LRU evictions are unchanged. Full blocks are named
in the prefix cache after the run instead of step by step; that differs only if
two running requests produce the very same block chain at once.

Used by the twin (``replay.twin``), where a step per asyncio event was the cost.
"""

from __future__ import annotations

import numpy as np

from replay.servers.sim._engine import Engine, SimRequest
from replay.servers.sim._noise import noise_factors

__all__ = ["DecodeRun"]


class DecodeRun:
    """A plan of up to ``steps`` pure-decode steps of ``engine`` (0: none applies)."""

    def __init__(self, engine: Engine, max_steps: int = 1 << 20,
                 horizon_s: float | None = None) -> None:
        """``horizon_s``: plan no more steps than can start within it (a bound: the
        steps only get longer as the context grows)."""
        self.engine = engine
        self.steps = 0
        p = engine.profile
        running = engine.running
        b = len(running)
        if (engine.waiting or not b or p.speculative is not None or p.burst_tokens != 1
                or b > p.max_num_batched_tokens):
            return
        bs = p.block_size
        k = max_steps
        ctx = 0
        blocks_needed = 0
        for req in running:
            n_tok = len(req.tokens)
            out = n_tok - len(req.prompt)
            if out <= 0 or req.num_computed != n_tok - 1:
                return
            left = min(req.max_tokens - out, p.max_model_len - n_tok)
            if left < k:
                k = left
            ctx += n_tok
        if horizon_s is not None:
            first = p.step_s(engine.backend, b, ctx, 0) * (p.step_noise[0] if p.step_noise
                                                            else 1.0)
            if first > 0:
                k = min(k, int(horizon_s / first) + 2)
        if k < 2:
            return
        for req in running:
            blocks_needed += max(0, -(-(req.num_computed + k) // bs) - len(req.blocks))
        if blocks_needed > engine.cache.free_blocks:
            return
        self.steps = k
        self.batch = b
        self.ctx0 = ctx

    def durations(self) -> np.ndarray:
        """Modelled seconds of each planned step (as ``SimProfile.step_s`` computes them)."""
        eng = self.engine
        p = eng.profile
        t = p.backends[eng.backend].batch_step_s(self.batch)
        if not p.ctx_ref_tokens:
            out: np.ndarray = np.full(self.steps, t)
        else:
            ctx = self.ctx0 + self.batch * np.arange(self.steps, dtype=np.float64)
            out = t * (1.0 + ctx / p.ctx_ref_tokens)
        if p.step_noise is not None:
            out = out * noise_factors(p.step_noise, eng.seed, eng.counters.steps, self.steps)
        return out

    def apply(self, k: int) -> list[SimRequest]:
        """Run the first ``k`` planned steps; the requests that finished (in the last)."""
        if not 1 <= k <= self.steps:
            raise ValueError(f"apply(k) needs 1 <= k <= {self.steps}")
        eng = self.engine
        bs = eng.profile.block_size
        running = list(eng.running)
        first = eng.counters.steps
        # KV blocks in the order the steps would take them: by step, then admission order
        events: list[tuple[int, int]] = []
        for pos, req in enumerate(running):
            start = len(req.blocks) * bs - req.num_computed  # first step needing a block
            for i in range(max(0, start), k, bs):
                events.append((i, pos))
        events.sort()
        cache = eng.cache
        for _i, pos in events:
            new = cache.allocate(1)
            assert new is not None, "DecodeRun planned more blocks than are free"
            running[pos].blocks.extend(new)
        steps = range(first, first + k)
        finished: list[SimRequest] = []
        mml = eng.profile.max_model_len
        for req in running:
            req.tokens.extend(eng._next_tokens(req, k))
            req.num_computed = len(req.tokens) - 1
            req.step_ids.extend(steps)
            eng._register(req)
            if req.num_output >= req.max_tokens or len(req.tokens) >= mml:
                req.finished = True
                eng.running.remove(req)
                cache.free(req.blocks)
                req.blocks = []
                finished.append(req)
        c = eng.counters
        c.steps += k
        c.generation_tokens += k * len(running)
        return finished
