"""Against a real vLLM CPU server started through the launcher (one per session)."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from replay.errors import TargetError
from replay.servers.launch._launcher import (
    LaunchedArm,
    check_server_info,
    fetch_server_info,
    launch_arm,
    plan_arms,
    resolve_vllm_launcher,
)
from tests.support.vllm import CPU_ARGS, CPU_ENV, MAX_MODEL_LEN, SERVED_NAME, free_port

pytestmark = pytest.mark.vllm


def test_tiny_model_matches_the_brief(tiny_model: Path) -> None:
    config = json.loads((tiny_model / "config.json").read_text())
    vocab = json.loads((tiny_model / "tokenizer.json").read_text())["model"]["vocab"]
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["hidden_size"], config["num_attention_heads"]) == (128, 2)
    assert (config["num_key_value_heads"], config["num_hidden_layers"]) == (1, 2)
    assert config["max_position_embeddings"] >= MAX_MODEL_LEN
    assert 1900 <= len(vocab) <= config["vocab_size"]
    assert (tiny_model / "model.safetensors").exists()


def test_server_info_reports_the_decode_backend_asked(vllm_server: LaunchedArm) -> None:
    info = fetch_server_info(vllm_server.url)
    config = info["vllm_config"]
    assert config["additional_config"]["decode_backend"] == "auto"
    assert config["model_config"]["max_model_len"] == MAX_MODEL_LEN
    check_server_info(info, vllm_server.spec)
    other = dataclasses.replace(vllm_server.spec, decode_backend="latency_specialized")
    with pytest.raises(TargetError, match="asked for 'latency_specialized'"):
        check_server_info(info, other)


def test_server_streams_forced_tokens(vllm_server: LaunchedArm) -> None:
    body = json.dumps({
        "model": SERVED_NAME, "prompt": list(range(10, 40)), "max_tokens": 5,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }).encode()
    req = urllib.request.Request(
        f"{vllm_server.url}/v1/completions", data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        events = [ln[6:] for ln in resp.read().decode().splitlines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (30, 5)


def test_bad_model_path_fails_clearly_and_leaves_nothing(
    vllm_py: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    (spec,) = plan_arms(
        str(empty), ["auto"], launcher=resolve_vllm_launcher(str(vllm_py)), port=free_port(),
        served_model_name=SERVED_NAME, extra_args=CPU_ARGS, env=CPU_ENV,
    )
    started = time.monotonic()
    with pytest.raises(TargetError) as info:
        with launch_arm(spec, tmp_path / "server.log", startup_timeout=240):
            pytest.fail("must not yield")
    msg = str(info.value)
    assert "exited with code" in msg, msg
    assert "last lines of" in msg and str(empty) in (tmp_path / "server.log").read_text()
    assert time.monotonic() - started < 200
    left = [
        p.pid for p in psutil.process_iter(["cmdline", "status"])
        if p.info["status"] != "zombie" and str(empty) in " ".join(p.info["cmdline"] or [])
    ]
    assert not left
