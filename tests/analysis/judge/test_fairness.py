"""The fairness verdict: only the decode backend may differ."""

from __future__ import annotations

from typing import Any

import pytest

from analysis import RunManifest, judge_fairness
from analysis.judge import diff_configs, gpu_count_of
from analysis.schema import FairnessError
from tests.analysis.builders import config, manifest


def _m(backend: str = "auto", run_id: str = "a", users: int = 2, **cfg: Any) -> RunManifest:
    return RunManifest.model_validate(manifest(
        run_id=run_id, label=backend, server_info={"vllm_config": config(backend, **cfg)},
        load={"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5}))


def test_only_decode_backend_differs_is_fair() -> None:
    v = judge_fairness([_m("auto"), _m("latency_specialized", "b")])
    assert v.fair and v.same_gpu_count and v.verified
    assert [(d.field, d.verdict) for d in v.differences] == [
        ("vllm_config.additional_config.decode_backend", "allowed")]
    assert "same GPU count" in v.sentence


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"parallel_config__tensor_parallel_size": 4}, "parallel_config.tensor_parallel_size"),
        ({"model_config__model": "other-model"}, "model_config.model"),
        ({"scheduler_config__max_num_seqs": 128}, "scheduler_config.max_num_seqs"),
        ({"cache_config__cache_dtype": "fp8"}, "cache_config.cache_dtype"),
        ({"speculative_config": {"method": "eagle", "num_speculative_tokens": 7}},
         "speculative_config"),
        ({"model_config__seed": 7}, "model_config.seed"),
    ],
)
def test_other_differences_refuse_and_name_the_field(change: dict, field: str) -> None:
    with pytest.raises(FairnessError) as exc:
        judge_fairness([_m("auto"), _m("latency_specialized", "b", **change)])
    assert f"vllm_config.{field}" in str(exc.value)
    assert any(f == f"vllm_config.{field}" for f, _, _ in exc.value.differences)
    assert "decode_backend" not in str(exc.value)


def test_tensor_parallel_change_also_changes_gpu_count() -> None:
    v = judge_fairness([_m("auto"), _m("latency_specialized", "b",
                                        parallel_config__tensor_parallel_size=4)],
                       allow_unfair=True)
    assert not v.fair and v.overridden and not v.same_gpu_count
    assert v.gpu_counts == [2, 4]
    assert "gpu_count" in {d.field for d in v.differences}
    assert v.sentence.startswith("UNFAIR")


def test_volatile_and_noted_fields_do_not_refuse() -> None:
    v = judge_fairness([
        _m("auto"),
        _m("latency_specialized", "b", instance_id="xyz",
           parallel_config__data_parallel_master_port=1234, cache_config__num_gpu_blocks=990),
    ])
    assert v.fair
    verdicts = {d.field: d.verdict for d in v.differences}
    assert verdicts["vllm_config.instance_id"] == "ignored"
    assert verdicts["vllm_config.parallel_config.data_parallel_master_port"] == "ignored"
    assert verdicts["vllm_config.cache_config.num_gpu_blocks"] == "noted"


def test_load_and_workload_must_match_except_users() -> None:
    assert judge_fairness([_m("auto", users=2), _m("latency_specialized", "b", users=8)]).fair
    other = _m("latency_specialized", "b")
    other = other.model_copy(update={"load": other.load.model_copy(update={"duration_s": 50})})
    with pytest.raises(FairnessError, match="load.duration_s"):
        judge_fairness([_m("auto"), other])
    fp = _m("latency_specialized", "b")
    fp = fp.model_copy(update={"workload": fp.workload.model_copy(update={"fingerprint": "x"})})
    with pytest.raises(FairnessError, match="workload.fingerprint"):
        judge_fairness([_m("auto"), fp])


def test_missing_config_cannot_be_verified() -> None:
    bare = _m("latency_specialized", "b").model_copy(update={"server_info": None})
    with pytest.raises(FairnessError, match="cannot be verified"):
        judge_fairness([_m("auto"), bare])
    single = judge_fairness([bare], require_config=False)
    assert single.fair and not single.verified


def test_config_as_json_text_is_parsed() -> None:
    import orjson

    text = _m("latency_specialized", "b")
    text = text.model_copy(update={"server_info": {
        "vllm_config": orjson.dumps(config("latency_specialized")).decode()}})
    assert judge_fairness([_m("auto"), text]).fair


def test_diff_is_recursive_and_type_aware() -> None:
    a = {"x": {"y": [1, 2], "z": 1}, "w": True}
    b = {"x": {"y": [1, 3], "z": 1.0}, "w": 1, "new": None}
    assert diff_configs(a, b) == [("new", "<missing>", None), ("w", True, 1),
                                  ("x.y", [1, 2], [1, 3])]


def test_gpu_count_is_tp_pp_dp() -> None:
    m = _m(parallel_config__tensor_parallel_size=4, parallel_config__pipeline_parallel_size=2,
           parallel_config__data_parallel_size=2)
    assert gpu_count_of(m) == 16
