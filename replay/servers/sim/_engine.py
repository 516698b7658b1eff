"""The performance model: a clockless vLLM-like scheduler (continuous batching).

``Engine.step()`` plans and applies one engine step and returns what it did and
how long it takes in model seconds; the HTTP side (``_runner``) sleeps until the
step's absolute deadline and only then delivers its tokens. Nothing here reads
a clock, so the model is tested without one.

Each step (as vLLM v1 schedules): running requests first, in admission order,
each taking from a token budget of ``max_num_batched_tokens``: a decoding
request one token (1 + drafts with speculation), a prefilling one a chunk of
its uncached prompt. A running request that needs a KV block when none is free
preempts the most recently admitted running request (recompute: its blocks are
freed and it re-enters the front of the queue). Then, if nothing was preempted,
waiting requests are admitted first come first served while there is budget, a
sequence slot (``max_num_seqs``) and KV room; the prefix cache decides how much
of each prompt is already computed.
"""

from __future__ import annotations

import random
import zlib
from array import array
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property

from replay.servers.sim._cache import PrefixCache, block_hashes
from replay.servers.sim._noise import noise_factor
from replay.servers.sim._profile import Backend, SimProfile

__all__ = ["Engine", "EngineCounters", "SimRequest", "StepResult"]

_TABLE_SIZE = 8192
FIRST_ORDINARY_ID = 16
"""Ids below this are reserved for the chat template's special tokens."""


@dataclass(eq=False)
class SimRequest:
    """One request inside the engine (identity equality: used as a dict key)."""

    rid: str
    prompt: list[int]
    max_tokens: int
    tokens: list[int] = field(default_factory=list)
    num_computed: int = 0
    blocks: list[int] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)
    registered: int = 0
    out_offset: int = 0
    admitted: bool = False
    finished: bool = False
    aborted: bool = False
    cached_tokens: int = 0
    """Prompt tokens found in the prefix cache at first admission (usage.cached_tokens)."""
    queried_tokens: int = 0
    hit_tokens: int = 0
    preempted_hit_tokens: int = 0
    """Cache hits when re-admitted after preemption (not in the exported counters)."""
    prefill_computed: int = 0
    preemptions: int = 0
    step_ids: list[int] = field(default_factory=list)
    """Index of every step that emitted tokens for this request."""

    def __post_init__(self) -> None:
        if not self.tokens:
            self.tokens = list(self.prompt)

    @property
    def num_prompt(self) -> int:
        return len(self.prompt)

    @property
    def num_output(self) -> int:
        return len(self.tokens) - len(self.prompt)

    @property
    def decoding(self) -> bool:
        return self.num_output > 0 and self.num_computed == len(self.tokens) - 1


@dataclass
class EngineCounters:
    """Cumulative totals, exported as vLLM's Prometheus counters."""

    prompt_tokens: int = 0
    prompt_tokens_cached: int = 0
    generation_tokens: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    preempted_prefix_cache_queries: int = 0
    preempted_prefix_cache_hits: int = 0
    preemptions: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    steps: int = 0


@dataclass
class StepResult:
    """One step: its modelled duration and the tokens it produced."""

    index: int
    duration_s: float
    decode_batch: int
    ctx_tokens: int
    prefill_tokens: int
    emissions: list[tuple[SimRequest, list[int]]]
    finished: list[SimRequest]
    scheduled: list[SimRequest]


class Engine:
    """Continuous batching over a prefix cache, for one profile and backend."""

    def __init__(self, profile: SimProfile, backend: Backend, seed: int = 0) -> None:
        self.profile = profile
        self.backend = backend
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.counters = EngineCounters()
        self.seed = seed
        """Also the key of each step's noise factor (``replay.servers.sim._noise``)."""
        self._rng = random.Random(seed)

    # The KV cache and the output table are built on first use: a twin of thousands of
    # replicas (``plan --twin --replicas N``) holds only the ones its users reach.
    @cached_property
    def cache(self) -> PrefixCache:
        """The KV blocks and their prefix hashes."""
        return PrefixCache(self.profile.num_gpu_blocks, self.profile.block_size)

    @cached_property
    def output_table(self) -> array[int]:
        """The output ids a request walks from its offset (a compact array: 64 KiB)."""
        table_rng = random.Random(f"sim-output-{self.seed}")
        vocab = self.profile.vocab_size
        return array("q", [table_rng.randrange(FIRST_ORDINARY_ID, vocab)
                           for _ in range(_TABLE_SIZE)])

    # -- requests ---------------------------------------------------------
    def add(self, rid: str, prompt: list[int], max_tokens: int) -> SimRequest:
        """Queue a request; its output tokens depend only on its id and position."""
        req = SimRequest(rid=rid, prompt=list(prompt), max_tokens=max_tokens)
        req.out_offset = zlib.crc32(rid.encode()) % _TABLE_SIZE
        self.waiting.append(req)
        return req

    def abort(self, req: SimRequest) -> None:
        """Drop a request (client gone), freeing its blocks."""
        if req.finished or req.aborted:
            return
        req.aborted = True
        if req in self.running:
            self.running.remove(req)
        else:
            try:
                self.waiting.remove(req)
            except ValueError:
                pass
        self.cache.free(req.blocks)
        req.blocks = []

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- the step -----------------------------------------------------------
    def step(self) -> StepResult:
        """Schedule and execute one step (state changes now; tokens are due at its end)."""
        p = self.profile
        bs = p.block_size
        spec = p.speculative
        budget = p.max_num_batched_tokens
        scheduled: list[tuple[SimRequest, int]] = []
        preempted = False
        i = 0
        running = self.running
        decode_n = 1 + spec.num_speculative_tokens if spec else p.burst_tokens
        mml = p.max_model_len
        while i < len(running) and budget > 0:
            req = running[i]
            nt, nc = len(req.tokens), req.num_computed
            if nt > len(req.prompt) and nc == nt - 1:  # req.decoding, inlined (hot loop)
                n = decode_n
            else:
                n = min(nt - nc, budget)
            n = min(n, mml - nc)
            need = -(-(nc + n) // bs) - len(req.blocks)
            lost = False
            while need > 0:
                new = self.cache.allocate(need)
                if new is not None:
                    req.blocks.extend(new)
                    break
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is req:
                    lost = True
                    break
            if lost:
                break
            scheduled.append((req, n))
            budget -= n
            i += 1
        if not preempted:
            while self.waiting and budget > 0 and len(self.running) < p.max_num_seqs:
                req = self.waiting[0]
                if not self._admit(req, budget):
                    break
                self.waiting.popleft()
                self.running.append(req)
                n = min(len(req.tokens) - req.num_computed, budget)
                scheduled.append((req, n))
                budget -= n
        return self._execute(scheduled)

    def _admit(self, req: SimRequest, budget: int) -> bool:
        """Take the cached prefix and blocks for the first chunk; False if KV is short."""
        bs = self.profile.block_size
        self._extend_hashes(req)
        hit = self.cache.longest_hit(req.hashes, len(req.tokens))
        hit_tokens = len(hit) * bs
        n = min(len(req.tokens) - hit_tokens, budget)
        need = -(-(hit_tokens + n) // bs) - len(hit)
        idle_hits = sum(1 for b in hit if self.cache._ref[b] == 0)
        if self.cache.free_blocks - idle_hits < need:
            return False
        self.cache.touch(hit)
        req.blocks = list(hit) + (self.cache.allocate(need) or [])
        req.registered = len(hit)
        req.num_computed = hit_tokens
        c = self.counters
        if req.preemptions:  # vLLM counts a victim's re-lookup apart and does not export it
            req.preempted_hit_tokens += hit_tokens
            c.preempted_prefix_cache_queries += len(req.tokens)
            c.preempted_prefix_cache_hits += hit_tokens
        else:
            req.queried_tokens += len(req.tokens)
            req.hit_tokens += hit_tokens
            c.prefix_cache_queries += len(req.tokens)
            c.prefix_cache_hits += hit_tokens
        if not req.admitted:
            req.admitted = True
            req.cached_tokens = hit_tokens
        return True

    def _preempt(self, req: SimRequest) -> None:
        self.cache.free(req.blocks)
        req.blocks = []
        req.num_computed = 0
        req.registered = 0
        req.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(req)

    def _extend_hashes(self, req: SimRequest) -> None:
        bs = self.profile.block_size
        full = len(req.tokens) // bs
        if len(req.hashes) < full:
            parent = req.hashes[-1] if req.hashes else None
            req.hashes.extend(block_hashes(req.tokens, bs, len(req.hashes), parent, full * bs))

    def _next_tokens(self, req: SimRequest, k: int) -> list[int]:
        table = self.output_table
        start = (req.out_offset + req.num_output) % _TABLE_SIZE
        out = table[start:start + k].tolist()
        while len(out) < k:
            out += table[: k - len(out)].tolist()
        return out

    def _execute(self, scheduled: list[tuple[SimRequest, int]]) -> StepResult:
        p = self.profile
        spec = p.speculative
        c = self.counters
        index = c.steps
        c.steps += 1
        decode_batch = 0
        ctx = 0
        prefill = 0
        emissions: list[tuple[SimRequest, list[int]]] = []
        finished: list[SimRequest] = []
        table = self.output_table
        bs = p.block_size
        mml = p.max_model_len
        for req, n in scheduled:  # the hot loop: SimRequest properties inlined
            tokens = req.tokens
            nt = len(tokens)
            n_out = nt - len(req.prompt)
            if n_out > 0 and req.num_computed == nt - 1:  # decoding
                decode_batch += 1
                ctx += nt
                if spec:
                    accepted = self._rng.choices(
                        range(spec.num_speculative_tokens + 1), spec.acceptance_pmf
                    )[0]
                    c.spec_drafts += 1
                    c.spec_draft_tokens += spec.num_speculative_tokens
                    c.spec_accepted_tokens += accepted
                    k = 1 + accepted
                else:
                    k = n
                k = max(1, min(k, req.max_tokens - n_out, mml - nt))
                new = [table[(req.out_offset + n_out) % _TABLE_SIZE]] if k == 1 \
                    else self._next_tokens(req, k)
                req.num_computed = nt - 1 + k
                tokens.extend(new)
            else:
                prefill += n
                req.prefill_computed += n
                req.num_computed += n
                if req.num_computed < nt:
                    self._register(req)
                    continue
                new = self._next_tokens(req, 1)
                tokens.extend(new)
                if n_out == 0:
                    c.prompt_tokens += req.num_prompt
                    c.prompt_tokens_cached += req.cached_tokens
            c.generation_tokens += len(new)
            req.step_ids.append(index)
            emissions.append((req, new))
            if req.num_computed // bs > req.registered:
                self._register(req)
            if len(tokens) - len(req.prompt) >= req.max_tokens or len(tokens) >= mml:
                req.finished = True
                self.running.remove(req)
                self.cache.free(req.blocks)
                req.blocks = []
                finished.append(req)
        duration = p.step_s(self.backend, decode_batch, ctx, prefill)
        if p.step_noise is not None:
            duration *= noise_factor(p.step_noise, self.seed, index)
        return StepResult(
            index, duration, decode_batch, ctx, prefill, emissions, finished,
            [req for req, _n in scheduled],
        )

    def _register(self, req: SimRequest) -> None:
        bs = self.profile.block_size
        upto = req.num_computed // bs
        if upto > req.registered:
            self._extend_hashes(req)
            for j in range(req.registered, upto):
                self.cache.register(req.blocks[j], req.hashes[j])
            req.registered = upto
