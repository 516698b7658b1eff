"""The twin's engines on simulated time, and the in-process transport the lanes call.

:class:`TwinEngines` is the :data:`~replay.twin._clock.Advancer` of a
:class:`~replay.twin._clock.VirtualLoop`: given an idle interval it runs
``replay.servers.sim.Engine`` steps back to back (each step starts when the previous one
ends, or when work arrives, exactly as serve-sim's ``StepLoop`` chains deadlines)
and returns early only when a request finishes. Per step it does one array store
(the step's end time); a request's token times are read in bulk when it ends,
as ``step_end[req.step_ids]``. No per-token or per-step asyncio event exists.

:meth:`TwinEngines.send` is a ``replay.load.Transport`` (``replay.client.stream_request``'s
signature), so the unchanged lanes stream into it: it parses the body the
lane built, queues the prompt on a replica, waits for the request to finish and
fills the ``StreamOutcome`` as the HTTP client would have (chunk per engine
emission, ``usage`` with cached tokens, output ids when asked).

Routing over replicas (``affinity``): a prompt goes to the replica that served the
prompt it extends (a session's previous turn: its last full block's hash is in
this prompt's chain), else to the least loaded replica; ``least_loaded`` ignores
history.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import aiohttp
import numpy as np
import orjson

from analysis import ErrorKind
from replay.client import CacheMark, Hashed, PrefixCacheModel, StreamOutcome, Timeouts, ids_text
from replay.servers.sim import Backend, DecodeRun, Engine, SimProfile, SimRequest, block_hashes
from replay.twin._clock import Deadlock

__all__ = ["PromptTap", "Routing", "TwinEngines"]

Routing = Literal["affinity", "least_loaded"]


_METRICS = {
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:num_preemptions_total": "preemptions",
    "vllm:spec_decode_num_drafts_total": "spec_drafts",
    "vllm:spec_decode_num_draft_tokens_total": "spec_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "spec_accepted_tokens",
    "vllm_sim:engine_step_model_seconds_total": "",
    "vllm_sim:engine_step_actual_seconds_total": "",
}
"""serve-sim's counter names and the ``EngineCounters`` field each one reads
(empty: the replica's modelled busy seconds)."""


class PromptTap(PrefixCacheModel):
    """The lanes' client prefix model, unchanged, that also keeps the prompt it saw last.

    A closed-loop lane calls ``observe(prompt)`` and then, with no ``await`` between,
    the transport: so :meth:`TwinEngines.send` takes the prompt as token ids from here
    instead of parsing the JSON body (which cost more than the whole engine)."""

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        self.last: np.ndarray | None = None
        self.last_scope: object = None
        self._chains: dict[object, tuple[np.ndarray, list[int]]] = {}

    def observe(self, prompt: np.ndarray, shared_tokens: int, scope: object,
                hashed: Hashed | None = None, owner: Any = None) -> CacheMark:
        """As the client's model, but shared blocks count from their send: the twin
        fills an outcome only when it ends, so there is no first token to wait for."""
        self.last, self.last_scope = prompt, scope
        return super().observe(prompt, shared_tokens, scope, hashed)

    def end_scope(self, scope: object) -> None:
        super().end_scope(scope)
        self._chains.pop(scope, None)

    def engine_prompt(self, prompt: np.ndarray, block_size: int) -> tuple[list[int], list[int]]:
        """The prompt as the engine takes it, and its block hash chain
        (``replay.servers.sim.block_hashes``), hashing only the blocks past what the chain's
        previous prompt shared with it.

        The engine reads a prompt's token values only to hash blocks it was not given
        hashes for (the partial last block, then its output); so the full blocks are
        handed over as zeros, which saves converting ~100K ids a request to ints."""
        scope = self.last_scope
        prev = self._chains.get(scope)
        reuse, base = 0, []
        if prev is not None:
            p_ids, p_hashes = prev
            m = min(p_ids.size, prompt.size)
            diff = np.flatnonzero(p_ids[:m] != prompt[:m])
            reuse = min((int(diff[0]) if diff.size else m) // block_size, len(p_hashes))
            base = p_hashes[:reuse]
        full = prompt.size // block_size
        fresh: list[int] = prompt[reuse * block_size:full * block_size].tolist()
        hashes = base + block_hashes(fresh, block_size, 0, base[-1] if base else None)
        self._chains[scope] = (prompt, hashes)
        ids = [0] * (full * block_size)
        ids.extend(prompt[full * block_size:].tolist())
        return ids, hashes


class _Replica:
    """One engine, its step in flight and the end time of every step so far."""

    def __init__(self, profile: SimProfile, backend: Backend, seed: int) -> None:
        self.engine = Engine(profile, backend, seed=seed)
        self.ends = np.zeros(256, dtype=np.int64)  # grows by doubling (``_stamp``)
        self.pending_index: int | None = None
        """Index of the step in flight (None: idle)."""
        self.pending_end = 0
        self.pending_finished: list[SimRequest] = []
        self.waiters: dict[SimRequest, asyncio.Future[None]] = {}
        self.sizes: dict[SimRequest, list[int]] | None = None
        self.busy_ns = 0
        self.steps = 0

    def start(self, now: int, until: int | None) -> None:
        """Begin the next step at ``now``: a run of pure-decode steps at once when the
        engine allows it (``DecodeRun``: those starting by ``until``, the last one left
        in flight), else one ``Engine.step()``."""
        eng = self.engine
        horizon = None if until is None else (until - now) / 1e9
        run = DecodeRun(eng, horizon_s=horizon) if self.sizes is None else None
        if run is not None and run.steps >= 2:
            dur = np.maximum(1, (run.durations() * 1e9).astype(np.int64))
            ends = now + np.cumsum(dur)
            k = run.steps if until is None else \
                max(1, int(np.searchsorted(ends - dur, until, side="right")))
            first = eng.counters.steps
            finished = run.apply(k)
            self._stamp(first, ends[:k])
            self.pending_index = first + k - 1
            self.pending_end = int(ends[k - 1])
            self.pending_finished = finished
            self.busy_ns += int(ends[k - 1]) - now
            self.steps += k - 1
            return
        result = eng.step()
        d = max(1, int(result.duration_s * 1e9))
        self.pending_index = result.index
        self.pending_end = now + d
        self.pending_finished = result.finished
        self.busy_ns += d
        if self.sizes is not None:
            sizes = self.sizes
            for req, toks in result.emissions:
                sizes.setdefault(req, []).append(len(toks))

    def _stamp(self, first: int, ends: np.ndarray) -> None:
        need = first + len(ends)
        if need > len(self.ends):
            grown = np.zeros(max(need, 2 * len(self.ends)), dtype=np.int64)
            grown[:len(self.ends)] = self.ends
            self.ends = grown
        self.ends[first:need] = ends

    def complete(self) -> bool:
        """The step in flight ends now: stamp it, wake its finished requests."""
        i = self.pending_index
        assert i is not None
        if i >= len(self.ends):
            self._stamp(i, np.array([self.pending_end], dtype=np.int64))
        else:
            self.ends[i] = self.pending_end
        self.pending_index = None
        self.steps += 1
        woke = False
        for req in self.pending_finished:
            fut = self.waiters.pop(req, None)
            if fut is not None and not fut.done():
                fut.set_result(None)
                woke = True
        return woke

    def load(self) -> int:
        e = self.engine
        return len(e.running) + len(e.waiting)


class TwinEngines:
    """``replicas`` engines of one profile, their router and the lanes' transport."""

    def __init__(self, profile: SimProfile, *, backend: Backend = "latency_specialized",
                 replicas: int = 1, routing: Routing = "affinity", seed: int = 0) -> None:
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        self.profile = profile
        self.routing = routing
        self.replicas = [_Replica(profile, backend, seed + k) for k in range(replicas)]
        if profile.speculative is not None or profile.burst_tokens > 1:
            for r in self.replicas:
                r.sizes = {}
        self._active: set[int] = set()
        """Replicas with queued work or a step in flight: the only ones an event visits,
        so an idle replica costs neither time nor (its engine's state being built on
        first use) memory, whatever ``replicas`` is."""
        self._owner: dict[int, int] = {}
        self._now = 0
        self.requests = 0
        self.tap: PromptTap | None = None
        """Set to the lanes' cache model to skip parsing request bodies."""

    # -- the clock's advancer ---------------------------------------------------
    def advance(self, now: int, until: int | None) -> int:
        """Run steps inside ``[now, until]``; stop early when a request finishes."""
        reps = self.replicas
        active = self._active
        while True:
            nxt: int | None = None
            order = sorted(active) if len(active) > 1 else list(active)  # replica order
            for k in order:
                r = reps[k]
                if r.pending_index is None and r.engine.has_work():
                    r.start(now, until)
                if r.pending_index is not None and (nxt is None or r.pending_end < nxt):
                    nxt = r.pending_end
                elif r.pending_index is None:
                    active.discard(k)  # nothing queued, nothing in flight
            if nxt is None:
                if until is None:
                    raise Deadlock("simulated time: no timer pending and the engines idle")
                self._now = until
                return until
            if until is not None and nxt > until:
                self._now = until
                return until
            now = nxt
            woke = False
            for k in order:
                r = reps[k]
                if r.pending_index is not None and r.pending_end == now:
                    woke = r.complete() or woke
            if woke:
                self._now = now
                return now

    def metrics(self) -> dict[str, float]:
        """The engines' counters as serve-sim's ``/metrics`` names them, summed over
        replicas; step seconds are the modelled ones (the twin is never late)."""
        out = dict.fromkeys(_METRICS, 0.0)
        for r in self.replicas:
            c = r.engine.counters
            for name, attr in _METRICS.items():
                out[name] += getattr(c, attr) if attr else r.busy_ns / 1e9
        return out

    # -- routing --------------------------------------------------------------------
    def _route(self, hashes: list[int]) -> int:
        if len(self.replicas) == 1:
            return 0
        if self.routing == "affinity":
            owner = self._owner
            for h in reversed(hashes):
                k = owner.get(h)
                if k is not None:
                    return k
        return self._least_loaded()

    def _least_loaded(self) -> int:
        """The first replica (by index) among those with the fewest requests, visiting
        only the active ones: any other has none."""
        best, best_load = -1, 0
        for k in sorted(self._active):
            load = self.replicas[k].load()
            if best < 0 or load < best_load:
                best, best_load = k, load
        idle = next(k for k in range(len(self._active) + 1) if k not in self._active) \
            if len(self._active) < len(self.replicas) else -1
        if idle >= 0 and (best < 0 or best_load > 0 or idle < best):
            return idle
        return best

    def _prompt(self, body: bytes) -> tuple[list[int], list[int]]:
        """The request's prompt ids and block hashes: from the tapped array when it is
        this body's, else parsed and hashed in full."""
        tap = self.tap
        bs = self.profile.block_size
        last = tap.last if tap is not None else None
        if tap is not None and last is not None:
            tap.last = None
            if body.endswith(b"," + ids_text(last[-4:]) + b"]}") or (
                    last.size <= 4 and body.endswith(b"[" + ids_text(last) + b"]}")):
                return tap.engine_prompt(last, bs)
        parsed: list[int] = orjson.loads(body)["prompt"]
        return parsed, block_hashes(parsed, bs)

    # -- the transport (``replay.load.Transport``) --------------------------------------
    async def send(self, session: aiohttp.ClientSession, url: str, body: bytes,
                   headers: dict[str, str], timeouts: Timeouts, out: StreamOutcome, *,
                   max_line_bytes: int = 0, keep_output_ids: bool = True,
                   max_tokens: int | None = None) -> StreamOutcome:
        """Serve one request on a replica and fill ``out`` when it ends (or is cancelled)."""
        prompt, hashes = self._prompt(body)
        rid = headers.get("X-Request-Id", f"twin-{self.requests}")
        self.requests += 1
        loop = asyncio.get_running_loop()
        out.sent_ns = time.monotonic_ns()
        out.http_status = 200
        # before the engine, as serve-sim's; busy or idle as the replica it would enter now
        # (routed only where the profile has a busy overhead: every request passes here)
        busy = self.profile.request_overhead_busy_s is not None and \
            self.replicas[self._route(hashes)].engine.has_work()
        overhead = self.profile.overhead_s(busy)
        if overhead:
            try:
                await asyncio.sleep(overhead)
            except asyncio.CancelledError:
                out.fail("cancelled", "cancelled", "request cancelled")
                raise
        k = self._route(hashes)
        rep = self.replicas[k]
        if hashes:
            self._owner[hashes[-1]] = k
        asked = max_tokens if max_tokens is not None else int(orjson.loads(body)["max_tokens"])
        req = rep.engine.add(rid, prompt, asked)
        self._active.add(k)
        req.hashes = hashes  # the engine would hash the same chain on admission
        fut: asyncio.Future[None] = loop.create_future()
        rep.waiters[req] = fut
        try:
            kind = await _wait(fut, rep, req, out.sent_ns, timeouts)
            if kind is not None:  # the client gave up: as stream_request, a timeout
                rep.waiters.pop(req, None)
                _fill(out, rep, req, keep_output_ids, cut=True)
                rep.engine.abort(req)
                out.fail("timeout", kind, f"no data before the {kind[8:]} limit")
                return out
        except asyncio.CancelledError:
            rep.waiters.pop(req, None)
            _fill(out, rep, req, keep_output_ids, cut=True)
            rep.engine.abort(req)
            out.fail("cancelled", "cancelled", "request cancelled")
            raise
        _fill(out, rep, req, keep_output_ids, cut=False)
        out.done = True
        return out


async def _wait(fut: asyncio.Future[None], rep: _Replica, req: SimRequest, sent_ns: int,
                timeouts: Timeouts) -> str | None:
    """Wait for the request to finish; the timeout kind if the client's first-token or
    total limit passes first (``--ttft-timeout``, ``--total-timeout``). The gap limit
    between tokens (``--itl-timeout``) is not modelled: a gap shows only at its end."""
    first_s, total_s = timeouts.first_token_s, timeouts.total_s
    while not fut.done():
        ids = req.step_ids
        got_first = bool(ids) and ids[0] != rep.pending_index
        limits = []
        if first_s is not None and not got_first:
            limits.append((sent_ns + int(first_s * 1e9), ErrorKind.TIMEOUT_FIRST_TOKEN))
        if total_s is not None:
            limits.append((sent_ns + int(total_s * 1e9), ErrorKind.TIMEOUT_TOTAL))
        if not limits:
            await fut
            return None
        at, kind = min(limits)
        now = time.monotonic_ns()
        if now >= at:
            return kind
        await asyncio.wait((fut,), timeout=(at - now) / 1e9)
    return None


def _fill(out: StreamOutcome, rep: _Replica, req: SimRequest, keep_ids: bool,
          *, cut: bool) -> None:
    """Chunk times and sizes from the steps that emitted for ``req`` (ended ones only)."""
    ids = req.step_ids
    if cut and rep.pending_index is not None and ids and ids[-1] == rep.pending_index:
        ids = ids[:-1]  # its last step is still in flight: those tokens never arrived
    n = len(ids)
    if n:
        times: list[int] = rep.ends[np.asarray(ids, dtype=np.intp)].tolist()
        sizes = rep.sizes.get(req, [1] * n)[:n] if rep.sizes is not None else [1] * n
        out.chunk_ns = times
        out.chunk_tokens = sizes
        out.first_ns = times[0]
        out.last_ns = times[-1]
    tokens = sum(out.chunk_tokens)
    if rep.sizes is not None:
        rep.sizes.pop(req, None)
    if keep_ids and tokens:
        out.output_ids = req.tokens[req.num_prompt:req.num_prompt + tokens]
    if not cut:
        out.usage = {"prompt_tokens": req.num_prompt, "completion_tokens": tokens,
                     "total_tokens": req.num_prompt + tokens,
                     "prompt_tokens_details": {"cached_tokens": req.cached_tokens}}
