"""The fairness guard sees the server's environment and launched command lines.

Uses the /server_info captured from vLLM 0.32 (tests/fixtures/vllm/server_info.json);
no server is started.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from analysis import RunManifest, judge_fairness
from analysis.judge._fairness import command_options, env_verdict
from analysis.schema import FairnessError

INFO = json.loads((Path(__file__).parents[1] / "fixtures" / "vllm" / "server_info.json")
                  .read_text())


def _manifest(run_id: str, backend: str, env: dict[str, Any] | None = None,
              info: dict[str, Any] | None = None) -> RunManifest:
    server_info = copy.deepcopy(INFO) if info is None else info
    if "vllm_config" in server_info:
        server_info["vllm_config"]["additional_config"] = {"decode_backend": backend}
    if env:
        server_info["vllm_env"].update(env)
    return RunManifest.model_validate({
        "run_id": run_id, "label": backend, "target": "http://127.0.0.1:8000", "model": "tiny",
        "server_info": server_info, "workload": {"fingerprint": "fp"},
        "load": {"users": 1, "duration_s": 10, "warmup_s": 0, "drain_s": 5},
        "clock": {"t0_wall": "", "t0_monotonic_ns": 0}, "started_at": "", "tool_version": "",
    })


def test_same_environment_is_fair() -> None:
    v = judge_fairness([_manifest("a", "auto"), _manifest("b", "latency_specialized")])
    assert v.fair
    assert not [d for d in v.differences if d.field.startswith("vllm_env")]


@pytest.mark.parametrize("name", ["VLLM_CPU_ATTN_SPLIT_KV", "VLLM_ATTENTION_BACKEND",
                                  "VLLM_USE_DEEP_GEMM"])
def test_kernel_choosing_variable_is_refused_and_named(name: str) -> None:
    other = _manifest("b", "latency_specialized", {name: "something-else"})
    with pytest.raises(FairnessError) as err:
        judge_fairness([_manifest("a", "auto"), other])
    assert f"vllm_env.{name}" in str(err.value)


def test_volatile_variables_are_ignored_and_timeouts_noted() -> None:
    other = _manifest("b", "latency_specialized", {
        "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME": "vllm_mm_other", "VLLM_DP_MASTER_PORT": 1234,
        "VLLM_LOGGING_LEVEL": "DEBUG", "VLLM_ENGINE_READY_TIMEOUT_S": 1200})
    v = judge_fairness([_manifest("a", "auto"), other])
    verdicts = {d.field: d.verdict for d in v.differences}
    assert v.fair
    assert verdicts["vllm_env.VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME"] == "ignored"
    assert verdicts["vllm_env.VLLM_DP_MASTER_PORT"] == "ignored"
    assert verdicts["vllm_env.VLLM_LOGGING_LEVEL"] == "ignored"
    assert verdicts["vllm_env.VLLM_ENGINE_READY_TIMEOUT_S"] == "noted"


def test_every_captured_variable_gets_a_verdict() -> None:
    verdicts = {env_verdict(k) for k in INFO["vllm_env"]}
    assert verdicts <= {"refused", "ignored", "noted"}
    assert env_verdict("VLLM_CPU_KVCACHE_SPACE") == "refused"  # KV capacity changes


def test_missing_server_info_refusal_says_how_to_fix() -> None:
    bare = _manifest("b", "latency_specialized", info={})
    with pytest.raises(FairnessError) as err:
        judge_fairness([_manifest("a", "auto"), bare])
    assert "VLLM_SERVER_DEV_MODE=1" in str(err.value)


def _argv(backend: str, port: int, *extra: str) -> list[str]:
    return ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
            "--host", "127.0.0.1", "--port", str(port), *extra, "--additional-config",
            json.dumps({"decode_backend": backend, "x": 1})]


def test_command_lines_differing_in_backend_and_port_are_fair() -> None:
    v = judge_fairness([_manifest("a", "auto"), _manifest("b", "latency_specialized")],
                       launch_commands=[_argv("auto", 8000), _argv("latency_specialized", 8001)])
    verdicts = {d.field: d.verdict for d in v.differences}
    assert v.fair
    assert verdicts["command.--additional-config.decode_backend"] == "allowed"
    assert verdicts["command.--port"] == "ignored"


def test_command_line_with_another_flag_is_refused() -> None:
    with pytest.raises(FairnessError) as err:
        judge_fairness([_manifest("a", "auto"), _manifest("b", "latency_specialized")],
                       launch_commands=[_argv("auto", 8000),
                                        _argv("latency_specialized", 8000, "--enforce-eager")])
    assert "command.--enforce-eager" in str(err.value)


def test_command_options_parses_values_flags_and_json() -> None:
    opts = command_options(["vllm", "serve", "M", "--max-num-seqs", "8", "--enforce-eager",
                            "--max-model-len=4096", "--additional-config", '{"a": 1}'])
    assert opts == {"argv[0]": "vllm", "argv[1]": "serve", "argv[2]": "M",
                    "--max-num-seqs": "8", "--enforce-eager": True,
                    "--max-model-len": "4096", "--additional-config.a": 1}
