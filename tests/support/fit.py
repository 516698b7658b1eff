"""A known profile and the engine records it would produce, for fitting tests."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from replay.servers.sim import Engine, SimProfile, load_profile

TIMING = {"step_s_batch1": 0.02, "step_s_batch64": 0.2}
PROFILE = SimProfile.model_validate({
    **load_profile("small").model_dump(mode="json"),
    "backends": {"auto": TIMING, "latency_specialized": TIMING},
    "ctx_ref_tokens": 20000, "prefill_tokens_per_s": 50000.0,
})


def engine_records(profile: SimProfile, users: int, *, per_user: int = 6, seed: int = 0,
                   think_s: float = 0.05) -> list[dict[str, Any]]:
    """Closed-loop users on the pure engine: model time advances by each step's duration;
    every emission is a token read at the step's end."""
    rng = np.random.default_rng(seed)
    engine = Engine(profile, "auto")
    arrivals: list[tuple[float, int, int]] = [(0.01 * u, u, 0) for u in range(users)]
    heapq.heapify(arrivals)
    live: dict[Any, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    t = 0.0
    shared = [int(x) for x in rng.integers(20, 30000, size=600)]
    while arrivals or engine.has_work():
        if not engine.has_work() and arrivals and arrivals[0][0] > t:
            t = arrivals[0][0]
        while arrivals and arrivals[0][0] <= t:
            sent, u, j = heapq.heappop(arrivals)
            prompt = shared[: 200 + 100 * j] + [int(x) for x in rng.integers(20, 30000,
                                                                            size=50 + u)]
            n_out = int(rng.integers(20, 60))
            req = engine.add(f"u{u}r{j}", prompt, n_out)
            live[req] = {"id": f"u{u}r{j}", "user": u, "lane": str(u), "session": f"s{u}",
                         "turn": j, "status": "ok", "due_s": sent, "sent_s": sent,
                         "prompt_tokens": len(prompt), "output_tokens_asked": n_out,
                         "chunk_times_s": [], "chunk_tokens": [], "u": u, "j": j}
        step = engine.step()
        t += step.duration_s
        for req, toks in step.emissions:
            live[req]["chunk_times_s"].append(t)
            live[req]["chunk_tokens"].append(len(toks))
        for req in step.finished:
            d = live.pop(req)
            d.update(first_token_s=d["chunk_times_s"][0], last_token_s=t, end_s=t,
                     output_tokens=req.num_output, cached_tokens=req.cached_tokens)
            u, j = d.pop("u"), d.pop("j")
            out.append(d)
            if j + 1 < per_user:
                heapq.heappush(arrivals, (t + think_s, u, j + 1))
    return out
