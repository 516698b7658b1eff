"""``GET /metrics``: Prometheus text with vLLM's metric names and labels.

Beyond vLLM, two ``vllm_sim:`` counters say how late the simulator ran:
``vllm_sim:engine_step_actual_seconds_total`` (wall time its engine steps really
took) and ``vllm_sim:engine_step_model_seconds_total`` (what the profile says they
should take, after ``time_scale``). Over a window, lateness is
delta(actual) / delta(model) - 1: a starved simulator must not pass for a fast one.
"""

from __future__ import annotations

import bisect
import time

from replay.servers.sim._engine import Engine

__all__ = ["Histogram", "PhaseHistograms", "render_metrics"]

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)

REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)
"""vLLM's edges for the per-request phase histograms (queue, prefill, decode)."""
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class Histogram:
    """A cumulative Prometheus histogram (vLLM's bucket edges)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, engine: str, model: str) -> list[str]:
        """Bucket, count and sum samples; labels in vLLM's order (``le`` between)."""
        labels = f'engine="{engine}",model_name="{model}"'
        out = []
        acc = 0
        for edge, n in zip(self.buckets, self.counts, strict=False):
            acc += n
            out.append(f'{name}_bucket{{engine="{engine}",le="{edge}",model_name="{model}"}} {acc}')
        out.append(f'{name}_bucket{{engine="{engine}",le="+Inf",model_name="{model}"}} '
                   f'{self.count}')
        out.append(f"{name}_count{{{labels}}} {self.count}")
        out.append(f"{name}_sum{{{labels}}} {self.total!r}")
        return out


class PhaseHistograms:
    """vLLM's per-request phase histograms, observed when a request finishes (queue:
    engine intake to first scheduled; prefill: first scheduled to first token; decode:
    first to last token; per-request TPOT), and tokens per engine step. The twin's fit
    reads their sums and counts (the poller keeps ``_sum``/``_count``)."""

    def __init__(self) -> None:
        self.queue = Histogram(REQUEST_LATENCY_BUCKETS)
        self.prefill = Histogram(REQUEST_LATENCY_BUCKETS)
        self.decode = Histogram(REQUEST_LATENCY_BUCKETS)
        self.request_tpot = Histogram(ITL_BUCKETS)
        self.iteration_tokens = Histogram(tuple(float(b) for b in ITERATION_TOKEN_BUCKETS))

    def finished(self, queued_ns: int, scheduled_ns: int, first_ns: int, last_ns: int,
                 output_tokens: int) -> None:
        self.queue.observe((scheduled_ns - queued_ns) / 1e9)
        self.prefill.observe((first_ns - scheduled_ns) / 1e9)
        decode_s = (last_ns - first_ns) / 1e9
        self.decode.observe(decode_s)
        if output_tokens > 1:
            self.request_tpot.observe(decode_s / (output_tokens - 1))

    def families(self, itl: Histogram) -> list[tuple[str, str, Histogram]]:
        return [
            ("request_time_per_output_token_seconds",
             "Histogram of time_per_output_token_seconds per request.", self.request_tpot),
            ("request_queue_time_seconds",
             "Histogram of time spent in WAITING phase for request.", self.queue),
            ("request_prefill_time_seconds",
             "Histogram of time spent in PREFILL phase for request.", self.prefill),
            ("request_decode_time_seconds",
             "Histogram of time spent in DECODE phase for request.", self.decode),
            ("iteration_tokens_total", "Histogram of number of tokens per engine_step.",
             self.iteration_tokens),
        ]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(engine: Engine, model_name: str, ttft: Histogram, itl: Histogram,
                   created: float | None = None, *, step_model_s: float = 0.0,
                   step_actual_s: float = 0.0, phases: PhaseHistograms | None = None) -> str:
    """The exposition text; counters are the engine's cumulative totals.

    Written as prometheus_client writes vLLM's: a counter's HELP/TYPE name ends in
    ``_total``, and every counter and histogram has a ``NAME_created`` gauge (the Unix
    time it was made; ``created``, default now) that a parser must not sum.
    """
    c = engine.counters
    stamp = time.time() if created is None else created
    model = _escape(model_name)
    labels = f'engine="0",model_name="{model}"'
    lines: list[str] = []

    def created_gauge(name: str, doc: str) -> None:
        lines.append(f"# HELP vllm:{name}_created {doc}")
        lines.append(f"# TYPE vllm:{name}_created gauge")
        lines.append(f"vllm:{name}_created{{{labels}}} {stamp!r}")

    def metric(name: str, kind: str, doc: str, value: float, ns: str = "vllm") -> None:
        full = f"{name}_total" if kind == "counter" else name
        lines.append(f"# HELP {ns}:{full} {doc}")
        lines.append(f"# TYPE {ns}:{full} {kind}")
        lines.append(f"{ns}:{full}{{{labels}}} {float(value)!r}")
        if kind == "counter":
            lines.append(f"# HELP {ns}:{name}_created {doc}")
            lines.append(f"# TYPE {ns}:{name}_created gauge")
            lines.append(f"{ns}:{name}_created{{{labels}}} {stamp!r}")

    metric("num_requests_running", "gauge", "Number of requests in model execution batches.",
           len(engine.running))
    metric("num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           len(engine.waiting))
    metric("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
           engine.cache.usage())
    metric("prefix_cache_queries", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", c.prefix_cache_queries)
    metric("prefix_cache_hits", "counter",
           "Prefix cache hits, in terms of number of cached tokens.", c.prefix_cache_hits)
    metric("num_preemptions", "counter", "Cumulative number of preemption from the engine.",
           c.preemptions)
    metric("prompt_tokens", "counter", "Number of prefill tokens processed.", c.prompt_tokens)
    metric("prompt_tokens_cached", "counter",
           "Number of cached prompt tokens (local + external).", c.prompt_tokens_cached)
    metric("generation_tokens", "counter", "Number of generation tokens processed.",
           c.generation_tokens)
    if engine.profile.speculative is not None:
        metric("spec_decode_num_drafts", "counter", "Number of spec decoding drafts.",
               c.spec_drafts)
        metric("spec_decode_num_draft_tokens", "counter", "Number of draft tokens.",
               c.spec_draft_tokens)
        metric("spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.",
               c.spec_accepted_tokens)
    for name, doc, hist in (
        ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft),
        ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl),
        *(phases.families(itl) if phases is not None else ()),
    ):
        lines.append(f"# HELP vllm:{name} {doc}")
        lines.append(f"# TYPE vllm:{name} histogram")
        lines.extend(hist.lines(f"vllm:{name}", "0", model))
        created_gauge(name, doc)
    metric("engine_step_actual_seconds", "counter",
           "Wall time the simulated engine steps really took (simulator only).",
           step_actual_s, ns="vllm_sim")
    metric("engine_step_model_seconds", "counter",
           "Time the profile says those steps should take (simulator only).",
           step_model_s, ns="vllm_sim")
    return "\n".join(lines) + "\n"
