"""Fairness with fleets: every replica of every arm is held to the same configuration."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analysis import RunManifest, judge_fairness, replica_diffs
from analysis.read import MetricSeries, counter_delta
from analysis.schema import FairnessError, Replica
from tests.analysis.builders import config, manifest


def _info(backend: str = "auto", **cfg: Any) -> dict[str, object]:
    return {"vllm_config": config(backend, **cfg)}


def _fleet(backend: str, run_id: str, *replicas: dict[str, object]) -> RunManifest:
    m = RunManifest.model_validate(manifest(
        run_id=run_id, label=backend, server_info=replicas[0],
        load={"users": 2, "duration_s": 100, "warmup_s": 10, "drain_s": 5}))
    m.replicas = [Replica(target=f"http://127.0.0.1:{9000 + k}", model=m.model,
                          server_info=info, gpu_count=m.gpu_count)
                  for k, info in enumerate(replicas)]
    return m


def test_alike_replicas_keep_a_comparison_fair() -> None:
    a = _fleet("auto", "a", _info("auto"), _info("auto"))
    b = _fleet("latency_specialized", "b", _info("latency_specialized"),
               _info("latency_specialized"))
    v = judge_fairness([a, b])
    assert v.fair and v.gpu_counts == [4, 4]
    assert replica_diffs(a.replicas) == []


def test_a_replica_on_another_backend_is_refused_within_its_arm() -> None:
    """Across arms the decode backend is the thing under test; within a fleet it is not."""
    a = _fleet("auto", "a", _info("auto"), _info("latency_specialized"))
    b = _fleet("latency_specialized", "b", _info("latency_specialized"),
               _info("latency_specialized"))
    with pytest.raises(FairnessError) as exc:
        judge_fairness([a, b])
    assert "replicas.vllm_config.additional_config.decode_backend" in str(exc.value)
    v = judge_fairness([a, b], allow_unfair=True)
    refused = [d for d in v.differences if d.verdict == "refused"]
    assert [d.run for d in refused] == ["a replica 1 (http://127.0.0.1:9001)"]


def test_every_replica_of_every_arm_is_compared() -> None:
    """A second arm's second replica that differs is found too; a volatile field
    (a port) is ignored and KV block counts are noted, as between arms."""
    a = _fleet("auto", "a", _info("auto"), _info("auto"))
    b = _fleet("latency_specialized", "b", _info("latency_specialized"),
               _info("latency_specialized", scheduler_config__max_num_seqs=7))
    with pytest.raises(FairnessError, match="replicas.vllm_config.scheduler_config"):
        judge_fairness([a, b])
    c = _fleet("latency_specialized", "c", _info("latency_specialized"),
               _info("latency_specialized", cache_config__num_gpu_blocks=5))
    v = judge_fairness([a, c])
    assert v.fair
    assert [d.verdict for d in replica_diffs(c.replicas)] == ["noted"]


def test_a_replica_without_server_info_leaves_the_fleet_unverified() -> None:
    a = _fleet("auto", "a", _info("auto"), {"vllm_config": None})
    b = _fleet("latency_specialized", "b", _info("latency_specialized"),
               _info("latency_specialized"))
    with pytest.raises(FairnessError, match="cannot be verified"):
        judge_fairness([a, b])


def test_counters_of_a_fleet_are_summed_per_replica() -> None:
    """Scrapes of two servers interleave in one file; a counter's increase is each
    replica's own increase, summed (differencing across servers would be nonsense)."""
    t = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    hits = np.array([0.0, 1000.0, 10.0, 1010.0, 20.0, 1020.0])
    series = MetricSeries(t, {"prefix_cache_hits_total": hits},
                          replica=np.array([0, 1, 0, 1, 0, 1]))
    assert [len(s.t_s) for s in series.split()] == [3, 3]
    assert counter_delta(series, "prefix_cache_hits_total", 0.5, 2.0) == pytest.approx(
        (20.0 - 5.0) + (1015.0 - 1000.0))
    one = MetricSeries(t[::2], {"prefix_cache_hits_total": hits[::2]})
    assert one.split() == [one]


def test_a_fleet_against_one_server_differs_in_gpu_count() -> None:
    """Per-GPU figures divide by the fleet's GPUs (the replicas' sum), so a fleet and
    one server of its kind are not the same hardware."""
    a = _fleet("auto", "a", _info("auto"), _info("auto"))
    b = _fleet("latency_specialized", "b", _info("latency_specialized"))
    b.replicas = []
    with pytest.raises(FairnessError, match="gpu_count"):
        judge_fairness([a, b])
    v = judge_fairness([a, b], allow_unfair=True)
    assert v.gpu_counts == [4, 2]
