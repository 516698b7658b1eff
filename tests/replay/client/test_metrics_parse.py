"""Our cheap Prometheus parser against prometheus_client's, on the sim's text."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from replay.client._poller import parse_prometheus

TEXT = """# HELP vllm:prefix_cache_hits_total Prefix cache hits, in tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 120.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 30.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 5.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.75
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.5
vllm:odd{label="with } brace"} 2
"""


def _reference(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.startswith("vllm:") or s.name.endswith(("_bucket", "_created")):
                continue
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_matches_prometheus_client() -> None:
    got = parse_prometheus(TEXT)
    assert got == _reference(TEXT)
    assert got["vllm:prefix_cache_hits_total"] == 150.0
    assert "process_cpu_seconds_total" not in got
    assert got["vllm:odd"] == 2.0


def test_keeps_the_simulators_lateness_counters_beside_vllms() -> None:
    text = TEXT + ("vllm_sim:engine_step_actual_seconds_total 3.5\n"
                   "vllm_sim:engine_step_model_seconds_total 3.0\n"
                   "vllm_simulated_other 1\n")
    got = parse_prometheus(text)
    assert got["vllm_sim:engine_step_actual_seconds_total"] == 3.5
    assert got["vllm_sim:engine_step_model_seconds_total"] == 3.0
    assert "vllm_simulated_other" not in got
    assert parse_prometheus(text, prefix="vllm_sim:") == {
        "vllm_sim:engine_step_actual_seconds_total": 3.5,
        "vllm_sim:engine_step_model_seconds_total": 3.0}
